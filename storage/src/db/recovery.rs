//! Getting writable again after an I/O failure (a full disk, a failed fsync), without a restart.
//!
//! After a failed WAL write or fsync the WAL is poisoned: the segment it was writing may have
//! lost pages the kernel will never report again, so nothing is ever appended to or synced in
//! it again. What the database has acknowledged is all in its heads (an append reaches the head
//! only after its WAL record was durable per the sync mode). So recovery makes the heads durable
//! by another road and then starts a new WAL:
//!
//! 1. Under the `appending` write lock, the active head is frozen with `wal_end_segment` = the
//!    number the new segment will get (no append can complete meanwhile: the WAL refuses them).
//! 2. Every frozen head is written to partition files through the normal flush (new files
//!    fsynced and renamed, the manifest replaced atomically), and the manifest's
//!    `wal_first_segment` is set to the new segment, so replay never reads the poisoned one.
//! 3. The WAL creates the new segment (fsynced, directory synced), clears the poison and deletes
//!    the old segments ([`crate::wal::Wal::restart_after_poison`]).
//! 4. Files left by failed attempts and not listed by the manifest are swept.
//!
//! Any step failing (still no space) leaves the WAL poisoned; a failed flush removes its partial
//! files, and the previous manifest and files stay as they were. The maintenance thread retries
//! with a backoff, and a refused append wakes it. Samples of unacknowledged appends never reach
//! a head, so they are not made durable by this; acknowledged ones always are.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Inner;
use crate::error::Result;
use crate::filenames;
use crate::manifest::Manifest;

/// The log target this module had before it moved into `db/` (operators filter by it, and
/// docs/operations.md quotes it).
const LOG_TARGET: &str = "storage::recovery";

/// The first retry comes this long after a failed attempt ...
const BACKOFF_MIN: Duration = Duration::from_millis(250);
/// ... doubling up to this: how long space may be back before strata notices.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// When the next recovery attempt is due, on the maintenance thread.
#[derive(Debug)]
pub(crate) struct Backoff {
    /// When the current failure was noticed.
    since: Option<Instant>,
    next_at: Option<Instant>,
    delay: Duration,
    attempts: u64,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff { since: None, next_at: None, delay: BACKOFF_MIN, attempts: 0 }
    }

    /// How long until the next attempt (zero: now).
    pub(crate) fn wait(&self, now: Instant) -> Duration {
        self.next_at.map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
    }

    fn failed(&mut self, now: Instant) {
        self.since.get_or_insert(now);
        self.attempts += 1;
        self.next_at = Some(now + self.delay);
        self.delay = (self.delay * 2).min(BACKOFF_MAX);
    }

    fn succeeded(&mut self) -> (Duration, u64) {
        let took = self.since.map_or(Duration::ZERO, |s| s.elapsed());
        let attempts = self.attempts + 1;
        *self = Backoff::new();
        (took, attempts)
    }
}

impl Inner {
    /// One recovery attempt if the WAL is poisoned and the backoff allows; for the maintenance
    /// thread. Returns true when writes are accepted again.
    pub(crate) fn recover_if_due(&self, backoff: &mut Backoff) -> bool {
        let now = Instant::now();
        if backoff.wait(now) > Duration::ZERO {
            return false;
        }
        backoff.since.get_or_insert(now);
        let mut m = self.maint.lock();
        match self.recover_locked(&mut m) {
            Ok(()) => {
                let (took, attempts) = backoff.succeeded();
                tracing::info!(
                    target: LOG_TARGET,
                    ms = took.as_millis() as u64,
                    attempts,
                    "storage recovered from an I/O failure: writes are accepted again"
                );
                true
            }
            Err(e) => {
                backoff.failed(Instant::now());
                tracing::warn!(
                    target: LOG_TARGET,
                    error = %e,
                    attempts = backoff.attempts,
                    retry_in_ms = backoff.wait(Instant::now()).as_millis() as u64,
                    "storage still cannot write; will retry"
                );
                false
            }
        }
    }

    /// Makes every head durable in partition files and restarts the WAL on a fresh segment
    /// (see the module docs). Does nothing if the WAL is not poisoned.
    pub(crate) fn recover_locked(&self, m: &mut Manifest) -> Result<()> {
        if self.wal.poisoned().is_none() {
            return Ok(());
        }
        let result = self.recover_steps(m);
        match &result {
            Ok(()) => self.counters.recoveries.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.recovery_failures.fetch_add(1, Ordering::Relaxed),
        };
        if result.is_ok()
            && let Err(e) = self.sweep_locked(m)
        {
            tracing::warn!(target: LOG_TARGET, error = %e, "could not remove files left by failed writes; will retry");
        }
        result
    }

    fn recover_steps(&self, m: &mut Manifest) -> Result<()> {
        // The WAL cannot move on while poisoned, so the segment after the current one is free.
        let next_segment = self.wal.current_segment().saturating_add(1);
        {
            let _appending = self.appending.write();
            let cur = self.state.read().clone();
            if cur.head.sample_count() > 0 {
                self.freeze_active(&cur.head, next_segment);
            }
        }
        self.flush_frozen_all(m)?;
        // Replay must never reach the poisoned segment, whose tail may be torn: with an empty
        // head there was no flush to say so.
        if m.wal_first_segment < next_segment {
            let mut next = m.clone();
            next.wal_first_segment = next_segment;
            self.store_manifest(&next, &[], ())?;
            *m = next;
        }
        self.wal.restart_after_poison(next_segment)
    }

    /// Removes files a failed flush or compaction could not remove, if any are pending: rewrites
    /// the manifest first (so the one on disk is exactly `m`, durably, even after a commit whose
    /// directory sync failed), then deletes every partition file and `.tmp` it does not list.
    pub(crate) fn sweep_locked(&self, m: &Manifest) -> Result<()> {
        if !self.sweep_pending.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let swept = m
            .store(&filenames::manifest(&self.dir))
            .map_err(crate::error::Error::from)
            .and_then(|()| super::remove_strays(&self.dir, m));
        match swept {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(target: LOG_TARGET, removed = n, "removed files left by failed writes");
                }
                Ok(())
            }
            Err(e) => {
                self.sweep_pending.store(true, Ordering::Release);
                Err(e)
            }
        }
    }
}
