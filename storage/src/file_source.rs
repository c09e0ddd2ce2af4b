//! Where the bytes of committed files come from: partition files (mapped, from the data
//! directory or through the local cache of a bucket object) and the manifest (read whole) are
//! read through this module and nowhere else.
//!
//! The partition reader ([`crate::partition`]'s `PartitionFile`) borrows slices of a
//! [`FileBytes`]: the index region, which opening a file fetches whole, through
//! [`FileBytes::all`], and every other range (blocks, histogram chunks) through
//! [`FileBytes::get`], which fetches it first when the file lives in a bucket. Writes go
//! through [`crate::fsutil`]; the WAL stays local.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::bucket::cache::CachedObject;
use crate::error::Result;

/// The bytes of one partition file.
pub(crate) enum FileBytes {
    /// A file of the data directory, mapped whole.
    Mapped(Mmap),
    /// An object of the bucket, mapped through its local cache file.
    Cached(CachedObject),
}

impl FileBytes {
    /// The whole file as mapped. For a cached file only what was fetched holds its bytes: the
    /// reader uses this for the index region, which opening fetches.
    pub fn all(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Cached(c) => c.bytes(),
        }
    }

    /// The bytes of `range` (None if it lies outside the file), fetched first if needed.
    pub fn get(&self, range: Range<usize>) -> Result<Option<&[u8]>> {
        self.prefetch(std::slice::from_ref(&range))?;
        Ok(self.all().get(range))
    }

    /// Makes `ranges` present (one request for a cached file); nothing for a local one.
    pub fn prefetch(&self, ranges: &[Range<usize>]) -> Result<()> {
        match self {
            FileBytes::Mapped(_) => Ok(()),
            FileBytes::Cached(c) => c.ensure(ranges),
        }
    }
}

/// The bytes of the partition file at `path`, mapped read-only (see [`crate::mmap`]).
pub(crate) fn map_partition_file(path: &Path) -> Result<FileBytes> {
    crate::mmap::map_file(path).map(FileBytes::Mapped)
}

/// The bytes of the partition file held in the bucket as `key` (`size` bytes), through a
/// local cache file at `cache_path` (see [`crate::bucket::cache`]).
pub(crate) fn cached_partition_file(
    bucket: Arc<crate::bucket::Bucket>,
    key: object_store::path::Path,
    cache_path: &Path,
    size: u64,
) -> Result<FileBytes> {
    CachedObject::open(bucket, key, cache_path, size).map(FileBytes::Cached)
}

/// The bytes of the manifest at `path`; `NotFound` if there is none.
pub(crate) fn read_manifest(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}
