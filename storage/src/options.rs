//! Database configuration. Every limit carries its unit in its name.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cardinality::SeriesLimits;
use crate::wal::{ReplayProgress, WalSync};

/// Everything `Db::open` needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where everything lives.
    pub data_dir: PathBuf,
    /// Partitions whose whole time range is older than `newest sample - retention` are removed,
    /// and samples that would fall in such a partition are refused.
    pub retention_ms: i64,
    /// Width of one time partition (one directory of files).
    pub partition_ms: i64,
    /// How far behind a series' newest sample an out-of-order sample is still accepted; `None`
    /// (the default) accepts any sample inside retention, in any order.
    pub ooo_window_ms: Option<i64>,
    /// Samples that far ahead of the wall clock are rejected as too far in the future.
    pub future_window_ms: i64,
    /// WAL durability mode.
    pub wal_sync: WalSync,
    /// WAL segment size at which a new segment is started.
    pub wal_segment_bytes: u64,
    /// On startup, truncate the WAL at a corrupt record in the middle instead of refusing to start
    /// (loses every record after it; for operators who accept that to get the server back).
    pub wal_truncate_corrupt: bool,
    /// Which WAL segment the startup replay is reading, shared with whoever reports it (the
    /// server's `/api/v1/status/walreplay`).
    pub wal_replay_progress: Arc<ReplayProgress>,
    /// Most samples in one block of a partition file.
    pub block_samples_max: usize,
    /// Blocks never cross a multiple of this many milliseconds (a grid that makes block
    /// statistics line up with common query buckets).
    pub block_grid_ms: i64,
    /// The head is flushed to partition files when it holds this many samples ...
    pub head_samples_max: usize,
    /// ... or when its oldest append is this old ...
    pub head_flush_interval: Duration,
    /// ... or when its samples span more than this (newest minus oldest timestamp), their mean
    /// time lies more than half of it before the newest, and it holds at least
    /// [`Options::head_span_flush_min_samples`]. A backfill or a bulk load (TSBS,
    /// `promtool`-style imports, a sender catching up) writes hours of data in seconds; without
    /// this it would all wait in the head, where queries decode every sample, until the sample
    /// or age limit. Like Prometheus, which persists head data once it spans 1.5 block ranges.
    pub head_span_max_ms: i64,
    /// How often the background worker checks for flush, compaction and retention work.
    pub maintenance_interval: Duration,
    /// A partition with at least this many files gets compacted into one.
    pub compact_files_min: usize,
    /// Cardinality limits on series creation (all 0, unlimited, by default); see
    /// [`crate::cardinality`].
    pub series_limits: SeriesLimits,
    /// Partition files and manifests mirrored to this bucket (see `bucket`); `None` (the
    /// default) keeps everything in `data_dir` only.
    pub bucket: Option<crate::BucketOptions>,
    /// `Some(refresh)`: a query node (`--role query`). The database serves the files of every
    /// writer's prefix at and below `bucket` (see `db/follow.rs`), looks for newer manifests
    /// every `refresh`, and refuses appends and every other change.
    pub follow: Option<Duration>,
}

impl Options {
    /// The fewest samples a head must hold before its time span alone makes it due for a
    /// flush: 1/64 of `head_samples_max`. Keeps a trickle of samples with odd timestamps (a
    /// clock far off, a late batch job) from flushing a nearly empty head again and again.
    pub fn head_span_flush_min_samples(&self) -> u64 {
        (self.head_samples_max as u64 / 64).max(1)
    }

    /// The first timestamp retention keeps when the newest sample is at `newest`: the start of
    /// the oldest partition that does not end before `newest - retention`. Samples before it
    /// are refused at ingest, since the next retention pass would delete them.
    pub fn retention_first_kept(&self, newest: i64) -> i64 {
        let pms = self.partition_ms.max(1);
        newest.saturating_sub(self.retention_ms).div_euclid(pms).saturating_mul(pms)
    }

    /// Defaults for a data directory: 15 d retention, 1 d partitions, samples accepted in any
    /// order inside retention, fsync per batch.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        const HOUR: i64 = 3_600_000;
        Options {
            data_dir: data_dir.into(),
            retention_ms: 15 * 24 * HOUR,
            partition_ms: 24 * HOUR,
            ooo_window_ms: None,
            future_window_ms: 10 * 60_000,
            wal_sync: WalSync::PerBatch,
            wal_segment_bytes: 128 << 20,
            wal_truncate_corrupt: false,
            wal_replay_progress: Arc::default(),
            block_samples_max: 1024,
            block_grid_ms: HOUR,
            head_samples_max: 50_000_000,
            head_flush_interval: Duration::from_secs(2 * 3600),
            head_span_max_ms: 3 * HOUR,
            maintenance_interval: Duration::from_secs(10),
            compact_files_min: 4,
            series_limits: SeriesLimits::default(),
            bucket: None,
            follow: None,
        }
    }
}
