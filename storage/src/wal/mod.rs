//! The write-ahead log: every ingest batch is one checksummed record here before it is
//! acknowledged, so a crash loses no acknowledged batch and never leaves half of one.
//!
//! The log is a directory of numbered segment files (layout: docs/format/wal.md). Records are
//! opaque payloads; the caller encodes them. Appends from many threads are serialized only for
//! the encode and the write(2); the expensive fdatasync is shared between them (group commit,
//! see [`commit`]). On open the log is replayed, a torn tail left by a crash is truncated, and
//! corruption anywhere else stops the open with [`Error::Corruption`] unless the operator opted
//! into truncating there ([`WalOptions::truncate_corrupt`]).
//!
//! Consecutive segments form *runs*: a run starts with each process's first segment, at every
//! [`Wal::rotate`] and at [`Wal::restart_after_poison`], and continues across the rotations
//! that segment size forces. The encoder is told the run its record lands in, so it can write
//! what later records of the run refer to (the database's series labels) once per run rather
//! than once per segment; the caller cuts the log with `rotate`, so it deletes whole runs only;
//! replay hands each record its run.
//!
//! Failure model: after any failed write or fsync the WAL is poisoned and refuses every later
//! append, because after a failed fsync the kernel may have dropped the dirty pages and a retry
//! that "succeeds" would acknowledge lost data. The poisoned segment is never written or synced
//! again. Two ways out: a restart (recovery sorts out what reached the disk), or
//! [`Wal::restart_after_poison`], which starts a fresh segment once the caller has stored every
//! acknowledged record elsewhere (the database flushes its heads to partition files first, see
//! `crate::db::recovery`).

// Recovery reads whatever a crash left on disk: no panicking shortcuts outside tests.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)
)]

mod commit;
mod format;
mod progress;
mod recover;
mod segment;
#[cfg(test)]
pub(crate) mod tests;

use std::fs::File;
use std::io::{self, IoSlice};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::buckets::{BucketHistogram, BucketSnapshot, FSYNC_NANOS_BUCKETS};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::fault::{self, Op};
use crate::fsutil;

use commit::Commit;
use format::{FRAME_HEADER_LEN, MAX_PAYLOAD_LEN};
use segment::ActiveSegment;

pub use progress::{ReplayProgress, ReplayStatus};

/// Where a replayed record lies in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The segment holding it.
    pub segment: u64,
    /// Its run: the number of the run's first segment, as the appender's `encode` saw it.
    /// Replay gets every record of a run, in order, from the run's first segment on.
    pub run: u64,
}

/// When an appended batch counts as durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalSync {
    /// fsync before acknowledging every batch (concurrent batches share one fsync). Nothing
    /// acknowledged is lost on power loss. The default.
    PerBatch,
    /// Acknowledge after the write(2) and fsync in the background every interval: a process
    /// crash loses nothing, a power loss may lose up to the last interval.
    Interval(Duration),
}

/// How to open a WAL.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// The directory holding the segment files (created if missing). Nothing else should write
    /// numeric file names into it.
    pub dir: PathBuf,
    /// A new segment is started before an append once the current one holds this many bytes.
    /// Smaller segments let flushed data be deleted sooner; larger ones mean fewer files.
    pub segment_bytes: u64,
    /// When an append counts as durable.
    pub sync: WalSync,
    /// On open, truncate the log at corruption in its middle (dropping everything after it)
    /// instead of refusing to open. Off by default: it loses acknowledged data.
    pub truncate_corrupt: bool,
    /// Where recovery reports which segment it is replaying (for the server's
    /// `/api/v1/status/walreplay` while the database opens).
    pub progress: Arc<ReplayProgress>,
}

impl WalOptions {
    /// Defaults for `dir`: 128 MiB segments, fsync per batch, refuse to open on corruption.
    #[cfg(any(test, feature = "testing"))]
    pub fn new(dir: impl Into<PathBuf>) -> WalOptions {
        WalOptions {
            dir: dir.into(),
            segment_bytes: 128 << 20,
            sync: WalSync::PerBatch,
            truncate_corrupt: false,
            progress: Arc::default(),
        }
    }
}

