//! The inverted index: label name -> label value -> postings (sorted ids of the series that have
//! that pair), plus the postings of every live series.
//!
//! It doubles as the string interner: the name and value keys are the one shared `Arc<str>` of
//! each string, and a new series is stored with labels built from those keys. Adding a series
//! to its postings and interning its strings is therefore the same lookup per label.
//!
//! Values of one name are also kept sorted, so `label_values` is an in-order walk and a regex
//! with a literal prefix (`host_4.*`) visits only the values starting with that prefix.
//!
//! Locking: the name map has a reader-writer lock that is taken for writing only to add or
//! remove a name; each name's value map has its own lock. Lock order is name map, then one value
//! map. Callers hold no other index lock except a series-map shard (see `Index`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::RwLock;

use super::postings;
use crate::labels_ref::LabelsRef;
use crate::types::{Label, Labels, SeriesId};

/// The values of one label name.
///
/// Each value's postings live in a slot of `postings`, and two maps lead to the slots. A hash
/// map serves lookups by value: one probe per label when a series is created, the hot path of
/// startup and ingest (several times cheaper than a `BTreeMap` lookup). An ordered map serves
/// walks in value order (`label_values`, regexes with a literal prefix) and also holds each
/// value's first id: a label-values walk mostly asks "does one series of this value pass?",
/// and with the first id in the entry that costs neither a hash probe nor a read of the
/// postings, which on a million series are cache misses that made up most of the walk.
#[derive(Default)]
pub(super) struct ValueIndex {
    /// Value -> slot in `postings`.
    slots: HashMap<Arc<str>, u32>,
    /// Postings by slot. A slot whose value was removed is empty and listed in `free`.
    postings: Vec<Vec<SeriesId>>,
    free: Vec<u32>,
    /// The values in order.
    sorted: BTreeMap<Arc<str>, Entry>,
    /// Number of series that have this label (the sum of the postings lengths).
    series: usize,
}

/// A value's entry in the ordered map.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Its slot in [`ValueIndex::postings`]. Slots are `u32`: there are fewer values than
    /// series, and series ids are `u32`.
    slot: u32,
    /// The smallest id of its postings (postings are never empty).
    first: SeriesId,
}

/// A value met in an ordered walk ([`ValueIndex::values_after`]): its first id at hand, its
/// postings read only if asked for.
#[derive(Clone, Copy)]
pub(super) struct ValueRef<'a> {
    index: &'a ValueIndex,
    entry: Entry,
}

impl<'a> ValueRef<'a> {
    /// The smallest id of the value's postings.
    pub(super) fn first(&self) -> SeriesId {
        self.entry.first
    }

    /// The value's postings.
    pub(super) fn ids(&self) -> &'a [SeriesId] {
        self.index.slot(self.entry.slot)
    }
}

impl ValueIndex {
    fn slot(&self, slot: u32) -> &[SeriesId] {
        self.postings.get(slot as usize).map_or(&[], Vec::as_slice)
    }

    /// Adds `id` to the postings of `value`; returns the interned value.
    fn add(&mut self, value: &str, id: SeriesId) -> Arc<str> {
        if let Some((key, &slot)) = self.slots.get_key_value(value) {
            let key = key.clone();
            if let Some(ids) = self.postings.get_mut(slot as usize)
                && postings::insert(ids, id)
            {
                self.series += 1;
                // Ids are handed out in increasing order, so a new first id is rare (two
                // creators finishing out of order).
                if ids.first() == Some(&id)
                    && let Some(entry) = self.sorted.get_mut(value)
                {
                    entry.first = id;
                }
            }
            return key;
        }
        let key: Arc<str> = Arc::from(value);
        let slot = match self.free.pop() {
            Some(slot) => {
                if let Some(ids) = self.postings.get_mut(slot as usize) {
                    *ids = vec![id];
                }
                slot
            }
            None => {
                self.postings.push(vec![id]);
                // Fewer values than series, and there are at most u32::MAX series.
                (self.postings.len() - 1) as u32
            }
        };
        self.slots.insert(key.clone(), slot);
        self.sorted.insert(key.clone(), Entry { slot, first: id });
        self.series += 1;
        key
    }

