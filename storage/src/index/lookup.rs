//! Label names and values of the series that pass a filter, without materialising label sets
//! of series that cannot change the answer.
//!
//! The filter is usually "has data in the queried time range", which costs a lookup in the heads
//! or a partition file per series, so each walk tests as few series as it can. With a million
//! series the walks are bound by cache misses, not instructions, so they are also laid out to
//! touch as little memory per value as possible. There are two walks:
//!
//! * the **values walk** goes through the label's values in order, and a value is in the answer
//!   as soon as one of its series passes. Without a candidate list, the first series of each
//!   value is kept in the index entry, so for live data a value costs its entry, a copy of its
//!   string and one test. With a candidate list (the series a `match[]` selected), each value's
//!   postings are checked against the candidates (a bitmap when they are dense, else galloping
//!   search) and only candidates are tested. The answer comes out sorted;
//! * the **labels walk** reads the candidates' own labels and tests a series only if it would
//!   add a value (or name) not found yet. It is cheaper when the candidates are few compared
//!   with the label's values, and needs a sort at the end.
//!
//! Label values with candidates take whichever walk is estimated cheaper
//! ([`values_walk_is_cheaper`]).
//! Label names with candidates start with the labels walk, since the first candidates usually
//! carry every name there is, and switch to values walks of the names still missing once those
//! cost less than reading the remaining candidates (a name no candidate has would otherwise
//! make the labels walk read them all).
//!
//! The values walk copies many values before testing their first series, and tests them in
//! increasing id order ([`id_order`]): the filter's per-series lookups (newest timestamps, a
//! partition file's series list) then sweep forward instead of jumping around.
//!
//! Index locks are never held while the filter runs: values and postings are copied out in
//! batches under the lock (a name's value map, or the series store), then tested. The filter may
//! therefore call back into the index.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::Arc;

use hashbrown::{HashMap, HashSet};

use super::Index;
use super::inverted::NameSize;
use super::postings;
use crate::error::Result;
use crate::types::{Labels, SeriesId};

// The batch sizes are tiny in unit tests, so that the model test (a few series) crosses every
// batch boundary.

/// Values visited per acquisition of a value map's lock.
const VALUE_BATCH: usize = if cfg!(test) { 2 } else { 512 };

/// Values copied before their first series are tested, when all values are wanted. Testing
/// many at once lets the tests run in id order (see [`id_order`]); the bound keeps the copy
/// small next to what the answer itself takes.
const VALUE_CHUNK: usize = if cfg!(test) { 3 } else { 1 << 18 };

/// Ids copied per lock acquisition when a value's first series failed the filter.
const REST_PICK: usize = if cfg!(test) { 2 } else { 1024 };

/// Series whose labels are copied out of the store per lock acquisition.
const LABELS_BATCH: usize = if cfg!(test) { 3 } else { 256 };

/// Cost estimates, in units of about one cache miss: visiting a value with candidates (its
/// entry, its postings slot, its ids), and reading a candidate's labels (the store slot, the
/// label pairs, the value's string).
const VALUE_STEPS: usize = 3;
const LABEL_READ_STEPS: usize = 3;

/// Postings ids checked against the candidates per unit of cost: they are read in order.
const IDS_PER_STEP: usize = 64;

/// A candidates bitmap is built when it has at most this many 64-bit words per candidate (at
/// least one candidate per 1024 ids); sparser candidates are searched instead.
const BITMAP_WORDS_PER_CANDIDATE: usize = 16;

/// A postings list at most this many times longer than the candidates is scanned against the
/// bitmap; a longer one has the candidates galloped through it.
const SCAN_RATIO: usize = 16;

/// How a lookup with candidates decides which series to test. Lookups pick by estimated cost;
/// tests force each way to check that they agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code, reason = "only tests force a walk"))]
pub(super) enum Plan {
    /// The cheaper way by the cost estimates.
    Cost,
    /// The values walk (for names: a values walk of every name not found yet, at once).
    Values,
    /// The labels walk, to the end.
    Labels,
}