/// What [`Wal::open`] replayed and repaired, for logs and startup metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Segments read.
    pub segments: usize,
    /// Records handed to the replay callback.
    pub records: u64,
    /// Bytes of those records, frame headers included.
    pub bytes: u64,
    /// Bytes cut off: a torn tail, or with `truncate_corrupt` everything from the corruption on
    /// (later segments included).
    pub truncated_bytes: u64,
}

/// Counters since open, for `/metrics` and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Records appended.
    pub records: u64,
    /// Bytes of those records written, frame headers included.
    pub bytes_written: u64,
    /// fdatasync calls on segment files (group commits, interval syncs, rotations, close).
    pub fsyncs: u64,
    /// Total time spent in those calls, in nanoseconds.
    pub fsync_nanos_total: u64,
    /// The slowest of those calls, in nanoseconds.
    pub fsync_nanos_max: u64,
    /// The segment appends currently go to.
    pub current_segment: u64,
}

/// Told that the WAL was just poisoned. Runs on the thread that saw the failure, possibly with
/// WAL locks held: it must only signal, never call back into the WAL.
pub type PoisonHook = Box<dyn Fn() + Send + Sync>;

/// An open write-ahead log. `Send + Sync`: share it by reference (or `Arc`) between any number
/// of appending threads.
pub struct Wal {
    inner: Arc<Inner>,
    /// The interval-mode background syncer, joined by [`Wal::close`].
    syncer: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    dir: PathBuf,
    segment_bytes: u64,
    sync: WalSync,
    /// The append lock: held while a record is encoded and written, never during a group fsync.
    writer: Mutex<Writer>,
    commit: Commit,
    /// Set by the first failed write or fsync; cleared only by [`Wal::restart_after_poison`].
    /// `poisoned` is the lock-free fast check on the append path, `poison` the reason.
    poisoned: AtomicBool,
    poison: Mutex<Option<String>>,
    /// Called once each time the WAL becomes poisoned (see [`Wal::set_poison_hook`]).
    poison_hook: OnceLock<PoisonHook>,
    current_segment: AtomicU64,
    counters: Counters,
    #[cfg(test)]
    faults: tests::Faults,
}

struct Writer {
    segment: ActiveSegment,
    /// The encode buffer, reused across appends.
    buf: Vec<u8>,
    /// Sequence number of the last record written.
    seq: u64,
    closed: bool,
}

struct Counters {
    records: AtomicU64,
    bytes: AtomicU64,
    fsyncs: AtomicU64,
    fsync_nanos_total: AtomicU64,
    fsync_nanos_max: AtomicU64,
    /// Latency of every fdatasync, in nanoseconds.
    fsync_duration: BucketHistogram,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            fsync_nanos_total: AtomicU64::new(0),
            fsync_nanos_max: AtomicU64::new(0),
            fsync_duration: BucketHistogram::new(FSYNC_NANOS_BUCKETS),
        }
    }
}

/// An encode buffer that grew beyond this is released after its record, so one huge batch
/// does not pin its memory for the life of the process.
const ENCODE_BUF_KEEP_BYTES: usize = 16 << 20;

/// Whether a rotation starts a new run or continues the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rotation {
    /// At [`Wal::rotate`] and after a refused record.
    NewRun,
    /// When the segment is full: only after a segment that holds a record, so a run's first
    /// segment is never empty when the run has more than one (an empty segment is deleted at
    /// open without orphaning the rest of its run).
    ContinueRun,
}

/// The interval syncer never spins faster than this, whatever interval it is given.
const SYNC_INTERVAL_MIN: Duration = Duration::from_millis(1);

