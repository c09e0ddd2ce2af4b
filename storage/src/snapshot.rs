//! Read views: a [`Snapshot`] is an `Arc` of the file set, tombstones and heads at one moment.
//!
//! Files and frozen heads in a snapshot never change. The active head keeps taking appends, so a
//! snapshot may see samples appended after it was taken (never fewer than existed at that time).

mod extreme;
pub(crate) mod files;
mod in_range;
mod latest;
mod pruned;
mod state;
mod window;

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::Result;
use crate::hist;
use crate::index::IndexStats;
use crate::matcher::{Matcher, matches_all};
use crate::merge::SourceConcat;
use crate::partition::BlockMeta;
use crate::query::{Querier, SeriesRef, StartTimestamp, check_selective};
use crate::start_ts;
use crate::types::{HistogramSample, Labels, Sample, SeriesId};
use crate::window_agg::{Extreme, Need, ScanStats, WindowAgg};
use files::{read_files, read_files_histograms, read_files_with_starts};
use in_range::InRange;
pub(crate) use state::{Frozen, LiveFile, ReadState, State};

/// A consistent read view of the database; implements [`Querier`].
#[derive(Clone)]
pub struct Snapshot {
    shared: Arc<ReadState>,
    state: Arc<State>,
    /// Ranged reads from the bucket made through this snapshot, and their bytes.
    bucket_reads: BucketReads,
    /// What this snapshot's selections picked, for reads of bucket files (see
    /// [`crate::footprint`]); unused without a bucket.
    footprint: Arc<crate::footprint::Footprint>,
}

/// Ranged reads from the bucket made through one snapshot (opening files, fetching blocks
/// missing from the local cache) and their bytes, readable after the snapshot is gone: one
/// query's bucket cost, when the snapshot is one query's.
#[derive(Debug, Clone, Default)]
pub struct BucketReads(Arc<[std::sync::atomic::AtomicU64; 2]>);

impl BucketReads {
    /// (ranged reads, bytes) so far.
    pub fn get(&self) -> (u64, u64) {
        let [n, bytes] = &*self.0;
        (n.load(std::sync::atomic::Ordering::Relaxed), bytes.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn add(&self, reads: u64, bytes: u64) {
        let [n, b] = &*self.0;
        n.fetch_add(reads, std::sync::atomic::Ordering::Relaxed);
        b.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
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
    pub(crate) fn new(shared: Arc<ReadState>, state: Arc<State>) -> Self {
        Snapshot { shared, state, bucket_reads: BucketReads::default(), footprint: Arc::default() }
    }

    /// The bucket reads made through this snapshot (see [`BucketReads`]).
    pub fn bucket_reads(&self) -> BucketReads {
        self.bucket_reads.clone()
    }

    /// Runs `read`, counting the bucket reads it makes on this thread into
    /// [`Snapshot::bucket_reads`].
    fn counted<T>(&self, read: impl FnOnce() -> T) -> T {
        // Without a bucket there is nothing to count, and no footprint to keep.
        if !self.shared.from_bucket {
            return read();
        }
        thread_local! {
            static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        /// Ends the outermost counted read, also when it unwinds.
        struct Outermost;
        impl Drop for Outermost {
            fn drop(&mut self) {
                COUNTING.with(|c| c.set(false));
            }
        }
        // A read inside another (`samples_latest` falling back to `samples_scanned`) is the
        // outer one's to count.
        if COUNTING.with(|c| c.replace(true)) {
            return read();
        }
        let outermost = Outermost;
        let _footprint = crate::footprint::enter(&self.footprint);
        let (n0, b0) = crate::bucket::cache::thread_reads();
        let out = read();
        drop(outermost);
        let (n1, b1) = crate::bucket::cache::thread_reads();
        if n1 > n0 {
            self.bucket_reads.add(n1 - n0, b1 - b0);
        }
        out
    }

    fn labels(&self, id: SeriesId) -> Option<Labels> {
        self.shared.index.labels(id)
    }

    /// `series` with its stored labels, which tombstones are matched against: a caller's
    /// [`SeriesRef`] names the series by id, and its labels may have been changed for display
    /// (a tenant's scope hides the tenant label). Looked up only while tombstones exist, the
    /// only reader of labels on the read path.
    fn stored<'s>(&self, series: &'s SeriesRef) -> Cow<'s, SeriesRef> {
        if self.state.tombstones.is_empty() {
            return Cow::Borrowed(series);
        }
        match self.labels(series.id) {
            Some(labels) if labels != series.labels => Cow::Owned(SeriesRef { id: series.id, labels }),
            _ => Cow::Borrowed(series),
        }
    }

    /// [`Snapshot::stored`] for a group of series.
    fn stored_group<'s>(&self, group: &'s [SeriesRef]) -> Cow<'s, [SeriesRef]> {
        if self.state.tombstones.is_empty() {
            return Cow::Borrowed(group);
        }
        Cow::Owned(group.iter().map(|s| self.stored(s).into_owned()).collect())
    }