    /// The interned copy of `value`, if some series has it.
    fn interned(&self, value: &str) -> Option<Arc<str>> {
        self.slots.get_key_value(value).map(|(key, _)| key.clone())
    }

    /// Removes `ids` (sorted) from the postings of `value`, dropping the value when none remain.
    fn remove(&mut self, value: &str, ids: &[SeriesId]) {
        let Some(&slot) = self.slots.get(value) else { return };
        let Some(list) = self.postings.get_mut(slot as usize) else { return };
        let old_first = list.first().copied();
        self.series -= postings::remove_all(list, ids);
        match list.first() {
            Some(&first) => {
                if Some(first) != old_first
                    && let Some(entry) = self.sorted.get_mut(value)
                {
                    entry.first = first;
                }
            }
            None => {
                *list = Vec::new();
                self.free.push(slot);
                self.slots.remove(value);
                self.sorted.remove(value);
            }
        }
    }

    /// The postings of one value.
    pub(super) fn postings(&self, value: &str) -> Option<&[SeriesId]> {
        self.slots.get(value).map(|&slot| self.slot(slot))
    }

    /// All values with their postings, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &[SeriesId])> {
        self.slots.iter().map(|(v, &slot)| (v.as_ref(), self.slot(slot)))
    }

    /// All values in order.
    #[cfg(test)]
    pub(super) fn sorted_values(&self) -> impl Iterator<Item = &str> {
        self.sorted.keys().map(AsRef::as_ref)
    }

    /// The values starting with `prefix` (all values if it is empty), in order, with their
    /// postings.
    pub(super) fn iter_prefix<'a>(&'a self, prefix: &str) -> impl Iterator<Item = (&'a str, &'a [SeriesId])> {
        self.sorted
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(v, _)| v.starts_with(prefix))
            .map(|(v, e)| (v.as_ref(), self.slot(e.slot)))
    }

    /// The values after `after` (from the first if None), in order. Lookups copy what they need
    /// from a bounded number of them and release the lock before doing slow work, so series
    /// creation never waits long behind a query.
    pub(super) fn values_after<'a>(
        &'a self,
        after: Option<&str>,
    ) -> impl Iterator<Item = (&'a str, ValueRef<'a>)> {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.sorted
            .range::<str, _>((from, Bound::Unbounded))
            .map(move |(v, &entry)| (v.as_ref(), ValueRef { index: self, entry }))
    }

    /// Number of distinct values.
    pub(super) fn value_count(&self) -> usize {
        self.slots.len()
    }

    /// Number of series that have this label.
    pub(super) fn series_count(&self) -> usize {
        self.series
    }

    fn memory_bytes(&self) -> usize {
        // A B-tree leaf holds up to 11 entries; nodes are about 2/3 full on average.
        let sorted = self.sorted.len() * (size_of::<Arc<str>>() + size_of::<Entry>()) * 3 / 2;
        let strings: usize = self.slots.keys().map(|v| 2 * size_of::<usize>() + v.len()).sum();
        let ids: usize = self.postings.iter().map(|p| p.capacity() * size_of::<SeriesId>()).sum();
        self.slots.allocation_size()
            + sorted
            + strings
            + ids
            + self.postings.capacity() * size_of::<Vec<SeriesId>>()
            + self.free.capacity() * size_of::<u32>()
    }
}

/// A label name and its size, from [`InvertedIndex::name_sizes`].
pub(super) struct NameSize {
    /// The interned name (the one label sets hold).
    pub(super) name: Arc<str>,
    /// Distinct values.
    pub(super) values: usize,
    /// Series that have the label.
    pub(super) series: usize,
}

/// The inverted index over all live series.
pub(super) struct InvertedIndex {
    names: RwLock<HashMap<Arc<str>, RwLock<ValueIndex>>>,
    all: RwLock<Vec<SeriesId>>,
}