/// Where [`Wal::write`] put a record: what [`Wal::wait_durable`] waits for.
#[derive(Debug, Clone, Copy)]
#[must_use = "a written record is not durable until wait_durable returns"]
pub struct Written {
    /// The segment the record went to.
    #[cfg(any(test, feature = "testing"))]
    segment: u64,
    seq: u64,
}

impl Wal {
    /// Opens the WAL in `opts.dir` (creating it), deletes segments numbered below
    /// `first_segment` (the caller has flushed their data elsewhere; it must be where a run
    /// starts, as what [`Wal::rotate`] returned is), replays every record of the remaining
    /// segments in order through `replay(position, payload)`, truncates a torn tail, and starts
    /// a new run for appends (never appending after recovered bytes).
    ///
    /// A damaged record at the end of the last segment (incomplete, checksum-failing or
    /// zero-filled, with no valid record after it) is a torn tail and is truncated. Damage
    /// followed by valid records, or in an older segment, is refused with
    /// [`Error::Corruption`] naming the file and offset, unless `opts.truncate_corrupt`, which
    /// truncates there, deletes later segments and logs a warning with what was dropped. A
    /// segment that continues a run whose previous segment is missing is corruption at its
    /// offset 0. An error returned by `replay` aborts the open with that error.
    pub fn open(
        opts: WalOptions,
        first_segment: u64,
        mut replay: impl FnMut(Position, &[u8]) -> Result<()>,
    ) -> Result<(Wal, ReplayStats)> {
        fsutil::create_dir_durable(&opts.dir)?;
        let recovered = recover::recover(&opts, first_segment, &mut replay)?;
        // A disk that is full (or failing) at startup must not keep the database from opening:
        // everything replayed is served, and the WAL starts poisoned, exactly as if the
        // failure had hit a running server, so writes are refused until the owner's recovery
        // succeeds and `restart_after_poison` creates the segment.
        let next = recovered.next_segment;
        let (segment, poison) = match ActiveSegment::create(&opts.dir, next, next) {
            Ok(segment) => (segment, None),
            Err(e @ Error::Io { .. }) => {
                tracing::error!(error = %e, "cannot start a WAL segment: refusing writes until storage recovers");
                (
                    ActiveSegment::placeholder(&opts.dir, recovered.next_segment.saturating_sub(1))?,
                    Some(e.to_string()),
                )
            }
            Err(e) => return Err(e),
        };
        let inner = Arc::new(Inner {
            dir: opts.dir,
            segment_bytes: opts.segment_bytes,
            sync: opts.sync,
            commit: Commit::new(Arc::clone(&segment.file)),
            current_segment: AtomicU64::new(segment.number),
            writer: Mutex::new(Writer { segment, buf: Vec::new(), seq: 0, closed: false }),
            poisoned: AtomicBool::new(poison.is_some()),
            poison: Mutex::new(poison),
            poison_hook: OnceLock::new(),
            counters: Counters::default(),
            #[cfg(test)]
            faults: tests::Faults::default(),
        });
        let syncer = match opts.sync {
            WalSync::PerBatch => None,
            WalSync::Interval(interval) => {
                let inner = Arc::clone(&inner);
                let handle = std::thread::Builder::new()
                    .name("wal-syncer".to_string())
                    .spawn(move || run_interval_syncer(&inner, interval.max(SYNC_INTERVAL_MIN)))
                    .map_err(|e| Error::io("spawn WAL syncer thread", e))?;
                Some(handle)
            }
        };
        Ok((Wal { inner, syncer: Mutex::new(syncer) }, recovered.stats))
    }

    /// [`Wal::write`] then [`Wal::wait_durable`]: appends one record and returns, once it is
    /// durable, the number of the segment it went to. (Tests and benchmarks use it; the
    /// database writes and waits in two steps, freeing the request in between.)
    #[cfg(any(test, feature = "testing"))]
    pub fn append(&self, encode: impl FnOnce(u64, &mut Vec<u8>)) -> Result<u64> {
        let written = self.write(encode)?;
        self.wait_durable(written)?;
        Ok(written.segment)
    }

