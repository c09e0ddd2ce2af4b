//! A partition file read from the bucket through a sparse local file.
//!
//! The local file has the object's size and starts as one hole. It is mapped whole, like a
//! local partition file, so the reader borrows slices as it always does; before it reads a
//! range it asks for it ([`CachedObject::ensure`]), and the pages of the range the file does
//! not hold yet are fetched (one ranged GET per run of pages, runs less than the S3 client's
//! coalescing gap apart fetched as one, gap included) and written into the holes, the gap's
//! pages too: the bytes came over the wire anyway, and the next query's series often lie
//! there. A page is written once, before it is marked present, and never again, so a mapped
//! page never changes under a reader. A selective query thereby reads a few ranges of a file,
//! never the whole object.
//!
//! The cache file is not trusted across restarts (which pages it holds is kept in memory
//! only): opening truncates it.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;
use object_store::path::Path;
use parking_lot::Mutex;

use super::Bucket;
use crate::error::{Error, Result};

/// Fetch granularity: a ranged request costs the same for 1 KiB and 64 KiB, and neighbouring
/// series' blocks then come along.
const PAGE: usize = 64 << 10;

/// Requests and bytes that cached files fetched, process-wide (for `/metrics` and the
/// benchmarks).
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// GET requests, as `object_store` coalesces a `get_ranges` call's ranges into them.
    pub requests: AtomicU64,
    /// Bytes those requests fetched (the gaps they coalesced over included).
    pub bytes: AtomicU64,
    /// Reads that found every page present.
    pub hits: AtomicU64,
}

/// The process-wide counters of [`CachedObject`]s.
pub fn counters() -> &'static CacheCounters {
    static COUNTERS: CacheCounters =
        CacheCounters { requests: AtomicU64::new(0), bytes: AtomicU64::new(0), hits: AtomicU64::new(0) };
    &COUNTERS
}

thread_local! {
    /// Ranged reads and bytes fetched by this thread so far.
    static THREAD: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Ranged reads and bytes this thread has fetched so far: the difference across a call is what
/// that call fetched (a snapshot's per-query counts, `Snapshot::bucket_reads`).
pub(crate) fn thread_reads() -> (u64, u64) {
    THREAD.with(std::cell::Cell::get)
}

/// Runs of missing pages at most this many pages apart are fetched as one request, the pages
/// between included: `object_store`'s `get_ranges` would merge them into one GET anyway
/// (`OBJECT_STORE_COALESCE_DEFAULT`, 1 MiB), and would drop the bytes between. The fetched
/// runs are then further apart than the client's gap, so each is exactly one GET.
const GAP_PAGES: usize = object_store::OBJECT_STORE_COALESCE_DEFAULT as usize / PAGE;

/// `pages` (sorted, distinct) as runs of pages to fetch: neighbours joined, and runs at most
/// [`GAP_PAGES`] apart joined across the gap.
fn fetch_runs(pages: impl IntoIterator<Item = usize>) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for page in pages {
        match runs.last_mut() {
            Some(last) if page - last.end <= GAP_PAGES => last.end = page + 1,
            _ => runs.push(page..page + 1),
        }
    }
    runs
}

/// See the module docs.
pub(crate) struct CachedObject {
    bucket: Arc<Bucket>,
    key: Path,
    path: PathBuf,
    file: File,
    map: Mmap,
    /// One bit per page: present in the local file.
    present: Mutex<Vec<u64>>,
    /// Bytes of the pages present: what the file takes on the local disk.
    present_bytes: AtomicU64,
}

