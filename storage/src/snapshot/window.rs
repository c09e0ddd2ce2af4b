//! [`Querier::window_aggregates`](crate::Querier::window_aggregates) for a [`Snapshot`]: whole
//! blocks from their statistics, everything else decoded.
//!
//! A partition-file block is answered from its [`BlockStats`](crate::encoding::BlockStats) when
//! both hold:
//!
//! - it is *exclusive*: the merged view of the series holds exactly the block's samples in the
//!   block's time range. That is so when no other block of the series (in another file of any
//!   partition) overlaps its range, no head sample (frozen or active) falls in it, and no
//!   tombstone that applies to its file covers part of it. Then no newer write can replace one
//!   of its samples and nothing hides one;
//! - every window that overlaps its time range contains all of it, so each such window takes
//!   either all of the block's samples or none;
//! - when the caller needs exact sums (`sum_over_time`, `avg_over_time`), its values are
//!   integers, so its `sum` statistic is exact: its statistics say so (`BlockStats::integral`,
//!   partition format 4), or, in older files, its header does
//!   ([`crate::encoding::integral_values`]). Otherwise it is decoded, and a series of floats declines the push-down as a whole
//!   rather than answer windows without an exact sum;
//! - when the caller needs the first and last values' times (`delta`, `rate`, `increase`), it
//!   holds no stale marker, and for counter resets (`rate`, `increase`) its values never
//!   decrease ([`Need::allows`]).
//!
//! When the caller needs sums only (`sum_over_time`, `avg_over_time`: count and exact sum), an
//! exclusive integer block cut by one window boundary into two parts that each lie wholly in
//! one window or outside all (two adjacent windows, as hourly windows not aligned with hour
//! blocks make; or one window covering the block's start or its end) is *split*
//! ([`split_point`]): its samples up to the boundary give a count and sum for the window before
//! the boundary, if any, and the window after it, if any, takes the block's count and sum less
//! those, exact for integers. Only the part before the boundary is read, and where the block's
//! timestamps are implied by its statistics its packed integers are summed as they are read,
//! without writing samples ([`split_sum`]). Windows that took such a part are
//! [partial](WindowAgg::is_partial).
//!
//! Every other block overlapping a window is decoded, and the decoded samples of all sources are
//! merged exactly as [`Querier::samples`](crate::Querier::samples) merges them (newest write
//! wins). Skipping the exclusive blocks does not change that merge: by exclusivity, no other
//! source holds a sample in their ranges. Each window then folds, in time order, the decoded
//! samples it contains and the statistics of the blocks it contains.

use std::sync::Arc;

use super::LiveFile;
use super::Snapshot;
use crate::error::Result;
use crate::matcher::matches_all;
use crate::merge::{keep_from, merge_sources};
use crate::partition::BlockMeta;
use crate::query::SeriesRef;
use crate::types::{Sample, is_stale};
use crate::window_agg::{EXACT_LIMIT, Need, ScanStats, WindowAgg, span};

/// What a block contributes to the windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// Answered from its statistics.
    Stats,
    /// Decoded and merged with the other sources.
    Decode,
    /// Decoded up to `at`, into a count and sum only: the window holding the samples up to
    /// `at` takes those if `before`, the window holding the rest takes the block's count and
    /// sum less those if `rest` (otherwise no window holds that side).
    Split { at: i64, before: bool, rest: bool },
    /// Overlaps no window: neither read nor counted.
    Skip,
}

/// A block of the series in one of the snapshot's files.
pub(super) struct Block<'a> {
    /// Index of the partition in time order (files of different partitions never share time).
    partition: usize,
    pub(super) file: &'a LiveFile,
    pub(super) meta: BlockMeta,
    /// Its values are known to be integers (see [`WindowAgg::merge_block`]); checked only for
    /// blocks answered from statistics when the caller needs sums (otherwise false, and the
    /// windows' exact sums are unknown).
    integral: bool,
    /// Tombstones (closed ranges) that apply to the block's file and this series.
    tombstones: Tombstones,
    pub(super) use_: Use,
}

/// Closed time ranges deleted from a series in one file, shared by the file's blocks of the
/// series. Nearly always none, which then costs no allocation per series and file.
#[derive(Clone, Default)]
struct Tombstones(Option<Arc<[(i64, i64)]>>);