    /// Writes one record (write(2), no fsync) and says where it went; it is durable once
    /// [`Wal::wait_durable`] returns for it.
    ///
    /// `encode(run, buf)` writes the payload into `buf` (empty on entry). It runs under the
    /// append lock, so the run it sees is the one the record lands in, and it should be cheap:
    /// appenders take turns running it. If the record is not written after all (too large, or
    /// a failed write), the run ends there, so the next record's encoder sees a new run and
    /// nothing relies on what the lost record held.
    pub fn write(&self, encode: impl FnOnce(u64, &mut Vec<u8>)) -> Result<Written> {
        let inner = &*self.inner;
        let entered = inner.commit.enter();
        let (segment, seq, frame_len) = {
            let mut guard = inner.writer.lock();
            let w = &mut *guard;
            if w.closed {
                return Err(Error::Closed);
            }
            inner.check_poison()?;
            if w.segment.len >= inner.segment_bytes && w.segment.has_records() {
                inner.rotate_locked(w, Rotation::ContinueRun)?;
            }
            w.buf.clear();
            encode(w.segment.run, &mut w.buf);
            if w.buf.len() > inner.max_payload_len() {
                let len = std::mem::take(&mut w.buf).len();
                // A later record of this run could rely on what the encoder thinks this one
                // wrote; in a new run none can. (A failed rotation poisons the WAL, and the
                // restart after that starts a new run too.)
                inner.rotate_locked(w, Rotation::NewRun)?;
                return Err(Error::InvalidInput(format!(
                    "WAL record of {len} bytes exceeds the {}-byte limit",
                    inner.max_payload_len()
                )));
            }
            let header = format::frame_header(w.segment.salt, &w.buf);
            failpoint::hit("wal.before_write");
            inner.write_frame(&w.segment, &header, &w.buf)?;
            failpoint::hit("wal.after_write_before_sync");
            let frame_len = (FRAME_HEADER_LEN + w.buf.len()) as u64;
            w.segment.len += frame_len;
            w.seq += 1;
            inner.commit.written(w.seq);
            if w.buf.capacity() > ENCODE_BUF_KEEP_BYTES {
                w.buf = Vec::new();
            }
            (w.segment.number, w.seq, frame_len)
        };
        drop(entered);
        inner.counters.records.fetch_add(1, Ordering::Relaxed);
        inner.counters.bytes.fetch_add(frame_len, Ordering::Relaxed);
        #[cfg(not(any(test, feature = "testing")))]
        let _ = segment;
        Ok(Written {
            #[cfg(any(test, feature = "testing"))]
            segment,
            seq,
        })
    }

    /// Returns once the record [`Wal::write`] wrote is durable as the sync mode promises: with
    /// [`WalSync::PerBatch`] after an fdatasync that covers it (shared with concurrent
    /// appenders), with [`WalSync::Interval`] at once.
    pub fn wait_durable(&self, written: Written) -> Result<()> {
        let inner = &*self.inner;
        if inner.sync == WalSync::PerBatch {
            inner.commit.wait_durable(written.seq, &|f| inner.fsync(f), &|| inner.check_poison())?;
        }
        failpoint::hit("wal.after_sync_before_ack");
        Ok(())
    }

    /// Syncs and closes the current segment and starts the next, which starts a new run;
    /// returns the new segment's number. Records appended after this returns go to the new
    /// segment. The caller uses it to cut the log at a flush boundary: once everything before
    /// is stored elsewhere, [`Wal::remove_segments_before`] the returned number drops whole runs,
    /// and replay can start there.
    pub fn rotate(&self) -> Result<u64> {
        let mut w = self.inner.writer.lock();
        if w.closed {
            return Err(Error::Closed);
        }
        self.inner.check_poison()?;
        self.inner.rotate_locked(&mut w, Rotation::NewRun)
    }

