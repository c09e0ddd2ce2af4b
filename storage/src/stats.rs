//! Numbers for monitoring: a lock-free histogram, and point-in-time statistics of the heads and
//! of what the database holds on disk.
//!
//! Counters that grow on the write path live next to the code that bumps them ([`Counters`],
//! the WAL's own counters); this module holds what is either shared by several of them (the
//! [`Histogram`]) or computed when asked (head and disk statistics, read at scrape time so they
//! cost nothing between scrapes).
//!
//! [`Counters`]: crate::db::Counters

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::db::Db;
use crate::error::Result;
use crate::filenames;

/// A histogram with fixed bucket bounds, safe to observe from any number of threads.
///
/// Observing is two relaxed atomic adds after a short scan of the bounds, so it can sit on the
/// write path. Values are unsigned integers in a unit the owner chooses (nanoseconds for
/// durations, a count for batch sizes); the exporter converts them. Buckets are stored
/// non-cumulatively and summed up in [`Histogram::snapshot`], so a snapshot's bucket counts,
/// `+Inf` bucket and count always agree even while observations race with it (the sum may lag by
/// the observations in flight, as in every lock-free Prometheus client).
#[derive(Debug)]
pub struct Histogram {
    /// Upper bounds (inclusive) of the finite buckets, ascending.
    bounds: &'static [u64],
    /// One counter per finite bucket plus one for values above every bound.
    buckets: Box<[AtomicU64]>,
    /// Sum of all observed values.
    sum: AtomicU64,
}

/// A copy of a [`Histogram`] at one moment, ready to be written out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Upper bounds (inclusive) of the finite buckets, ascending, in the histogram's unit.
    pub bounds: &'static [u64],
    /// Observations at or below each bound (cumulative), one per entry of `bounds`.
    pub cumulative: Vec<u64>,
    /// All observations (the `+Inf` bucket).
    pub count: u64,
    /// Sum of all observed values, in the histogram's unit.
    pub sum: u64,
}

impl Histogram {
    /// An empty histogram with these bucket bounds. `bounds` must be ascending; an unsorted
    /// list would put values in the wrong buckets (checked in debug builds).
    pub fn new(bounds: &'static [u64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bucket bounds must ascend");
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `value`.
    pub fn observe(&self, value: u64) {
        // The bounds are a dozen entries: a linear scan beats a binary search's branches.
        let bucket = self.bounds.iter().position(|&bound| value <= bound).unwrap_or(self.bounds.len());
        if let Some(counter) = self.buckets.get(bucket) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Counts one duration, in nanoseconds (saturating at 584 years).
    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The histogram as it is now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(self.bounds.len());
        let mut running = 0u64;
        for counter in self.buckets.iter().take(self.bounds.len()) {
            running = running.saturating_add(counter.load(Ordering::Relaxed));
            cumulative.push(running);
        }
        let above = self.buckets.last().map_or(0, |c| c.load(Ordering::Relaxed));
        HistogramSnapshot {
            bounds: self.bounds,
            cumulative,
            count: running.saturating_add(above),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// Bucket bounds in nanoseconds for fsync latency: 100 µs (a fast NVMe) to 2.5 s (a disk in
/// trouble).
pub const FSYNC_NANOS_BUCKETS: &[u64] = &[
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
];

/// Bucket bounds in nanoseconds for flushes and compactions: 10 ms (a small head) to 10 min (a
/// 50-million-sample head or a large partition on a slow disk).
pub const MAINTENANCE_NANOS_BUCKETS: &[u64] = &[
    10_000_000,
    50_000_000,
    100_000_000,
    500_000_000,
    1_000_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
    60_000_000_000,
    120_000_000_000,
    300_000_000_000,
    600_000_000_000,
];

/// Bucket bounds for the number of WAL records one fsync made durable (group-commit batch size).
pub const GROUP_COMMIT_RECORDS_BUCKETS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];

/// What the in-memory heads hold right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadStats {
    /// Series with samples in the active head (the one taking appends).
    pub series: usize,
    /// Samples in memory: the active head plus heads frozen by a flush still being written.
    pub samples: u64,
    /// Of `samples`, those written behind their series' newest sample (and rewrites), held in
    /// the heads' out-of-order runs until a flush writes them to files of their own.
    pub out_of_order_samples: u64,
    /// Heads frozen by a flush and not yet written to partition files.
    pub frozen_heads: usize,
    /// Approximate heap bytes of all heads (compressed chunks and per-series structures).
    pub memory_bytes: usize,
    /// Approximate heap bytes of the series index.
    pub index_memory_bytes: usize,
}

/// One time partition on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStats {
    /// Its start, in ms since the epoch (a multiple of the partition width).
    pub start_ms: i64,
    /// Live partition files in it.
    pub files: usize,
    /// Their total size in bytes.
    pub bytes: u64,
}

/// What the database holds on disk right now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Every partition with live files, oldest first.
    pub partitions: Vec<PartitionStats>,
    /// WAL segment files in the WAL directory.
    pub wal_segments: usize,
    /// Their total size in bytes.
    pub wal_bytes: u64,
    /// Deletion tombstones not yet applied by a compaction.
    pub tombstones: usize,
}

