//! The merge of sample sources: runs of one series read from several places (partition files,
//! frozen and active heads, the levels of a snapshot) combined into one sorted run in which the
//! newest source wins at a shared timestamp.
//!
//! Used by both the read path (`snapshot`, `partition::reader`) and the write path (flush,
//! compaction, the head's out-of-order merge); it depends on nothing but [`crate::types`], so
//! neither path imports the other through it.

use crate::types::Sample;

/// Merges per-source sample runs (each sorted, unique timestamps) given in priority order:
/// where sources share a timestamp the later source wins.
pub(crate) fn merge_sources(mut runs: Vec<Vec<Sample>>, out: &mut Vec<Sample>) {
    // One source into an empty output: it is the answer as it stands (sorted, unique).
    if out.is_empty() && runs.len() == 1 {
        if let Some(run) = runs.pop() {
            *out = run;
        }
        return;
    }
    let mut merge = SourceConcat::new(out);
    for r in runs {
        let from = out.len();
        out.extend(r);
        merge.added(out, from);
    }
    merge.finish(out);
}

/// Keeps, in `v[from..]`, only the samples for which `keep` holds.
pub(crate) fn keep_from(v: &mut Vec<Sample>, from: usize, keep: impl Fn(&Sample) -> bool) {
    let mut w = from;
    for r in from..v.len() {
        if keep(&v[r]) {
            v[w] = v[r];
            w += 1;
        }
    }
    v.truncate(w);
}

/// [`merge_sources`] for sources read straight into the output vector, one after the other in
/// priority order, so a query's read of a series copies its samples once instead of once per
/// level (file, partition, snapshot). Mark each source with [`SourceConcat::added`] after
/// appending it, then call [`SourceConcat::finish`]. Sources that follow each other in time (the
/// usual case: one file, or files then head) are left as appended; otherwise the whole tail is
/// stably sorted by time and the last copy of each timestamp kept, which is the same answer.
#[derive(Debug)]
pub(crate) struct SourceConcat {
    start: usize,
    last: Option<i64>,
    ordered: bool,
}

impl SourceConcat {
    /// Starts a merge at the end of `out`.
    pub(crate) fn new(out: &[Sample]) -> Self {
        SourceConcat { start: out.len(), last: None, ordered: true }
    }

    /// Notes the source appended at `out[from..]` (sorted, unique timestamps; may be empty).
    pub(crate) fn added(&mut self, out: &[Sample], from: usize) {
        if let (Some(f), Some(l)) = (out.get(from), out.get(from..).and_then(<[Sample]>::last)) {
            if self.last.is_some_and(|prev| f.t <= prev) {
                self.ordered = false;
            }
            self.last = Some(l.t);
        }
    }

    /// Sorts and de-duplicates the sources if they overlap in time.
    pub(crate) fn finish(self, out: &mut Vec<Sample>) {
        if !self.ordered {
            if let Some(tail) = out.get_mut(self.start..) {
                tail.sort_by_key(|s| s.t);
            }
            dedup_keep_last(out, self.start);
        }
    }
}

/// Removes all but the last sample of each run of equal timestamps in `v[start..]` (sorted).
pub(crate) fn dedup_keep_last(v: &mut Vec<Sample>, start: usize) {
    let mut w = start;
    for r in start..v.len() {
        let s = v[r];
        if w > start && v[w - 1].t == s.t {
            v[w - 1] = s;
        } else {
            v[w] = s;
            w += 1;
        }
    }
    v.truncate(w);
}
