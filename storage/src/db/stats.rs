//! Numbers for monitoring: point-in-time statistics of the heads and of what the database holds
//! on disk.
//!
//! Counters that grow on the write path live next to the code that bumps them ([`Counters`],
//! the WAL's own counters, with [`crate::buckets`] histograms); this module holds what is
//! computed when asked (head and disk statistics, read at scrape time so they cost nothing
//! between scrapes).
//!
//! [`Counters`]: super::Counters

use super::Db;
use crate::buckets::BucketSnapshot;
use crate::error::Result;
use crate::filenames;

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
            index_memory_bytes: self.inner.shared.index.memory_bytes(),
        }
    }

    /// WAL fdatasync latency since open, in nanoseconds.
    pub fn wal_fsync_durations(&self) -> BucketSnapshot {
        self.inner.wal.fsync_durations()
    }

    /// WAL records made durable per fdatasync since open (group-commit batch sizes).
    pub fn wal_group_commit_records(&self) -> BucketSnapshot {
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
    use std::sync::atomic::Ordering;
    use std::time::Duration;

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
}
