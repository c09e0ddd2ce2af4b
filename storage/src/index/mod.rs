//! The series index: label set -> dense runtime [`SeriesId`], id -> label set, and an inverted
//! index answering Prometheus label matchers.
//!
//! Parts, each behind its own locks so that no lock is held across a whole query or batch:
//!
//! * [`series_map`]: label set -> id, 64 shards selected by the label set's hash. The hit path
//!   of [`Index::get_or_create`] (an append to a known series) is one hash and one shared lock;
//!   ingest does the same from a decoded request's borrowed bytes (`Index::get_raw_hashed`,
//!   then `Index::get_or_create_hashed` for a missing series) and WAL replay from a record's
//!   ([`IndexLoader`]), so a known series costs no allocation.
//! * [`series_store`]: id -> label set, a chunked vector indexed by id.
//! * [`inverted`]: name -> value -> sorted postings, plus the postings of all live series; also
//!   the string interner (equal names and values across series share one `Arc<str>`).
//! * [`select`]: turns matchers into postings operations ([`postings`]).
//! * [`order`]: the label order of the series, so that sorting a selection by labels mostly
//!   sorts integers.
//!
//! Creating a series runs under the write lock of its series-map shard, so racing creators of
//! one label set agree on one id. The id is published in the store, then added to the postings,
//! then entered in the series map: once `get_or_create` returns an id, `select` and `labels`
//! see it, and `select` never returns an id whose labels are unknown (unless `remove`d since).
//! From borrowed strings, the label set published first is built from the interned strings
//! (one lookup per label, [`inverted`]'s `intern`) and the postings insertion looks them up
//! again. WAL replay, which fills the index before anyone reads it, goes through an
//! [`IndexLoader`] instead: it skips the publication, one lookup per label.
//! Lock order: series-map shard, then name map, then one name's value map; the store and the
//! all-series postings are taken alone. Queries never take a series-map lock.
//!
//! Memory is dominated by the label sets themselves (`Labels` is an `Arc<[Label]>` of 32-byte
//! pairs of interned strings): 368 bytes (a 384-byte allocation) for an 11-label series, out of
//! about 520 bytes per series measured on 1 million TSBS-like series; the rest is the series
//! map, the id slot and the postings. `memory_bytes` estimates the total
//! (`cargo run --release -p storage --example index_bench`).

mod inverted;
mod lookup;
mod metric_count;
mod order;
mod postings;
mod select;
mod series_map;
mod series_store;
mod stats;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod ref_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::labels_ref::{LabelPair, LabelsRef, RawLabels};
use crate::matcher::Matcher;
use crate::types::{Label, Labels, SeriesId};
use inverted::InvertedIndex;
use order::LabelOrder;
use series_map::SeriesMap;
use series_store::SeriesStore;
pub use stats::{IndexStats, Stat};

/// The in-memory series index, shared by all appenders and queries (`Send + Sync`; wrap it in
/// an `Arc`). Ids are dense from 0, increase, and are never reused within the process, so a
/// stale id can never alias another series; they are not persisted, so every start rebuilds
/// them.
pub struct Index {
    series: SeriesMap,
    store: SeriesStore,
    postings: InvertedIndex,
    order: LabelOrder,
    next_id: AtomicU32,
    live: AtomicUsize,
    /// Heap bytes of the live label sets (their slices; the strings are interned).
    label_bytes: AtomicUsize,
}

/// Heap bytes of one stored label set: the `Arc` header plus the pairs.
fn label_set_bytes(labels: &Labels) -> usize {
    2 * size_of::<usize>() + labels.len() * size_of::<Label>()
}

