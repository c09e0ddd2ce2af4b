//! The one place that maps files into memory.
#![allow(unsafe_code)]

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::{Error, Result};

/// Maps a whole file read-only.
///
/// # Safety argument
/// `memmap2::Mmap::map` is unsafe because another process could modify or truncate the file
/// while it is mapped, which would change bytes under our feet or raise SIGBUS. strata only maps
/// partition files, which are immutable after they are renamed into place and are deleted (never
/// truncated or rewritten) once no snapshot references them; the data directory is owned by one
/// strata process. Corruption of the bytes by anything else is caught by the block checksums.
pub fn map_file(path: &Path) -> Result<Mmap> {
    let f = File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    // SAFETY: see the function documentation: the mapped file is immutable while strata runs.
    unsafe { Mmap::map(&f) }.map_err(|e| Error::io(format!("mmap {}", path.display()), e))
}

/// Maps a partition file's local cache (`bucket::cache`), whose `file` is open for writing.
///
/// # Safety argument
/// The cache file is written only in pages that no reader has read (a page is read after it is
/// written and marked present, and a present page is never written again), by this process,
/// which owns the data directory; its size is set before it is mapped and never changes. The
/// block checksums catch anything else.
pub fn map_cache_file(file: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: see the function documentation.
    unsafe { Mmap::map(file) }.map_err(|e| Error::io(format!("mmap {}", path.display()), e))
}