/// Whether the values walk of a label with `values` values over `series` series is expected
/// to cost less than the labels walk of `candidates` candidates.
fn values_walk_is_cheaper(values: usize, series: usize, candidates: usize) -> bool {
    let scan = series.min(values.saturating_mul(candidates)) / IDS_PER_STEP;
    let walk = values.saturating_mul(VALUE_STEPS).saturating_add(scan);
    // The labels walk also sorts what it found, with cache misses on the strings.
    let found = candidates.min(values);
    let sort = found.saturating_mul(found.max(1).ilog2() as usize) / 4;
    walk <= candidates.saturating_mul(LABEL_READ_STEPS).saturating_add(sort)
}

/// The series a `match[]` selected, as the values walk tests postings against them: a bitmap
/// of ids when they are dense enough (one bit test per postings entry), and the sorted list.
struct Candidates<'a> {
    ids: &'a [SeriesId],
    bits: Option<Vec<u64>>,
}

impl<'a> Candidates<'a> {
    /// `ids` must be sorted and unique.
    fn new(ids: &'a [SeriesId]) -> Self {
        let words = ids.last().map_or(0, |&max| max as usize / 64 + 1);
        let bits = (words <= ids.len().saturating_mul(BITMAP_WORDS_PER_CANDIDATE)).then(|| {
            let mut bits = vec![0u64; words];
            for &id in ids {
                if let Some(w) = bits.get_mut(id as usize / 64) {
                    *w |= 1 << (id % 64);
                }
            }
            bits
        });
        Candidates { ids, bits }
    }

    /// Whether `id` is a candidate.
    fn contains(&self, id: SeriesId) -> bool {
        match &self.bits {
            Some(bits) => has_bit(bits, id),
            None => self.ids.binary_search(&id).is_ok(),
        }
    }

    /// Appends to `out` the first `limit` ids of `postings` above `after` that are candidates;
    /// true if there are more than `limit`.
    fn pick(
        &self,
        postings: &[SeriesId],
        after: Option<SeriesId>,
        limit: usize,
        out: &mut Vec<SeriesId>,
    ) -> bool {
        let postings = above(postings, after);
        match &self.bits {
            Some(bits) if postings.len() <= self.ids.len().saturating_mul(SCAN_RATIO) => {
                let mut found = 0;
                for &id in postings {
                    if has_bit(bits, id) {
                        if found == limit {
                            return true;
                        }
                        out.push(id);
                        found += 1;
                    }
                }
                false
            }
            _ => {
                let candidates = above(self.ids, after);
                if postings.len() <= candidates.len() {
                    postings::intersect_first(postings, candidates, limit, out)
                } else {
                    postings::intersect_first(candidates, postings, limit, out)
                }
            }
        }
    }
}

/// The ids of `list` (sorted) above `after` (all if None).
fn above(list: &[SeriesId], after: Option<SeriesId>) -> &[SeriesId] {
    let from = after.map_or(0, |a| list.partition_point(|&id| id <= a));
    list.get(from..).unwrap_or_default()
}

/// Whether bit `id` is set in the bitmap.
fn has_bit(bits: &[u64], id: SeriesId) -> bool {
    bits.get(id as usize / 64).is_some_and(|w| w >> (id % 64) & 1 == 1)
}

/// Values of one label copied out of the index, each with the first series to test, so the
/// filter runs without the lock. Strings are copied rather than shared: taking a reference to
/// each interned value would be an atomic operation per value, which stalls the walk's
/// overlapping reads.
#[derive(Default)]
struct ValueBatch {
    /// The values back to back.
    text: String,
    values: Vec<BatchValue>,
    /// The first series to test of each value.
    ids: Vec<SeriesId>,
    /// The last value visited, where the next batch starts (None if the walk is done).
    resume: Option<String>,
}

/// One value of a [`ValueBatch`].
struct BatchValue {
    /// End of its string in [`ValueBatch::text`] (the start is the previous value's end).
    text_end: usize,
    /// True if series after the first may qualify.
    more: bool,
}

impl ValueBatch {
    /// Each value with its first series and whether more may follow.
    fn iter(&self) -> impl Iterator<Item = (&str, SeriesId, bool)> {
        let mut start = 0;
        self.values.iter().zip(&self.ids).map(move |(v, &id)| {
            let text = self.text.get(start..v.text_end).unwrap_or_default();
            start = v.text_end;
            (text, id, v.more)
        })
    }
}

