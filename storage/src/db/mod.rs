//! The database: ties the WAL, the series index, the heads and the partition files together.
//!
//! Concurrency model (no global lock around storing and querying):
//! - `state` is an `Arc<State>` swapped under a short write lock; a query clones the `Arc`
//!   (a [`Snapshot`]) and never blocks anyone afterwards.
//! - Appenders hold `appending` for reading from the WAL write to the head insert, so a flush, which
//!   takes `appending` for writing to rotate the WAL and swap in a fresh head, sees every record of the
//!   old segments in the head it freezes.
//! - `maint` serialises maintenance (flush, compaction, retention, deletion) and guards the
//!   in-memory copy of the manifest; it is never taken on the append or query path.

pub mod backup;
mod cache_trim;
mod compact;
mod flush;
mod follow;
mod recovery;
mod splice;
pub mod stats;
#[cfg(test)]
mod wal_tests;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch_codec::{self, IdMap};
use crate::batch_ref::BatchRef;
use crate::buckets::{BucketHistogram, MAINTENANCE_NANOS_BUCKETS};
use crate::cardinality::{Cardinality, CardinalityStats, RejectedSeries, SeriesRejections};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::filenames;
use crate::fsutil;
use crate::head::{Head, SeriesSamples};
use crate::index::Index;
use crate::labels_ref::RawLabels;
use crate::manifest::Manifest;
use crate::options::Options;
use crate::partition::PartitionFile;
use crate::series_table::SeriesTable;
use crate::snapshot::{LiveFile, ReadState, Snapshot, State};
use crate::types::{Batch, HistogramSample, Labels, Sample, SeriesId};
use crate::wal::{Position, Wal, WalOptions};
use compact::CompactMode;

/// Whether the database can take writes right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// True when writes can be made durable.
    pub writable: bool,
    /// Why not, when not.
    pub reason: Option<String>,
}

/// What happened to one [`Db::append`] call. Rejected samples are not stored; the rest are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Samples stored (including idempotent repeats of a stored sample), histograms included.
    pub appended: u64,
    /// Of `appended`, the native histogram samples.
    pub histograms_appended: u64,
    /// Series seen for the first time.
    pub series_created: u64,
    /// Samples further behind their series' newest sample than the out-of-order window (only
    /// when one is configured).
    pub too_old: u64,
    /// Samples in a partition retention deletes: before [`AppendOutcome::retention_first_kept`].
    pub outside_retention: u64,
    /// With `outside_retention`, the first timestamp retention keeps (ms since the epoch).
    pub retention_first_kept: Option<i64>,
    /// Samples too far ahead of the wall clock.
    pub too_far_future: u64,
    /// The first rejected sample, for error messages.
    pub first_rejected: Option<(Labels, Sample)>,
    /// New series refused by a cardinality limit, per limit ([`crate::cardinality`]).
    pub series_rejected: SeriesRejections,
    /// Samples not stored because their series was refused.
    pub series_limited: u64,
    /// The first series refused, for error messages.
    pub first_rejected_series: Option<RejectedSeries>,
}

impl AppendOutcome {
    /// Samples rejected for any reason.
    pub fn rejected(&self) -> u64 {
        self.too_old + self.outside_retention + self.too_far_future + self.series_limited
    }
}

/// A series entry of an append with samples inside the accepted window.
struct Accepted<'b> {
    id: SeriesId,
    labels: RawLabels<'b>,
    /// Its accepted samples, sorted by time: a range of the append's `kept` vector.
    samples: std::ops::Range<usize>,
    /// Their start timestamps (one per sample, 0: none), a range of the append's
    /// `kept_starts` vector; None when no accepted sample of the entry has one.
    starts: Option<std::ops::Range<usize>>,
    /// Its accepted histograms (in write order), a range of the append's `kept_hists`.
    hists: std::ops::Range<usize>,
}

/// An append whose WAL record is written but not yet known durable: see
/// [`Db::append_ref_deferred`]. Holds the database's append lock (shared), so a flush waits for
/// it; finish it promptly. Dropping it unfinished keeps its samples out of the head (its
/// record stays in the WAL, replayed only by a restart before the next flush): only for a
/// request that then answers an error, so nothing unstored is acknowledged.
#[must_use = "the samples are neither durable nor visible until finish returns"]
pub struct PendingAppend<'d> {
    db: &'d Inner,
    _appending: parking_lot::RwLockReadGuard<'d, ()>,
    out: AppendOutcome,
    /// None when nothing of the batch was accepted (no record written).
    written: Option<WrittenAppend>,
}

/// What the head insert of a written append needs, owned, so that the batch can go.
struct WrittenAppend {
    record: crate::wal::Written,
    head: Arc<Head>,
    kept: Vec<Sample>,
    kept_starts: Vec<i64>,
    kept_hists: Vec<HistogramSample>,
    /// Per accepted entry: its series and ranges, as in [`Accepted`].
    series: Vec<KeptSeries>,
    out_of_order: u64,
}

/// An [`Accepted`] entry without its labels, which borrow the batch.
struct KeptSeries {
    id: SeriesId,
    samples: std::ops::Range<usize>,
    starts: Option<std::ops::Range<usize>>,
    hists: std::ops::Range<usize>,
}

impl PendingAppend<'_> {
    /// What was refused so far (`appended` is filled in by [`PendingAppend::finish`]).
    pub fn outcome(&self) -> &AppendOutcome {
        &self.out
    }

    /// Waits until the WAL record is durable, then inserts the samples into the head.
    pub fn finish(self) -> Result<AppendOutcome> {
        let PendingAppend { db, _appending, mut out, written } = self;
        let Some(w) = written else { return Ok(out) };
        db.wal.wait_durable(w.record).map_err(|e| db.append_failed(e))?;
        let appends: Vec<SeriesSamples<'_>> = w
            .series
            .iter()
            .map(|k| SeriesSamples {
                id: k.id,
                samples: w.kept.get(k.samples.clone()).unwrap_or_default(),
                starts: k.starts.clone().and_then(|r| w.kept_starts.get(r)).unwrap_or_default(),
            })
            .collect();
        w.head.append_series(&appends);
        for k in w.series.iter().filter(|k| !k.hists.is_empty()) {
            w.head.append_histograms(k.id, w.kept_hists.get(k.hists.clone()).unwrap_or_default());
        }
        if let Some(t) = w.kept.iter().map(|s| s.t).max() {
            db.newest.fetch_max(t, Ordering::Relaxed);
        }
        out.appended = w.kept.len() as u64;
        out.histograms_appended = w.kept_hists.len() as u64;
        db.counters.samples_appended.fetch_add(out.appended, Ordering::Relaxed);
        db.counters.samples_out_of_order.fetch_add(w.out_of_order, Ordering::Relaxed);
        if w.head.flush_weight() >= db.opts.head_samples_max as u64 || db.span_flush_due(&w.head) {
            db.wake_worker();
        }
        Ok(out)
    }
}

