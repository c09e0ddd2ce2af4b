//! The mirror: a thread that brings the bucket up to the newest local manifest.
//!
//! Every local manifest commit (flush, compaction, retention, deletion) offers the new manifest;
//! the mirror keeps only the newest offer. For it, the mirror uploads each listed file the
//! bucket does not hold yet, then commits the manifest as the prefix's next record under this
//! writer's epoch. Files the previous record listed and this one does not are recorded as gone,
//! and deleted once older than the delete delay. Failures are retried with backoff, forever:
//! the local directory holds everything meanwhile. A commit that meets a newer epoch fences
//! the writer ([`MirrorStatus::fenced`]): its appends are refused from then on.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::Bucket;
use super::commit::{self, Commit, LocalState, now_ms};
use super::record::{Gone, Record};
use crate::filenames;
use crate::manifest::Manifest;

/// What the mirror has done, for health and metrics.
#[derive(Debug, Default)]
pub struct MirrorStatus {
    /// The newest record this writer committed.
    pub committed_seq: AtomicU64,
    /// Files uploaded.
    pub uploads: AtomicU64,
    /// Bytes of the files uploaded.
    pub uploaded_bytes: AtomicU64,
    /// Records committed.
    pub commits: AtomicU64,
    /// Failed attempts (each retried).
    pub failures: AtomicU64,
    /// Objects deleted after the delete delay.
    pub deleted: AtomicU64,
    /// The bucket lacks something committed locally (an offer is pending or in hand).
    pub behind: AtomicBool,
    /// A newer writer took the prefix: nothing is committed any more.
    pub fenced: AtomicBool,
    /// The epoch that fenced this writer (0 while not fenced).
    pub fenced_by: AtomicU64,
}

/// Records whose files a writer remembers (see [`Mirror::files_committed_at`]).
const HISTORY: usize = 64;

/// The files a record lists, as (partition, file id).
type FileSet = Arc<HashSet<(i64, u64)>>;

struct Shared {
    /// The files of the newest records committed, by record number, oldest first: the last
    /// entry's are those the bucket holds for sure.
    committed: Mutex<std::collections::VecDeque<(u64, FileSet)>>,
    /// The positions of outside sources in the newest committed record (see
    /// [`crate::Db::note_position`]).
    committed_positions: Mutex<BTreeMap<String, u64>>,
    /// The newest manifest not yet committed to the bucket, if any.
    offered: Mutex<Option<Manifest>>,
    wake: Condvar,
    stop: AtomicBool,
    /// True while the mirror works on an offer (so `wait_idle` knows when it is done).
    busy: AtomicBool,
    status: Arc<MirrorStatus>,
}

/// The running mirror of one database.
pub(crate) struct Mirror {
    shared: Arc<Shared>,
    bucket: Arc<Bucket>,
    /// This writer process's nonce, which its records carry.
    writer: u64,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Mirror {
    /// Starts the mirror from `record`, the prefix's state as this writer claimed it.
    pub fn start(bucket: Arc<Bucket>, dir: PathBuf, record: Record) -> Mirror {
        let writer = record.writer;
        let status = Arc::new(MirrorStatus::default());
        status.committed_seq.store(record.seq, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            committed: Mutex::new([(record.seq, Arc::new(files_of(&record.manifest)))].into()),
            committed_positions: Mutex::new(record.manifest.positions.clone()),
            offered: Mutex::new(None),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            status,
        });
        let worker = Worker {
            bucket: Arc::clone(&bucket),
            dir,
            shared: Arc::clone(&shared),
            last: record,
            confirmed: Instant::now(),
            uploaded: HashSet::new(),
            orphans: Vec::new(),
            in_flight: None,
        };
        let thread =
            std::thread::Builder::new().name("strata-mirror".into()).spawn(move || worker.run()).ok();
        Mirror { shared, bucket, writer, thread: Mutex::new(thread) }
    }

    /// Offers the newest local manifest (replacing an older offer not yet taken).
    pub fn offer(&self, m: &Manifest) {
        *self.shared.offered.lock() = Some(m.clone());
        self.shared.status.behind.store(true, Ordering::Relaxed);
        self.shared.wake.notify_all();
    }

