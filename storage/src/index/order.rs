//! Series in the order of their label sets, mostly without comparing label sets.
//!
//! Every selection returns its series sorted by labels: the order Prometheus lists series in,
//! the order partition files store them in, and the order in which aggregations add values,
//! so that answers do not depend on ids. Comparing two label sets follows pointers into two
//! scattered allocations; sorting the 100,000 head series of `count(cpu_usage_user)` that
//! way was half of that query's time, as ids are given in arrival order.
//!
//! Ids are never reused and a series' labels never change, so a series' position among the
//! series known here orders it against every other known series for good. [`LabelOrder`]
//! keeps the known ids in label order and each one's position (its rank). A selection sorts
//! its known ids by rank (integers), sorts the others by labels and merges them in by binary
//! search. A sort that meets many unknown ids (after a burst of new series, after a start)
//! also enters them into the order, so later selections find them known; entering rebuilds
//! the order at a cost linear in the series known, paid only by a sort whose own
//! label comparisons cost about as much.

use std::ops::ControlFlow;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::series_store::SeriesStore;
use crate::types::{Labels, SeriesId};

/// Rank of an id that is not in the order.
const UNKNOWN: u32 = u32::MAX;

/// A sort enters its unknown ids when it has at least this many ...
const ENTER_MIN: usize = 256;
/// ... and at least this share (1/n) of the ids known. Entering reads every known id's labels
/// once; sorting `k` unknown ids and merging them into `m` known ones compares label sets
/// about `k * (log k + log m)` times, so at `k = known / 64` (with `known` in the millions) the
/// two cost about the same.
const ENTER_SHARE: usize = 64;

/// Known ids in label order, and each id's position in it.
#[derive(Default)]
struct Ranks {
    /// Ids in label order (some may have been removed since).
    order: Vec<SeriesId>,
    /// By id: its position in `order`, or [`UNKNOWN`].
    rank: Vec<u32>,
}

impl Ranks {
    fn of(&self, id: SeriesId) -> Option<u32> {
        self.rank.get(id as usize).copied().filter(|&r| r != UNKNOWN)
    }
}

/// The label order of the series known so far (see the module documentation).
#[derive(Default)]
pub(super) struct LabelOrder {
    ranks: RwLock<Arc<Ranks>>,
    /// Held while one sort enters new ids; others sort without entering meanwhile.
    entering: Mutex<()>,
}

impl LabelOrder {
    /// The live ids of `ids` with their labels, sorted by labels.
    pub(super) fn sort(&self, store: &SeriesStore, ids: &[SeriesId]) -> Vec<(SeriesId, Labels)> {
        let ranks = Arc::clone(&self.ranks.read());
        let mut known: Vec<(u32, SeriesId, Labels)> = Vec::with_capacity(ids.len());
        let mut unknown: Vec<(SeriesId, Labels)> = Vec::new();
        store.for_each(ids, |id, labels| {
            match ranks.of(id) {
                Some(r) => known.push((r, id, labels.clone())),
                None => unknown.push((id, labels.clone())),
            }
            ControlFlow::Continue(())
        });
        known.sort_unstable_by_key(|k| k.0);
        let known: Vec<(SeriesId, Labels)> = known.into_iter().map(|(_, id, labels)| (id, labels)).collect();
        if unknown.is_empty() {
            return known;
        }
        // Live label sets are unique, so an unstable sort gives the one order.
        unknown.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        if unknown.len() >= ENTER_MIN && unknown.len().saturating_mul(ENTER_SHARE) >= ranks.order.len() {
            self.enter(store, &unknown);
        }
        merge(known, unknown)
    }

    /// Enters `new` (sorted by labels) into the order, unless another sort is entering ids.
    fn enter(&self, store: &SeriesStore, new: &[(SeriesId, Labels)]) {
        let Some(_entering) = self.entering.try_lock() else { return };
        let current = Arc::clone(&self.ranks.read());
        // Another sort may have entered some of them since this one looked.
        let new: Vec<(SeriesId, Labels)> = new.iter().filter(|(id, _)| current.of(*id).is_none()).cloned().collect();
        let mut old = Vec::with_capacity(current.order.len());
        // Removed series leave the order here (`for_each` skips them).
        store.for_each(&current.order, |id, labels| {
            old.push((id, labels.clone()));
            ControlFlow::Continue(())
        });
        let merged = merge(old, new);
        let ids = merged.iter().map(|(id, _)| *id as usize);
        let mut rank = vec![UNKNOWN; ids.clone().max().map_or(0, |m| m + 1)];
        for (position, id) in ids.enumerate() {
            if let Some(r) = rank.get_mut(id) {
                // At most 2^32 - 1 ids exist, so a position fits.
                *r = position as u32;
            }
        }
        let order = merged.into_iter().map(|(id, _)| id).collect();
        *self.ranks.write() = Arc::new(Ranks { order, rank });
    }