/// Monotonic counters for `/metrics`. Bumped with relaxed atomic adds where the event happens;
/// read at scrape time.
#[derive(Debug)]
pub struct Counters {
    /// Samples appended.
    pub samples_appended: AtomicU64,
    /// Samples appended although older than their series' newest sample.
    pub samples_out_of_order: AtomicU64,
    /// Samples rejected as further behind their series' newest than the out-of-order window.
    pub rejected_too_old: AtomicU64,
    /// Samples rejected because retention would delete them.
    pub rejected_outside_retention: AtomicU64,
    /// Samples rejected as too far in the future.
    pub rejected_too_far_future: AtomicU64,
    /// Samples rejected because a cardinality limit refused their new series.
    pub rejected_series_limit: AtomicU64,
    /// Series created.
    pub series_created: AtomicU64,
    /// Series removed from the index because no data of theirs was left (after retention).
    pub series_removed: AtomicU64,
    /// Appends refused because the samples waiting to be flushed reached twice
    /// `head_samples_max` ([`Error::FlushBacklog`]).
    pub appends_refused_backlog: AtomicU64,
    /// Flushes completed.
    pub flushes: AtomicU64,
    /// Flushes that failed (the head stays in memory and the WAL, and is retried).
    pub flush_failures: AtomicU64,
    /// Total flush time in microseconds.
    pub flush_micros: AtomicU64,
    /// Duration of each completed flush, in nanoseconds.
    pub flush_duration: BucketHistogram,
    /// Bytes written by flushes.
    pub flush_bytes: AtomicU64,
    /// Compactions completed.
    pub compactions: AtomicU64,
    /// Compactions that failed (their input files stay live).
    pub compaction_failures: AtomicU64,
    /// Total compaction time in microseconds.
    pub compaction_micros: AtomicU64,
    /// Duration of each completed compaction, in nanoseconds.
    pub compaction_duration: BucketHistogram,
    /// Bytes written by compactions.
    pub compaction_bytes: AtomicU64,
    /// Blocks written by compactions, copied ones included.
    pub compaction_blocks: AtomicU64,
    /// Blocks compactions copied from their inputs without decoding them (see `db/splice.rs`).
    pub compaction_blocks_copied: AtomicU64,
    /// Partitions removed by retention.
    pub retention_partitions_removed: AtomicU64,
    /// Maintenance runs that failed.
    pub maintenance_errors: AtomicU64,
    /// Times the database became writable again by itself after a failed WAL write or fsync
    /// (see `recovery.rs`).
    pub recoveries: AtomicU64,
    /// Recovery attempts that failed (the disk was still full); each is retried.
    pub recovery_failures: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        let zero = || AtomicU64::new(0);
        Counters {
            samples_appended: zero(),
            samples_out_of_order: zero(),
            rejected_too_old: zero(),
            rejected_outside_retention: zero(),
            rejected_too_far_future: zero(),
            rejected_series_limit: zero(),
            series_created: zero(),
            series_removed: zero(),
            appends_refused_backlog: zero(),
            flushes: zero(),
            flush_failures: zero(),
            flush_micros: zero(),
            flush_duration: BucketHistogram::new(MAINTENANCE_NANOS_BUCKETS),
            flush_bytes: zero(),
            compactions: zero(),
            compaction_failures: zero(),
            compaction_micros: zero(),
            compaction_duration: BucketHistogram::new(MAINTENANCE_NANOS_BUCKETS),
            compaction_bytes: zero(),
            compaction_blocks: zero(),
            compaction_blocks_copied: zero(),
            retention_partitions_removed: zero(),
            maintenance_errors: zero(),
            recoveries: zero(),
            recovery_failures: zero(),
        }
    }
}

/// How far outside sources (partitions of an ingest log) had been appended: as noted by the
/// appender, and as of the data in the committed manifest's files.
#[derive(Debug, Default)]
pub(crate) struct Positions {
    /// The newest position noted per source, after its records were appended.
    pub noted: BTreeMap<String, u64>,
    /// The positions of the local manifest last committed by a flush.
    pub flushed: BTreeMap<String, u64>,
}

pub(crate) struct Inner {
    pub opts: Options,
    pub dir: PathBuf,
    /// What snapshots read besides the [`State`]: the index, the series table, the partition
    /// width and the deletion flag.
    pub shared: Arc<ReadState>,
    /// Cardinality limits; every series created while the database is open goes through it.
    pub cardinality: Cardinality,
    pub wal: Wal,
    pub appending: RwLock<()>,
    pub state: RwLock<Arc<State>>,
    pub maint: Mutex<Manifest>,
    pub counters: Counters,
    pub closed: AtomicBool,
    /// Wakes the maintenance thread; shared with the WAL, which pulls it when it is poisoned
    /// (also from its background syncer, where no append is there to notice).
    pub wake: Arc<(Mutex<bool>, Condvar)>,
    /// Some failed flush, compaction or retention left files it could not remove, or a manifest
    /// whose commit is uncertain: the next maintenance sweeps unlisted files.
    pub sweep_pending: AtomicBool,
    /// The newest timestamp stored (`i64::MIN` while empty): what retention measures back from,
    /// and so what ingest refuses samples by (see [`Options::retention_first_kept`]). Set at
    /// open from the files and the replayed head, then only raised by appends (a deletion of
    /// the newest data does not lower it until the next start).
    pub newest: AtomicI64,
    /// When a flush last wrote a file to each partition: compaction merges a partition that
    /// stopped taking in-order data into one file only once writes to it have paused (a
    /// backfill writing old partitions flush after flush would otherwise rewrite them whole
    /// each time).
    pub partition_writes: Mutex<BTreeMap<i64, Instant>>,
    /// With a bucket: the thread that uploads files and commits manifests to it.
    pub mirror: Option<crate::bucket::mirror::Mirror>,
    /// Outside sources' positions ([`Db::note_position`]).
    pub positions: Mutex<Positions>,
    /// On a query node: the prefixes followed (see `follow.rs`).
    pub follow: Option<Mutex<follow::Follow>>,
    _lock: File,
}

/// An open database. Every method takes `&self`; share it behind an `Arc`.
pub struct Db {
    pub(crate) inner: Arc<Inner>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

/// Statistics of opening the database.
#[derive(Debug, Clone, Default)]
pub struct OpenStats {
    /// Partition files opened.
    pub files: usize,
    /// WAL records replayed.
    pub wal_records: u64,
    /// WAL bytes replayed.
    pub wal_bytes: u64,
    /// Samples replayed into the head.
    pub wal_samples: u64,
    /// Stray files removed (leftovers of interrupted operations).
    pub stray_removed: usize,
    /// Time taken.
    pub duration: Duration,
}

impl Db {
    /// Opens (creating if needed) the database in `opts.data_dir`: loads the manifest, removes
    /// files it does not list, opens partition files, replays the WAL into the head, and starts
    /// the background maintenance thread.
    pub fn open(opts: Options) -> Result<Db> {
        Self::open_with_stats(opts).map(|(db, _)| db)
    }

