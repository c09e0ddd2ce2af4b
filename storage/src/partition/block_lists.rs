//! Decoded block lists of a partition file, kept for the next query that touches the series.
//!
//! A series' block list is a chain (each entry's statistics relative to the previous ones), so
//! reading it decodes every entry up to the query's end: a dozen varints and five floats per
//! block. A query reads it once per file per series, and twice when push-down declines and
//! the plain read follows. That decoding was 12 % of a TSBS single-groupby query's thread time
//! and about a quarter of a query answered from block statistics alone; dashboards ask the
//! same series again every refresh.
//!
//! The lists are kept whole per (file, series), so any later range is a filter over them. Their
//! memory is bounded for the whole process by [`BUDGET_BYTES`]: once it is used up, further
//! lists are decoded per read as before and not kept. A file's lists go with the file (dropped
//! by compaction or retention), which returns their bytes to the budget; there is no other
//! eviction, so what stays is what queries touched first, and compaction turns it over.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::BlockMeta;
use crate::types::SeriesId;

/// Bytes of decoded block lists kept by all files of the process together: about 800,000
/// block entries (80 bytes each), e.g. a day of hourly blocks for 33,000 series.
pub const BUDGET_BYTES: usize = 64 << 20;

/// Bytes one kept list costs besides its entries (the map's slot, the `Arc`'s counts).
const ENTRY_OVERHEAD: usize = 48;

/// Shards, so parallel readers of one file rarely wait on each other.
const SHARDS: usize = 16;

/// Bytes kept by all files now.
static KEPT_BYTES: AtomicUsize = AtomicUsize::new(0);

type Shard = HashMap<SeriesId, Arc<[BlockMeta]>, foldhash::fast::RandomState>;

/// Bytes of block lists kept by all files of the process now (at most [`BUDGET_BYTES`]).
pub fn kept_bytes() -> usize {
    KEPT_BYTES.load(Ordering::Relaxed)
}

/// The kept block lists of one file.
#[derive(Default)]
pub(super) struct BlockLists {
    shards: [Mutex<Shard>; SHARDS],
    /// Bytes this file keeps, returned to the budget when it is dropped.
    bytes: AtomicUsize,
}

impl BlockLists {
    /// The kept list of series `id`, if any.
    #[cfg(test)]
    pub(super) fn get(&self, id: SeriesId) -> Option<Arc<[BlockMeta]>> {
        self.shard(id).lock().get(&id).cloned()
    }

    /// `f` of the kept list of series `id`, if any, under its shard's lock. A query over many
    /// series meets each list cold; cloning the `Arc` would touch its counts, a cache line
    /// away from the blocks a recent range reads at the list's end.
    pub(super) fn with<T>(&self, id: SeriesId, f: impl FnOnce(&[BlockMeta]) -> T) -> Option<T> {
        self.shard(id).lock().get(&id).map(|list| f(list))
    }

    /// Whether a list of `blocks` entries would fit the budget now (a hint: [`Self::keep`]
    /// decides).
    pub(super) fn has_room(blocks: usize) -> bool {
        KEPT_BYTES.load(Ordering::Relaxed).saturating_add(cost(blocks)) <= BUDGET_BYTES
    }

    /// Keeps `list` as series `id`'s if the budget has room and no list is kept for it yet.
    pub(super) fn keep(&self, id: SeriesId, list: Arc<[BlockMeta]>) {
        let cost = cost(list.len());
        let before = KEPT_BYTES.fetch_add(cost, Ordering::Relaxed);
        if before.saturating_add(cost) > BUDGET_BYTES {
            KEPT_BYTES.fetch_sub(cost, Ordering::Relaxed);
            return;
        }
        let mut shard = self.shard(id).lock();
        if shard.contains_key(&id) {
            // Another reader kept it first.
            KEPT_BYTES.fetch_sub(cost, Ordering::Relaxed);
            return;
        }
        shard.insert(id, list);
        self.bytes.fetch_add(cost, Ordering::Relaxed);
    }

    fn shard(&self, id: SeriesId) -> &Mutex<Shard> {
        &self.shards[id as usize % SHARDS]
    }
}

impl Drop for BlockLists {
    fn drop(&mut self) {
        KEPT_BYTES.fetch_sub(*self.bytes.get_mut(), Ordering::Relaxed);
    }
}

/// Budget bytes of a kept list of `blocks` entries.
fn cost(blocks: usize) -> usize {
    blocks.saturating_mul(std::mem::size_of::<BlockMeta>()).saturating_add(ENTRY_OVERHEAD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::BlockStats;

    fn list(n: usize) -> Arc<[BlockMeta]> {
        let stats = BlockStats::from_samples(&[crate::types::Sample::new(1, 2.0)]);
        (0..n).map(|i| BlockMeta { offset: i as u64, len: 1, stats }).collect()
    }

    /// A file counts what it keeps once per series, and a second list for the same series
    /// does not replace the first.
    #[test]
    fn a_file_counts_each_kept_list_once() {
        let lists = BlockLists::default();
        assert!(lists.get(7).is_none());
        lists.keep(7, list(3));
        lists.keep(7, list(5));
        lists.keep(23, list(1));
        assert_eq!(lists.get(7).map(|l| l.len()), Some(3));
        assert_eq!(lists.get(23).map(|l| l.len()), Some(1));
        assert_eq!(lists.bytes.load(Ordering::Relaxed), cost(3) + cost(1));
    }

    /// A list larger than the whole budget is never kept.
    #[test]
    fn the_budget_bounds_what_is_kept() {
        let lists = BlockLists::default();
        let too_many = BUDGET_BYTES / std::mem::size_of::<BlockMeta>() + 1;
        assert!(!BlockLists::has_room(too_many));
        lists.keep(1, list(too_many));
        assert!(lists.get(1).is_none());
        assert_eq!(lists.bytes.load(Ordering::Relaxed), 0);
    }
}