impl DiskStats {
    /// Bytes of partition files and WAL segments together.
    pub fn total_bytes(&self) -> u64 {
        self.partitions.iter().map(|p| p.bytes).sum::<u64>().saturating_add(self.wal_bytes)
    }
}

impl Db {
    /// Sizes of the heads and the index. Walks every head series (under its shard lock, one
    /// shard at a time), so call it at scrape frequency, not per write.
    pub fn head_stats(&self) -> HeadStats {
        let state = self.inner.state.read().clone();
        let frozen = state.frozen.iter().map(|f| &f.head);
        HeadStats {
            series: state.head.series_count(),
            samples: state.head.sample_count() + frozen.clone().map(|h| h.sample_count()).sum::<u64>(),
            out_of_order_samples: state.head.ooo_sample_count()
                + frozen.clone().map(|h| h.ooo_sample_count()).sum::<u64>(),
            frozen_heads: state.frozen.len(),
            memory_bytes: state.head.memory_bytes() + frozen.map(|h| h.memory_bytes()).sum::<usize>(),
            index_memory_bytes: self.inner.index.memory_bytes(),
        }
    }

    /// WAL fdatasync latency since open, in nanoseconds.
    pub fn wal_fsync_durations(&self) -> HistogramSnapshot {
        self.inner.wal.fsync_durations()
    }

    /// WAL records made durable per fdatasync since open (group-commit batch sizes).
    pub fn wal_group_commit_records(&self) -> HistogramSnapshot {
        self.inner.wal.group_commit_records()
    }