    /// [`Db::open`], also returning what opening did.
    pub fn open_with_stats(mut opts: Options) -> Result<(Db, OpenStats)> {
        let started = Instant::now();
        let dir = opts.data_dir.clone();
        fsutil::create_dir_durable(&dir)?;
        let lock = lock_dir(&dir)?;
        fsutil::create_dir_durable(&filenames::partitions_dir(&dir))?;
        let manifest_path = filenames::manifest(&dir);
        if opts.partition_ms <= 0 {
            return Err(Error::InvalidInput("partition width must be positive".into()));
        }
        let bucket = match &opts.bucket {
            Some(b) => Some(Arc::new(crate::Bucket::open(b)?)),
            None => None,
        };
        let follow = match (opts.follow, &bucket) {
            (Some(refresh), Some(root)) => {
                // A query node's directory is a cache: nothing in it outlives the process.
                fsutil::remove_path(&manifest_path)?;
                fsutil::remove_path(&filenames::wal_dir(&dir))?;
                let mut follow = follow::Follow::new(Arc::clone(root), refresh);
                follow.poll()?;
                // The writers' partition width, whatever the flag says.
                if let Some(ms) = follow.partition_width() {
                    opts.partition_ms = ms;
                }
                Some(follow)
            }
            (Some(_), None) => {
                return Err(Error::InvalidInput("a query node needs a bucket (--storage.bucket)".into()));
            }
            (None, _) => None,
        };
        let local = Manifest::load(&manifest_path)?;
        let claimed = match &bucket {
            Some(bucket) if follow.is_none() => {
                Some(crate::bucket::open_prefix(bucket, &dir, local.as_ref())?)
            }
            _ => None,
        };
        let mut manifest = match (&claimed, local) {
            // Restored: `open_prefix` wrote the prefix's manifest as the local one.
            (Some(_), None) => Manifest::load(&manifest_path)?.unwrap_or_default(),
            (_, local) => local.unwrap_or_default(),
        };
        if manifest.partition_ms == 0 {
            manifest.partition_ms = opts.partition_ms;
        } else if manifest.partition_ms != opts.partition_ms {
            tracing::warn!(
                configured_ms = opts.partition_ms,
                kept_ms = manifest.partition_ms,
                "the database keeps the partition width it was created with"
            );
            opts.partition_ms = manifest.partition_ms;
        }
        let mut stats = OpenStats { stray_removed: remove_strays(&dir, &manifest)?, ..OpenStats::default() };

        let mut index = Index::new();
        let series = SeriesTable::default();
        let mut partitions: BTreeMap<i64, Vec<Arc<LiveFile>>> = BTreeMap::new();
        for entry in &manifest.files {
            let path = filenames::partition_file(&dir, entry.partition, entry.id);
            let resolve = |labels: &Labels, max_t| {
                let (id, _) = index.get_or_create(labels);
                series.observe(id, max_t);
                id
            };
            let file = match &bucket {
                // Restored from the bucket (or lost locally): read from it through a cache.
                Some(b) if !path.exists() => PartitionFile::open_cached(
                    Arc::clone(b),
                    b.file_key(entry.partition, entry.id),
                    &filenames::partition_cache_file(&dir, entry.partition, entry.id),
                    entry.size,
                    resolve,
                )?,
                _ => PartitionFile::open(&path, resolve)?,
            };
            partitions
                .entry(entry.partition)
                .or_default()
                .push(Arc::new(LiveFile::open(entry.clone(), file)));
            stats.files += 1;
        }
        for files in partitions.values_mut() {
            files.sort_by_key(|f| f.entry.seq);
        }
        let max_seq = manifest.files.iter().map(|f| f.seq + 1).max().unwrap_or(0);
        manifest.next_seq = manifest.next_seq.max(max_seq);
        let max_id = manifest.files.iter().map(|f| f.id + 1).max().unwrap_or(0);
        manifest.next_file_id = manifest.next_file_id.max(max_id);
        if let Some(c) = &claimed {
            // Each epoch names its files from its own range, so a fenced writer still
            // uploading can never overwrite a file of the writer that fenced it.
            manifest.next_file_id = manifest.next_file_id.max(crate::bucket::first_file_id(c.epoch));
        }

        let head = Head::new();
        let wal_opts = WalOptions {
            dir: filenames::wal_dir(&dir),
            segment_bytes: opts.wal_segment_bytes,
            sync: opts.wal_sync,
            truncate_corrupt: opts.wal_truncate_corrupt,
            progress: Arc::clone(&opts.wal_replay_progress),
        };
        // Replay is pipelined: this thread reads and checks records and hands each to every
        // applier thread; applier `k` decodes the series whose WAL id falls in its share
        // (`id % appliers == k`), borrowing their label strings from the record, and applies
        // them. Each applier walks the whole record but validates and copies only its share.
        //
        // WAL ids are the writing process's series ids, so a series keeps its id within a WAL
        // run (a run never spans two processes: `Wal::open` always starts a new one) but may
        // have another one in the next run, and so another applier. Within a run every series
        // is applied by one thread in record order; at each run boundary this thread waits
        // until every applier has applied the previous run, so a rewrite of a sample in a later
        // run is applied after the value it replaces, whichever thread applies it: last write
        // wins.
        let appliers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
        let wal_dir = filenames::wal_dir(&dir);
        // Nothing reads the index until `open` returns: replay fills it through a loader.
        let loader = index.loader();
        let (wal, replay, wal_samples) = std::thread::scope(|scope| -> Result<_> {
            let mut senders = Vec::with_capacity(appliers);
            let mut workers = Vec::with_capacity(appliers);
            for k in 0..appliers {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Replayed>(8);
                senders.push(tx);
                let (loader, series, head, wal_dir) = (&loader, &series, &head, &wal_dir);
                workers.push(scope.spawn(move || -> Result<u64> {
                    let mine = |old: SeriesId| old as usize % appliers == k;
                    let mut ids = IdMap::default();
                    let mut samples_applied = 0u64;
                    let mut recycled = batch_codec::DecodedBatch::default();
                    for message in rx {
                        let (at, payload) = match message {
                            Replayed::Record(at, payload) => (at, payload),
                            Replayed::RunDone(ack) => {
                                // The other end may have stopped waiting after an error.
                                let _ = ack.send(());
                                continue;
                            }
                        };
                        let corrupt = |reason: String| {
                            let Position { segment, run } = at;
                            Error::corruption(
                                wal_dir,
                                None,
                                format!("segment {segment} (run {run}): {reason}"),
                            )
                        };
                        let mut batch = recycled.recycle();
                        batch_codec::decode_where(&payload, mine, &mut batch)
                            .map_err(|e| corrupt(e.to_string()))?;
                        ids.enter_run(at.run);
                        for (old, labels) in batch.defs() {
                            let (new, _) = loader.get_or_create_ref(labels);
                            ids.insert(old, new);
                        }
                        for ((old, samples, starts), hists) in
                            batch.series_with_starts().zip(batch.histograms())
                        {
                            let id = ids
                                .get(old)
                                .ok_or_else(|| corrupt(format!("series {old} used before its definition")))?;
                            if let Some(last) = samples.iter().map(|s| s.t).max() {
                                series.observe(id, last);
                            }
                            head.append_with_starts(id, samples, starts);
                            head.append_histograms(id, hists);
                            samples_applied += samples.len() as u64;
                        }
                        recycled = batch.recycle();
                    }
                    Ok(samples_applied)
                }));
            }
            let mut replaying = None;
            let opened = Wal::open(wal_opts, manifest.wal_first_segment, |at: Position, payload| {
                if replaying.is_some_and(|run| run != at.run) {
                    wait_for_appliers(&senders);
                }
                replaying = Some(at.run);
                let payload: Arc<[u8]> = Arc::from(payload);
                for tx in &senders {
                    // A closed channel means that applier stopped on an error, reported below.
                    if tx.send(Replayed::Record(at, payload.clone())).is_err() {
                        break;
                    }
                }
                Ok(())
            });
            drop(senders);
            let mut applied = 0u64;
            let mut first_err = None;
            for w in workers {
                match w.join() {
                    Ok(Ok(n)) => applied += n,
                    Ok(Err(e)) => first_err = first_err.or(Some(e)),
                    Err(_) => {
                        first_err =
                            first_err.or(Some(Error::InvalidInput("WAL replay thread panicked".into())))
                    }
                }
            }
            if let Some(e) = first_err {
                return Err(e);
            }
            let (wal, replay) = opened?;
            Ok((wal, replay, applied))
        })?;
        stats.wal_records = replay.records;
        stats.wal_bytes = replay.bytes;
        stats.wal_samples = wal_samples;

        let newest = manifest.files.iter().map(|f| f.max_t).chain(head.time_bounds().map(|b| b.1)).max();
        let state = State {
            head: Arc::new(head),
            frozen: Vec::new(),
            partitions,
            tombstones: Arc::new(manifest.tombstones.clone()),
        };
        // Series' newest timestamps were read from files that live tombstones still apply to.
        let deleted = !manifest.tombstones.is_empty();
        let wake = Arc::new((Mutex::new(false), Condvar::new()));
        {
            let wake = Arc::clone(&wake);
            wal.set_poison_hook(Box::new(move || {
                *wake.0.lock() = true;
                wake.1.notify_all();
            }));
        }
        let mirror = match (bucket, claimed) {
            (Some(b), Some(c)) => Some(crate::bucket::mirror::Mirror::start(b, dir.clone(), c)),
            _ => None,
        };
        let positions = Positions { noted: manifest.positions.clone(), flushed: manifest.positions.clone() };
        let inner = Arc::new(Inner {
            cardinality: Cardinality::new(opts.series_limits),
            shared: Arc::new(ReadState {
                index,
                series,
                partition_ms: opts.partition_ms,
                deleted: AtomicBool::new(deleted),
                from_bucket: opts.bucket.is_some(),
            }),
            opts,
            dir,
            wal,
            appending: RwLock::new(()),
            state: RwLock::new(Arc::new(state)),
            maint: Mutex::new(manifest),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            wake,
            sweep_pending: AtomicBool::new(false),
            newest: AtomicI64::new(newest.unwrap_or(i64::MIN)),
            partition_writes: Mutex::new(BTreeMap::new()),
            positions: Mutex::new(positions),
            mirror,
            follow: follow.map(Mutex::new),
            _lock: lock,
        });
        if let Some(follow) = &inner.follow {
            // What the first poll read above.
            inner.install_follow(&mut follow.lock());
        }
        if let Some(m) = &inner.mirror {
            m.offer(&inner.maint.lock());
        }
        let worker = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("strata-maintenance".into())
                .spawn(move || match inner.follow {
                    Some(_) => inner.follow_loop(),
                    None => inner.maintenance_loop(),
                })
                .map_err(|e| Error::io("spawn maintenance thread", e))?
        };
        stats.duration = started.elapsed();
        tracing::info!(
            files = stats.files,
            wal_records = stats.wal_records,
            wal_samples = stats.wal_samples,
            series = inner.shared.index.len(),
            ms = stats.duration.as_millis() as u64,
            "database opened"
        );
        Ok((Db { inner, worker: Mutex::new(Some(worker)) }, stats))
    }

