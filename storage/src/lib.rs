//! strata's storage engine.
//!
//! A sample travels: [`Db::append`] resolves series ids in the `index`, encodes the batch as
//! one WAL record (`batch_codec`) that the `wal` group-commits and fsyncs, then inserts the
//! samples into the in-memory `head`. A flush freezes the head, writes it as immutable
//! `partition` files (Gorilla-style `encoding` blocks with per-block statistics), commits
//! them by atomically replacing the `manifest`, and deletes WAL segments it no longer needs.
//! Queries read a [`Snapshot`]: an `Arc` of the file set plus the heads, never blocking writers.
//!
//! This crate knows nothing about HTTP, wire formats or PromQL.
//!
//! Layering: the read path (`snapshot`, `merge`, the partition reader) imports nothing from the
//! write path (`db/`: open, append, flush, compaction, recovery, backup, statistics); helpers
//! both use live in leaf modules (`merge`, `clock`, `buckets`). A snapshot holds the
//! read-only `ReadState`, never the database. The bytes of partition files and manifests are
//! read only in `file_source`, the seam for keeping them in an object store.

/// Declares modules that are public with the `testing` feature (for other crates' tests and
/// storage's own) and crate-private otherwise.
macro_rules! testing_pub_mod {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "testing")]
        pub mod $name;
        #[cfg(not(feature = "testing"))]
        mod $name;
    )*};
}

// Used by other crates.
pub mod buckets;
pub mod cardinality;
pub mod labels_ref;
pub mod matcher;
pub mod query;
pub mod window_agg;

// Internals storage's own tests and examples read (file formats, the WAL, the index), public
// only with the `testing` feature; what other crates need of them is re-exported below.
testing_pub_mod!(encoding, filenames, hist, index, manifest, partition, wal);

// Test doubles and fault injection, public only with the `testing` feature.
testing_pub_mod!(fault, powercut);
#[cfg(any(test, feature = "testing"))]
pub mod mem;
#[cfg(feature = "testing")]
pub mod testing;

// The rest: crate-private; what other crates need of them is re-exported below.
mod batch_codec;
mod batch_ref;
mod bucket;
mod clock;
mod db;
mod error;
mod failpoint;
mod file_source;
mod footprint;
mod fsutil;
mod head;
mod merge;
mod mmap;
mod options;
mod series_table;
mod snapshot;
mod start_ts;
mod types;

pub use batch_ref::{BatchRef, SeriesBuilder};
pub(crate) use bucket::Bucket;
pub use bucket::BucketOptions;
pub use bucket::cache::{CacheCounters, counters as bucket_cache_counters};
#[cfg(any(test, feature = "testing"))]
pub use bucket::faulty;
pub use bucket::mirror::MirrorStatus;
pub use db::backup::BackupStats;
pub use db::stats::{DiskStats, HeadStats, PartitionStats};
pub use db::{AppendOutcome, Counters, Db, Health, OpenStats, PendingAppend};
pub use error::{Error, Result};
pub use index::{IndexStats, Stat};
pub use labels_ref::{LabelPair, LabelsRef, RawLabels, RawPair};
pub use matcher::{MatchOp, Matcher};
pub use options::Options;
pub use partition::block_list_bytes;
pub use query::{Querier, SeriesRef};
pub use snapshot::{BlockView, BucketReads, Snapshot};
pub use types::{
    Batch, CounterResetHint, FloatHistogram, HistogramSample, Label, Labels, METRIC_NAME, STALE_NAN_BITS,
    Sample, SeriesId, TENANT_LABEL, is_stale, stale_nan,
};
pub use wal::{ReplayProgress, ReplayStatus, WalStats, WalSync};
