//! Read views: a [`Snapshot`] is an `Arc` of the file set, tombstones and heads at one moment.
//!
//! Files and frozen heads in a snapshot never change. The active head keeps taking appends, so a
//! snapshot may see samples appended after it was taken (never fewer than existed at that time).

use std::sync::Arc;

use crate::compact::read_files;
use crate::db::{Inner, State};
use crate::error::Result;
use crate::flush::merge_sources;
use crate::matcher::{Matcher, matches_all};
use crate::partition::BlockMeta;
use crate::query::{Querier, SeriesRef, check_selective};
use crate::types::{Labels, Sample, SeriesId};

/// A consistent read view of the database; implements [`Querier`].
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<Inner>,
    state: Arc<State>,
}

/// A block of a partition file as a query can use it without decoding: its statistics, and
/// whether anything else (another file, a head, a tombstone) may hold samples in its time range,
/// in which case its statistics alone are not the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockView {
    /// Where and what.
    pub meta: BlockMeta,
    /// True if no other source has data for this series in the block's time range and no
    /// tombstone hides part of it: the statistics are exact for that range.
    pub exclusive: bool,
}

impl Snapshot {
    pub(crate) fn new(inner: Arc<Inner>, state: Arc<State>) -> Self {
        Snapshot { inner, state }
    }

    fn labels(&self, id: SeriesId) -> Option<Labels> {
        self.inner.index.labels(id)
    }

    fn has_data(&self, id: SeriesId, labels: &Labels, mint: i64, maxt: i64) -> Result<bool> {
        let s = &self.state;
        if s.head.overlaps(id, mint, maxt) || s.frozen.iter().any(|f| f.head.overlaps(id, mint, maxt)) {
            return Ok(true);
        }
        for files in self.partitions_in(mint, maxt) {
            for f in files {
                if f.entry.max_t < mint || f.entry.min_t > maxt || !f.file.overlaps(id, mint, maxt)? {
                    continue;
                }
                let hidden =
                    s.tombstones.iter().any(|t| t.applies_to(&f.entry) && matches_all(&t.matchers, labels));
                if !hidden {
                    return Ok(true);
                }
                // A tombstone may hide this file's data: look at the samples themselves.
                let mut v = Vec::new();
                read_files(std::slice::from_ref(f), &s.tombstones, id, labels, mint, maxt, &mut v)?;
                if !v.is_empty() {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    fn partitions_in(&self, mint: i64, maxt: i64) -> impl Iterator<Item = &Vec<Arc<crate::db::LiveFile>>> {
        let pms = self.inner.opts.partition_ms.max(1);
        let lo = mint.div_euclid(pms).saturating_mul(pms);
        self.state.partitions.range(lo..=maxt).map(|(_, f)| f)
    }

    fn read(&self, id: SeriesId, labels: &Labels, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
        let mut runs = Vec::new();
        for files in self.partitions_in(mint, maxt) {
            let mut run = Vec::new();
            read_files(files, &self.state.tombstones, id, labels, mint, maxt, &mut run)?;
            runs.push(run);
        }
        for f in &self.state.frozen {
            let mut run = Vec::new();
            f.head.read(id, mint, maxt, &mut run);
            runs.push(run);
        }
        let mut run = Vec::new();
        self.state.head.read(id, mint, maxt, &mut run);
        runs.push(run);
        runs.retain(|r| !r.is_empty());
        if runs.len() == 1 {
            if let Some(r) = runs.pop() {
                out.extend(r);
            }
            return Ok(());
        }
        merge_sources(runs, out);
        Ok(())
    }

    /// The partition-file blocks of a series overlapping `[mint, maxt]`, in time order, with
    /// whether each block's statistics are exact on their own (see [`BlockView`]). Samples in the
    /// heads are not blocks; read them with [`Querier::samples`] over the ranges not covered.
    pub fn blocks(&self, series: &SeriesRef, mint: i64, maxt: i64) -> Result<Vec<BlockView>> {
        let s = &self.state;
        let mut all: Vec<(usize, BlockMeta)> = Vec::new();
        let mut tombstoned = Vec::new();
        let files: Vec<_> = self.partitions_in(mint, maxt).flatten().collect();
        for (i, f) in files.iter().enumerate() {
            if f.entry.max_t < mint || f.entry.min_t > maxt || !f.file.contains(series.id) {
                tombstoned.push(false);
                continue;
            }
            tombstoned.push(
                s.tombstones
                    .iter()
                    .any(|t| t.applies_to(&f.entry) && matches_all(&t.matchers, &series.labels)),
            );
            for b in f.file.blocks(series.id)? {
                if b.stats.max_t >= mint && b.stats.min_t <= maxt {
                    all.push((i, b));
                }
            }
        }
        let heads: Vec<&crate::head::Head> =
            s.frozen.iter().map(|f| f.head.as_ref()).chain(std::iter::once(s.head.as_ref())).collect();
        let mut out = Vec::with_capacity(all.len());
        for (k, (i, b)) in all.iter().enumerate() {
            let overlaps_other = all.iter().enumerate().any(|(j, (fi, o))| {
                j != k && fi != i && o.stats.min_t <= b.stats.max_t && o.stats.max_t >= b.stats.min_t
            });
            let in_head = heads.iter().any(|h| h.overlaps(series.id, b.stats.min_t, b.stats.max_t));
            let hidden = tombstoned.get(*i).copied().unwrap_or(true);
            out.push(BlockView { meta: *b, exclusive: !overlaps_other && !in_head && !hidden });
        }
        out.sort_by_key(|v| (v.meta.stats.min_t, v.meta.stats.max_t));
        Ok(out)
    }

    fn matching(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        let mut out = Vec::new();
        let ids = if matchers.is_empty() {
            self.inner.index.select(&[])
        } else {
            self.inner.index.select(matchers)
        };
        for id in ids {
            let Some(labels) = self.labels(id) else { continue };
            if self.has_data(id, &labels, mint, maxt)? {
                out.push(SeriesRef { id, labels });
            }
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(out)
    }
}

impl Querier for Snapshot {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        check_selective(matchers)?;
        self.matching(matchers, mint, maxt)
    }

    fn samples(&self, series: &SeriesRef, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
        self.read(series.id, &series.labels, mint, maxt, out)
    }

    fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        let ids: Vec<SeriesId> = self.matching(matchers, mint, maxt)?.into_iter().map(|s| s.id).collect();
        Ok(self.inner.index.label_names(Some(&ids)))
    }

    fn label_values(&self, name: &str, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        let ids: Vec<SeriesId> = self.matching(matchers, mint, maxt)?.into_iter().map(|s| s.id).collect();
        Ok(self.inner.index.label_values(name, Some(&ids)))
    }
}
