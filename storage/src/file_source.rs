//! Where the bytes of committed files come from: partition files (mapped) and the manifest
//! (read whole) are read through these two functions and nowhere else.
//!
//! This is the seam for keeping partition files and manifests in an object store: a trait
//! with these two calls (plus listing, which `db/` still does on the directory) replaces the
//! local-directory functions here, and the readers above it ([`crate::partition`]'s
//! `PartitionFile::open`, [`crate::manifest`]'s `Manifest::load`) stay as they are. Writes go
//! through [`crate::fsutil`]; the WAL stays local.

use std::path::Path;

use memmap2::Mmap;

use crate::error::Result;

/// The bytes of the partition file at `path`, mapped read-only (see [`crate::mmap`]).
pub(crate) fn map_partition_file(path: &Path) -> Result<Mmap> {
    crate::mmap::map_file(path)
}

/// The bytes of the manifest at `path`; `NotFound` if there is none.
pub(crate) fn read_manifest(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}
