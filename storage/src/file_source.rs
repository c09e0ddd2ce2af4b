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
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;

use crate::bucket::cache::CachedObject;
use crate::error::Result;

/// The bytes of one partition file, and when they were last read.
pub(crate) struct FileBytes {
    source: Source,
    /// [`READ_CLOCK`] at the last data read: the cache trim drops the least recently read files.
    last_read: AtomicU64,
}

enum Source {
    /// A file of the data directory, mapped whole.
    Mapped(Mmap),
    /// An object of the bucket, mapped through its local cache file.
    Cached(CachedObject),
}

/// A coarse clock for "least recently read": moved on by each trim of the bucket cache
/// ([`advance_read_clock`]), read on every data read. A read only loads it and stores into its
/// file when the value changed, so the hot read path touches no line that other threads write
/// at read rate; files read between two trims tie, which is all a trim can tell apart.
static READ_CLOCK: AtomicU64 = AtomicU64::new(1);

/// Moves the read clock on: reads from now on count as later than every read before.
pub(crate) fn advance_read_clock() {
    READ_CLOCK.fetch_add(1, Ordering::Relaxed);
}

impl FileBytes {
    fn new(source: Source) -> FileBytes {
        FileBytes { source, last_read: AtomicU64::new(READ_CLOCK.load(Ordering::Relaxed)) }
    }

    /// The whole file as mapped. For a cached file only what was fetched holds its bytes: the
    /// reader uses this for the index region, which opening fetches.
    pub fn all(&self) -> &[u8] {
        match &self.source {
            Source::Mapped(m) => m,
            Source::Cached(c) => c.bytes(),
        }
    }

    /// The bytes of `range` (None if it lies outside the file), fetched first if needed.
    pub fn get(&self, range: Range<usize>) -> Result<Option<&[u8]>> {
        let now = READ_CLOCK.load(Ordering::Relaxed);
        if self.last_read.load(Ordering::Relaxed) != now {
            self.last_read.store(now, Ordering::Relaxed);
        }
        self.prefetch(std::slice::from_ref(&range))?;
        Ok(self.all().get(range))
    }

    /// True unless reading `range` would fetch from the bucket first.
    pub fn is_present(&self, range: &Range<usize>) -> bool {
        match &self.source {
            Source::Mapped(_) => true,
            Source::Cached(c) => c.is_present(range),
        }
    }

    /// Makes `ranges` present (one request for a cached file); nothing for a local one.
    pub fn prefetch(&self, ranges: &[Range<usize>]) -> Result<()> {
        match &self.source {
            Source::Mapped(_) => Ok(()),
            Source::Cached(c) => c.ensure(ranges),
        }
    }

    /// Bytes the file takes on the local disk: all of a local file, the fetched pages of a
    /// cached one.
    pub fn local_bytes(&self) -> u64 {
        match &self.source {
            Source::Mapped(m) => m.len() as u64,
            Source::Cached(c) => c.local_bytes(),
        }
    }

    /// True if the bytes come from the bucket through the local cache.
    pub fn is_cached(&self) -> bool {
        matches!(self.source, Source::Cached(_))
    }

    /// When the file's data was last read, as an order (larger is later).
    pub fn last_read(&self) -> u64 {
        self.last_read.load(Ordering::Relaxed)
    }
}

/// The bytes of the partition file at `path`, mapped read-only (see [`crate::mmap`]).
pub(crate) fn map_partition_file(path: &Path) -> Result<FileBytes> {
    crate::mmap::map_file(path).map(|m| FileBytes::new(Source::Mapped(m)))
}

/// The bytes of the partition file held in the bucket as `key` (`size` bytes), through a
/// local cache file at `cache_path` (see [`crate::bucket::cache`]).
pub(crate) fn cached_partition_file(
    bucket: Arc<crate::bucket::Bucket>,
    key: object_store::path::Path,
    cache_path: &Path,
    size: u64,
) -> Result<FileBytes> {
    CachedObject::open(bucket, key, cache_path, size).map(|c| FileBytes::new(Source::Cached(c)))
}

/// The bytes of the manifest at `path`; `NotFound` if there is none.
pub(crate) fn read_manifest(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}
