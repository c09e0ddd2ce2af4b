//! Series id -> label set: a chunked vector indexed by the dense id.
//!
//! Chunks of 4096 slots are allocated as ids grow, so growing never copies the slots already
//! there (only the small vector of chunk pointers) and a writer holds the lock for one slot
//! store. Readers take the shared lock per lookup, or once per batch of ids when a query walks
//! many series.

use std::ops::ControlFlow;

use parking_lot::RwLock;

use crate::types::{Labels, SeriesId};

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

/// Ids looked up under one acquisition of the read lock when walking many series, so a long
/// walk never blocks series creation for more than a few microseconds.
const BATCH: usize = 256;

type Chunk = Box<[Option<Labels>]>;

/// The store. A slot is `None` before its series is published and after it is removed.
pub(super) struct SeriesStore {
    chunks: RwLock<Vec<Chunk>>,
}

fn slot(chunks: &[Chunk], id: SeriesId) -> Option<&Labels> {
    let id = id as usize;
    chunks.get(id >> CHUNK_BITS)?.get(id & (CHUNK - 1))?.as_ref()
}

impl SeriesStore {
    pub(super) fn new() -> Self {
        SeriesStore { chunks: RwLock::new(Vec::new()) }
    }

    /// The labels of a live series.
    pub(super) fn get(&self, id: SeriesId) -> Option<Labels> {
        slot(&self.chunks.read(), id).cloned()
    }

    /// Publishes the labels of a new series.
    pub(super) fn set(&self, id: SeriesId, labels: Labels) {
        let id = id as usize;
        let mut chunks = self.chunks.write();
        while chunks.len() <= id >> CHUNK_BITS {
            chunks.push(vec![None; CHUNK].into_boxed_slice());
        }
        if let Some(slot) = chunks.get_mut(id >> CHUNK_BITS).and_then(|c| c.get_mut(id & (CHUNK - 1))) {
            *slot = Some(labels);
        }
    }

    /// Empties the slots of removed series. Chunks stay allocated: ids are never reused, and a
    /// chunk costs 16 bytes per id ever created (64 KiB per 4096 ids).
    pub(super) fn clear(&self, ids: &[SeriesId]) {
        for batch in ids.chunks(BATCH) {
            let mut chunks = self.chunks.write();
            for &id in batch {
                let id = id as usize;
                if let Some(slot) = chunks.get_mut(id >> CHUNK_BITS).and_then(|c| c.get_mut(id & (CHUNK - 1)))
                {
                    *slot = None;
                }
            }
        }
    }

    /// Calls `f` with the labels of each live series in `ids`, in order, until it breaks.
    pub(super) fn for_each(&self, ids: &[SeriesId], mut f: impl FnMut(SeriesId, &Labels) -> ControlFlow<()>) {
        for batch in ids.chunks(BATCH) {
            let chunks = self.chunks.read();
            for &id in batch {
                let Some(labels) = slot(&chunks, id) else { continue };
                if f(id, labels).is_break() {
                    return;
                }
            }
        }
    }

    /// Keeps the ids of live series whose labels satisfy `keep`.
    pub(super) fn retain(&self, ids: &mut Vec<SeriesId>, mut keep: impl FnMut(&Labels) -> bool) {
        let mut out = Vec::with_capacity(ids.len());
        self.for_each(ids, |id, labels| {
            if keep(labels) {
                out.push(id);
            }
            ControlFlow::Continue(())
        });
        *ids = out;
    }

    /// Heap bytes of the slots (the label sets themselves are counted by the caller).
    pub(super) fn memory_bytes(&self) -> usize {
        let chunks = self.chunks.read();
        chunks.len() * CHUNK * size_of::<Option<Labels>>() + chunks.capacity() * size_of::<Chunk>()
    }
}