impl CachedObject {
    /// Creates (or empties) the cache file at `path` for the object `key` of `size` bytes.
    pub fn open(bucket: Arc<Bucket>, key: Path, path: &FsPath, size: u64) -> Result<CachedObject> {
        let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
        if let Some(dir) = path.parent() {
            crate::fsutil::create_dir_durable(dir)?;
        }
        // A new file, never the old one's inode: a cache file being replaced (the cache was
        // trimmed) may still be mapped by readers of the file it replaces.
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("removing", e)),
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io("creating", e))?;
        file.set_len(size).map_err(|e| io("sizing", e))?;
        let map = crate::mmap::map_cache_file(&file, path)?;
        let pages = (size as usize).div_ceil(PAGE);
        Ok(CachedObject {
            bucket,
            key,
            path: path.to_path_buf(),
            file,
            map,
            present: Mutex::new(vec![0; pages.div_ceil(64)]),
            present_bytes: AtomicU64::new(0),
        })
    }

    /// The whole mapping. Only ranges passed to [`CachedObject::ensure`] hold the object's
    /// bytes; the rest reads as zeros.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Bytes of the object held in the local cache file.
    pub fn local_bytes(&self) -> u64 {
        self.present_bytes.load(Ordering::Relaxed)
    }

    /// True if every page of `range` is present.
    pub fn is_present(&self, range: &Range<usize>) -> bool {
        let len = self.map.len();
        if range.start >= range.end.min(len) {
            return true;
        }
        let present = self.present.lock();
        (range.start / PAGE..=(range.end.min(len) - 1) / PAGE).all(|p| present[p / 64] & (1 << (p % 64)) != 0)
    }

    /// Makes the bytes of `ranges` present, fetching the missing pages (and the gaps between
    /// nearby ones, see [`GAP_PAGES`]) in one call.
    pub fn ensure(&self, ranges: &[Range<usize>]) -> Result<()> {
        let len = self.map.len();
        let missing: Vec<Range<usize>> = {
            let present = self.present.lock();
            // Ranges may share pages and come in any order: each missing page once, in order.
            let mut pages: Vec<usize> = ranges
                .iter()
                .filter(|r| r.start < r.end.min(len))
                .flat_map(|r| r.start / PAGE..=(r.end.min(len) - 1) / PAGE)
                .filter(|&page| present[page / 64] & (1 << (page % 64)) == 0)
                .collect();
            drop(present);
            pages.sort_unstable();
            pages.dedup();
            fetch_runs(pages)
        };
        let c = counters();
        if missing.is_empty() {
            c.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let byte_ranges: Vec<Range<u64>> =
            missing.iter().map(|p| (p.start * PAGE) as u64..((p.end * PAGE).min(len)) as u64).collect();
        let got = self.bucket.get_ranges(&self.key, &byte_ranges)?;
        let requests = byte_ranges.len() as u64;
        let sent: u64 = byte_ranges.iter().map(|r| r.end - r.start).sum();
        c.requests.fetch_add(requests, Ordering::Relaxed);
        c.bytes.fetch_add(sent, Ordering::Relaxed);
        THREAD.with(|t| {
            let (n, bytes) = t.get();
            t.set((n + requests, bytes + sent));
        });
        let mut present = self.present.lock();
        for (pages, data) in missing.iter().zip(&got) {
            let start = pages.start * PAGE;
            if data.len() != ((pages.end * PAGE).min(len) - start) {
                return Err(Error::Bucket(format!(
                    "{}: a ranged read returned {} bytes",
                    self.key,
                    data.len()
                )));
            }
            for page in pages.clone() {
                if present[page / 64] & (1 << (page % 64)) != 0 {
                    // A gap's page held already, or another reader fetched it meanwhile: a
                    // present page is never rewritten.
                    continue;
                }
                let at = page * PAGE - start;
                let chunk = &data[at..(at + PAGE).min(data.len())];
                self.file
                    .write_all_at(chunk, (page * PAGE) as u64)
                    .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
                present[page / 64] |= 1 << (page % 64);
                self.present_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{GAP_PAGES, PAGE, fetch_runs};

    #[test]
    fn runs_join_across_gaps_the_client_would_fetch_along() {
        assert_eq!(GAP_PAGES * PAGE, 1 << 20, "object_store's gap");
        assert_eq!(fetch_runs(Vec::<usize>::new()), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(fetch_runs([3, 4, 5]), vec![3..6]);
        assert_eq!(fetch_runs([0, 2]), vec![0..3], "a page's gap is fetched along");
        assert_eq!(fetch_runs([0, 1 + GAP_PAGES]), vec![0..2 + GAP_PAGES], "a gap of exactly 1 MiB too");
        assert_eq!(fetch_runs([0, 2 + GAP_PAGES, 3 + GAP_PAGES]), vec![0..1, 2 + GAP_PAGES..4 + GAP_PAGES]);
    }
}