    /// Deletes whole segments numbered below `segment`, once their records are stored
    /// elsewhere. The current segment is never deleted. `segment` should be where a run starts
    /// (what [`Wal::rotate`] returned): a run cut at its front cannot be replayed.
    pub fn remove_segments_before(&self, segment: u64) -> Result<()> {
        let limit = segment.min(self.current_segment());
        let mut removed = false;
        for (number, path) in segment::list(&self.inner.dir)? {
            if number < limit {
                fsutil::remove_path(&path)?;
                removed = true;
            }
        }
        if removed {
            fsutil::sync_dir(&self.inner.dir)?;
        }
        Ok(())
    }

    /// The segment appends currently go to.
    pub fn current_segment(&self) -> u64 {
        self.inner.current_segment.load(Ordering::Acquire)
    }

    /// Why the WAL refuses writes, if it does (see the module docs on poisoning). A server
    /// reports itself not ready while this is set.
    pub fn poisoned(&self) -> Option<String> {
        if !self.inner.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.inner.poison.lock().clone()
    }

    /// Sets the function called each time the WAL becomes poisoned, so the owner can start
    /// recovering even when no append is there to see the error (the interval syncer's fsync).
    /// Only the first call has an effect.
    pub fn set_poison_hook(&self, hook: PoisonHook) {
        let _ = self.inner.poison_hook.set(hook);
    }

    /// Leaves the poisoned state: creates segment `number` (or the one after the current
    /// segment, if higher), which starts a new run, sends every later append there, clears the
    /// poison, and deletes the older segments. The poisoned segment is never written or synced
    /// again, and any appender still waiting for a record in it gets an error, so nothing in it
    /// is acknowledged later.
    ///
    /// The caller must first have stored elsewhere, durably, every record whose append returned
    /// `Ok`, and recorded that replay starts at `number` (the database's manifest): the old
    /// segments are dropped. Does nothing if the WAL is not poisoned. On failure (the disk is
    /// still full) the WAL stays poisoned, with no new segment left behind, and it may be
    /// called again.
    pub fn restart_after_poison(&self, number: u64) -> Result<()> {
        let inner = &*self.inner;
        let number = {
            let mut w = inner.writer.lock();
            if w.closed {
                return Err(Error::Closed);
            }
            if !inner.poisoned.load(Ordering::Acquire) {
                return Ok(());
            }
            let number = number.max(w.segment.number.saturating_add(1));
            // A segment file of that number can only be the remains of an earlier failed
            // attempt (`create` removes its own failures, but a crash point may not).
            fsutil::remove_path(&inner.dir.join(segment::file_name(number)))?;
            let next = ActiveSegment::create(&inner.dir, number, number)?;
            inner.commit.restart(Arc::clone(&next.file));
            w.segment = next;
            inner.current_segment.store(number, Ordering::Release);
            *inner.poison.lock() = None;
            inner.poisoned.store(false, Ordering::Release);
            number
        };
        tracing::info!(segment = number, "WAL restarted on a new segment after an I/O failure");
        if let Err(e) = self.remove_segments_before(number) {
            // Replay skips them anyway (the caller recorded where it starts) and startup deletes them.
            tracing::warn!(error = %e, "could not delete WAL segments left by the I/O failure");
        }
        Ok(())
    }

    /// Syncs the current segment and stops the interval syncer. Later appends and rotations
    /// return [`Error::Closed`]. Calling it again does nothing.
    pub fn close(&self) -> Result<()> {
        let result = {
            let mut w = self.inner.writer.lock();
            if w.closed {
                return Ok(());
            }
            w.closed = true;
            let inner = &*self.inner;
            inner.commit.sync_exclusive(&|f| inner.fsync(f), &|| inner.check_poison())
        };
        self.inner.commit.stop();
        let syncer = self.syncer.lock().take();
        if let Some(handle) = syncer
            && handle.join().is_err()
        {
            tracing::error!("WAL syncer thread panicked");
        }
        result
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        let c = &self.inner.counters;
        WalStats {
            records: c.records.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            fsync_nanos_total: c.fsync_nanos_total.load(Ordering::Relaxed),
            fsync_nanos_max: c.fsync_nanos_max.load(Ordering::Relaxed),
            current_segment: self.current_segment(),
        }
    }