    /// Notes that everything of the outside source `source` (a partition of an ingest log,
    /// say) up to `position` has been appended, as an appender that reads such a source calls
    /// once its append returned. The next flush records the positions noted before it in its
    /// manifest (`position` lines, docs/format/manifest.md), which a bucket's records carry:
    /// [`Db::positions_stored`] then says how far each source's data is in files. Positions only
    /// grow; a lower one is ignored.
    pub fn note_position(&self, source: &str, position: u64) {
        let mut p = self.inner.positions.lock();
        let at = p.noted.entry(source.to_string()).or_default();
        *at = (*at).max(position);
    }

    /// How far each source's data is in files: with a bucket, in the files of the newest
    /// record this writer committed to it (what another writer taking the source over may
    /// skip); without, in the local manifest's files.
    pub fn positions_stored(&self) -> BTreeMap<String, u64> {
        match &self.inner.mirror {
            Some(mirror) => mirror.committed_positions(),
            None => self.inner.positions.lock().flushed.clone(),
        }
    }

    /// Appends a batch. Returns once the batch is durable (per the WAL sync mode) and visible
    /// to new snapshots. Samples outside the accepted time window, and new series beyond a
    /// cardinality limit ([`crate::cardinality`]), are rejected and counted in the outcome; the rest
    /// of the batch is stored. A series with an empty label set fails the
    /// whole batch with `InvalidInput` before anything is written.
    ///
    /// Borrows the batch's strings and goes through [`Db::append_ref`]; decoders of requests
    /// build a [`BatchRef`] directly instead, so no label is copied.
    pub fn append(&self, batch: &Batch) -> Result<AppendOutcome> {
        self.inner.append(&BatchRef::from(batch))
    }

    /// [`Db::append`] for a batch whose label strings are borrowed (e.g. from a decoded
    /// request): a series the index knows costs no allocation, and an owned label set is made
    /// only for a new one.
    pub fn append_ref(&self, batch: &BatchRef<'_>) -> Result<AppendOutcome> {
        self.inner.append(batch)
    }

    /// [`Db::append_ref`] in two halves, so that a request handler can free the request (its
    /// body, the decoded batch) while the WAL's fsync is pending instead of holding it through
    /// the wait: this writes the WAL record and returns; [`PendingAppend::finish`] waits until
    /// the record is durable and then puts the samples in the head, where queries see them.
    /// Nothing is acknowledged or visible before it is durable, as with `append_ref`.
    pub fn append_ref_deferred(&self, batch: &BatchRef<'_>) -> Result<PendingAppend<'_>> {
        self.inner.append_deferred(batch)
    }

    /// A consistent read view. Cheap; take one per query.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.shared.clone(), self.inner.state.read().clone())
    }