    /// Partition sizes from the current file set (no I/O) and the WAL's size on disk (a
    /// directory listing and one `stat` per segment).
    pub fn disk_stats(&self) -> Result<DiskStats> {
        let state = self.inner.state.read().clone();
        let partitions = state
            .partitions
            .iter()
            .map(|(start, files)| PartitionStats {
                start_ms: *start,
                files: files.len(),
                bytes: files.iter().map(|f| f.entry.size).sum(),
            })
            .collect();
        let (wal_segments, wal_bytes) = crate::wal::disk_usage(&filenames::wal_dir(&self.inner.dir))?;
        Ok(DiskStats { partitions, wal_segments, wal_bytes, tombstones: state.tombstones.len() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, Labels, Options, Sample};

    const BASE: i64 = 1_700_000_000_000; // a fixed past time: never too far in the future
    const DAY: i64 = 24 * 3_600_000;

    fn append(db: &Db, host: &str, samples: &[i64]) {
        let mut b = Batch::new();
        let labels = Labels::from_pairs(&[("__name__", "up"), ("host", host)]);
        b.push(labels, samples.iter().map(|&t| Sample::new(t, 1.0)).collect());
        db.append(&b).unwrap();
    }

    #[test]
    fn db_statistics_follow_appends_flushes_compactions_and_retention() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = Options::new(dir.path());
        opts.maintenance_interval = Duration::from_secs(3600); // the test drives maintenance
        opts.compact_files_min = 2;
        opts.retention_ms = 2 * DAY;
        opts.ooo_window_ms = Some(3_600_000);
        let db = Db::open(opts).unwrap();

        // In order, then 10 s back (accepted out of order), then 2 h back (behind the window),
        // then 10 days back (outside retention).
        append(&db, "a", &[BASE, BASE + 60_000]);
        append(&db, "a", &[BASE + 50_000, BASE - 2 * 3_600_000]);
        append(&db, "a", &[BASE - 10 * DAY]);
        let c = db.counters();
        assert_eq!(c.samples_appended.load(Ordering::Relaxed), 3);
        assert_eq!(c.samples_out_of_order.load(Ordering::Relaxed), 1);
        assert_eq!(c.rejected_too_old.load(Ordering::Relaxed), 1);
        assert_eq!(c.rejected_outside_retention.load(Ordering::Relaxed), 1);
        let head = db.head_stats();
        assert_eq!((head.series, head.samples, head.frozen_heads), (1, 3, 0));
        assert!(head.memory_bytes > 0 && head.index_memory_bytes > 0, "{head:?}");
        let fsyncs = db.wal_stats().fsyncs;
        assert_eq!(db.wal_fsync_durations().count, fsyncs);
        let batches = db.wal_group_commit_records();
        assert_eq!(batches.sum, 2, "two records, each made durable once: {batches:?}");
        let disk = db.disk_stats().unwrap();
        assert!(disk.partitions.is_empty());
        assert_eq!(disk.wal_segments, 1);
        assert!(disk.wal_bytes >= db.wal_stats().bytes_written, "{disk:?}");

        db.flush().unwrap();
        append(&db, "b", &[BASE + 120_000]);
        db.flush().unwrap();
        assert_eq!(db.head_stats().samples, 0);
        assert_eq!(c.flush_duration.snapshot().count, 2);
        let disk = db.disk_stats().unwrap();
        let start = BASE.div_euclid(DAY) * DAY;
        assert_eq!(disk.partitions.len(), 1);
        // The first flush wrote the in-order and the out-of-order samples to a file each.
        assert_eq!((disk.partitions[0].start_ms, disk.partitions[0].files), (start, 3));
        assert_eq!(disk.partitions[0].bytes, c.flush_bytes.load(Ordering::Relaxed));
        assert_eq!(disk.total_bytes(), disk.partitions[0].bytes + disk.wal_bytes);

        db.compact().unwrap();
        assert_eq!(c.compactions.load(Ordering::Relaxed), 1);
        assert_eq!(c.compaction_duration.snapshot().count, 1);
        let disk = db.disk_stats().unwrap();
        assert_eq!(disk.partitions[0].files, 1);
        assert_eq!(disk.partitions[0].bytes, c.compaction_bytes.load(Ordering::Relaxed));

        // Data three days later expires the first partition and both series with it.
        append(&db, "c", &[BASE + 3 * DAY]);
        assert_eq!(db.apply_retention().unwrap(), 1);
        assert_eq!(c.retention_partitions_removed.load(Ordering::Relaxed), 1);
        assert_eq!(c.series_removed.load(Ordering::Relaxed), 2);
        assert_eq!(c.flush_failures.load(Ordering::Relaxed), 0);
        assert_eq!(c.compaction_failures.load(Ordering::Relaxed), 0);
        db.close().unwrap();
    }

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        static BOUNDS: &[u64] = &[10, 100];
        let h = Histogram::new(BOUNDS);
        for v in [0, 10, 11, 100, 101, 5000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.cumulative, vec![2, 4]);
        assert_eq!(s.count, 6);
        assert_eq!(s.sum, 10 + 11 + 100 + 101 + 5000);
        assert_eq!(s.bounds, BOUNDS);
    }

    #[test]
    fn durations_are_counted_in_nanoseconds() {
        let h = Histogram::new(FSYNC_NANOS_BUCKETS);
        h.observe_duration(Duration::from_micros(300));
        h.observe_duration(Duration::from_secs(3));
        let s = h.snapshot();
        assert_eq!(s.sum, 3_000_300_000);
        assert_eq!(s.cumulative.first(), Some(&0));
        assert_eq!(s.cumulative.get(2), Some(&1), "300 µs is in the 500 µs bucket");
        assert_eq!(s.cumulative.last(), Some(&1), "3 s is above every bound");
        assert_eq!(s.count, 2);
    }

    #[test]
    fn bucket_bounds_ascend() {
        for bounds in [FSYNC_NANOS_BUCKETS, MAINTENANCE_NANOS_BUCKETS, GROUP_COMMIT_RECORDS_BUCKETS] {
            assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
        }
    }

    #[test]
    fn concurrent_observations_are_all_counted() {
        let h = Histogram::new(GROUP_COMMIT_RECORDS_BUCKETS);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..1000 {
                        h.observe((i + t) % 300);
                    }
                });
            }
        });
        let s = h.snapshot();
        assert_eq!(s.count, 4000);
        assert!(s.cumulative.windows(2).all(|w| w[0] <= w[1]));
    }
}
