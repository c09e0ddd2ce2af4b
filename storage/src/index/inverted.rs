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

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::RwLock;

use super::postings;
use crate::types::{Label, Labels, SeriesId};

/// The values of one label name.
///
/// Postings are found through a hash map (one probe per label when a series is created, the
/// hot path of startup); the values are also kept in sorted order for `label_values` and for
/// regexes with a literal prefix. The two structures cost about the same memory as one
/// `BTreeMap` would, and creation became several times cheaper than `BTreeMap` lookups.
#[derive(Default)]
pub(super) struct ValueIndex {
    postings: HashMap<Arc<str>, Vec<SeriesId>>,
    sorted: BTreeSet<Arc<str>>,
    /// Number of series that have this label (the sum of the postings lengths).
    series: usize,
}

impl ValueIndex {
    /// Adds `id` to the postings of `value`; returns the interned value.
    fn add(&mut self, value: &str, id: SeriesId) -> Arc<str> {
        if let Some((key, ids)) = self.postings.get_key_value_mut(value) {
            self.series += usize::from(postings::insert(ids, id));
            return key.clone();
        }
        let key: Arc<str> = Arc::from(value);
        self.postings.insert(key.clone(), vec![id]);
        self.sorted.insert(key.clone());
        self.series += 1;
        key
    }

    /// Removes `ids` (sorted) from the postings of `value`, dropping the value when none remain.
    fn remove(&mut self, value: &str, ids: &[SeriesId]) {
        if let Some(list) = self.postings.get_mut(value) {
            self.series -= postings::remove_all(list, ids);
            if list.is_empty() {
                self.postings.remove(value);
                self.sorted.remove(value);
            }
        }
    }

    /// The postings of one value.
    pub(super) fn postings(&self, value: &str) -> Option<&[SeriesId]> {
        self.postings.get(value).map(Vec::as_slice)
    }

    /// All values with their postings, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &[SeriesId])> {
        self.postings.iter().map(|(v, p)| (v.as_ref(), p.as_slice()))
    }

    /// All values in order.
    #[cfg(test)]
    pub(super) fn sorted_values(&self) -> impl Iterator<Item = &str> {
        self.sorted.iter().map(AsRef::as_ref)
    }

    /// The values starting with `prefix` (all values if it is empty), in order, with their
    /// postings.
    pub(super) fn iter_prefix<'a>(&'a self, prefix: &str) -> impl Iterator<Item = (&'a str, &'a [SeriesId])> {
        self.sorted
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |v| v.starts_with(prefix))
            .filter_map(|v| Some((v.as_ref(), self.postings(v)?)))
    }

    /// Up to `n` values after `after` (from the first if None), in order, each with the ids
    /// `pick` appends from its postings to the batch (e.g. a prefix, or those also in a
    /// candidate list; `pick` returns true if it took only a prefix). Lookups copy a batch and
    /// release the lock before doing slow work on it, so series creation never waits long
    /// behind a query. One flat id vector per batch keeps the copy to two allocations.
    pub(super) fn batch_after(
        &self,
        after: Option<&str>,
        n: usize,
        mut pick: impl FnMut(&[SeriesId], &mut Vec<SeriesId>) -> bool,
    ) -> ValueBatch {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut batch = ValueBatch { values: Vec::with_capacity(n), ids: Vec::new() };
        for v in self.sorted.range::<str, _>((from, Bound::Unbounded)).take(n) {
            let Some(ids) = self.postings(v) else { continue };
            let prefix_only = pick(ids, &mut batch.ids);
            batch.values.push(BatchValue { value: v.clone(), end: batch.ids.len(), prefix_only });
        }
        batch
    }

    /// Number of distinct values.
    pub(super) fn value_count(&self) -> usize {
        self.postings.len()
    }

    /// Number of series that have this label.
    pub(super) fn series_count(&self) -> usize {
        self.series
    }

    fn memory_bytes(&self) -> usize {
        // A BTreeSet leaf holds up to 11 keys; nodes are about 2/3 full on average.
        let sorted = self.sorted.len() * size_of::<Arc<str>>() * 3 / 2;
        let values: usize = self
            .postings
            .iter()
            .map(|(v, p)| 2 * size_of::<usize>() + v.len() + p.capacity() * size_of::<SeriesId>())
            .sum();
        self.postings.allocation_size() + sorted + values
    }
}

/// Values of a label with ids picked from their postings, copied out of the index.
pub(super) struct ValueBatch {
    /// The values in order.
    pub(super) values: Vec<BatchValue>,
    /// The picked ids of all values, back to back (value `i` ends at `values[i].end`).
    pub(super) ids: Vec<SeriesId>,
}

/// One value of a [`ValueBatch`].
pub(super) struct BatchValue {
    /// The interned value.
    pub(super) value: Arc<str>,
    /// End of its ids in [`ValueBatch::ids`] (the start is the previous value's end).
    pub(super) end: usize,
    /// True if its ids are a proper prefix of its postings (the rest was not copied).
    pub(super) prefix_only: bool,
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
    pub(super) fn insert_series(&self, id: SeriesId, labels: &Labels) -> Labels {
        let interned =
            self.insert_known_names(id, labels).unwrap_or_else(|| self.insert_new_names(id, labels));
        postings::insert(&mut self.all.write(), id);
        Labels::from_sorted(interned)
    }

    /// The common case: every name exists already, so the name map is only read. Returns None,
    /// having changed nothing, if a name is new.
    fn insert_known_names(&self, id: SeriesId, labels: &Labels) -> Option<Vec<Label>> {
        let names = self.names.read();
        let found: Vec<_> =
            labels.iter().map(|l| names.get_key_value(l.name.as_ref())).collect::<Option<_>>()?;
        Some(
            found
                .into_iter()
                .zip(labels)
                .map(|((name, values), l)| Label {
                    name: name.clone(),
                    value: values.write().add(&l.value, id),
                })
                .collect(),
        )
    }

    fn insert_new_names(&self, id: SeriesId, labels: &Labels) -> Vec<Label> {
        let mut names = self.names.write();
        labels
            .iter()
            .map(|l| {
                let (name, values) = names
                    .raw_entry_mut()
                    .from_key(l.name.as_ref())
                    .or_insert_with(|| (Arc::from(l.name.as_ref()), RwLock::default()));
                Label { name: name.clone(), value: values.get_mut().add(&l.value, id) }
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

    /// Number of distinct label names.
    pub(super) fn name_count(&self) -> usize {
        self.names.read().len()
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
        }
    }
}
