//! The one error type of the storage crate.

use std::path::PathBuf;

/// Result alias for storage operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in storage. Callers map variants to outcomes: `Io`/`Poisoned`
/// are transient for a sender (retry later), `InvalidInput`/`OutOfBounds` never succeed on retry,
/// and `Corruption` names the file and offset so recovery can truncate or refuse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O failure, with what we were doing.
    #[error("{context}: {source}")]
    Io {
        /// What strata was doing, including the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk failed a checksum or could not be decoded.
    #[error("corruption in {path}{}: {reason}", offset.map(|o| format!(" at byte {o}")).unwrap_or_default())]
    Corruption {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad record or block, when known.
        offset: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// A decoder was handed bytes that are not a valid encoding (no file context yet; callers
    /// wrap it into `Corruption` with the path and offset).
    #[error("invalid encoding: {0}")]
    Decode(String),
    /// The caller passed something storage never accepts (e.g. a series without labels,
    /// an invalid regex in a matcher).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A new series' labels that storage never accepts (a name or value that is not UTF-8):
    /// worded as the remote-write decoders word their label errors, which a receiver answers
    /// 400.
    #[error("invalid labels in series {series}: {reason}")]
    InvalidLabels {
        /// The series in Prometheus notation (lossy, cut when long).
        series: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A previous fsync or write failed; the WAL refuses further writes until the database has
    /// recovered on a new segment (by itself, see `recovery.rs`) or restarted, because after a
    /// failed fsync the kernel may have dropped dirty pages and retrying would ack lost data.
    #[error("storage refuses writes after an earlier I/O failure: {0}")]
    Poisoned(String),
    /// Flushing is behind the writers: the samples waiting in memory to be flushed reached
    /// the limit, and accepting more would grow memory without bound. Refused until the flush
    /// catches up; a retry later succeeds.
    #[error(
        "{pending} samples wait to be flushed (limit {limit}, twice --head-samples-max): writes are refused until flushing catches up"
    )]
    FlushBacklog {
        /// Samples in the active and frozen heads.
        pending: u64,
        /// The limit.
        limit: u64,
    },
    /// Another process holds the data directory's lock (a second strata started on it).
    #[error("data directory {} is in use by another strata process", .0.display())]
    DirectoryInUse(PathBuf),
    /// The database is shutting down.
    #[error("storage is closed")]
    Closed,
    /// An object-store request failed (after the client's own retries): transient, the caller
    /// retries.
    #[error("object store: {op} {key}: {source}")]
    ObjectStore {
        /// The request, e.g. `GET`.
        op: &'static str,
        /// The object's key.
        key: String,
        /// The client's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// The bucket and the data directory do not belong together, or the bucket's state is not
    /// what its protocol allows (a missing manifest named by the hint).
    #[error("bucket {0}")]
    Bucket(String),
    /// Another writer opened this writer's bucket prefix: nothing this process writes would
    /// reach the bucket any more, so it refuses writes (senders retry, and reach the new one).
    #[error("this writer was fenced: writer epoch {theirs} took its bucket prefix over")]
    Fenced {
        /// The newer writer's epoch.
        theirs: u64,
    },
    /// A query node (`--role query`) only reads: writes and changes go to the writer that owns
    /// the prefix.
    #[error("{0}: this node only reads the bucket (--role query); the writer of the prefix does that")]
    ReadOnly(&'static str),
}

impl Error {
    /// Wraps an `io::Error` with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// A corruption error for `path` at `offset`.
    pub fn corruption(path: impl Into<PathBuf>, offset: Option<u64>, reason: impl Into<String>) -> Self {
        Error::Corruption { path: path.into(), offset, reason: reason.into() }
    }

    /// True for failures a retry may fix (I/O, poisoned WAL, flush backlog, shutdown): a
    /// remote-write receiver answers these with 503, everything else with 4xx.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Io { .. }
                | Error::Poisoned(_)
                | Error::FlushBacklog { .. }
                | Error::Closed
                | Error::ObjectStore { .. }
                | Error::Fenced { .. }
        )
    }
}
