//! Names of every file and directory strata keeps in its data directory, in one place.
//!
//! ```text
//! data/
//!   MANIFEST                 the live file set (replaced atomically)
//!   LOCK                     held while a process has the directory open
//!   BUCKET                   with a bucket: the epoch and manifest this directory last committed
//!   wal/00000001 ...         WAL segments
//!   partitions/<start_ms>/<file_id>.spf   immutable partition files
//!   partitions/<start_ms>/<file_id>.spf.cache   with a bucket: the ranges read so far of a
//!                                          file held only there (sparse)
//! ```

use std::path::{Path, PathBuf};

/// The manifest file.
pub fn manifest(data: &Path) -> PathBuf {
    data.join("MANIFEST")
}

/// With a bucket: what this directory last committed to it (`bucket::commit::LocalState`).
pub fn bucket_state(data: &Path) -> PathBuf {
    data.join("BUCKET")
}

/// The lock file.
pub fn lock(data: &Path) -> PathBuf {
    data.join("LOCK")
}

/// The WAL directory.
pub fn wal_dir(data: &Path) -> PathBuf {
    data.join("wal")
}

/// The directory holding all partitions.
pub fn partitions_dir(data: &Path) -> PathBuf {
    data.join("partitions")
}

/// The directory of the partition starting at `start_ms`.
pub fn partition_dir(data: &Path, start_ms: i64) -> PathBuf {
    partitions_dir(data).join(start_ms.to_string())
}

/// A partition file.
pub fn partition_file(data: &Path, start_ms: i64, file_id: u64) -> PathBuf {
    partition_dir(data, start_ms).join(format!("{file_id:08}.spf"))
}

/// The local cache of a partition file read from the bucket: sparse, holding the ranges read
/// so far (`bucket::cache`).
pub fn partition_cache_file(data: &Path, start_ms: i64, file_id: u64) -> PathBuf {
    partition_dir(data, start_ms).join(format!("{file_id:08}.spf.cache"))
}

/// Parses a partition directory name back to its start.
pub fn parse_partition_dir(name: &str) -> Option<i64> {
    name.parse().ok()
}

/// Parses a partition file name, or its cache's, back to its id.
pub fn parse_partition_file(name: &str) -> Option<u64> {
    name.strip_suffix(".spf").or_else(|| name.strip_suffix(".spf.cache"))?.parse().ok()
}