    fn partitions_in(&self, mint: i64, maxt: i64) -> impl Iterator<Item = &Vec<Arc<LiveFile>>> {
        let pms = self.shared.partition_ms.max(1);
        let lo = mint.div_euclid(pms).saturating_mul(pms);
        self.state.partitions.range(lo..=maxt).map(|(_, f)| f)
    }

    fn read(
        &self,
        id: SeriesId,
        labels: &Labels,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        // Every source is read straight into `out`; see `SourceConcat`.
        let mut merge = SourceConcat::new(out);
        for files in self.partitions_in(mint, maxt) {
            let from = out.len();
            read_files(files, &self.state.tombstones, id, labels, mint, maxt, out, stats)?;
            merge.added(out, from);
        }
        for head in self.state.frozen.iter().map(|f| &f.head).chain(std::iter::once(&self.state.head)) {
            let from = out.len();
            head.read(id, mint, maxt, out);
            stats.samples_decoded += (out.len() - from) as u64;
            merge.added(out, from);
        }
        merge.finish(out);
        Ok(())
    }

    /// The start timestamps of a series' samples in `[mint, maxt]`, merged over files and heads
    /// as [`Snapshot::read`] merges samples (newest write wins per timestamp, with or without
    /// a start timestamp). A series no source holds start timestamps for returns at once.
    fn read_starts(
        &self,
        id: SeriesId,
        labels: &Labels,
        mint: i64,
        maxt: i64,
        out: &mut Vec<StartTimestamp>,
    ) -> Result<()> {
        let s = &self.state;
        let heads = || std::iter::once(&s.head).chain(s.frozen.iter().map(|f| &f.head));
        let in_files = self.partitions_in(mint, maxt).flatten().any(|f| f.may_hold(|p| p.has_starts(id)));
        if !in_files && !heads().any(|h| h.has_starts(id)) {
            return Ok(());
        }
        let mut sources = Vec::new();
        for files in self.partitions_in(mint, maxt) {
            let (mut run, mut starts) = (Vec::new(), Vec::new());
            read_files_with_starts(files, &s.tombstones, id, labels, mint, maxt, &mut run, &mut starts)?;
            sources.push((run, starts));
        }
        // Frozen heads (oldest first), then the active head: newest last.
        for h in s.frozen.iter().map(|f| &f.head).chain(std::iter::once(&s.head)) {
            let (mut run, mut starts) = (Vec::new(), Vec::new());
            h.read_with_starts(id, mint, maxt, &mut run, &mut starts);
            sources.push((run, starts));
        }
        start_ts::merge(&sources, out);
        Ok(())
    }

    /// True if some source (file or head) holds native histograms of the series in
    /// `[mint, maxt]` (or around it: a cheap test, may say yes for a range without any).
    pub(crate) fn may_have_histograms(&self, id: SeriesId, mint: i64, maxt: i64) -> bool {
        let s = &self.state;
        self.partitions_in(mint, maxt).flatten().any(|f| f.may_hold(|p| p.has_histograms(id)))
            || s.head.has_histograms(id)
            || s.frozen.iter().any(|f| f.head.has_histograms(id))
    }

    /// The native histograms of a series in `[mint, maxt]`, merged over files and heads by the
    /// float rule (see [`crate::hist`]).
    fn read_histograms(
        &self,
        id: SeriesId,
        labels: &Labels,
        mint: i64,
        maxt: i64,
        out: &mut Vec<HistogramSample>,
    ) -> Result<()> {
        if !self.may_have_histograms(id, mint, maxt) {
            return Ok(());
        }
        let s = &self.state;
        let mut sources = Vec::new();
        for files in self.partitions_in(mint, maxt) {
            let (mut run, mut hs) = (Vec::new(), Vec::new());
            read_files(files, &s.tombstones, id, labels, mint, maxt, &mut run, &mut ScanStats::default())?;
            read_files_histograms(files, &s.tombstones, id, labels, mint, maxt, &mut hs)?;
            sources.push((run, hs));
        }
        for h in s.frozen.iter().map(|f| &f.head).chain(std::iter::once(&s.head)) {
            let (mut run, mut hs) = (Vec::new(), Vec::new());
            h.read_histograms(id, mint, maxt, &mut run, &mut hs);
            sources.push((run, hs));
        }
        hist::merge(sources, out);
        Ok(())
    }

