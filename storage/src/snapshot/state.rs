//! What a [`Snapshot`](super::Snapshot) reads: the [`State`] (file set, heads and tombstones at
//! one moment, swapped whole by the writers) and the [`ReadState`] (what stays shared for the
//! life of the database: the series index and table, the partition width, the deletion flag).
//!
//! The write path builds and publishes these; the read path only reads them, so nothing here
//! names the database itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

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
}

/// A live partition file: its manifest entry and the open file.
#[derive(Debug)]
pub(crate) struct LiveFile {
    pub entry: FileEntry,
    pub file: PartitionFile,
}

/// A head that was frozen by a flush, with the WAL segment its successor starts at.
pub(crate) struct Frozen {
    pub head: Arc<Head>,
    pub wal_end_segment: u64,
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
