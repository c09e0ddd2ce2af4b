//! Label names and values of the series that pass a filter, without materialising label sets
//! of series that cannot change the answer.
//!
//! The filter is usually "has data in the queried time range", which costs a lookup in the heads
//! or a partition file per series, so each walk tests as few series as it can:
//!
//! * with no candidate list, a value (or name) is in the answer as soon as one series in its
//!   postings passes, so the walk goes value by value and stops at the first series that passes:
//!   for live data that is one test per value, not one per series;
//! * with a candidate list (the series a `match[]` selected) smaller than the label's values,
//!   the candidates' own labels are read and a series is tested only if it would add a value
//!   not found yet;
//! * with more candidates than values, each value's postings are intersected with the
//!   candidates and tested as in the first case.
//!
//! Index locks are never held while the filter runs: values and postings are copied out in
//! batches under the lock (a name's value map, or the series store), then tested. The filter may
//! therefore call back into the index.

use std::borrow::Cow;
use std::sync::Arc;

use hashbrown::HashSet;

use super::Index;
use super::inverted::{BatchValue, ValueBatch};
use super::postings;
use crate::error::Result;
use crate::types::{Labels, SeriesId};

/// Values copied out of a value map per lock acquisition.
const VALUE_BATCH: usize = 512;

/// Ids of a value's postings copied with the value: enough that the first series with data is
/// almost always among them, few enough that copying costs little next to the test.
const POSTINGS_PREFIX: usize = 8;

/// What reading one candidate's labels costs, in galloping steps of a postings intersection
/// (a store lookup, a pointer chase and a scan of the labels, against one binary-search probe).
const LABEL_READ_STEPS: usize = 4;

/// Series whose labels are copied out of the store per lock acquisition.
const LABELS_BATCH: usize = 256;

impl Index {
    /// Sorted unique label names over the series in `candidates` (all live series if None)
    /// for which `keep(id, labels)` holds. `keep` gets the labels when they are at hand.
    pub fn label_names_where(
        &self,
        candidates: Option<&[SeriesId]>,
        mut keep: impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        let Some(ids) = candidates else {
            let mut names = Vec::new();
            for name in self.postings.names() {
                if self.any_value_kept(&name, &mut keep)? {
                    names.push(name);
                }
            }
            return Ok(names);
        };
        // Every series usually has every name: stop as soon as all known names were seen.
        let known = self.postings.name_count();
        let mut found: HashSet<Arc<str>> = HashSet::new();
        'walk: for batch in ids.chunks(LABELS_BATCH) {
            for (id, labels) in self.labels_of(batch) {
                if labels.iter().all(|l| found.contains(&l.name)) {
                    continue;
                }
                if keep(id, Some(&labels))? {
                    found.extend(labels.iter().map(|l| l.name.clone()));
                    if found.len() >= known {
                        break 'walk;
                    }
                }
            }
        }
        let mut names: Vec<String> = found.iter().map(|n| n.to_string()).collect();
        names.sort_unstable();
        Ok(names)
    }

    /// Sorted unique values of label `name` over the series in `candidates` (all live series if
    /// None) for which `keep(id, labels)` holds.
    pub fn label_values_where(
        &self,
        name: &str,
        candidates: Option<&[SeriesId]>,
        mut keep: impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        let Some(ids) = candidates else {
            return self.values_kept(name, None, &mut keep);
        };
        let ids: Cow<[SeriesId]> = if ids.is_sorted() {
            Cow::Borrowed(ids)
        } else {
            let mut sorted = ids.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            Cow::Owned(sorted)
        };
        // Walking the values costs about one galloping step per id shared by a value's postings
        // and the candidates; reading the candidates' labels costs a few such steps per
        // candidate. Pick the cheaper.
        let intersect_steps = self.postings.with_values(name, |values| {
            values.map(|v| v.iter().map(|(_, p)| p.len().min(ids.len())).sum::<usize>())
        });
        let Some(intersect_steps) = intersect_steps else { return Ok(Vec::new()) };
        if intersect_steps <= ids.len().saturating_mul(LABEL_READ_STEPS) {
            return self.values_kept(name, Some(&ids), &mut keep);
        }
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

    /// True if some series with label `name` passes `keep`.
    fn any_value_kept(
        &self,
        name: &str,
        keep: &mut impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<bool> {
        let mut after: Option<Arc<str>> = None;
        loop {
            let batch = self.value_batch(name, after.as_deref(), None);
            let Some(last) = batch.values.last() else { return Ok(false) };
            after = Some(last.value.clone());
            let mut start = 0;
            for value in &batch.values {
                let ids = batch.ids.get(start..value.end).unwrap_or_default();
                start = value.end;
                if self.value_kept(name, value, ids, keep)? {
                    return Ok(true);
                }
            }
        }
    }

    /// The values of `name` (in order) for which a series of the value, among `candidates` if
    /// given, passes `keep`.
    fn values_kept(
        &self,
        name: &str,
        candidates: Option<&[SeriesId]>,
        keep: &mut impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut after: Option<Arc<str>> = None;
        loop {
            let batch = self.value_batch(name, after.as_deref(), candidates);
            let Some(last) = batch.values.last() else { return Ok(out) };
            after = Some(last.value.clone());
            let mut start = 0;
            for value in &batch.values {
                let ids = batch.ids.get(start..value.end).unwrap_or_default();
                start = value.end;
                if self.value_kept(name, value, ids, keep)? {
                    out.push(value.value.to_string());
                }
            }
        }
    }

    /// Whether a series of `value` passes: first among the copied `ids`; if they were only a
    /// prefix of the postings and none passed, among the rest, copied now.
    fn value_kept(
        &self,
        name: &str,
        value: &BatchValue,
        ids: &[SeriesId],
        keep: &mut impl FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
    ) -> Result<bool> {
        for &id in ids {
            if keep(id, None)? {
                return Ok(true);
            }
        }
        let (true, Some(&last)) = (value.prefix_only, ids.last()) else { return Ok(false) };
        // The postings may have changed since the prefix was copied: continue after its last id.
        let rest = self.postings.with_values(name, |values| {
            values
                .and_then(|v| v.postings(&value.value))
                .map(|ids| ids.get(ids.partition_point(|&id| id <= last)..).unwrap_or_default().to_vec())
                .unwrap_or_default()
        });
        for id in rest {
            if keep(id, None)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The next values of `name` after `after`, each with the ids of its postings that are
    /// among `candidates`, or with a prefix of its postings when there are no candidates.
    fn value_batch(&self, name: &str, after: Option<&str>, candidates: Option<&[SeriesId]>) -> ValueBatch {
        self.postings.with_values(name, |values| {
            let Some(values) = values else { return ValueBatch { values: Vec::new(), ids: Vec::new() } };
            match candidates {
                Some(c) => values.batch_after(after, VALUE_BATCH, |ids, out| {
                    postings::intersect_into(c, ids, out);
                    false
                }),
                None => values.batch_after(after, VALUE_BATCH, |ids, out| {
                    let prefix = ids.get(..POSTINGS_PREFIX).unwrap_or(ids);
                    out.extend_from_slice(prefix);
                    prefix.len() < ids.len()
                }),
            }
        })
    }

    /// The labels of the live series among `ids`, copied under one lock acquisition.
    fn labels_of(&self, ids: &[SeriesId]) -> Vec<(SeriesId, Labels)> {
        let mut out = Vec::with_capacity(ids.len());
        self.store.for_each(ids, |id, labels| {
            out.push((id, labels.clone()));
            std::ops::ControlFlow::Continue(())
        });
        out
    }
}