    /// A read view of what a query node holding the bucket records `seen` (writer nonce,
    /// record number: [`Db::followed_records`]) cannot read from the bucket: the heads, and
    /// the files that the record of this writer it holds does not list. Everything when there
    /// is no bucket, or when `seen` holds no record this writer process committed among its
    /// last 64: a query node merges both answers, so more is slower, never wrong.
    pub fn snapshot_unuploaded(&self, seen: &[(u64, u64)]) -> Snapshot {
        let state = self.inner.state.read().clone();
        let held = self.inner.mirror.as_ref().and_then(|m| {
            let (_, seq) = seen.iter().find(|(w, _)| *w == m.writer())?;
            m.files_committed_at(*seq)
        });
        let Some(held) = held else { return Snapshot::new(self.inner.shared.clone(), state) };
        let mut unuploaded = state.clone_shallow();
        for (p, files) in unuploaded.partitions.iter_mut() {
            files.retain(|f| !held.contains(&(*p, f.entry.id)));
        }
        unuploaded.partitions.retain(|_, files| !files.is_empty());
        Snapshot::new(self.inner.shared.clone(), Arc::new(unuploaded))
    }

    /// On a query node, the newest record read of each followed prefix, as (writer nonce,
    /// record number): what [`Db::snapshot_unuploaded`] on each writer wants to know.
    pub fn followed_records(&self) -> Vec<(u64, u64)> {
        self.inner.follow.as_ref().map(|f| f.lock().records()).unwrap_or_default()
    }

    /// Writes the head to partition files now.
    pub fn flush(&self) -> Result<()> {
        self.inner.writable("flush")?;
        let mut m = self.inner.maint.lock();
        self.inner.flush_locked(&mut m)
    }

    /// Runs one compaction pass over all partitions.
    pub fn compact(&self) -> Result<()> {
        self.inner.writable("compact")?;
        let mut m = self.inner.maint.lock();
        self.inner.compact_locked(&mut m, CompactMode::Policy)
    }

    /// Merges every partition that has more than one file into one file, whatever the tiered
    /// policy would wait for: what a bulk import or backfill wants once it is done (the
    /// counterpart of VictoriaMetrics' `/internal/force_merge`). Reads keep being served; the
    /// old files go once no snapshot uses them.
    ///
    /// The head is flushed first, so everything written before the call ends up merged: after a
    /// load that sent its data in any order, each partition is then one file whose blocks are
    /// those of an in-order load (a head left for the shutdown flush would add files of its own,
    /// its out-of-order ones among them).
    pub fn compact_all(&self) -> Result<()> {
        self.inner.writable("compact")?;
        let mut m = self.inner.maint.lock();
        self.inner.flush_locked(&mut m)?;
        self.inner.compact_locked(&mut m, CompactMode::All)
    }

    /// Removes partitions past the retention period.
    pub fn apply_retention(&self) -> Result<usize> {
        self.inner.writable("retention")?;
        let mut m = self.inner.maint.lock();
        self.inner.retention_locked(&mut m)
    }

    /// Deletes the samples in `[mint, maxt]` of series matching `matchers` (a tombstone; the data
    /// is dropped from disk by the next compaction or [`Db::clean_tombstones`]).
    pub fn delete(&self, matchers: &[crate::Matcher], mint: i64, maxt: i64) -> Result<()> {
        self.inner.writable("delete")?;
        self.inner.shared.deleted.store(true, Ordering::Release);
        let mut m = self.inner.maint.lock();
        self.inner.delete_locked(&mut m, matchers, mint, maxt)
    }

    /// Rewrites every file that tombstones apply to, dropping the deleted data from disk.
    pub fn clean_tombstones(&self) -> Result<()> {
        self.inner.writable("clean tombstones")?;
        let mut m = self.inner.maint.lock();
        self.inner.compact_locked(&mut m, CompactMode::Tombstones)
    }

    /// Writes a consistent copy of the database into `dir` (new or empty) that a new strata can
    /// open: the admin API's snapshot. `with_head` flushes the head first so the copy has every
    /// acknowledged sample. See [`backup`].
    pub fn backup_to(&self, dir: &Path, with_head: bool) -> Result<backup::BackupStats> {
        self.inner.writable("snapshot")?;
        backup::backup_to(&self.inner, dir, with_head)
    }

    /// Reads the newest manifest of every prefix a query node follows now, rather than at the
    /// next refresh; true if the files changed. False at once on any other node.
    pub fn refresh_bucket(&self) -> Result<bool> {
        self.inner.refresh_follow()
    }

    /// The prefixes a query node follows and the newest manifest number read from each; empty on
    /// any other node.
    pub fn followed_prefixes(&self) -> Vec<(String, Option<u64>)> {
        self.inner.follow.as_ref().map(|f| f.lock().prefixes()).unwrap_or_default()
    }

    /// True on a query node (`Options::follow`), which only reads.
    pub fn reads_only(&self) -> bool {
        self.inner.follow.is_some()
    }

    /// Writable or not, and why.
    pub fn health(&self) -> Health {
        if self.inner.closed.load(Ordering::Acquire) {
            return Health { writable: false, reason: Some(Error::Closed.to_string()) };
        }
        if let Some(theirs) = self.inner.fenced_by() {
            return Health { writable: false, reason: Some(Error::Fenced { theirs }.to_string()) };
        }
        if self.inner.follow.is_some() {
            return Health { writable: false, reason: Some(Error::ReadOnly("writes").to_string()) };
        }
        match self.inner.wal.poisoned() {
            Some(why) => Health {
                writable: false,
                reason: Some(format!("{why} (writes are refused until storage recovers by itself)")),
            },
            None => Health { writable: true, reason: None },
        }
    }

    /// True while the WAL refuses writes after a failed write or fsync; the maintenance thread
    /// is then trying to recover (see `recovery.rs`).
    pub fn wal_poisoned(&self) -> bool {
        self.inner.wal.poisoned().is_some()
    }

    /// What the bucket mirror has done, when there is a bucket.
    pub fn mirror_status(&self) -> Option<&Arc<crate::MirrorStatus>> {
        self.inner.mirror.as_ref().map(|m| m.status())
    }

    /// Trims the local copies of bucket files to `--storage.bucket-cache-size` now (the
    /// maintenance thread does it at each run); returns the bytes freed.
    pub fn trim_bucket_cache(&self) -> Result<u64> {
        if self.inner.follow.is_some() {
            return self.inner.trim_follow_cache();
        }
        let _m = self.inner.maint.lock();
        self.inner.trim_bucket_cache_locked()
    }

    /// Waits until the bucket holds everything committed locally (true), at most `timeout`.
    /// True at once without a bucket.
    pub fn wait_mirrored(&self, timeout: Duration) -> bool {
        self.inner.mirror.as_ref().is_none_or(|m| m.wait_idle(timeout))
    }

