//! Per-series state that outlives a head: the newest timestamp (for the out-of-order window) and
//! the WAL run the series was last defined in (so each run defines it once).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockReadGuard};

use crate::types::SeriesId;

const CHUNK: usize = 1 << 14;

/// State of one series.
#[derive(Debug)]
pub struct SeriesSlot {
    /// Newest timestamp accepted for the series (`i64::MIN` if none yet).
    pub max_t: AtomicI64,
    /// The WAL run (the number of its first segment) + 1 in which the series was last defined
    /// (0 = never). Runs are numbered by segment numbers, which are never reused, so a mark
    /// never matches a run it was not set in.
    pub wal_run: AtomicU64,
}

impl Default for SeriesSlot {
    fn default() -> Self {
        SeriesSlot { max_t: AtomicI64::new(i64::MIN), wal_run: AtomicU64::new(0) }
    }
}

/// A growable array of [`SeriesSlot`] indexed by dense series id. Slots never move, so the
/// common path is a shared read lock plus atomic operations.
#[derive(Debug, Default)]
pub struct SeriesTable {
    chunks: RwLock<Vec<Box<[SeriesSlot]>>>,
}

impl SeriesTable {
    /// Runs `f` on the slot of `id`, growing the table if needed.
    pub fn with<R>(&self, id: SeriesId, f: impl FnOnce(&SeriesSlot) -> R) -> R {
        let (c, i) = (id as usize / CHUNK, id as usize % CHUNK);
        {
            let chunks = self.chunks.read();
            if let Some(slot) = chunks.get(c).and_then(|ch| ch.get(i)) {
                return f(slot);
            }
        }
        let mut chunks = self.chunks.write();
        while chunks.len() <= c {
            chunks.push((0..CHUNK).map(|_| SeriesSlot::default()).collect());
        }
        // The loop above guarantees the chunk exists; `i < CHUNK` by construction.
        match chunks.get(c).and_then(|ch| ch.get(i)) {
            Some(slot) => f(slot),
            None => f(&SeriesSlot::default()),
        }
    }

    /// A view for many look-ups under one shared lock (taking it per look-up is a write to a
    /// cache line every appending core shares), in which every id up to `max_id` has a slot.
    /// Hold it only briefly and call nothing that takes the table's lock meanwhile.
    pub fn view(&self, max_id: SeriesId) -> SeriesView<'_> {
        let needed = max_id as usize / CHUNK + 1;
        if self.chunks.read().len() < needed {
            let mut chunks = self.chunks.write();
            while chunks.len() < needed {
                chunks.push((0..CHUNK).map(|_| SeriesSlot::default()).collect());
            }
        }
        SeriesView(self.chunks.read())
    }

    /// Newest timestamp of the series.
    pub fn max_t(&self, id: SeriesId) -> i64 {
        self.with(id, |s| s.max_t.load(Ordering::Relaxed))
    }

    /// Raises the newest timestamp of the series to at least `t`.
    pub fn observe(&self, id: SeriesId, t: i64) {
        self.with(id, |s| s.max_t.fetch_max(t, Ordering::Relaxed));
    }
}

/// See [`SeriesTable::view`].
pub struct SeriesView<'a>(RwLockReadGuard<'a, Vec<Box<[SeriesSlot]>>>);

impl SeriesView<'_> {
    /// The slot of `id`; None only for an id past the view's `max_id` that no one added.
    pub fn get(&self, id: SeriesId) -> Option<&SeriesSlot> {
        self.0.get(id as usize / CHUNK).and_then(|ch| ch.get(id as usize % CHUNK))
    }
}
