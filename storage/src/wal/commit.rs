//! Group commit: which records are written, which are durable, and who runs the next fsync.
//!
//! Every record gets a sequence number when it is written (under the append lock). An appender
//! that needs its record durable waits until `synced` reaches its number. If nobody leads an
//! fsync it becomes the leader:
//!
//! 1. *Gather*: it waits until every appender that had already entered `append` has written its
//!    record (or given up). Writes take microseconds and fsyncs milliseconds, so letting them
//!    join is nearly free, and without it the leader would often sync just its own record while
//!    the others' land a moment later and need a fsync of their own. Only appenders that entered
//!    before the leader started gathering are awaited, so a stream of new arrivals cannot
//!    starve the fsync.
//! 2. *Sync*: it notes the newest written record, releases the lock, runs one fdatasync, and
//!    publishes the new `synced` to everyone.
//!
//! Appenders arriving meanwhile write their records (the append lock is never held during a
//! group fsync) and wait; the first of them to wake leads the next fsync, which covers them
//! all. A lone writer pays one fsync per record with no thread hand-off.
//!
//! All fsyncs of the WAL (group commits, the interval syncer, rotation, close) run one at a
//! time through [`Commit::sync_exclusive`] or the leader, and none starts once the WAL is
//! poisoned. That matters: after a failed fsync Linux reports the error to one caller only, so
//! an fsync running concurrently with (or after) a failed one could return success for pages
//! the kernel dropped, and `synced` would then lie.

use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::buckets::{BucketHistogram, BucketSnapshot, GROUP_COMMIT_RECORDS_BUCKETS};
use crate::error::Result;

/// Syncs a segment file, poisoning the WAL on failure.
pub(crate) type FsyncFn<'a> = &'a dyn Fn(&File) -> Result<()>;
/// Fails when the WAL is poisoned.
pub(crate) type PoisonCheck<'a> = &'a dyn Fn() -> Result<()>;

/// Shared between appenders, the interval syncer, rotation and close.
pub(crate) struct Commit {
    state: Mutex<State>,
    /// Signalled when `synced`, `syncing`, `leader` or `stop` change.
    changed: Condvar,
    /// Signalled when an appender leaves while a leader is gathering.
    drained: Condvar,
    /// Records each successful fsync made durable (those that made none are not counted).
    batch_records: BucketHistogram,
}

struct State {
    /// Sequence number of the newest record written to a segment file.
    written: u64,
    /// Every record up to this sequence number is durable.
    synced: u64,
    /// Records up to this sequence number were in a segment abandoned after poisoning
    /// ([`Commit::restart`]): an appender still waiting for one of them gets an error.
    abandoned: u64,
    /// The segment file holding the newest records (older segments are synced on rotation).
    file: Arc<File>,
    /// Appenders that entered `append`, and those that have since written (or failed).
    entered: u64,
    left: u64,
    /// Some appender is leading a group commit (gathering or syncing).
    leader: bool,
    /// The leader is waiting in the gather step.
    leader_gathering: bool,
    /// An fsync is running (a group commit's, the syncer's, rotation's or close's).
    syncing: bool,
    /// The interval syncer should exit.
    stop: bool,
}

/// Held by an appender from entering `append` until its record is written (or it fails);
/// a gathering leader waits for these.
pub(crate) struct Entered<'a>(&'a Commit);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.left += 1;
        if s.leader_gathering {
            self.0.drained.notify_one();
        }
    }
}

impl Commit {
    /// Tracks a WAL whose records go to `file`; nothing is written yet.
    pub fn new(file: Arc<File>) -> Commit {
        Commit {
            state: Mutex::new(State {
                written: 0,
                synced: 0,
                abandoned: 0,
                file,
                entered: 0,
                left: 0,
                leader: false,
                leader_gathering: false,
                syncing: false,
                stop: false,
            }),
            changed: Condvar::new(),
            drained: Condvar::new(),
            batch_records: BucketHistogram::new(GROUP_COMMIT_RECORDS_BUCKETS),
        }
    }