impl Tombstones {
    fn of(ranges: impl Iterator<Item = (i64, i64)>) -> Self {
        let ranges: Vec<(i64, i64)> = ranges.collect();
        Tombstones((!ranges.is_empty()).then(|| ranges.into()))
    }

    fn iter(&self) -> impl Iterator<Item = &(i64, i64)> {
        self.0.iter().flat_map(|r| r.iter())
    }
}

impl Block<'_> {
    pub(super) fn range(&self) -> (i64, i64) {
        (self.meta.stats.min_t, self.meta.stats.max_t)
    }
}

/// See the module documentation.
pub(super) fn window_aggregates(
    snap: &Snapshot,
    series: &SeriesRef,
    windows: &[(i64, i64)],
    need: Need,
    out: &mut Vec<WindowAgg>,
    stats: &mut ScanStats,
) -> Result<bool> {
    let sums = need == Need::Sums;
    if !well_ordered(windows) {
        return Ok(false);
    }
    let Some((mint, maxt)) = span(windows) else { return Ok(false) };
    // Block statistics count histogram markers as float values: a series with native
    // histograms is read sample by sample (the engine folds floats and histograms itself).
    if snap.may_have_histograms(series.id, mint, maxt) {
        return Ok(false);
    }
    let mut blocks = file_blocks(snap, series, mint, maxt)?;
    // Windows that contain no whole block (narrower than the blocks, or not aligned with
    // them, as a dashboard's `now`-relative steps usually are) can take nothing from
    // statistics, except by splitting blocks for sums: decline before reading the heads.
    let usable = |b: &Block<'_>| {
        (contained(b.range(), windows) == Some(true) && need.allows(&b.meta.stats))
            || (sums && split_point(b.range(), windows).is_some())
    };
    if !blocks.iter().any(usable) {
        return Ok(false);
    }
    let heads = read_heads(snap, series, mint, maxt);
    classify(&mut blocks, &heads, windows, need);
    // Only sums need to know whether a block's values are integers. The statistics of format
    // 4 say so; in older files, finding out reads the block's header and verifies its
    // checksum, about 5 % of a query answered from statistics alone, and on a query node a
    // fetch of the block from the bucket.
    if sums {
        for b in blocks.iter_mut().filter(|b| matches!(b.use_, Use::Stats | Use::Split { .. })) {
            b.integral = b.file.file()?.block_integral(&b.meta)?;
            if !b.integral {
                b.use_ = Use::Decode;
            }
        }
    }
    if !worth_it(&blocks, &heads) {
        return Ok(false);
    }

    let (decoded, parts) = decode(&blocks, heads, mint, maxt, stats)?;
    let mut from_stats: Vec<FromStats> = blocks
        .iter()
        .filter(|b| b.use_ == Use::Stats)
        .map(|b| FromStats::Block(&b.meta, b.integral))
        .chain(parts.into_iter().map(FromStats::Part))
        .collect();
    from_stats.sort_by_key(FromStats::start);
    stats.blocks_from_stats += blocks.iter().filter(|b| b.use_ == Use::Stats).count() as u64;

    let mut prev: Option<((i64, i64), WindowAgg)> = None;
    for &w in windows {
        let agg = match prev {
            Some((pw, agg)) if pw == w => agg,
            _ => fold_window(w, &decoded, &from_stats),
        };
        out.push(agg);
        prev = Some((w, agg));
    }
    Ok(true)
}