    /// The partition-file blocks of a series overlapping `[mint, maxt]`, in time order, with
    /// whether each block's statistics are exact on their own (see [`BlockView`]). Samples in the
    /// heads are not blocks; read them with [`Querier::samples`] over the ranges not covered.
    pub fn blocks(&self, series: &SeriesRef, mint: i64, maxt: i64) -> Result<Vec<BlockView>> {
        let series = &*self.stored(series);
        let s = &self.state;
        let mut all: Vec<(usize, BlockMeta)> = Vec::new();
        let mut tombstoned = Vec::new();
        let files: Vec<_> = self.partitions_in(mint, maxt).flatten().collect();
        for (i, f) in files.iter().enumerate() {
            if f.entry.max_t < mint || f.entry.min_t > maxt || !f.file()?.contains(series.id) {
                tombstoned.push(false);
                continue;
            }
            tombstoned.push(
                s.tombstones
                    .iter()
                    .any(|t| t.applies_to(&f.entry) && matches_all(&t.matchers, &series.labels)),
            );
            for b in f.file()?.blocks_in(series.id, mint, maxt)? {
                all.push((i, b));
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
        self.open_files_for(&[matchers], mint, maxt)?;
        let in_range = InRange::new(self, mint, maxt);
        if in_range.is_empty() {
            return Ok(Vec::new());
        }
        let index = &self.shared.index;
        let sorted = index.sorted_by_labels(&index.select(matchers));
        let mut out = Vec::with_capacity(sorted.len());
        for (id, labels) in sorted {
            if in_range.has_data(id, Some(&labels))? {
                out.push(SeriesRef { id, labels });
            }
        }
        if self.shared.from_bucket {
            self.footprint.selected(out.iter().map(|s| s.id).collect(), mint, maxt);
        }
        Ok(out)
    }

    /// Opens the files not open yet (a query node's, see [`LiveFile`]) of the partitions
    /// `[mint, maxt]` reaches, and loads the chunks of their series tables that may hold a
    /// series one of `selections` (sets of matchers) selects (all chunks for an empty set), up
    /// to 16 files at once, so that those series are in the index before anything is looked up
    /// there. Nothing to do on a writer, whose files are all open and read whole.
    fn open_files_for(&self, selections: &[&[Matcher]], mint: i64, maxt: i64) -> Result<()> {
        if !self.shared.from_bucket {
            return Ok(());
        }
        let closed: Vec<&Arc<LiveFile>> = self
            .partitions_in(mint, maxt)
            .flatten()
            .filter(|f| f.opened().is_none_or(|p| p.needs_load_for(selections)))
            .collect();
        if closed.is_empty() {
            return Ok(());
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let first_error = parking_lot::Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..closed.len().min(16) {
                scope.spawn(|| {
                    while let Some(f) = closed.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        if let Err(e) = self.counted(|| f.file()?.load_for(selections)) {
                            first_error.lock().get_or_insert(e);
                            return;
                        }
                        f.enter_rest_later();
                    }
                });
            }
        });
        first_error.into_inner().map_or(Ok(()), Err)
    }

    /// A label-name or label-value lookup: `lookup` over the index, given the series `matchers`
    /// select (None for all when there are none) and the test that a series has data in
    /// `[mint, maxt]`; the files of that range opened and loaded for `matchers` first.
    fn label_lookup(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        lookup: impl FnOnce(
            &crate::index::Index,
            Option<&[SeriesId]>,
            &mut dyn FnMut(SeriesId, Option<&Labels>) -> Result<bool>,
        ) -> Result<Vec<String>>,
    ) -> Result<Vec<String>> {
        self.counted(|| {
            self.open_files_for(&[matchers], mint, maxt)?;
            let in_range = InRange::new(self, mint, maxt);
            if in_range.is_empty() {
                return Ok(Vec::new());
            }
            let candidates = (!matchers.is_empty()).then(|| self.shared.index.select(matchers));
            lookup(&self.shared.index, candidates.as_deref(), &mut |id, labels| in_range.has_data(id, labels))
        })
    }

    /// Cardinality statistics of the live series `matchers` select (all of them if empty; the
    /// `/api/v1/status/tsdb` lists, scoped to a tenant), each list the `limit` largest
    /// entries, the tenant label left out. Computed from the index, whatever the time range of
    /// the series' data; on a query node, whose index holds only what queries selected, after
    /// every file's series have entered it (fetching the series tables not fetched yet, once:
    /// the next call finds them entered).
    pub fn index_stats(&self, limit: usize, matchers: &[Matcher]) -> Result<IndexStats> {
        self.counted(|| {
            self.open_files_for(&[&[]], i64::MIN, i64::MAX)?;
            let of = (!matchers.is_empty()).then(|| self.shared.index.select(matchers));
            Ok(self.shared.index.stats(limit, of.as_deref()))
        })
    }