    /// Counters for monitoring.
    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// New series refused by cardinality limits since the process started, per limit.
    pub fn series_rejected_total(&self) -> SeriesRejections {
        self.inner.cardinality.rejected_total()
    }

    /// Who among `tenants` (values of [`crate::TENANT_LABEL`]; `None`: the default tenant)
    /// created series today and who was refused (the `limit` largest metrics of each), and the
    /// limits in force (each counted per tenant): `/api/v1/status/tsdb`'s answer to "which
    /// metric is exploding?".
    pub fn cardinality_stats(&self, tenants: &[Option<&str>], limit: usize) -> CardinalityStats {
        self.inner.cardinality.stats(tenants, limit, now_ms())
    }

    /// WAL statistics (fsyncs, bytes, latency).
    pub fn wal_stats(&self) -> crate::wal::WalStats {
        self.inner.wal.stats()
    }

    /// Number of series in the index.
    pub fn series_count(&self) -> usize {
        self.inner.shared.index.len()
    }

    /// Approximate heap bytes of the series index and the heads.
    pub fn memory_bytes(&self) -> (usize, usize) {
        let s = self.inner.state.read().clone();
        let heads = s.head.memory_bytes() + s.frozen.iter().map(|f| f.head.memory_bytes()).sum::<usize>();
        (self.inner.shared.index.memory_bytes(), heads)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Stops background work, flushes the head to partition files (so the next start replays
    /// little) and syncs the WAL. Appends afterwards fail with `Error::Closed`. If the WAL is
    /// poisoned, one recovery attempt runs first; if it fails, the acknowledged data is still in
    /// the WAL for the next start.
    pub fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.wake_worker();
        if let Some(w) = self.worker.lock().take() {
            let _ = w.join();
        }
        if self.inner.wal.poisoned().is_some() {
            let mut m = self.inner.maint.lock();
            if let Err(e) = self.inner.recover_locked(&mut m) {
                tracing::warn!(error = %e, "close: storage still cannot write");
            }
        }
        let flushed = match self.inner.follow {
            Some(_) => Ok(()),
            None => self.flush(),
        };
        let closed = self.inner.wal.close();
        if let Some(m) = &self.inner.mirror {
            // What the last flush wrote goes up now, if the bucket answers in time; else the
            // next start uploads it.
            if !m.wait_idle(Duration::from_secs(30)) {
                tracing::warn!("close: the bucket is not up to date yet; the next start uploads the rest");
            }
            m.stop();
        }
        flushed.and(closed)
    }
}

/// What the WAL reader hands each replay applier.
enum Replayed {
    /// A record and where it lies, to decode the applier's share of.
    Record(Position, Arc<[u8]>),
    /// Everything sent before was applied once the applier answers on this channel.
    RunDone(std::sync::mpsc::Sender<()>),
}

/// Blocks until every applier has applied all it was sent (or has stopped on an error, which
/// drops its channel and whatever was queued in it).
fn wait_for_appliers(senders: &[std::sync::mpsc::SyncSender<Replayed>]) {
    let (ack, acks) = std::sync::mpsc::channel();
    let asked = senders.iter().filter(|tx| tx.send(Replayed::RunDone(ack.clone())).is_ok()).count();
    drop(ack);
    for _ in 0..asked {
        if acks.recv().is_err() {
            break;
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Stop the worker without flushing: a dropped (not closed) database behaves like a crash,
        // which the WAL makes safe.
        self.inner.closed.store(true, Ordering::Release);
        self.inner.wake_worker();
        if let Some(w) = self.worker.lock().take() {
            let _ = w.join();
        }
    }
}

impl Inner {
    /// Refuses `what` on a query node, which only reads.
    fn writable(&self, what: &'static str) -> Result<()> {
        match self.follow {
            Some(_) => Err(Error::ReadOnly(what)),
            None => Ok(()),
        }
    }

    /// The epoch of the writer that took this one's bucket prefix over, if one did.
    fn fenced_by(&self) -> Option<u64> {
        let status = self.mirror.as_ref()?.status();
        status.fenced.load(Ordering::Acquire).then(|| status.fenced_by.load(Ordering::Relaxed))
    }

    fn append(&self, batch: &BatchRef<'_>) -> Result<AppendOutcome> {
        self.append_deferred(batch)?.finish()
    }

    /// The WAL-writing half of an append; see [`Db::append_ref_deferred`].
    fn append_deferred(&self, batch: &BatchRef<'_>) -> Result<PendingAppend<'_>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(theirs) = self.fenced_by() {
            return Err(Error::Fenced { theirs });
        }
        self.writable("append")?;
        let mut out = AppendOutcome::default();
        if let Some((l, _)) = batch.iter().find(|(l, _)| l.is_empty()) {
            return Err(Error::InvalidInput(format!("series with no labels ({l})")));
        }
        // Held from id resolution to the head insert (in `PendingAppend::finish`): a flush's
        // rotation and retention's series garbage collection take it exclusively, so neither
        // runs in the middle of an append.
        let appending = self.appending.read();
        self.check_flush_backlog()?;
        let now = now_ms();
        let future_limit = now.saturating_add(self.opts.future_window_ms);
        // Retention measures back from the newest sample, this batch's included: a sample the
        // next retention pass would delete is refused now rather than stored and then lost.
        let batch_newest = batch
            .iter()
            .flat_map(|(_, samples)| samples.iter().map(|s| s.t))
            .filter(|&t| t <= future_limit)
            .max()
            .unwrap_or(i64::MIN);
        let newest = self.newest.load(Ordering::Relaxed).max(batch_newest);
        let first_kept = if newest == i64::MIN { i64::MIN } else { self.opts.retention_first_kept(newest) };
        let ooo_window = self.opts.ooo_window_ms;
        // Resolve ids and filter samples outside the accepted window. The accepted samples of
        // all series go into one vector (`kept`), each series owning a range of it.
        let mut accepted: Vec<Accepted<'_>> = Vec::with_capacity(batch.len());
        let mut kept: Vec<Sample> = Vec::with_capacity(batch.sample_count());
        let mut out_of_order = 0u64;
        let resolved = self.cardinality.resolve(&self.shared.index, batch, now)?;
        out.series_created = resolved.created;
        out.series_rejected = resolved.rejected;
        out.first_rejected_series = resolved.first_rejected;
        // Start timestamps of the accepted samples of series that have any, one per sample.
        let mut kept_starts: Vec<i64> = Vec::new();
        // Histograms of accepted histogram samples, per series in write order.
        let mut kept_hists: Vec<HistogramSample> = Vec::new();
        let series_hists = batch.iter_histograms();
        let table = self.shared.series.view(resolved.ids.iter().flatten().copied().max().unwrap_or(0));
        for (((labels, samples, starts), hists), id) in
            batch.iter_with_starts().zip(series_hists).zip(resolved.ids)
        {
            let Some(id) = id else {
                // No samples, or a new series a cardinality limit refused.
                out.series_limited += samples.len() as u64;
                continue;
            };
            // The view has a slot for every id resolved above.
            let slot = table.get(id);
            let mut max_t = slot.map_or(i64::MIN, |s| s.max_t.load(Ordering::Relaxed));
            let start = kept.len();
            let starts_from = kept_starts.len();
            let mut next_start = starts.iter().peekable();
            let hists_from = kept_hists.len();
            let mut next_hist = hists.iter().peekable();
            // The usual series: plain samples, all inside the accepted window (checked on their
            // oldest and newest), kept whole. Otherwise sample by sample below.
            let plain = starts.is_empty() && hists.is_empty();
            let within = plain
                && samples
                    .iter()
                    .fold(None, |b: Option<(i64, i64)>, s| {
                        Some(b.map_or((s.t, s.t), |(lo, hi)| (lo.min(s.t), hi.max(s.t))))
                    })
                    .is_some_and(|(lo, hi)| {
                        // With a window, each sample is checked against the newest before it, which
                        // is at most `max(max_t, hi)`.
                        let newest = max_t.max(hi);
                        hi <= future_limit
                            && lo >= first_kept
                            && ooo_window.is_none_or(|w| newest == i64::MIN || lo >= newest.saturating_sub(w))
                    });
            if within {
                for s in samples {
                    if s.t < max_t {
                        out_of_order += 1;
                    }
                    max_t = max_t.max(s.t);
                }
                kept.extend_from_slice(samples);
            }
            for (i, s) in samples.iter().enumerate().filter(|_| !within) {
                let st = match next_start.next_if(|(at, _)| *at as usize == i) {
                    Some(&(_, st)) => st,
                    None => 0,
                };
                let h = next_hist.next_if(|(at, _)| *at as usize == i);
                let reject = if s.t > future_limit {
                    out.too_far_future += 1;
                    true
                } else if s.t < first_kept {
                    out.outside_retention += 1;
                    out.retention_first_kept = Some(first_kept);
                    true
                } else if let Some(w) = ooo_window
                    && max_t != i64::MIN
                    && s.t < max_t.saturating_sub(w)
                {
                    out.too_old += 1;
                    true
                } else {
                    false
                };
                if reject {
                    if out.first_rejected.is_none() {
                        out.first_rejected = Some((labels.to_labels_lossy(), *s));
                    }
                    continue;
                }
                if s.t < max_t {
                    out_of_order += 1;
                }
                max_t = max_t.max(s.t);
                kept.push(*s);
                if let Some((_, h)) = h {
                    kept_hists.push(HistogramSample { t: s.t, h: h.clone() });
                }
                if !starts.is_empty() {
                    kept_starts.push(st);
                }
            }
            if kept_starts.get(starts_from..).is_some_and(|k| k.iter().all(|&st| st == 0)) {
                kept_starts.truncate(starts_from);
            }
            let Some(mine) = kept.get_mut(start..).filter(|k| !k.is_empty()) else { continue };
            // Raise the series' newest timestamp now, not after the WAL write, so a later entry
            // for the same series in this batch (or a concurrent batch) sees it.
            if let Some(slot) = slot {
                slot.max_t.fetch_max(max_t, Ordering::Relaxed);
            }
            let mine_starts = kept_starts.get_mut(starts_from..).filter(|k| !k.is_empty());
            if !mine.windows(2).all(|w| w[0].t < w[1].t) {
                // Stable: among equal timestamps the later sample stays later and so wins.
                match mine_starts {
                    None => mine.sort_by_key(|s| s.t),
                    Some(mine_starts) => sort_with_starts(mine, mine_starts),
                }
            }
            let starts = (kept_starts.len() > starts_from).then_some(starts_from..kept_starts.len());
            let hists = hists_from..kept_hists.len();
            accepted.push(Accepted { id, labels, samples: start..kept.len(), starts, hists });
        }
        drop(table);
        self.counters.rejected_too_old.fetch_add(out.too_old, Ordering::Relaxed);
        self.counters.rejected_outside_retention.fetch_add(out.outside_retention, Ordering::Relaxed);
        self.counters.rejected_too_far_future.fetch_add(out.too_far_future, Ordering::Relaxed);
        self.counters.rejected_series_limit.fetch_add(out.series_limited, Ordering::Relaxed);
        self.counters.series_created.fetch_add(out.series_created, Ordering::Relaxed);
        if accepted.is_empty() {
            return Ok(PendingAppend { db: self, _appending: appending, out, written: None });
        }
        let samples_of = |a: &Accepted<'_>| kept.get(a.samples.clone()).unwrap_or_default();
        let starts_of =
            |a: &Accepted<'_>| a.starts.clone().and_then(|r| kept_starts.get(r)).unwrap_or_default();
        let hists_of = |a: &Accepted<'_>| kept_hists.get(a.hists.clone()).unwrap_or_default();

        let head = self.state.read().head.clone();
        let series = &self.shared.series;
        let max_id = accepted.iter().map(|a| a.id).max().unwrap_or(0);
        let written = self.wal.write(|run, buf| {
            // Each run of the WAL defines a series once: in the first record of the run that
            // uses it (replay maps the ids of a run from its definitions).
            let mark = run + 1;
            let mut defs = Vec::new();
            let table = series.view(max_id);
            for a in &accepted {
                // Encoders run one at a time (under the WAL's lock): a load, and a store only
                // for a series this run has not defined yet.
                // (The view has every accepted id; were one missing, defining it again in
                // this run would be harmless.)
                let defined = table.get(a.id).is_some_and(|slot| {
                    let defined = slot.wal_run.load(Ordering::Relaxed) == mark;
                    if !defined {
                        slot.wal_run.store(mark, Ordering::Relaxed);
                    }
                    defined
                });
                if !defined {
                    defs.push((a.id, a.labels));
                }
            }
            drop(table);
            let series: Vec<batch_codec::FullSeries<'_>> =
                accepted.iter().map(|a| (a.id, samples_of(a), starts_of(a), hists_of(a))).collect();
            batch_codec::encode(&defs, &series, buf);
        });
        let record = match written {
            Ok(record) => record,
            Err(e) => return Err(self.append_failed(e)),
        };
        let series = accepted
            .iter()
            .map(|a| KeptSeries {
                id: a.id,
                samples: a.samples.clone(),
                starts: a.starts.clone(),
                hists: a.hists.clone(),
            })
            .collect();
        let written = WrittenAppend { record, head, kept, kept_starts, kept_hists, series, out_of_order };
        Ok(PendingAppend { db: self, _appending: appending, out, written: Some(written) })
    }

    /// The error of a WAL write or sync that failed, after waking the maintenance thread if
    /// the WAL is poisoned: recovery is its job, and it keeps its own backoff.
    fn append_failed(&self, e: Error) -> Error {
        if self.wal.poisoned().is_some() {
            self.wake_worker();
        }
        e
    }

    /// True when the head holds old data in bulk: its samples span more than
    /// `head_span_max_ms`, their mean time lies more than half of that before the newest (as
    /// for a bulk load spread evenly over the span; a live head with a few late samples, from a
    /// skewed clock or a catching-up sender, has its mean near the newest and waits for the age
    /// or size limit instead of flushing again and again), and there are enough of them to be
    /// worth a file (see [`Options::head_span_flush_min_samples`]).
    fn span_flush_due(&self, head: &Head) -> bool {
        let span = self.opts.head_span_max_ms;
        let (Some((lo, hi)), Some(mean)) = (head.time_bounds(), head.mean_time()) else { return false };
        hi.saturating_sub(lo) > span
            && hi.saturating_sub(mean) > span / 2
            && head.flush_weight() >= self.opts.head_span_flush_min_samples()
    }

    /// Refuses an append while the samples waiting to be flushed (the active head and heads
    /// frozen for a flush still running) reach twice `head_samples_max`: writers are then
    /// outrunning the disk, and accepting more would grow memory without bound. The error is
    /// transient (a 503 that senders retry), and the flush is woken.
    fn check_flush_backlog(&self) -> Result<()> {
        let limit = (self.opts.head_samples_max as u64).saturating_mul(2);
        let pending = {
            let s = self.state.read();
            s.head.flush_weight() + s.frozen.iter().map(|f| f.head.flush_weight()).sum::<u64>()
        };
        if pending < limit {
            return Ok(());
        }
        self.counters.appends_refused_backlog.fetch_add(1, Ordering::Relaxed);
        self.wake_worker();
        Err(Error::FlushBacklog { pending, limit })
    }

    pub(crate) fn wake_worker(&self) {
        let (m, cv) = &*self.wake;
        *m.lock() = true;
        cv.notify_all();
    }

    fn maintenance_loop(&self) {
        let mut backoff = recovery::Backoff::new();
        loop {
            {
                let wait = if self.wal.poisoned().is_some() {
                    backoff.wait(Instant::now())
                } else {
                    self.opts.maintenance_interval
                };
                let (m, cv) = &*self.wake;
                let mut woken = m.lock();
                if !*woken && !wait.is_zero() {
                    cv.wait_for(&mut woken, wait);
                }
                *woken = false;
            }
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            if self.wal.poisoned().is_some() {
                // Nothing else runs until writes are durable again: compaction would only
                // compete for the space the heads need.
                self.recover_if_due(&mut backoff);
                continue;
            }
            if let Err(e) = self.maintenance_once() {
                self.counters.maintenance_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "background maintenance failed; will retry");
            }
        }
    }

    fn maintenance_once(&self) -> Result<()> {
        let mut m = self.maint.lock();
        self.flush_if_due_locked(&mut m)?;
        self.compact_locked(&mut m, CompactMode::Policy)?;
        self.retention_locked(&mut m)?;
        self.sweep_locked(&m)?;
        self.trim_bucket_cache_locked().map(|_| ())
    }

    /// Flushes the head if one of the flush triggers holds, or finishes a flush that left
    /// frozen heads behind.
    pub(crate) fn flush_if_due_locked(&self, m: &mut Manifest) -> Result<()> {
        let (due, frozen_left) = {
            let s = self.state.read();
            let h = &s.head;
            let due = h.flush_weight() >= self.opts.head_samples_max as u64
                || (h.sample_count() > 0 && h.created().elapsed() >= self.opts.head_flush_interval)
                || self.span_flush_due(h);
            (due, !s.frozen.is_empty())
        };
        if due || frozen_left {
            self.flush_locked(m)?;
        }
        Ok(())
    }

    /// Publishes a new state built from the current one.
    pub(crate) fn update_state(&self, f: impl FnOnce(&State) -> State) {
        let mut s = self.state.write();
        let next = f(&s);
        *s = Arc::new(next);
    }
}

/// Sorts one series' samples by time together with their start timestamps (stable: among
/// equal timestamps the later sample stays later and so wins).
fn sort_with_starts(samples: &mut [Sample], starts: &mut [i64]) {
    let mut pairs: Vec<(Sample, i64)> = samples.iter().copied().zip(starts.iter().copied()).collect();
    pairs.sort_by_key(|(s, _)| s.t);
    for ((s, st), (ds, dst)) in pairs.into_iter().zip(samples.iter_mut().zip(starts.iter_mut())) {
        (*ds, *dst) = (s, st);
    }
}

/// Takes an exclusive lock on the data directory so two processes never share it.
///
/// A lock that is busy is tried again for up to [`LOCK_WAIT`] before giving up: the lock
/// belongs to an open file description, and a process that has just let it go may still share
/// that description with a child it forked a moment before the child's `exec` closed it (a
/// test harness or supervisor that spawns processes while holding a database), or with a
/// previous strata still exiting. A second strata running on the directory holds it for good
/// and is refused after the wait.
fn lock_dir(dir: &Path) -> Result<File> {
    let path = filenames::lock(dir);
    let f = File::create(&path).map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    let start = Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::DirectoryInUse(dir.to_path_buf()));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::io(format!("lock {}", path.display()), e));
            }
        }
    }
}