    /// Registers an appender about to write; drop the guard once its record is written.
    pub fn enter(&self) -> Entered<'_> {
        self.state.lock().entered += 1;
        Entered(self)
    }

    /// Records that the record numbered `seq` is in the current file. Called under the append lock.
    pub fn written(&self, seq: u64) {
        self.state.lock().written = seq;
    }

    /// Switches to a new segment file after [`Commit::sync_exclusive`] synced the old one, which
    /// made every written record durable. Called under the append lock.
    pub fn switch_file(&self, file: Arc<File>) {
        let mut s = self.state.lock();
        s.synced = s.synced.max(s.written);
        s.file = file;
        drop(s);
        self.changed.notify_all();
    }

    /// Starts over on a fresh segment `file` after the WAL was poisoned: every record written
    /// so far is abandoned, never synced again nor acknowledged. Called under the append lock.
    pub fn restart(&self, file: Arc<File>) {
        let mut s = self.state.lock();
        while s.syncing {
            self.changed.wait(&mut s);
        }
        s.abandoned = s.written;
        s.synced = s.written;
        s.file = file;
        drop(s);
        self.changed.notify_all();
    }

    /// Blocks until record `seq` is durable, leading group commits as needed.
    pub fn wait_durable(&self, seq: u64, fsync: FsyncFn<'_>, poisoned: PoisonCheck<'_>) -> Result<()> {
        let mut s = self.state.lock();
        loop {
            if seq <= s.abandoned {
                return Err(crate::error::Error::Poisoned(
                    "the record was in a WAL segment abandoned after an I/O failure".into(),
                ));
            }
            if s.synced >= seq {
                return Ok(());
            }
            poisoned()?;
            if s.leader {
                self.changed.wait(&mut s);
            } else {
                self.lead(&mut s, true, fsync, poisoned)?;
            }
        }
    }

    /// Syncs everything written so far if anything is unsynced and nobody else is syncing it
    /// already. For the interval syncer.
    pub fn sync_if_dirty(&self, fsync: FsyncFn<'_>, poisoned: PoisonCheck<'_>) -> Result<()> {
        let mut s = self.state.lock();
        if s.written > s.synced && !s.leader && !s.syncing {
            self.lead(&mut s, false, fsync, poisoned)?;
        }
        Ok(())
    }

    /// Syncs the current file now, after any running fsync, and marks everything written so far
    /// durable. For rotation and close, which call it under the append lock (so nothing new is
    /// written meanwhile).
    pub fn sync_exclusive(&self, fsync: FsyncFn<'_>, poisoned: PoisonCheck<'_>) -> Result<()> {
        let mut s = self.state.lock();
        while s.syncing {
            self.changed.wait(&mut s);
        }
        self.fsync_locked(&mut s, fsync, poisoned)
    }

    /// Sleeps until `deadline` or until [`Commit::stop`]; returns false once stopped.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        let mut s = self.state.lock();
        while !s.stop && Instant::now() < deadline {
            self.changed.wait_until(&mut s, deadline);
        }
        !s.stop
    }

    /// How many records each fsync made durable, since the WAL opened.
    pub fn batch_records(&self) -> BucketSnapshot {
        self.batch_records.snapshot()
    }

    /// Tells the interval syncer to exit.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.changed.notify_all();
    }

    /// The leader's job: optionally gather in-flight appenders, then run one fsync.
    fn lead(
        &self,
        s: &mut MutexGuard<'_, State>,
        gather: bool,
        fsync: FsyncFn<'_>,
        poisoned: PoisonCheck<'_>,
    ) -> Result<()> {
        s.leader = true;
        if gather {
            let entered_before = s.entered;
            while s.left < entered_before {
                s.leader_gathering = true;
                self.drained.wait(s);
            }
            s.leader_gathering = false;
        }
        // A rotation or close may be syncing; their fsync and ours must not overlap.
        while s.syncing {
            self.changed.wait(s);
        }
        let result = self.fsync_locked(s, fsync, poisoned);
        s.leader = false;
        self.changed.notify_all();
        result
    }

    /// Runs one fsync of the current file with the lock released, then publishes the result.
    /// The caller made sure no other fsync runs.
    fn fsync_locked(
        &self,
        s: &mut MutexGuard<'_, State>,
        fsync: FsyncFn<'_>,
        poisoned: PoisonCheck<'_>,
    ) -> Result<()> {
        poisoned()?;
        s.syncing = true;
        let target = s.written;
        let file = Arc::clone(&s.file);
        let result = MutexGuard::unlocked(s, || fsync(&file));
        s.syncing = false;
        if result.is_ok() {
            if target > s.synced {
                self.batch_records.observe(target - s.synced);
            }
            s.synced = s.synced.max(target);
        }
        self.changed.notify_all();
        result
    }
}