impl InvertedIndex {
    pub(super) fn new() -> Self {
        InvertedIndex { names: RwLock::new(HashMap::new()), all: RwLock::new(Vec::new()) }
    }

    /// Adds series `id` to the postings of each of its labels and of all series; returns its
    /// label set rebuilt from interned strings.
    pub(super) fn insert_series(&self, id: SeriesId, labels: LabelsRef<'_>) -> Labels {
        let interned =
            self.insert_known_names(id, labels).unwrap_or_else(|| self.insert_new_names(id, labels));
        postings::insert(&mut self.all.write(), id);
        Labels::from_sorted(interned)
    }

    /// `labels` as an owned label set made of the interned strings where they exist (others are
    /// allocated), without adding postings: what a borrowed label set is published as before
    /// [`InvertedIndex::insert_series`] adds the series.
    pub(super) fn intern(&self, labels: LabelsRef<'_>) -> Labels {
        let names = self.names.read();
        Labels::from_sorted_iter(labels.iter().map(|(name, value)| match names.get_key_value(name) {
            Some((name, values)) => Label {
                name: name.clone(),
                value: values.read().interned(value).unwrap_or_else(|| Arc::from(value)),
            },
            None => Label::new(name, value),
        }))
    }

    /// The common case: every name exists already, so the name map is only read. Returns None,
    /// having changed nothing, if a name is new.
    fn insert_known_names(&self, id: SeriesId, labels: LabelsRef<'_>) -> Option<Vec<Label>> {
        let names = self.names.read();
        let found: Vec<_> =
            labels.iter().map(|(name, _)| names.get_key_value(name)).collect::<Option<_>>()?;
        Some(
            found
                .into_iter()
                .zip(labels.iter())
                .map(|((name, values), (_, value))| Label {
                    name: name.clone(),
                    value: values.write().add(value, id),
                })
                .collect(),
        )
    }

    fn insert_new_names(&self, id: SeriesId, labels: LabelsRef<'_>) -> Vec<Label> {
        let mut names = self.names.write();
        labels
            .iter()
            .map(|(name, value)| {
                let (name, values) = names
                    .raw_entry_mut()
                    .from_key(name)
                    .or_insert_with(|| (Arc::from(name), RwLock::default()));
                Label { name: name.clone(), value: values.get_mut().add(value, id) }
            })
            .collect()
    }

    /// Removes series from every postings list; names and values left without series are
    /// dropped (so their interned strings are freed once no label set uses them).
    pub(super) fn remove_series(&self, removed: &[(SeriesId, Labels)]) {
        let mut pairs: Vec<(&str, &str, SeriesId)> = removed
            .iter()
            .flat_map(|(id, labels)| labels.iter().map(move |l| (l.name.as_ref(), l.value.as_ref(), *id)))
            .collect();
        pairs.sort_unstable();

        let mut emptied = Vec::new();
        {
            let names = self.names.read();
            for of_name in pairs.chunk_by(|a, b| a.0 == b.0) {
                let Some(&(name, _, _)) = of_name.first() else { continue };
                let Some(values) = names.get(name) else { continue };
                let mut values = values.write();
                for of_value in of_name.chunk_by(|a, b| a.1 == b.1) {
                    let ids: Vec<SeriesId> = of_value.iter().map(|p| p.2).collect();
                    if let Some(&(_, value, _)) = of_value.first() {
                        values.remove(value, &ids);
                    }
                }
                if values.value_count() == 0 {
                    emptied.push(name);
                }
            }
        }
        if !emptied.is_empty() {
            let mut names = self.names.write();
            for name in emptied {
                // A concurrent insert may have reused the name since we looked.
                if names.get_mut(name).is_some_and(|v| v.get_mut().value_count() == 0) {
                    names.remove(name);
                }
            }
        }

        let mut ids: Vec<SeriesId> = removed.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        postings::remove_all(&mut self.all.write(), &ids);
    }