    /// Chunks held in memory by the active and frozen heads.
    pub fn head_chunks(&self) -> usize {
        let s = &self.state;
        s.head.chunk_count() + s.frozen.iter().map(|f| f.head.chunk_count()).sum::<usize>()
    }

    /// The oldest and newest sample timestamps in the files and heads, None if there is no data.
    /// Bounds, not exact: samples hidden by a tombstone may still count.
    pub fn time_bounds(&self) -> Option<(i64, i64)> {
        let s = &self.state;
        let files = s.partitions.values().flatten().map(|f| (f.entry.min_t, f.entry.max_t));
        let heads =
            std::iter::once(&s.head).chain(s.frozen.iter().map(|f| &f.head)).filter_map(|h| h.time_bounds());
        files.chain(heads).reduce(|(lo, hi), (l, h)| (lo.min(l), hi.max(h)))
    }
}

impl Querier for Snapshot {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        self.counted(|| {
            check_selective(matchers)?;
            self.matching(matchers, mint, maxt)
        })
    }

    fn selects_ahead(&self) -> bool {
        self.shared.from_bucket
    }

    fn prepare(&self, selections: &[(&[Matcher], i64, i64)]) -> Result<()> {
        let (Some(mint), Some(maxt)) =
            (selections.iter().map(|s| s.1).min(), selections.iter().map(|s| s.2).max())
        else {
            return Ok(());
        };
        let matchers: Vec<&[Matcher]> = selections.iter().map(|s| s.0).collect();
        self.counted(|| self.open_files_for(&matchers, mint, maxt))
    }

    fn samples(&self, series: &SeriesRef, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
        self.samples_scanned(series, mint, maxt, out, &mut ScanStats::default())
    }

    fn samples_scanned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        let series = &*self.stored(series);
        self.counted(|| {
            let from = out.len();
            self.read(series.id, &series.labels, mint, maxt, out, stats)?;
            hist::strip_markers(out, from);
            Ok(())
        })
    }

    fn samples_pruned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        may_keep: &dyn Fn(f64, f64) -> bool,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        let series = &*self.stored(series);
        self.counted(|| {
            let from = out.len();
            if !pruned::samples_pruned(self, series, mint, maxt, may_keep, out, stats)? {
                self.read(series.id, &series.labels, mint, maxt, out, stats)?;
            }
            hist::strip_markers(out, from);
            Ok(())
        })
    }

    fn samples_latest(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        let series = &*self.stored(series);
        self.counted(|| {
            match latest::latest_without_reading(self, series, mint, maxt)? {
                Some(latest::Latest::Stats(s)) => {
                    stats.blocks_from_stats += 1;
                    out.push(s);
                    Ok(())
                }
                // Neither a block nor a decoded sample: nothing to count.
                Some(latest::Latest::Head(s)) => {
                    out.push(s);
                    Ok(())
                }
                None => self.samples_scanned(series, mint, maxt, out, stats),
            }
        })
    }

    fn histograms(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<HistogramSample>,
    ) -> Result<()> {
        let series = &*self.stored(series);
        self.counted(|| self.read_histograms(series.id, &series.labels, mint, maxt, out))
    }

    fn start_timestamps(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<StartTimestamp>,
    ) -> Result<()> {
        let series = &*self.stored(series);
        self.counted(|| self.read_starts(series.id, &series.labels, mint, maxt, out))
    }

    fn window_aggregates(
        &self,
        series: &SeriesRef,
        windows: &[(i64, i64)],
        need: Need,
        out: &mut Vec<WindowAgg>,
        stats: &mut ScanStats,
    ) -> Result<bool> {
        let series = &*self.stored(series);
        self.counted(|| window::window_aggregates(self, series, windows, need, out, stats))
    }

    fn group_extremes(
        &self,
        group: &[SeriesRef],
        windows: &[(i64, i64)],
        which: Extreme,
        out: &mut Vec<Option<f64>>,
        stats: &mut ScanStats,
    ) -> Result<bool> {
        let group = &*self.stored_group(group);
        self.counted(|| extreme::group_extremes(self, group, windows, which, out, stats))
    }

    fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        self.label_lookup(matchers, mint, maxt, |index, candidates, keep| {
            index.label_names_where(candidates, keep)
        })
    }

    fn label_values(&self, name: &str, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        self.label_lookup(matchers, mint, maxt, |index, candidates, keep| {
            index.label_values_where(name, candidates, keep)
        })
    }
}
