//! strata's storage engine.
//!
//! A sample travels: [`Db::append`] resolves series ids in the [`index`], encodes the batch as
//! one WAL record ([`batch_codec`]) that the [`wal`] group-commits and fsyncs, then inserts the
//! samples into the in-memory [`head`]. A flush freezes the head, writes it as immutable
//! [`partition`] files (Gorilla-style [`encoding`] blocks with per-block statistics), commits
//! them by atomically replacing the [`manifest`], and deletes WAL segments it no longer needs.
//! Queries read a [`Snapshot`]: an `Arc` of the file set plus the heads, never blocking writers.
//!
//! This crate knows nothing about HTTP, wire formats or PromQL.

pub mod batch_codec;
pub mod batch_ref;
pub mod buckets;
pub mod cardinality;
mod clock;
pub mod db;
pub mod encoding;
pub mod error;
mod failpoint;
#[cfg(feature = "testing")]
pub mod fault;
#[cfg(not(feature = "testing"))]
mod fault;
pub mod filenames;
pub mod fsutil;
pub mod head;
pub mod hist;
pub mod index;
pub mod labels_ref;
pub mod manifest;
pub mod matcher;
#[cfg(any(test, feature = "testing"))]
pub mod mem;
mod merge;
mod mmap;
pub mod options;
pub mod partition;
#[cfg(feature = "testing")]
pub mod powercut;
#[cfg(not(feature = "testing"))]
mod powercut;
pub mod query;
pub mod series_table;
pub mod snapshot;
pub mod start_ts;
pub mod types;
pub mod wal;
pub mod window_agg;

pub use batch_ref::{BatchRef, SeriesBuilder};
pub use db::{AppendOutcome, Db, Health};
pub use error::{Error, Result};
pub use labels_ref::{LabelPair, LabelsRef, RawLabels, RawPair};
pub use matcher::{MatchOp, Matcher};
pub use options::Options;
pub use query::{Querier, SeriesRef};
pub use snapshot::{BlockView, Snapshot};
pub use types::{
    Batch, CounterResetHint, FloatHistogram, HistogramSample, Label, Labels, METRIC_NAME, STALE_NAN_BITS,
    Sample, SeriesId, is_stale, stale_nan,
};
pub use wal::WalSync;