/// How long [`lock_dir`] waits for a busy lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Removes partition files and directories the manifest does not list, and `.tmp` leftovers:
/// the remains of flushes or compactions interrupted before their manifest commit, or of
/// deletions interrupted after it.
pub(crate) fn remove_strays(dir: &Path, m: &Manifest) -> Result<usize> {
    let mut removed = fsutil::remove_tmp_files(dir)?;
    let pdir = filenames::partitions_dir(dir);
    let listed: std::collections::HashSet<(i64, u64)> = m.files.iter().map(|f| (f.partition, f.id)).collect();
    let parts = match std::fs::read_dir(&pdir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(Error::io(format!("list {}", pdir.display()), e)),
    };
    for p in parts {
        let p = p.map_err(|e| Error::io(format!("list {}", pdir.display()), e))?;
        let name = p.file_name().to_string_lossy().into_owned();
        let Some(start) = filenames::parse_partition_dir(&name) else {
            fsutil::remove_path(&p.path())?;
            removed += 1;
            continue;
        };
        let mut kept = 0;
        let files =
            std::fs::read_dir(p.path()).map_err(|e| Error::io(format!("list {}", p.path().display()), e))?;
        for f in files {
            let f = f.map_err(|e| Error::io(format!("list {}", p.path().display()), e))?;
            let fname = f.file_name().to_string_lossy().into_owned();
            match filenames::parse_partition_file(&fname) {
                Some(id) if listed.contains(&(start, id)) => kept += 1,
                _ => {
                    fsutil::remove_path(&f.path())?;
                    removed += 1;
                }
            }
        }
        if kept == 0 {
            fsutil::remove_path(&p.path())?;
        }
    }
    if removed > 0 {
        fsutil::sync_dir(&pdir)?;
        tracing::info!(removed, "removed files left by interrupted operations");
    }
    Ok(removed)
}
