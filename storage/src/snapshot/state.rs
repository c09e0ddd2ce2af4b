//! What a [`Snapshot`](super::Snapshot) reads: the [`State`] (file set, heads and tombstones at
//! one moment, swapped whole by the writers) and the [`ReadState`] (what stays shared for the
//! life of the database: the series index and table, the partition width, the deletion flag).
//!
//! The write path builds and publishes these; the read path only reads them, so nothing here
//! names the database itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use crate::bucket::Bucket;
use crate::error::Result;

use crate::head::Head;
use crate::index::Index;
use crate::manifest::{FileEntry, Tombstone};
use crate::partition::PartitionFile;
use crate::series_table::SeriesTable;

/// The read-only part of the database a snapshot needs, shared by every snapshot and the
/// writers (which create series in `index` and raise `series`' newest timestamps).
pub(crate) struct ReadState {
    /// Series ids and labels.
    pub index: Index,
    /// Per-series state: the newest accepted timestamp.
    pub series: SeriesTable,
    /// The partition width in milliseconds (fixed at open: the manifest's).
    pub partition_ms: i64,
    /// Set by the first deletion of this process, or at open if tombstones are live: from
    /// then on a series' newest accepted timestamp may name a deleted sample, so lookups stop
    /// taking it as proof of data (see `snapshot::in_range`).
    pub deleted: AtomicBool,
    /// Some files may be read from a bucket (`--storage.bucket`): reads keep a query's
    /// footprint (see [`crate::footprint`]).
    pub from_bucket: bool,
}

/// A live partition file: its manifest entry and the open file, or where to open it from.
///
/// A query node (`--role query`) lists every file of its prefixes but opens a file (two ranged
/// reads) only when a query first reaches its partition, so that it is ready at once whatever
/// the bucket holds. Every other file is open from the start.
#[derive(Debug)]
pub(crate) struct LiveFile {
    pub entry: FileEntry,
    file: OnceLock<PartitionFile>,
    lazy: Option<LazyFile>,
}

/// Where a file not yet open is read from, and the index its series enter when it opens.
pub(crate) struct LazyFile {
    pub bucket: Arc<Bucket>,
    pub key: object_store::path::Path,
    pub cache_path: PathBuf,
    pub shared: Arc<ReadState>,
    /// Held while opening, so two queries reaching the file at once open it once.
    opening: parking_lot::Mutex<()>,
}

impl std::fmt::Debug for LazyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyFile").field("key", &self.key).finish()
    }
}

impl LiveFile {
    /// A file that is open.
    pub(crate) fn open(entry: FileEntry, file: PartitionFile) -> LiveFile {
        LiveFile { entry, file: OnceLock::from(file), lazy: None }
    }

    /// A bucket file opened when first read; its series enter `shared`'s index then.
    pub(crate) fn lazy(
        entry: FileEntry,
        bucket: Arc<Bucket>,
        key: object_store::path::Path,
        cache_path: PathBuf,
        shared: Arc<ReadState>,
    ) -> LiveFile {
        let lazy = LazyFile { bucket, key, cache_path, shared, opening: parking_lot::Mutex::new(()) };
        LiveFile { entry, file: OnceLock::new(), lazy: Some(lazy) }
    }

    /// A lazy file's unopened copy, reading the same object through the same cache path (which
    /// opening empties); None for a file that is not lazy.
    pub(crate) fn unopened(&self) -> Option<LiveFile> {
        let l = self.lazy.as_ref()?;
        Some(LiveFile::lazy(
            self.entry.clone(),
            Arc::clone(&l.bucket),
            l.key.clone(),
            l.cache_path.clone(),
            Arc::clone(&l.shared),
        ))
    }

    /// The file if it is open (always, for a file that is not lazy).
    pub(crate) fn opened(&self) -> Option<&PartitionFile> {
        self.file.get()
    }

    /// The open file, opening it first if it is lazy and not open yet.
    pub(crate) fn file(&self) -> Result<&PartitionFile> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let Some(lazy) = &self.lazy else {
            return Err(crate::Error::InvalidInput("a partition file without a source".into()));
        };
        let _opening = lazy.opening.lock();
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let shared = Arc::clone(&lazy.shared);
        // Read in part: its series enter the index as selections load their chunks.
        let file = PartitionFile::open_cached_in_part(
            Arc::clone(&lazy.bucket),
            lazy.key.clone(),
            &lazy.cache_path,
            self.entry.size,
            Box::new(move |labels, max_t| {
                let (id, _) = shared.index.get_or_create(labels);
                shared.series.observe(id, max_t);
                id
            }),
        )?;
        Ok(self.file.get_or_init(|| file))
    }

    /// Has the series that the chunks a query fetched hold, and that its selections did not
    /// enter, entered later by a thread of the process (one for all files, started on first
    /// use), unless that is queued already or nothing is left: a cold query answers after
    /// entering the series it selects, and the next query with other matchers finds the rest
    /// in the index rather than scanning the chunks again (`partition/in_part.rs`).
    pub(crate) fn enter_rest_later(self: &Arc<Self>) {
        static LATER: OnceLock<std::sync::mpsc::Sender<std::sync::Weak<LiveFile>>> = OnceLock::new();
        if !self.opened().is_some_and(PartitionFile::queue_entering) {
            return;
        }
        let later = LATER.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<std::sync::Weak<LiveFile>>();
            let spawned = std::thread::Builder::new().name("strata-enter-series".into()).spawn(move || {
                for file in rx {
                    // A file gone from every state since (trimmed, compacted away) is skipped.
                    let Some(live) = file.upgrade() else { continue };
                    if let Some(Err(e)) = live.opened().map(PartitionFile::enter_fetched) {
                        // The next query's selection scans again and reports it.
                        tracing::warn!(file = %live.entry.id, error = %e, "entering a file's fetched series");
                    }
                }
            });
            if let Err(e) = spawned {
                // Nothing is lost: queries keep scanning the chunks they need.
                tracing::warn!(error = %e, "no thread to enter fetched series");
            }
            tx
        });
        // With no thread, the receiver is gone and the send fails: left to the scans.
        if later.send(Arc::downgrade(self)).is_err()
            && let Some(f) = self.opened()
        {
            f.unqueue();
        }
    }

    /// Whether the file holds a series, for a cheap test that must not fail: a file that cannot
    /// be opened is taken to hold it, so that the read that follows reports the error.
    pub(crate) fn may_hold(&self, test: impl FnOnce(&PartitionFile) -> bool) -> bool {
        self.file().map_or(true, test)
    }
}

/// A head that was frozen by a flush, with the WAL segment its successor starts at.
pub(crate) struct Frozen {
    pub head: Arc<Head>,
    pub wal_end_segment: u64,
    /// The positions noted when it was frozen ([`crate::Db::note_position`]): every record up
    /// to them is in it or in files already written.
    pub positions: std::collections::BTreeMap<String, u64>,
}

/// The immutable view readers snapshot.
pub(crate) struct State {
    pub head: Arc<Head>,
    /// Frozen heads, oldest first, still being written to files.
    pub frozen: Vec<Arc<Frozen>>,
    /// Partition start -> live files ordered by seq.
    pub partitions: BTreeMap<i64, Vec<Arc<LiveFile>>>,
    pub tombstones: Arc<Vec<Tombstone>>,
}

impl State {
    /// A copy sharing every `Arc`.
    pub(crate) fn clone_shallow(&self) -> State {
        State {
            head: self.head.clone(),
            frozen: self.frozen.clone(),
            partitions: self.partitions.clone(),
            tombstones: self.tombstones.clone(),
        }
    }
}