    /// fdatasync latency since open, in nanoseconds.
    pub fn fsync_durations(&self) -> BucketSnapshot {
        self.inner.counters.fsync_duration.snapshot()
    }

    /// Records made durable per fdatasync since open: how well group commit batches.
    pub fn group_commit_records(&self) -> BucketSnapshot {
        self.inner.commit.batch_records()
    }
}

/// Segment files in the WAL directory `dir` and their total size in bytes. A segment deleted
/// while it is being looked at (a flush finishing) is left out rather than failing the call.
pub(crate) fn disk_usage(dir: &std::path::Path) -> Result<(usize, u64)> {
    let mut segments = 0;
    let mut bytes = 0u64;
    for (_, path) in segment::list(dir)? {
        match std::fs::metadata(&path) {
            Ok(meta) => {
                segments += 1;
                bytes = bytes.saturating_add(meta.len());
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("stat {}", path.display()), e)),
        }
    }
    Ok((segments, bytes))
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(error = %e, "WAL: final sync on drop failed");
        }
    }
}

impl Inner {
    fn check_poison(&self) -> Result<()> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let reason = self.poison.lock().clone().unwrap_or_else(|| "an earlier I/O failure".into());
        Err(Error::Poisoned(reason))
    }

    /// Poisons the WAL with `err`'s message (the first poisoning wins) and returns `err`.
    fn poison_with(&self, err: Error) -> Error {
        let reason = err.to_string();
        let mut poison = self.poison.lock();
        if poison.is_none() {
            tracing::error!(%reason, "WAL poisoned: refusing writes until storage recovers");
            *poison = Some(reason);
            self.poisoned.store(true, Ordering::Release);
            drop(poison);
            if let Some(hook) = self.poison_hook.get() {
                hook();
            }
        }
        err
    }

    /// Writes one frame, normally with a single writev(2). Poisons the WAL on failure: the
    /// file may now end in a partial record, which only recovery may remove.
    fn write_frame(&self, segment: &ActiveSegment, header: &[u8], payload: &[u8]) -> Result<()> {
        let result = if mid_record_failpoint_armed() {
            write_in_halves(&segment.file, header, payload)
        } else {
            self.fault_before_write(&segment.file, &segment.path, header).and_then(|()| {
                segment::write_all_vectored(&segment.file, &mut [IoSlice::new(header), IoSlice::new(payload)])
            })
        };
        result.map_err(|e| {
            self.poison_with(Error::io(format!("write WAL segment {}", segment.path.display()), e))
        })
    }

    /// fdatasync with timing and counters. Poisons the WAL on failure.
    fn fsync(&self, file: &File) -> Result<()> {
        let start = Instant::now();
        let result = self.fault_before_sync().and_then(|()| {
            crate::powercut::syncing_file(file);
            file.sync_data()
        });
        let result = result.and_then(|()| fault::check(Op::Sync, &self.dir));
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let c = &self.counters;
        c.fsyncs.fetch_add(1, Ordering::Relaxed);
        c.fsync_nanos_total.fetch_add(nanos, Ordering::Relaxed);
        c.fsync_nanos_max.fetch_max(nanos, Ordering::Relaxed);
        c.fsync_duration.observe(nanos);
        result.map_err(|e| {
            self.poison_with(Error::io(format!("fdatasync WAL segment in {}", self.dir.display()), e))
        })
    }

    /// Syncs the current segment, creates the next one and switches appends to it. Runs under
    /// the append lock. Syncing first keeps the recovery invariant that only the newest segment
    /// can end in a torn record, and that a segment continuing a run exists only once the
    /// run's earlier segments are durable.
    fn rotate_locked(&self, w: &mut Writer, rotation: Rotation) -> Result<u64> {
        self.commit.sync_exclusive(&|f| self.fsync(f), &|| self.check_poison())?;
        let number = w.segment.number.saturating_add(1);
        let run = match rotation {
            Rotation::NewRun => number,
            Rotation::ContinueRun => w.segment.run,
        };
        let next = ActiveSegment::create(&self.dir, number, run).map_err(|e| self.poison_with(e))?;
        self.commit.switch_file(Arc::clone(&next.file));
        w.segment = next;
        self.current_segment.store(number, Ordering::Release);
        Ok(number)
    }

    /// The largest payload `append` writes: [`MAX_PAYLOAD_LEN`], lowered by tests.
    #[cfg(test)]
    fn max_payload_len(&self) -> usize {
        match self.faults.max_payload.load(Ordering::SeqCst) {
            0 => MAX_PAYLOAD_LEN,
            n => n,
        }
    }

    #[cfg(not(test))]
    fn max_payload_len(&self) -> usize {
        MAX_PAYLOAD_LEN
    }

    #[cfg(test)]
    fn fault_before_write(&self, file: &File, path: &std::path::Path, header: &[u8]) -> io::Result<()> {
        self.faults.before_write(file, header)?;
        fault_write(file, path, header)
    }

    #[cfg(not(test))]
    fn fault_before_write(&self, file: &File, path: &std::path::Path, header: &[u8]) -> io::Result<()> {
        fault_write(file, path, header)
    }

    #[cfg(test)]
    fn fault_before_sync(&self) -> io::Result<()> {
        self.faults.before_sync()
    }

    #[cfg(not(test))]
    fn fault_before_sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The interval-mode background syncer: every `interval`, fsync whatever was written since the