    /// The positions of outside sources in the newest committed record.
    pub fn committed_positions(&self) -> BTreeMap<String, u64> {
        self.shared.committed_positions.lock().clone()
    }

    /// The files the bucket holds for sure (listed by the newest committed record).
    pub fn committed_files(&self) -> FileSet {
        self.shared.committed.lock().back().map_or_else(Default::default, |(_, f)| Arc::clone(f))
    }

    /// The files record `seq` lists, if this writer process committed it (or claimed the
    /// prefix with it) among its last 64 records: what a query node holding that record reads
    /// from the bucket rather than from this writer.
    pub fn files_committed_at(&self, seq: u64) -> Option<FileSet> {
        self.shared.committed.lock().iter().find(|(s, _)| *s == seq).map(|(_, f)| Arc::clone(f))
    }

    /// The nonce this writer's records carry.
    pub fn writer(&self) -> u64 {
        self.writer
    }

    /// The bucket mirrored to.
    pub fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    pub fn status(&self) -> &Arc<MirrorStatus> {
        &self.shared.status
    }

    /// Waits until no offer is pending (or the mirror is fenced), at most `timeout`; true if
    /// it got there.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut offered = self.shared.offered.lock();
        loop {
            let idle = offered.is_none() && !self.shared.busy.load(Ordering::Acquire);
            if idle || self.shared.status.fenced.load(Ordering::Acquire) {
                return true;
            }
            if self.shared.wake.wait_until(&mut offered, until).timed_out() {
                return false;
            }
        }
    }

    /// Stops the thread (after the attempt in progress).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Worker {
    bucket: Arc<Bucket>,
    dir: PathBuf,
    shared: Arc<Shared>,
    /// The newest record committed by this writer (or claimed).
    last: Record,
    /// When this writer last learnt that it holds the prefix (a commit or a check).
    confirmed: Instant,
    /// A record whose commit request failed: it may have been applied, so it is committed
    /// again, bytes unchanged, before anything else takes its number.
    in_flight: Option<Record>,
    /// Files in the bucket that no record lists (found at start), to record as gone.
    orphans: Vec<Gone>,
    /// Files uploaded since `last` was committed: an attempt that failed at the commit does
    /// not upload them again.
    uploaded: HashSet<(i64, u64)>,
}

/// Waits between failed attempts: doubling from 100 ms to 30 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << failures.min(9))).min(Duration::from_secs(30))
}