/// Whether answering from statistics saves work over the caller's plain read, which decodes
/// every sample once. Here, a block answered from statistics costs nothing; a decoded block
/// (and the heads) costs about twice a plain read per sample, being merged and then folded per
/// window (`promql/examples/pushdown_bench.rs`); a split block costs its part before the
/// boundary, read once (summed as read where timestamps are implied), never more than the plain
/// read of the whole block. So push-down wins when `2 × decoded + split prefixes` is at most
/// the plain read's samples. Windows narrower than the blocks, or data rewritten over most
/// blocks, end here; a block split near its end still wins, if by little.
fn worth_it(blocks: &[Block<'_>], heads: &[Vec<Sample>]) -> bool {
    let head_samples = heads.iter().map(|r| r.len() as u64).sum::<u64>();
    let (mut plain, mut pushed, mut from_stats) = (head_samples, 2 * head_samples, 0u64);
    for b in blocks {
        let samples = u64::from(b.meta.stats.count) + u64::from(b.meta.stats.stale_count);
        match b.use_ {
            Use::Stats => from_stats += samples,
            Use::Decode => pushed += 2 * samples,
            Use::Split { at, .. } => {
                // The part before the boundary, estimated by time.
                let (lo, hi) = b.range();
                let before = (i128::from(at) - i128::from(lo) + 1) * i128::from(samples)
                    / (i128::from(hi) - i128::from(lo) + 1).max(1);
                let before = u64::try_from(before.clamp(0, i128::from(samples))).unwrap_or(samples);
                pushed += before;
                from_stats += samples - before;
            }
            Use::Skip => continue,
        }
        plain += samples;
    }
    from_stats > 0 && pushed <= plain
}

/// Windows this path handles: non-empty, with starts and ends both non-decreasing (so the
/// windows overlapping a time range are a contiguous run). Anything else decodes.
pub(super) fn well_ordered(windows: &[(i64, i64)]) -> bool {
    windows.iter().all(|(lo, hi)| lo <= hi)
        && windows.windows(2).all(|p| p[0].0 <= p[1].0 && p[0].1 <= p[1].1)
}

/// The series' samples in the frozen heads and the active head, oldest head first (the order
/// in which newer writes win), empty runs left out.
pub(super) fn read_heads(snap: &Snapshot, series: &SeriesRef, mint: i64, maxt: i64) -> Vec<Vec<Sample>> {
    let s = &snap.state;
    let mut runs = Vec::new();
    for head in s.frozen.iter().map(|f| &f.head).chain(std::iter::once(&s.head)) {
        let mut run = Vec::new();
        head.read(series.id, mint, maxt, &mut run);
        if !run.is_empty() {
            runs.push(run);
        }
    }
    runs
}

/// The series' blocks overlapping `[mint, maxt]` in every file, in partition order and, within
/// a partition, file order (the order in which newer writes win). All start as `Decode`.
pub(super) fn file_blocks<'a>(
    snap: &'a Snapshot,
    series: &SeriesRef,
    mint: i64,
    maxt: i64,
) -> Result<Vec<Block<'a>>> {
    let mut out = Vec::new();
    for (partition, files) in snap.partitions_in(mint, maxt).enumerate() {
        for f in files {
            let e = &f.entry;
            if e.max_t < mint || e.min_t > maxt {
                continue;
            }
            // Empty if the file does not hold the series.
            let metas = f.file()?.blocks_in(series.id, mint, maxt)?;
            if metas.is_empty() {
                continue;
            }
            let tombstones = Tombstones::of(
                snap.state
                    .tombstones
                    .iter()
                    .filter(|t| t.applies_to(e) && matches_all(&t.matchers, &series.labels))
                    .map(|t| (t.mint, t.maxt)),
            );
            out.reserve(metas.len());
            for meta in metas {
                let tombstones = tombstones.clone();
                out.push(Block { partition, file: f, meta, integral: false, tombstones, use_: Use::Decode });
            }
        }
    }
    Ok(out)
}