/// last fsync. Exits when the WAL closes; while it is poisoned, every attempt fails at once.
fn run_interval_syncer(inner: &Inner, interval: Duration) {
    let mut deadline = Instant::now() + interval;
    while inner.commit.sleep_until(deadline) {
        deadline += interval;
        let now = Instant::now();
        if deadline < now {
            // We fell behind (a slow fsync); don't sync back-to-back to catch up.
            deadline = now + interval;
        }
        // A failure poisons the WAL; keep running, as it may be restarted on a new segment.
        let _ = inner.commit.sync_if_dirty(&|f| inner.fsync(f), &|| inner.check_poison());
    }
}

/// An injected write fault ([`crate::fault`]) on a WAL segment: like a disk filling up in the
/// middle of a record, part of the frame reaches the file before the error.
fn fault_write(mut file: &File, path: &std::path::Path, header: &[u8]) -> io::Result<()> {
    use std::io::Write;
    if let Err(e) = fault::check(Op::Write, path) {
        file.write_all(header.get(..header.len() / 2).unwrap_or_default())?;
        return Err(e);
    }
    Ok(())
}

/// True when the process was started with the `wal.mid_record` crash point armed; only then
/// are records written in two halves, so normal runs keep one syscall per record.
fn mid_record_failpoint_armed() -> bool {
    static ARMED: OnceLock<bool> = OnceLock::new();
    *ARMED.get_or_init(|| failpoint::is_armed("wal.mid_record"))
}

/// Writes the first half of a frame, passes the `wal.mid_record` crash point, writes the rest.
fn write_in_halves(file: &File, header: &[u8], payload: &[u8]) -> io::Result<()> {
    let half = (header.len() + payload.len()) / 2;
    let (mut first, mut second): (Vec<IoSlice<'_>>, Vec<IoSlice<'_>>) = match header.split_at_checked(half) {
        Some((h1, h2)) => (vec![IoSlice::new(h1)], vec![IoSlice::new(h2), IoSlice::new(payload)]),
        None => {
            let (p1, p2) = payload.split_at(half.saturating_sub(header.len()).min(payload.len()));
            (vec![IoSlice::new(header), IoSlice::new(p1)], vec![IoSlice::new(p2)])
        }
    };
    segment::write_all_vectored(file, &mut first)?;
    failpoint::hit("wal.mid_record");
    segment::write_all_vectored(file, &mut second)
}