    /// Heap bytes of the order.
    pub(super) fn memory_bytes(&self) -> usize {
        let ranks = self.ranks.read();
        (ranks.order.capacity() + ranks.rank.capacity()) * size_of::<u32>()
    }
}

/// Merges two lists sorted by labels (no label set in both) into one: each of `b` is placed by
/// a binary search over what remains of `a`, so a short `b` costs few comparisons.
fn merge(a: Vec<(SeriesId, Labels)>, b: Vec<(SeriesId, Labels)>) -> Vec<(SeriesId, Labels)> {
    if b.is_empty() {
        return a;
    }
    // Where each of `b` goes: after this many of `a`.
    let mut cuts = Vec::with_capacity(b.len());
    let mut from = 0;
    for item in &b {
        from += a.get(from..).unwrap_or(&[]).partition_point(|x| x.1 < item.1);
        cuts.push(from);
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter();
    let mut taken = 0;
    for (item, cut) in b.into_iter().zip(cuts) {
        out.extend(a.by_ref().take(cut - taken));
        taken = cut;
        out.push(item);
    }
    out.extend(a);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(v: u32) -> Labels {
        Labels::from_pairs(&[("__name__", "m"), ("v", &format!("{v:05}"))])
    }

    proptest! {
        /// Whatever was entered before and whatever a sort asks for, the answer is the live
        /// ids it asked for, sorted by labels.
        #[test]
        fn sorts_as_comparing_labels(
            values in proptest::collection::vec(0u32..5000, 1..600),
            asks in proptest::collection::vec((proptest::collection::vec(any::<prop::sample::Index>(), 0..600), any::<bool>()), 1..6),
        ) {
            let store = SeriesStore::new();
            // Ids in arrival order; labels in any order (duplicates dropped: one live set each).
            let mut seen = std::collections::HashSet::new();
            let values: Vec<u32> = values.into_iter().filter(|v| seen.insert(*v)).collect();
            for (id, v) in values.iter().enumerate() {
                store.set(id as SeriesId, labels(*v));
            }
            let order = LabelOrder::default();
            for (picks, remove_one) in asks {
                let mut ids: Vec<SeriesId> = picks.iter().map(|i| i.index(values.len()) as SeriesId).collect();
                ids.sort_unstable();
                ids.dedup();
                if remove_one && let Some(&id) = ids.first() {
                    store.clear(&[id]);
                }
                let got = order.sort(&store, &ids);
                let mut want: Vec<(SeriesId, Labels)> =
                    ids.iter().filter_map(|&id| store.get(id).map(|l| (id, l))).collect();
                want.sort_by(|a, b| a.1.cmp(&b.1));
                prop_assert_eq!(&got, &want);
            }
        }
    }

    #[test]
    fn a_large_sort_enters_its_ids_and_a_small_one_does_not() {
        let store = SeriesStore::new();
        let n = 4 * ENTER_MIN as u32;
        for id in 0..n {
            // Label order is the reverse of id order.
            store.set(id, labels(n - id));
        }
        let order = LabelOrder::default();
        let few: Vec<SeriesId> = (0..10).collect();
        order.sort(&store, &few);
        assert!(order.ranks.read().order.is_empty(), "ten ids are not worth entering");
        let all: Vec<SeriesId> = (0..n).collect();
        let sorted = order.sort(&store, &all);
        assert_eq!(sorted.iter().map(|s| s.0).collect::<Vec<_>>(), (0..n).rev().collect::<Vec<_>>());
        let ranks = order.ranks.read();
        assert_eq!(ranks.order.len(), n as usize);
        assert_eq!(ranks.of(n - 1), Some(0));
    }
}