/// Decides each block's [`Use`] (see the module documentation); blocks are split only for
/// [`Need::Sums`].
fn classify(blocks: &mut [Block<'_>], heads: &[Vec<Sample>], windows: &[(i64, i64)], need: Need) {
    let exclusive = exclusive(blocks, heads);
    for (b, exclusive) in blocks.iter_mut().zip(exclusive) {
        let (lo, hi) = b.range();
        let Some(contained) = contained((lo, hi), windows) else {
            b.use_ = Use::Skip;
            continue;
        };
        b.use_ = match split_point((lo, hi), windows) {
            _ if !exclusive => Use::Decode,
            _ if contained && need.allows(&b.meta.stats) => Use::Stats,
            // A contained block has no boundary inside it (`split_point` is `None`), so one
            // statistics cannot answer falls through to `Decode`.
            Some((at, before, rest)) if need == Need::Sums => Use::Split { at, before, rest },
            _ => Use::Decode,
        };
    }
}

/// For each block, whether it is exclusive (see the module documentation): no other block
/// overlaps its time range, no head sample falls in it, and no tombstone covers part of it.
pub(super) fn exclusive(blocks: &[Block<'_>], heads: &[Vec<Sample>]) -> Vec<bool> {
    let overlapped = overlapped_by_other_blocks(blocks);
    blocks
        .iter()
        .zip(overlapped)
        .map(|(b, overlapped)| {
            let (lo, hi) = b.range();
            let in_head = heads.iter().any(|run| {
                let i = run.partition_point(|s| s.t < lo);
                run.get(i).is_some_and(|s| s.t <= hi)
            });
            let hidden = b.tombstones.iter().any(|&(tlo, thi)| tlo <= hi && thi >= lo);
            !overlapped && !in_head && !hidden
        })
        .collect()
}

/// Where a block not contained in the windows overlapping it can be split in two parts that
/// each lie wholly inside one window or outside all of them: `(last time of the first part,
/// first part in a window, second part in a window)`. Two adjacent windows, the earlier ending
/// inside the block: `(its end, true, true)`; one window covering the block's start: `(its end,
/// true, false)`; one window covering the block's end: `(its start - 1, false, true)`. `None`
/// for any other block. Windows are well ordered (see [`well_ordered`]) and closed.
fn split_point((lo, hi): (i64, i64), windows: &[(i64, i64)]) -> Option<(i64, bool, bool)> {
    let first = windows.partition_point(|w| w.1 < lo);
    let end = windows.partition_point(|w| w.0 <= hi);
    let &(a_lo, a_hi) = windows.get(first)?;
    match end.checked_sub(first)? {
        1 if a_lo <= lo && a_hi < hi => Some((a_hi, true, false)),
        1 if a_lo > lo && a_hi >= hi => Some((a_lo - 1, false, true)),
        2 => {
            let &(b_lo, b_hi) = windows.get(first + 1)?;
            let adjacent = a_hi.checked_add(1) == Some(b_lo);
            (adjacent && a_lo <= lo && a_hi < hi && b_hi >= hi).then_some((a_hi, true, true))
        }
        _ => None,
    }
}

/// The rest of a split block after its boundary, as the later window folds it in.
#[derive(Debug, Clone, Copy)]
pub(super) struct Part {
    /// First timestamp after the boundary.
    start: i64,
    count: u64,
    sum: f64,
    /// Bound on the magnitudes' sum (the block's, which covers its rest).
    bound: f64,
}

/// What a window folds in from statistics: a whole block, or the rest of a split one.
enum FromStats<'a> {
    Block(&'a BlockMeta, bool),
    Part(Part),
}

impl FromStats<'_> {
    fn start(&self) -> i64 {
        match self {
            FromStats::Block(b, _) => b.stats.min_t,
            FromStats::Part(p) => p.start,
        }
    }
}

/// Whether every window overlapping the time range `(lo, hi)` contains all of it; `None` if no
/// window overlaps it. Windows are well ordered (see [`well_ordered`]).
pub(super) fn contained((lo, hi): (i64, i64), windows: &[(i64, i64)]) -> Option<bool> {
    // Windows overlapping the range: ends >= lo (a suffix) and starts <= hi (a prefix).
    let first = windows.partition_point(|w| w.1 < lo);
    let end = windows.partition_point(|w| w.0 <= hi);
    if first >= end {
        return None;
    }
    Some(windows[end - 1].0 <= lo && windows[first].1 >= hi)
}

/// For each block, whether another block's time range overlaps its own. Blocks of one series
/// in one file never overlap each other, so any overlap is with another file; counting one
/// anyway would only cost a decode.
fn overlapped_by_other_blocks(blocks: &[Block<'_>]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| blocks[i].range());
    let mut out = vec![false; blocks.len()];
    let mut max_end_before = i64::MIN;
    for (k, &i) in order.iter().enumerate() {
        let (lo, hi) = blocks[i].range();
        let by_earlier = k > 0 && max_end_before >= lo;
        let by_later = order.get(k + 1).is_some_and(|&j| blocks[j].range().0 <= hi);
        out[i] = by_earlier || by_later;
        max_end_before = max_end_before.max(hi);
    }
    out
}

/// Decodes the `Decode` blocks and merges them with the head samples, as `Snapshot::read`
/// merges sources: per partition, the files' runs in file order (tombstones applied); then the
/// partitions, the frozen heads and the active head.
pub(super) fn decode(
    blocks: &[Block<'_>],
    heads: Vec<Vec<Sample>>,
    mint: i64,
    maxt: i64,
    stats: &mut ScanStats,
) -> Result<(Vec<Sample>, Vec<Part>)> {
    let mut parts = Vec::new();
    let mut scratch = Vec::new();
    stats.samples_decoded += heads.iter().map(|r| r.len() as u64).sum::<u64>();
    let mut runs: Vec<Vec<Sample>> = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let partition = blocks[i].partition;
        let mut file_runs: Vec<Vec<Sample>> = Vec::new();
        while i < blocks.len() && blocks[i].partition == partition {
            let (file, tombstones) = (blocks[i].file, blocks[i].tombstones.clone());
            let mut run = Vec::new();
            while i < blocks.len() && std::ptr::eq(blocks[i].file, file) {
                let b = &blocks[i];
                i += 1;
                let from = run.len();
                match b.use_ {
                    Use::Decode => file.file()?.read_block(&b.meta, &mut run)?,
                    Use::Split { at, before, rest } => {
                        // Exclusive, so no other source has samples in its range, and integer:
                        // each side's window takes its count and exact sum, and the decoded
                        // samples need not join the merge.
                        let st = &b.meta.stats;
                        let bound = st.min.abs().max(st.max.abs()) * f64::from(st.count);
                        let (count, sum) = split_sum(file, &b.meta, at, bound, &mut scratch, stats)?;
                        if before {
                            parts.push(Part { start: st.min_t, count, sum, bound });
                        }
                        if rest {
                            let count = u64::from(st.count).saturating_sub(count);
                            parts.push(Part { start: at.saturating_add(1), count, sum: st.sum - sum, bound });
                        }
                        continue;
                    }
                    Use::Stats | Use::Skip => continue,
                }
                stats.blocks_decoded += 1;
                stats.samples_decoded += (run.len() - from) as u64;
                if b.meta.stats.min_t < mint || b.meta.stats.max_t > maxt {
                    keep_from(&mut run, from, |s| s.t >= mint && s.t <= maxt);
                }
            }
            for &(tlo, thi) in tombstones.iter() {
                run.retain(|s| s.t < tlo || s.t > thi);
            }
            file_runs.push(run);
        }
        let mut merged = Vec::new();
        merge_sources(file_runs, &mut merged);
        runs.push(merged);
    }
    runs.extend(heads);
    runs.retain(|r| !r.is_empty());
    let mut out = Vec::new();
    merge_sources(runs, &mut out);
    Ok((out, parts))
}

/// The count and sum of a split block's non-stale values up to `at`: summed as integers while
/// reading them when the block allows (implied timestamps, integer codec) and `bound` keeps the
/// sum exact (then the integer sum is the `f64` sum in any order), else decoded into `scratch`
/// and folded in time order.
fn split_sum(
    file: &LiveFile,
    meta: &BlockMeta,
    at: i64,
    bound: f64,
    scratch: &mut Vec<Sample>,
    stats: &mut ScanStats,
) -> Result<(u64, f64)> {
    stats.blocks_decoded += 1;
    if bound < EXACT_LIMIT
        && let Some(p) = file.file()?.sum_block_until(meta, at)?
    {
        stats.samples_decoded += p.read;
        return Ok((p.count, p.sum as f64));
    }
    scratch.clear();
    file.file()?.read_block_until(meta, at, scratch)?;
    stats.samples_decoded += scratch.len() as u64;
    let live = scratch.iter().filter(|s| !is_stale(s.v));
    Ok(live.fold((0u64, 0.0), |(n, sum), s| (n + 1, sum + s.v)))
}

/// One window's aggregate: the decoded samples and the statistics-answered blocks it contains,
/// folded in time order. Neither list has an entry inside another's block range.
fn fold_window((lo, hi): (i64, i64), decoded: &[Sample], from_stats: &[FromStats<'_>]) -> WindowAgg {
    let mut agg = WindowAgg::default();
    let mut samples =
        decoded[decoded.partition_point(|s| s.t < lo)..].iter().take_while(|s| s.t <= hi).peekable();
    // A statistics block (or a split block's rest) overlapping the window lies inside it, so
    // its start decides.
    let blocks =
        from_stats[from_stats.partition_point(|b| b.start() < lo)..].iter().take_while(|b| b.start() <= hi);
    for b in blocks {
        while let Some(s) = samples.next_if(|s| s.t < b.start()) {
            agg.push(s.t, s.v);
        }
        match b {
            FromStats::Block(b, integral) => agg.merge_block(&b.stats, *integral),
            FromStats::Part(p) => agg.merge_part(p.count, p.sum, p.bound),
        }
    }
    for s in samples {
        agg.push(s.t, s.v);
    }
    agg
}