/// True if both label sets hold the very same string allocations.
fn same_strings(a: &Labels, b: &Labels) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(&x.name, &y.name) && Arc::ptr_eq(&x.value, &y.value))
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Index {
            series: SeriesMap::new(),
            store: SeriesStore::new(),
            postings: InvertedIndex::new(),
            order: LabelOrder::default(),
            next_id: AtomicU32::new(0),
            live: AtomicUsize::new(0),
            label_bytes: AtomicUsize::new(0),
        }
    }

    /// The id of this label set, creating the series if it is new (the bool is true if it was
    /// created). New series are stored with interned strings, so equal names and values across
    /// series share one allocation; [`Index::labels`] returns that interned copy.
    ///
    /// # Panics
    ///
    /// If 2^32 - 1 series have been created in this process (ids would have to be reused, which
    /// would mix series). Memory runs out long before that.
    pub fn get_or_create(&self, labels: &Labels) -> (SeriesId, bool) {
        let hash = self.series.hash(labels);
        self.series.get_or_insert_with(
            hash,
            |stored| stored == labels,
            || {
                let pairs: Vec<LabelPair<'_>> = labels.iter().map(|l| (&*l.name, &*l.value)).collect();
                self.create(Some(labels.clone()), LabelsRef::new_unchecked(&pairs))
            },
        )
    }

    /// [`Index::get_or_create`] for a borrowed label set. A known series is found by hashing and
    /// comparing the borrowed strings, with no allocation; only a new series gets an owned label
    /// set, built from the interned strings where they exist. Ingest takes the same path in two
    /// steps (`Index::get_raw_hashed`, then `Index::get_or_create_hashed` with its hash).
    ///
    /// # Panics
    ///
    /// As [`Index::get_or_create`].
    #[cfg(any(test, feature = "testing"))]
    pub fn get_or_create_ref(&self, labels: LabelsRef<'_>) -> (SeriesId, bool) {
        self.get_or_create_hashed(self.series.hash_ref(labels), labels)
    }

    /// [`Index::get_or_create_ref`] with the hash of `labels` as [`Index::get_raw_hashed`] gave
    /// it for the same bytes (the hash reads bytes only), so a series found missing by its
    /// unchecked bytes is created without hashing it again.
    pub(crate) fn get_or_create_hashed(&self, hash: u64, labels: LabelsRef<'_>) -> (SeriesId, bool) {
        self.series.get_or_insert_with(
            hash,
            |stored| labels == *stored,
            || self.create(Some(self.postings.intern(labels)), labels),
        )
    }

    /// A handle for filling the index before anyone reads it (WAL replay at open). Holding
    /// `&mut self` proves no reader exists, so a new series skips the publication that keeps
    /// concurrent readers consistent (see [`Index::create`]): one lookup per label instead of
    /// two. The handle is `Sync`, for replaying on several threads.
    pub fn loader(&mut self) -> IndexLoader<'_> {
        IndexLoader { index: self }
    }

    /// Creates a series (under its series-map shard's write lock). If `publish` is given, it is
    /// published first, so that a concurrent `select` never finds the id in the postings
    /// without labels, and replaced by the interned copy unless it is made of the interned
    /// strings already.
    fn create(&self, publish: Option<Labels>, labels: LabelsRef<'_>) -> (Labels, SeriesId) {
        let id = self.allocate_id();
        if let Some(published) = &publish {
            self.store.set(id, published.clone());
        }
        let interned = self.postings.insert_series(id, labels);
        let stored = match publish {
            Some(published) if same_strings(&published, &interned) => published,
            _ => {
                self.store.set(id, interned.clone());
                interned
            }
        };
        self.live.fetch_add(1, Ordering::Relaxed);
        self.label_bytes.fetch_add(label_set_bytes(&stored), Ordering::Relaxed);
        (stored, id)
    }

    fn allocate_id(&self) -> SeriesId {
        match self.next_id.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1)) {
            Ok(id) => id,
            Err(_) => panic!("series id space exhausted: {} series created in this process", u32::MAX),
        }
    }

    /// The id of this label set, if the series exists.
    #[cfg(any(test, feature = "testing"))]
    pub fn get(&self, labels: &Labels) -> Option<SeriesId> {
        self.series.get(self.series.hash(labels), |stored| stored == labels)
    }

    /// The id of this borrowed label set, if the series exists.
    #[cfg(any(test, feature = "testing"))]
    pub fn get_ref(&self, labels: LabelsRef<'_>) -> Option<SeriesId> {
        self.series.get(self.series.hash_ref(labels), |stored| labels == *stored)
    }

    /// The id of a label set of unchecked bytes, if the series exists: found by hashing and
    /// comparing bytes, so bytes that are not UTF-8 never match (every stored string is). Also
    /// gives the hash of `labels`, for [`Index::get_hashed`] and [`Index::get_or_create_hashed`]
    /// after a miss.
    pub(crate) fn get_raw_hashed(&self, labels: RawLabels<'_>) -> (Option<SeriesId>, u64) {
        let hash = self.series.hash_raw(labels);
        (self.series.get(hash, |stored| labels == *stored), hash)
    }

    /// [`Index::get_ref`] with the hash [`Index::get_raw_hashed`] gave for the same bytes.
    pub(crate) fn get_hashed(&self, hash: u64, labels: LabelsRef<'_>) -> Option<SeriesId> {
        self.series.get(hash, |stored| labels == *stored)
    }

    /// The labels of a live series (None if the id was never created or has been removed).
    pub fn labels(&self, id: SeriesId) -> Option<Labels> {
        self.store.get(id)
    }

    /// Sorted ascending ids of live series matching all `matchers`, with Prometheus semantics:
    /// a matcher that matches `""` also selects series without that label. No matchers select
    /// every live series. See [`select`] for how matchers become postings operations.
    pub fn select(&self, matchers: &[Matcher]) -> Vec<SeriesId> {
        select::select(self, matchers)
    }

    /// The live series of `ids` with their labels, sorted by labels (see [`order`]: mostly
    /// without comparing label sets).
    pub fn sorted_by_labels(&self, ids: &[SeriesId]) -> Vec<(SeriesId, Labels)> {
        self.order.sort(&self.store, ids)
    }

    /// Sorted unique label names over `ids` (all live series if None), whatever the times of
    /// their data: [`Index::label_names_where`] keeping every series.
    #[cfg(any(test, feature = "testing"))]
    pub fn label_names(&self, ids: Option<&[SeriesId]>) -> Vec<String> {
        self.label_names_where(ids, |_, _| Ok(true)).unwrap_or_default()
    }

    /// Sorted unique values of label `name` over `ids` (all live series if None), whatever the
    /// times of their data: [`Index::label_values_where`] keeping every series.
    #[cfg(any(test, feature = "testing"))]
    pub fn label_values(&self, name: &str, ids: Option<&[SeriesId]>) -> Vec<String> {
        self.label_values_where(name, ids, |_, _| Ok(true)).unwrap_or_default()
    }

    /// Removes series (e.g. after retention dropped all their data). Their ids are not reused;
    /// creating the same label set again gives a new id. Unknown or already removed ids are
    /// ignored. The caller makes sure no appender still uses the ids: one that called
    /// `get_or_create` just before may still hold the old id.
    pub fn remove(&self, ids: &[SeriesId]) {
        let mut removed = Vec::new();
        for &id in ids {
            let Some(labels) = self.store.get(id) else { continue };
            // Whoever takes the series-map entry owns the removal, so racing removers of one
            // id (or a duplicate in `ids`) remove it once.
            if self.series.remove(self.series.hash(&labels), id) {
                removed.push((id, labels));
            }
        }
        if removed.is_empty() {
            return;
        }
        self.postings.remove_series(&removed);
        let mut gone: Vec<SeriesId> = removed.iter().map(|r| r.0).collect();
        gone.sort_unstable();
        self.store.clear(&gone);
        self.live.fetch_sub(removed.len(), Ordering::Relaxed);
        let bytes: usize = removed.iter().map(|(_, l)| label_set_bytes(l)).sum();
        self.label_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Number of live series.
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// True if there are no live series.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes of the whole index, for the memory-per-series benchmark and the
    /// `/metrics` endpoint. Walks the postings (milliseconds for millions of series).
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + self.series.memory_bytes()
            + self.store.memory_bytes()
            + self.postings.memory_bytes()
            + self.order.memory_bytes()
            + self.label_bytes.load(Ordering::Relaxed)
    }

    /// Asserts every internal invariant (sorted postings, postings agree with labels, counts).
    #[cfg(test)]
    fn check(&self) {
        self.postings.check(|id| self.labels(id));
        assert_eq!(self.series.len(), self.len(), "series map size vs live count");
        assert_eq!(self.postings.all().len(), self.len(), "all-series postings vs live count");
        for id in self.postings.all() {
            let labels = self.labels(id).expect("live series without labels");
            assert_eq!(self.get(&labels), Some(id), "series map disagrees with store for {labels}");
        }
    }
}

/// Fills an [`Index`] nobody reads yet ([`Index::loader`]).
pub struct IndexLoader<'i> {
    index: &'i Index,
}

impl IndexLoader<'_> {
    /// [`Index::get_or_create_ref`] without publishing a new series' labels before its
    /// postings: no reader can see the difference.
    ///
    /// # Panics
    ///
    /// As [`Index::get_or_create`].
    pub fn get_or_create_ref(&self, labels: LabelsRef<'_>) -> (SeriesId, bool) {
        let index = self.index;
        let hash = index.series.hash_ref(labels);
        index.series.get_or_insert_with(hash, |stored| labels == *stored, || index.create(None, labels))
    }
}

impl Default for Index {
    fn default() -> Self {
        Index::new()
    }
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index").field("series", &self.len()).finish_non_exhaustive()
    }
}
