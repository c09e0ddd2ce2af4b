//! The replicated ingest log (`--log.url`): distributors publish each write to it, split by
//! series into a fixed number of partitions, and acknowledge the client once the log has
//! acknowledged every part; ingesters consume partitions into their database. A write is then
//! as durable as the log (replicated by it) before any ingester has seen it, and an ingester
//! that restarts replays its partitions from where its database stopped.
//!
//! - [`partition`]: which partition a series belongs to (stable across restarts and versions)
//!   and the split of a batch into per-partition messages;
//! - [`jetstream`]: the log on NATS JetStream, one stream per partition;
//! - [`distributor`]: the write path of `--role distributor`;
//! - [`ingester`]: the consuming loop of a writer in log mode, and its offsets file;
//! - [`leases`]: which ingester consumes which partition, by etcd leases;
//! - [`metrics`]: the `strata_log_*` families of `/metrics`;
//! - [`consistency`]: strong reads (`X-Read-Consistency: strong`);
//! - [`ha`]: one replica of each Prometheus HA pair kept (`--ha-tracker`).
//!
//! The log is behind [`Log`] so that another engine (Kafka) can follow; see
//! `docs/operations.md`, "Replicated ingest".

pub mod consistency;
pub mod distributor;
pub mod ha;
pub mod ingester;
pub mod jetstream;
pub mod leases;
pub mod metrics;
pub mod partition;

use std::pin::Pin;

use axum::body::Bytes;
use futures_util::Stream;

/// The ingest log this process uses (`--log.*`).
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// Where the log is and how it is laid out.
    pub jetstream: jetstream::JetStreamConfig,
    /// The partitions this process consumes into its database; `None` for a distributor,
    /// which has none.
    pub consume: Option<ingester::Ownership>,
    /// With `--ha-tracker`: how Prometheus HA pairs are told apart and elected.
    pub ha: Option<ha::HaConfig>,
    /// `--future-window`: samples further ahead of the wall clock are refused by the
    /// distributor, before the client is answered.
    pub future_window_ms: i64,
}

/// Why the log refused or failed an operation. Every one is worth retrying later: a write
/// that meets one is answered 503, an ingester retries its read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The log could not be reached, or did not answer in time.
    #[error("the ingest log is unavailable: {0}")]
    Unavailable(String),
    /// The log answered with an error.
    #[error("the ingest log refused the operation: {0}")]
    Refused(String),
}

/// One message read from a partition.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its position in the partition: increasing, not necessarily by one.
    pub offset: u64,
    /// What the distributor published.
    pub payload: Bytes,
}

/// The records of one partition from an offset on, as they arrive.
pub type Records = Pin<Box<dyn Stream<Item = Result<Record, LogError>> + Send>>;

/// A future of the log's.
pub type LogFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LogError>> + Send + 'a>>;

/// A partitioned, replicated log. Partitions are numbered from 0; each keeps its records in
/// the order they were acknowledged.
pub trait Log: Send + Sync {
    /// How many partitions the log has.
    fn partitions(&self) -> u32;

    /// Appends `payload` to `partition`; resolves once the log holds it durably (as its
    /// replication requires). A second publish with the same `id` within the log's
    /// de-duplication window is acknowledged without being stored again: a client's retry of
    /// a request whose answer was lost.
    fn publish(&self, partition: u32, id: String, payload: Bytes) -> LogFuture<'_, ()>;

    /// The records of `partition` after `after` (0: from the first), without end.
    fn read_after(&self, partition: u32, after: u64) -> LogFuture<'_, Records>;

    /// The offset of the last record of `partition` (0: none yet): every write acknowledged
    /// before the call is at or below it.
    fn last_offset(&self, partition: u32) -> LogFuture<'_, u64>;
}