impl Worker {
    fn run(mut self) {
        if let Err(e) = self.find_orphans() {
            tracing::warn!(error = %e, "could not list the bucket's files for leftovers; the next start looks again");
        }
        let mut failures = 0u32;
        let mut pending: Option<Manifest> = None;
        loop {
            {
                let mut offered = self.shared.offered.lock();
                // Wake for an offer, to stop, to retry, or when a gone object's delay ends.
                let wait = if pending.is_some() { backoff(failures) } else { self.next_deletion_in() };
                if offered.is_none() && !self.shared.stop.load(Ordering::Acquire) {
                    let _ = self.shared.wake.wait_for(&mut offered, wait);
                }
                if self.shared.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(m) = offered.take() {
                    pending = Some(m);
                }
                self.shared.busy.store(pending.is_some(), Ordering::Release);
            }
            let target = pending.clone().unwrap_or_else(|| self.last.manifest.clone());
            if pending.is_none() && !self.deletions_due() {
                continue;
            }
            match self.sync(&target) {
                Ok(true) => {
                    pending = None;
                    failures = 0;
                }
                Ok(false) => {
                    self.set_idle();
                    return;
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    self.shared.status.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, attempt = failures, "could not bring the bucket up to date; will retry");
                }
            }
            if pending.is_none() {
                self.set_idle();
            }
        }
    }

    /// No work in hand: says so to `wait_idle`, under the lock it checks with (a change made
    /// outside it could fall between its check and its wait, and the wake-up be lost).
    fn set_idle(&self) {
        {
            let offered = self.shared.offered.lock();
            self.shared.busy.store(false, Ordering::Release);
            self.shared.status.behind.store(offered.is_some(), Ordering::Relaxed);
        }
        self.shared.wake.notify_all();
    }

    /// Time until the oldest gone object may be deleted (a long wait if none is gone).
    fn next_deletion_in(&self) -> Duration {
        let delay = self.bucket.delete_delay();
        let now = now_ms();
        self.last
            .gone
            .iter()
            .map(|g| {
                let due = g.since_ms.saturating_add(delay.as_millis() as i64);
                Duration::from_millis(due.saturating_sub(now).max(0) as u64)
            })
            .min()
            .unwrap_or(Duration::from_secs(3600))
            .max(Duration::from_millis(10))
    }

    fn deletions_due(&self) -> bool {
        let cutoff = now_ms().saturating_sub(self.bucket.delete_delay().as_millis() as i64);
        !self.orphans.is_empty() || self.last.gone.iter().any(|g| g.since_ms <= cutoff)
    }

    /// Lists the prefix's partition files (once, at start: never on a query path) and keeps
    /// those that neither the newest record lists nor its gone list names: uploads that a crash
    /// or a fenced writer left uncommitted. The next commit records them as gone since they
    /// were written, so they are deleted after the delay like any other.
    fn find_orphans(&mut self) -> crate::error::Result<()> {
        let known: HashSet<(i64, u64)> = files_of(&self.last.manifest)
            .into_iter()
            .chain(self.last.gone.iter().map(|g| (g.partition, g.id)))
            .collect();
        for (partition, id, modified_ms) in self.bucket.list_files()? {
            if !known.contains(&(partition, id)) {
                self.orphans.push(Gone { partition, id, since_ms: modified_ms });
            }
        }
        if !self.orphans.is_empty() {
            tracing::info!(
                files = self.orphans.len(),
                "found files in the bucket that no manifest lists; deleting them after the delay"
            );
        }
        Ok(())
    }

    /// Uploads what `m` lists and the bucket lacks, deletes gone objects whose delay is over,
    /// and commits `m`. Ok(false): fenced, stop.
    fn sync(&mut self, m: &Manifest) -> crate::error::Result<bool> {
        // After a pause (no commit for half the delete delay), first check that no writer
        // took the prefix meanwhile: the number after ours may have been taken and deleted
        // since (see `commit::prune_records`), and the files this writer thinks gone may be
        // listed by the newer writer's records.
        if self.confirmed.elapsed() > self.bucket.delete_delay() / 2 && !self.still_ours()? {
            return Ok(false);
        }
        if !self.resolve_in_flight()? {
            return Ok(false);
        }
        let last = &self.last.manifest;
        let unchanged = m.files == last.files
            && m.tombstones.len() == last.tombstones.len()
            && m.tombstones.iter().zip(&last.tombstones).all(|(a, b)| a.seq == b.seq);
        if unchanged && !self.deletions_due() {
            // A commit that changes only the local WAL position: nothing for the bucket.
            return Ok(true);
        }
        let held = files_of(&self.last.manifest);
        for f in &m.files {
            if held.contains(&(f.partition, f.id)) || self.uploaded.contains(&(f.partition, f.id)) {
                continue;
            }
            let path = filenames::partition_file(&self.dir, f.partition, f.id);
            if !self.bucket.upload(&path, &self.bucket.file_key(f.partition, f.id))? {
                // Removed by a later local commit, whose offer follows; this state is skipped.
                if self.shared.offered.lock().is_some() {
                    return Ok(true);
                }
                return Err(crate::error::Error::Bucket(format!(
                    "{} vanished before it was uploaded",
                    path.display()
                )));
            }
            self.uploaded.insert((f.partition, f.id));
            self.shared.status.uploads.fetch_add(1, Ordering::Relaxed);
            self.shared.status.uploaded_bytes.fetch_add(f.size, Ordering::Relaxed);
        }
        // Objects past their delay go first: the record committed below no longer names them.
        let cutoff = now_ms().saturating_sub(self.bucket.delete_delay().as_millis() as i64);
        let mut gone = Vec::with_capacity(self.last.gone.len());
        for g in &self.last.gone {
            if g.since_ms <= cutoff {
                self.bucket.delete(&self.bucket.file_key(g.partition, g.id))?;
                self.shared.status.deleted.fetch_add(1, Ordering::Relaxed);
            } else {
                gone.push(*g);
            }
        }
        let listed = files_of(m);
        let now = now_ms();
        // Orphans found at start (uploads a crash left uncommitted), unless this manifest lists
        // them: a file uploaded before the crash whose local commit happened is live.
        gone.extend(self.orphans.iter().copied());
        gone.retain(|g| !listed.contains(&(g.partition, g.id)));
        gone.extend(
            self.last
                .manifest
                .files
                .iter()
                .filter(|f| !listed.contains(&(f.partition, f.id)))
                .map(|f| Gone { partition: f.partition, id: f.id, since_ms: now }),
        );
        let record = Record {
            seq: self.last.seq + 1,
            epoch: self.last.epoch,
            writer: self.last.writer,
            oldest: self.last.oldest,
            gone,
            manifest: m.clone(),
        };
        // Until this commit's outcome is known, no other record may take its number: a
        // request that failed may have been applied.
        self.in_flight = Some(record.clone());
        let outcome = commit::commit(&self.bucket, &record)?;
        self.in_flight = None;
        self.settle(record, outcome)
    }

    /// Whether the prefix's newest record is still this writer's (its last, or the one whose
    /// commit is unsettled); if not, the writer is fenced.
    fn still_ours(&mut self) -> crate::error::Result<bool> {
        let theirs = match commit::still_ours(&self.bucket, &self.last)? {
            Ok(()) => None,
            Err(theirs) => match &self.in_flight {
                Some(r) if commit::still_ours(&self.bucket, r)?.is_ok() => None,
                _ => Some(theirs),
            },
        };
        match theirs {
            None => {
                self.confirmed = Instant::now();
                Ok(true)
            }
            Some(theirs) => {
                self.fenced(theirs);
                Ok(false)
            }
        }
    }

    /// Settles a commit whose request failed earlier (it may have been applied): creating the
    /// same bytes again finds them if it was, and creates them now if it was not. Ok(false):
    /// fenced.
    fn resolve_in_flight(&mut self) -> crate::error::Result<bool> {
        let Some(record) = self.in_flight.clone() else { return Ok(true) };
        let outcome = commit::commit(&self.bucket, &record)?;
        self.in_flight = None;
        self.settle(record, outcome)
    }

    /// Takes a commit's outcome: the record becomes the newest, or the writer is fenced
    /// (Ok(false)).
    fn settle(&mut self, record: Record, outcome: Commit) -> crate::error::Result<bool> {
        match outcome {
            Commit::Done => {
                self.confirmed = Instant::now();
                LocalState { epoch: record.epoch, seq: record.seq }.store(&self.dir)?;
                self.shared.status.committed_seq.store(record.seq, Ordering::Relaxed);
                self.shared.status.commits.fetch_add(1, Ordering::Relaxed);
                {
                    let mut committed = self.shared.committed.lock();
                    committed.push_back((record.seq, Arc::new(files_of(&record.manifest))));
                    self.shared.committed_positions.lock().clone_from(&record.manifest.positions);
                    if committed.len() > HISTORY {
                        committed.pop_front();
                    }
                }
                self.last = record;
                self.uploaded.clear();
                self.orphans.clear();
                match commit::prune_records(&self.bucket, &self.last) {
                    Ok(oldest) => self.last.oldest = oldest,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not delete old bucket manifests; the next commit retries")
                    }
                }
                Ok(true)
            }
            Commit::Fenced { theirs } => {
                self.fenced(theirs);
                Ok(false)
            }
            // Another writer of this very epoch cannot exist: treat it as being fenced.
            Commit::Lost => {
                self.fenced(self.last.epoch);
                Ok(false)
            }
        }
    }

    fn fenced(&self, theirs: u64) {
        tracing::error!(
            bucket = self.bucket.url(),
            epoch = self.last.epoch,
            newer_epoch = theirs,
            "another writer opened this bucket prefix: this one commits nothing more and refuses writes"
        );
        self.shared.status.fenced_by.store(theirs, Ordering::Relaxed);
        self.shared.status.fenced.store(true, Ordering::Release);
    }
}

fn files_of(m: &Manifest) -> HashSet<(i64, u64)> {
    m.files.iter().map(|f| (f.partition, f.id)).collect()
}