    /// Runs `f` on the values of label `name` (None if no live series has it) under that
    /// name's read lock. Keep `f` short and never call back into the index from it.
    pub(super) fn with_values<R>(&self, name: &str, f: impl FnOnce(Option<&ValueIndex>) -> R) -> R {
        let names = self.names.read();
        match names.get(name) {
            Some(values) => f(Some(&values.read())),
            None => f(None),
        }
    }

    /// [`InvertedIndex::with_values`] for two names at once (the values of `a`, then of `b`,
    /// read-locked in that order; writers never hold two names' locks, so this cannot wait on
    /// one that waits on it).
    pub(super) fn with_values_pair<R>(
        &self,
        a: &str,
        b: &str,
        f: impl FnOnce(Option<&ValueIndex>, Option<&ValueIndex>) -> R,
    ) -> R {
        let names = self.names.read();
        let a = names.get(a).map(|v| v.read());
        let b = names.get(b).map(|v| v.read());
        f(a.as_deref(), b.as_deref())
    }

    /// The ids of all live series.
    pub(super) fn all(&self) -> Vec<SeriesId> {
        self.all.read().clone()
    }

    /// Sorted label names of live series.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.names.read().keys().map(|n| n.to_string()).collect();
        names.sort_unstable();
        names
    }

    /// Every label name (the interned string, in no particular order) with how many values
    /// and series it has: what a lookup needs to pick the cheaper way to decide about a name.
    pub(super) fn name_sizes(&self) -> Vec<NameSize> {
        self.names
            .read()
            .iter()
            .map(|(name, values)| {
                let values = values.read();
                NameSize { name: name.clone(), values: values.value_count(), series: values.series_count() }
            })
            .collect()
    }

    /// Approximate heap bytes of the maps, postings and interned strings.
    pub(super) fn memory_bytes(&self) -> usize {
        let names = self.names.read();
        let per_name: usize =
            names.iter().map(|(n, v)| n.len() + 2 * size_of::<usize>() + v.read().memory_bytes()).sum();
        names.allocation_size() + per_name + self.all.read().capacity() * size_of::<SeriesId>()
    }

    /// Asserts every internal invariant; used by tests after concurrent or random operations.
    #[cfg(test)]
    pub(super) fn check(&self, labels_of: impl Fn(SeriesId) -> Option<Labels>) {
        let all = self.all.read().clone();
        assert!(all.windows(2).all(|w| w[0] < w[1]), "all-series postings not strictly sorted");
        for (name, values) in self.names.read().iter() {
            let values = values.read();
            assert!(values.value_count() > 0, "empty name {name} kept");
            let mut series = 0;
            for (value, ids) in values.iter() {
                assert!(!ids.is_empty(), "empty postings kept for {name}={value}");
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "postings of {name}={value} not sorted");
                for &id in ids {
                    let labels = labels_of(id).expect("postings hold a removed series");
                    assert_eq!(labels.get(name), Some(value), "series {id} in wrong postings");
                    assert!(all.binary_search(&id).is_ok(), "series {id} missing from all postings");
                }
                series += ids.len();
            }
            assert_eq!(series, values.series_count(), "series count of {name}");
            let sorted: Vec<&str> = values.sorted_values().collect();
            let mut expected: Vec<&str> = values.iter().map(|(v, _)| v).collect();
            expected.sort_unstable();
            assert_eq!(sorted, expected, "sorted values of {name}");
            for (value, v) in values.values_after(None) {
                assert_eq!(Some(v.ids()), values.postings(value), "slot of {name}={value}");
                assert_eq!(v.ids().first(), Some(&v.first()), "first id of {name}={value}");
            }
            let used = values.postings.iter().filter(|p| !p.is_empty()).count();
            assert_eq!(used, values.value_count(), "used slots of {name}");
            assert_eq!(used + values.free.len(), values.postings.len(), "free slots of {name}");
        }
    }
}