/// The positions of `ids` in increasing order of id, near enough: a counting sort on the high
/// bits, with about one id per bucket, so O(n). Testing series in id order turns the filter's
/// lookups in id-indexed tables (newest timestamps, a partition file's series list) from random
/// probes into one forward sweep that the caches and the prefetcher serve.
fn id_order(ids: &[SeriesId]) -> Vec<u32> {
    let max = u64::from(ids.iter().copied().max().unwrap_or(0));
    let mut shift = 0;
    while max >> shift >= ids.len().max(1) as u64 {
        shift += 1;
    }
    let bucket = |id: SeriesId| (u64::from(id) >> shift) as usize;
    let mut starts = vec![0u32; (max >> shift) as usize + 2];
    for &id in ids {
        if let Some(n) = starts.get_mut(bucket(id) + 1) {
            *n += 1;
        }
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut order = vec![0u32; ids.len()];
    // Positions fit in u32: a batch holds at most VALUE_CHUNK values.
    for (i, &id) in ids.iter().enumerate() {
        if let Some(next) = starts.get_mut(bucket(id))
            && let Some(slot) = order.get_mut(*next as usize)
        {
            *slot = i as u32;
            *next += 1;
        }
    }
    order
}

/// The filter a lookup tests series with: `keep(id, labels)` gets the labels when they are at
/// hand.
pub(super) trait Keep: FnMut(SeriesId, Option<&Labels>) -> Result<bool> {}
impl<F: FnMut(SeriesId, Option<&Labels>) -> Result<bool>> Keep for F {}

impl Index {
    /// Sorted unique label names over the series in `candidates` (all live series if None)
    /// for which `keep(id, labels)` holds. `keep` gets the labels when they are at hand.
    pub fn label_names_where(
        &self,
        candidates: Option<&[SeriesId]>,
        keep: impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        self.label_names_planned(candidates, Plan::Cost, keep)
    }

    /// Sorted unique values of label `name` over the series in `candidates` (all live series if
    /// None) for which `keep(id, labels)` holds.
    pub fn label_values_where(
        &self,
        name: &str,
        candidates: Option<&[SeriesId]>,
        keep: impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        self.label_values_planned(name, candidates, Plan::Cost, keep)
    }

    /// [`Index::label_names_where`] with candidates handled as `plan` says.
    pub(super) fn label_names_planned(
        &self,
        candidates: Option<&[SeriesId]>,
        plan: Plan,
        mut keep: impl Keep,
    ) -> Result<Vec<String>> {
        let mut sizes = self.postings.name_sizes();
        sizes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let found = match candidates {
            None => {
                let mut found = Vec::with_capacity(sizes.len());
                for s in &sizes {
                    found.push(self.any_value_kept(&s.name, None, &mut keep)?);
                }
                found
            }
            Some(ids) => self.names_of_candidates(&sizes, ids, plan, &mut keep)?,
        };
        Ok(sizes.iter().zip(found).filter(|(_, f)| *f).map(|(s, _)| s.name.to_string()).collect())
    }

    /// [`Index::label_values_where`] with candidates handled as `plan` says.
    pub(super) fn label_values_planned(
        &self,
        name: &str,
        candidates: Option<&[SeriesId]>,
        plan: Plan,
        mut keep: impl Keep,
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let Some(ids) = candidates else {
            out.reserve(self.postings.with_values(name, |v| v.map_or(0, |v| v.value_count())));
            self.walk_values(name, None, &mut keep, VALUE_CHUNK, |v| {
                out.push(v.to_string());
                ControlFlow::Continue(())
            })?;
            return Ok(out);
        };
        let ids = sorted_unique(ids);
        let size = self.postings.with_values(name, |v| v.map(|v| (v.value_count(), v.series_count())));
        let Some((values, series)) = size else { return Ok(out) };
        let by_values = match plan {
            Plan::Cost => values_walk_is_cheaper(values, series, ids.len()),
            Plan::Values => true,
            Plan::Labels => false,
        };
        if !by_values {
            return self.values_of_candidates(name, &ids, &mut keep);
        }
        self.walk_values(name, Some(&Candidates::new(&ids)), &mut keep, VALUE_CHUNK, |v| {
            out.push(v.to_string());
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Which of the names in `sizes` (sorted) some candidate among `ids` (in any order) that
    /// passes `keep` has; see the module docs.
    fn names_of_candidates(
        &self,
        sizes: &[NameSize],
        ids: &[SeriesId],
        plan: Plan,
        keep: &mut impl Keep,
    ) -> Result<Vec<bool>> {
        let mut found = vec![false; sizes.len()];
        let mut missing = sizes.len();
        // Label sets hold the interned names, so a name is found by its address without
        // hashing the string; by its text otherwise (a series created concurrently).
        let address = |name: &Arc<str>| Arc::as_ptr(name).cast::<u8>() as usize;
        let by_address: HashMap<usize, usize> =
            sizes.iter().enumerate().map(|(i, s)| (address(&s.name), i)).collect();
        let position = |name: &Arc<str>| {
            by_address
                .get(&address(name))
                .copied()
                .or_else(|| sizes.binary_search_by(|s| s.name.as_ref().cmp(name.as_ref())).ok())
        };
        let mut remaining = ids.len();
        for batch in ids.chunks(LABELS_BATCH) {
            if missing == 0 {
                break;
            }
            let switch = match plan {
                Plan::Cost => self.names_cheaper_by_values(sizes, &found, remaining),
                Plan::Values => true,
                Plan::Labels => false,
            };
            if switch {
                let ids = sorted_unique(ids);
                let candidates = Candidates::new(&ids);
                for (s, f) in sizes.iter().zip(found.iter_mut()) {
                    if !*f {
                        *f = self.any_value_kept(&s.name, Some(&candidates), keep)?;
                    }
                }
                return Ok(found);
            }
            for (id, labels) in self.labels_of(batch) {
                if missing == 0 {
                    break;
                }
                let adds =
                    labels.iter().any(|l| position(&l.name).is_some_and(|i| found.get(i) == Some(&false)));
                if adds && keep(id, Some(&labels))? {
                    for l in labels.iter() {
                        if let Some(f) = position(&l.name).and_then(|i| found.get_mut(i))
                            && !*f
                        {
                            *f = true;
                            missing -= 1;
                        }
                    }
                }
            }
            remaining -= batch.len();
        }
        Ok(found)
    }

    /// Whether values walks of the names not `found` yet are expected to cost less than reading
    /// the labels of the `remaining` candidates.
    fn names_cheaper_by_values(&self, sizes: &[NameSize], found: &[bool], remaining: usize) -> bool {
        let walks: usize = sizes
            .iter()
            .zip(found)
            .filter(|(_, f)| !**f)
            .map(|(s, _)| s.values.saturating_mul(VALUE_STEPS).saturating_add(s.series / IDS_PER_STEP))
            .fold(0, usize::saturating_add);
        walks < remaining.saturating_mul(LABEL_READ_STEPS)
    }

    /// The labels walk for label values: the values of `name` among the candidates `ids`
    /// (sorted) whose series pass `keep`, testing only series that would add a value.
    fn values_of_candidates(
        &self,
        name: &str,
        ids: &[SeriesId],
        keep: &mut impl Keep,
    ) -> Result<Vec<String>> {
        let mut found: HashSet<Arc<str>> = HashSet::new();
        for batch in ids.chunks(LABELS_BATCH) {
            for (id, labels) in self.labels_of(batch) {
                let value = labels.iter().find(|l| l.name.as_ref() == name).map(|l| &l.value);
                let Some(value) = value.filter(|v| !found.contains(v.as_ref())) else { continue };
                if keep(id, Some(&labels))? {
                    found.insert(value.clone());
                }
            }
        }
        let mut values: Vec<String> = found.iter().map(|v| v.to_string()).collect();
        values.sort_unstable();
        Ok(values)
    }

    /// True if some series with label `name` (among `candidates` if given) passes `keep`.
    fn any_value_kept(
        &self,
        name: &str,
        candidates: Option<&Candidates>,
        keep: &mut impl Keep,
    ) -> Result<bool> {
        let mut any = false;
        // Usually the first value's first series passes: test it alone first.
        self.walk_values(name, candidates, keep, 1, |_| {
            any = true;
            ControlFlow::Break(())
        })?;
        Ok(any)
    }

    /// The values walk: calls `found` with each value of `name`, in order, for which a series
    /// (among `candidates` if given) passes `keep`, until `found` breaks. Values are copied
    /// and tested in chunks, the first of `chunk` values, each next one 16 times larger (up to
    /// [`VALUE_CHUNK`]), so a walk that stops early tests few series.
    fn walk_values(
        &self,
        name: &str,
        candidates: Option<&Candidates>,
        keep: &mut impl Keep,
        mut chunk: usize,
        mut found: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut after: Option<String> = None;
        loop {
            let batch = self.value_batch(name, after.as_deref(), candidates, chunk);
            let mut passed = vec![false; batch.ids.len()];
            for i in id_order(&batch.ids) {
                if let (Some(p), Some(&id)) = (passed.get_mut(i as usize), batch.ids.get(i as usize)) {
                    *p = keep(id, None)?;
                }
            }
            for ((value, id, more), passed) in batch.iter().zip(passed) {
                let kept = passed || (more && self.later_kept(name, value, id, candidates, keep)?);
                if kept && found(value).is_break() {
                    return Ok(());
                }
            }
            match batch.resume {
                Some(last) => after = Some(last),
                None => return Ok(()),
            }
            chunk = chunk.saturating_mul(16).min(VALUE_CHUNK);
        }
    }

    /// Up to `limit` values of `name` after `after`, each with the first series to test: its
    /// first id without candidates, its first candidate otherwise (values without candidates
    /// are left out). Takes the value map's lock once per [`VALUE_BATCH`] values.
    fn value_batch(
        &self,
        name: &str,
        after: Option<&str>,
        candidates: Option<&Candidates>,
        limit: usize,
    ) -> ValueBatch {
        let mut batch = ValueBatch::default();
        let mut visited = 0;
        let mut resume = after.map(str::to_string);
        loop {
            let n = VALUE_BATCH.min(limit - visited);
            let last = self.postings.with_values(name, |values| {
                let values = values?;
                let mut last = None;
                for (value, v) in values.values_after(resume.as_deref()).take(n) {
                    last = Some(value);
                    let more = match candidates {
                        None => {
                            batch.ids.push(v.first());
                            true
                        }
                        // The first id is at hand: if it is a candidate, the postings need
                        // not be read.
                        Some(c) if c.contains(v.first()) => {
                            batch.ids.push(v.first());
                            true
                        }
                        Some(c) => {
                            let start = batch.ids.len();
                            let more = c.pick(v.ids(), None, 1, &mut batch.ids);
                            if batch.ids.len() == start {
                                continue;
                            }
                            more
                        }
                    };
                    batch.text.push_str(value);
                    batch.values.push(BatchValue { text_end: batch.text.len(), more });
                }
                last.map(str::to_string)
            });
            let Some(last) = last else { return batch };
            visited += n;
            if visited >= limit {
                batch.resume = Some(last);
                return batch;
            }
            resume = Some(last);
        }
    }

    /// Whether a series of `value` after its first one `first` (among `candidates` if given)
    /// passes, testing the rest in order in batches.
    fn later_kept(
        &self,
        name: &str,
        value: &str,
        first: SeriesId,
        candidates: Option<&Candidates>,
        keep: &mut impl Keep,
    ) -> Result<bool> {
        let mut after = first;
        let mut rest = Vec::new();
        loop {
            rest.clear();
            // The postings may have changed since the first id was copied: continue after the
            // last id tested.
            let more = self.postings.with_values(name, |values| {
                let Some(ids) = values.and_then(|v| v.postings(value)) else { return false };
                match candidates {
                    Some(c) => c.pick(ids, Some(after), REST_PICK, &mut rest),
                    None => {
                        let rest_ids = above(ids, Some(after));
                        let (now, later) = rest_ids.split_at(rest_ids.len().min(REST_PICK));
                        rest.extend_from_slice(now);
                        !later.is_empty()
                    }
                }
            });
            for &id in &rest {
                if keep(id, None)? {
                    return Ok(true);
                }
            }
            match rest.last() {
                Some(&last) if more => after = last,
                _ => return Ok(false),
            }
        }
    }

    /// The labels of the live series among `ids`, copied under one lock acquisition.
    fn labels_of(&self, ids: &[SeriesId]) -> Vec<(SeriesId, Labels)> {
        let mut out = Vec::with_capacity(ids.len());
        self.store.for_each(ids, |id, labels| {
            out.push((id, labels.clone()));
            ControlFlow::Continue(())
        });
        out
    }
}

/// `ids` sorted and without duplicates, copied only if they are not already.
fn sorted_unique(ids: &[SeriesId]) -> Cow<'_, [SeriesId]> {
    if ids.windows(2).all(|w| w[0] < w[1]) {
        Cow::Borrowed(ids)
    } else {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Cow::Owned(sorted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_pick_the_same_ids_by_bitmap_and_by_search() {
        let dense: Vec<SeriesId> = (0..2000).filter(|i| i % 3 == 0).collect();
        let sparse: Vec<SeriesId> = vec![5, 900, 1_000_000, 3_000_000];
        let postings: Vec<SeriesId> = (0..3000).filter(|i| i % 2 == 0).chain([3_000_000]).collect();
        for ids in [&dense, &sparse] {
            let c = Candidates::new(ids);
            assert_eq!(c.bits.is_some(), ids.len() > 4, "bitmap only for dense candidates");
            let expected: Vec<SeriesId> = postings.iter().copied().filter(|id| ids.contains(id)).collect();
            for after in [None, Some(0), Some(6), Some(2999)] {
                let expected: Vec<SeriesId> =
                    expected.iter().copied().filter(|&id| after.is_none_or(|a| id > a)).collect();
                for limit in [0, 1, 5, 10_000] {
                    let mut out = Vec::new();
                    let more = c.pick(&postings, after, limit, &mut out);
                    assert_eq!(out, expected[..limit.min(expected.len())], "{after:?} {limit}");
                    assert_eq!(more, expected.len() > limit, "{after:?} {limit}");
                    // A short list is scanned, a long one galloped: the same answer.
                    let mut short = Vec::new();
                    c.pick(&postings[..10], after, limit, &mut short);
                    let want: Vec<SeriesId> = postings[..10]
                        .iter()
                        .copied()
                        .filter(|&id| ids.contains(&id) && after.is_none_or(|a| id > a))
                        .take(limit)
                        .collect();
                    assert_eq!(short, want);
                }
            }
        }
    }

    #[test]
    fn id_order_is_a_permutation_sorted_by_bucket() {
        let permutation = |ids: &[SeriesId]| {
            let mut order = id_order(ids);
            order.sort_unstable();
            order == (0..ids.len() as u32).collect::<Vec<_>>()
        };
        // At least one id per possible value: an exact sort.
        let dense = [5, 3, 9, 0, 7, 1, 2, 8, 6, 4];
        let sorted: Vec<SeriesId> = id_order(&dense).iter().map(|&i| dense[i as usize]).collect();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        // Sparse ids land in buckets of 2^k ids, in bucket order.
        let sparse = [u32::MAX, 0, 1 << 31, 17, 17, 1 << 20];
        assert!(permutation(&sparse));
        let order: Vec<SeriesId> = id_order(&sparse).iter().map(|&i| sparse[i as usize]).collect();
        assert_eq!(order.first(), Some(&0));
        assert_eq!(order.last(), Some(&u32::MAX));
        assert!(permutation(&[]));
        assert!(permutation(&[u32::MAX]));
    }

    #[test]
    fn the_cost_estimate_prefers_the_values_walk_for_many_candidates() {
        // A million series: hostname (100k values) under one metric's 100k series.
        assert!(values_walk_is_cheaper(100_000, 1_000_000, 100_000));
        // Ten candidates (one host) against the hostnames.
        assert!(!values_walk_is_cheaper(100_000, 1_000_000, 10));
        // A label with few values (region) under one metric.
        assert!(values_walk_is_cheaper(3, 1_000_000, 100_000));
    }
}
