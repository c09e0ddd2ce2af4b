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
//! - when the caller needs exact sums (`sum_over_time`, `avg_over_time`), its header shows its
//!   values are integers ([`crate::encoding::integral_values`]), so its `sum` statistic is
//!   exact. Otherwise it is decoded, and a series of floats declines the push-down as a whole
//!   rather than answer windows without an exact sum.
//!
//! Every other block overlapping a window is decoded, and the decoded samples of all sources are
//! merged exactly as [`Querier::samples`](crate::Querier::samples) merges them (newest write
//! wins). Skipping the exclusive blocks does not change that merge: by exclusivity, no other
//! source holds a sample in their ranges. Each window then folds, in time order, the decoded
//! samples it contains and the statistics of the blocks it contains.

use std::sync::Arc;

use super::Snapshot;
use crate::db::LiveFile;
use crate::error::Result;
use crate::flush::{keep_from, merge_sources};
use crate::matcher::matches_all;
use crate::partition::BlockMeta;
use crate::query::SeriesRef;
use crate::types::Sample;
use crate::window::{ScanStats, WindowAgg, span};

/// What a block contributes to the windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Answered from its statistics.
    Stats,
    /// Decoded and merged with the other sources.
    Decode,
    /// Overlaps no window: neither read nor counted.
    Skip,
}

/// A block of the series in one of the snapshot's files.
struct Block<'a> {
    /// Index of the partition in time order (files of different partitions never share time).
    partition: usize,
    file: &'a LiveFile,
    meta: BlockMeta,
    /// Its values are known to be integers (see [`WindowAgg::merge_block`]); checked only for
    /// blocks answered from statistics.
    integral: bool,
    /// Tombstones (closed ranges) that apply to the block's file and this series.
    tombstones: Arc<Vec<(i64, i64)>>,
    use_: Use,
}

impl Block<'_> {
    fn range(&self) -> (i64, i64) {
        (self.meta.stats.min_t, self.meta.stats.max_t)
    }
}

/// See the module documentation.
pub(super) fn window_aggregates(
    snap: &Snapshot,
    series: &SeriesRef,
    windows: &[(i64, i64)],
    sums: bool,
    out: &mut Vec<WindowAgg>,
    stats: &mut ScanStats,
) -> Result<bool> {
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
    // statistics: decline before reading the heads.
    if !blocks.iter().any(|b| contained(b.range(), windows) == Some(true)) {
        return Ok(false);
    }
    let heads = read_heads(snap, series, mint, maxt);
    classify(&mut blocks, &heads, windows);
    for b in blocks.iter_mut().filter(|b| b.use_ == Use::Stats) {
        b.integral = b.file.file.block_integral(&b.meta)?;
        if sums && !b.integral {
            b.use_ = Use::Decode;
        }
    }
    if !worth_it(&blocks, &heads) {
        return Ok(false);
    }

    let decoded = decode(&blocks, heads, mint, maxt, stats)?;
    let mut from_stats: Vec<(&BlockMeta, bool)> =
        blocks.iter().filter(|b| b.use_ == Use::Stats).map(|b| (&b.meta, b.integral)).collect();
    from_stats.sort_by_key(|(b, _)| b.stats.min_t);
    stats.blocks_from_stats += from_stats.len() as u64;

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

/// Whether answering from statistics saves work: at least as many samples come from block
/// statistics as must be decoded. Decoding here (blocks merged with the head, then folded per
/// window) costs about twice a plain sample read per sample (`promql/examples/pushdown_bench.rs`),
/// so with fewer samples from statistics the caller's plain read is faster. Windows narrower than
/// the blocks, or data rewritten over most blocks, end here.
fn worth_it(blocks: &[Block<'_>], heads: &[Vec<Sample>]) -> bool {
    let samples = |b: &Block<'_>| u64::from(b.meta.stats.count) + u64::from(b.meta.stats.stale_count);
    let from_stats: u64 = blocks.iter().filter(|b| b.use_ == Use::Stats).map(samples).sum();
    let decoded: u64 = blocks.iter().filter(|b| b.use_ == Use::Decode).map(samples).sum::<u64>()
        + heads.iter().map(|r| r.len() as u64).sum::<u64>();
    from_stats > 0 && from_stats >= decoded
}

/// Windows this path handles: non-empty, with starts and ends both non-decreasing (so the
/// windows overlapping a time range are a contiguous run). Anything else decodes.
fn well_ordered(windows: &[(i64, i64)]) -> bool {
    windows.iter().all(|(lo, hi)| lo <= hi)
        && windows.windows(2).all(|p| p[0].0 <= p[1].0 && p[0].1 <= p[1].1)
}

/// The series' samples in the frozen heads and the active head, oldest head first (the order
/// in which newer writes win), empty runs left out.
fn read_heads(snap: &Snapshot, series: &SeriesRef, mint: i64, maxt: i64) -> Vec<Vec<Sample>> {
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
fn file_blocks<'a>(snap: &'a Snapshot, series: &SeriesRef, mint: i64, maxt: i64) -> Result<Vec<Block<'a>>> {
    let mut out = Vec::new();
    for (partition, files) in snap.partitions_in(mint, maxt).enumerate() {
        for f in files {
            let e = &f.entry;
            if e.max_t < mint || e.min_t > maxt || !f.file.contains(series.id) {
                continue;
            }
            let tombstones: Arc<Vec<(i64, i64)>> = Arc::new(
                snap.state
                    .tombstones
                    .iter()
                    .filter(|t| t.applies_to(e) && matches_all(&t.matchers, &series.labels))
                    .map(|t| (t.mint, t.maxt))
                    .collect(),
            );
            for meta in f.file.blocks(series.id)? {
                if meta.stats.max_t >= mint && meta.stats.min_t <= maxt {
                    let tombstones = Arc::clone(&tombstones);
                    out.push(Block {
                        partition,
                        file: f,
                        meta,
                        integral: false,
                        tombstones,
                        use_: Use::Decode,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Decides each block's [`Use`] (see the module documentation).
fn classify(blocks: &mut [Block<'_>], heads: &[Vec<Sample>], windows: &[(i64, i64)]) {
    let overlapped = overlapped_by_other_blocks(blocks);
    for (b, overlapped) in blocks.iter_mut().zip(overlapped) {
        let (lo, hi) = b.range();
        let Some(contained) = contained((lo, hi), windows) else {
            b.use_ = Use::Skip;
            continue;
        };
        let in_head = heads.iter().any(|run| {
            let i = run.partition_point(|s| s.t < lo);
            run.get(i).is_some_and(|s| s.t <= hi)
        });
        let hidden = b.tombstones.iter().any(|&(tlo, thi)| tlo <= hi && thi >= lo);
        b.use_ = if contained && !overlapped && !in_head && !hidden { Use::Stats } else { Use::Decode };
    }
}

/// Whether every window overlapping the time range `(lo, hi)` contains all of it; `None` if no
/// window overlaps it. Windows are well ordered (see [`well_ordered`]).
fn contained((lo, hi): (i64, i64), windows: &[(i64, i64)]) -> Option<bool> {
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
fn decode(
    blocks: &[Block<'_>],
    heads: Vec<Vec<Sample>>,
    mint: i64,
    maxt: i64,
    stats: &mut ScanStats,
) -> Result<Vec<Sample>> {
    stats.samples_decoded += heads.iter().map(|r| r.len() as u64).sum::<u64>();
    let mut runs: Vec<Vec<Sample>> = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let partition = blocks[i].partition;
        let mut file_runs: Vec<Vec<Sample>> = Vec::new();
        while i < blocks.len() && blocks[i].partition == partition {
            let (file, tombstones) = (blocks[i].file, Arc::clone(&blocks[i].tombstones));
            let mut run = Vec::new();
            while i < blocks.len() && std::ptr::eq(blocks[i].file, file) {
                let b = &blocks[i];
                i += 1;
                if b.use_ != Use::Decode {
                    continue;
                }
                let from = run.len();
                file.file.read_block(&b.meta, &mut run)?;
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
    Ok(out)
}

/// One window's aggregate: the decoded samples and the statistics-answered blocks it contains,
/// folded in time order. Neither list has an entry inside another's block range.
fn fold_window((lo, hi): (i64, i64), decoded: &[Sample], from_stats: &[(&BlockMeta, bool)]) -> WindowAgg {
    let mut agg = WindowAgg::default();
    let mut samples =
        decoded[decoded.partition_point(|s| s.t < lo)..].iter().take_while(|s| s.t <= hi).peekable();
    // A statistics block overlapping the window lies inside it, so its start decides.
    let blocks = from_stats[from_stats.partition_point(|(b, _)| b.stats.min_t < lo)..]
        .iter()
        .take_while(|(b, _)| b.stats.min_t <= hi);
    for &(b, integral) in blocks {
        while let Some(s) = samples.next_if(|s| s.t < b.stats.min_t) {
            agg.push(s.v);
        }
        agg.merge_block(&b.stats, integral);
    }
    for s in samples {
        agg.push(s.v);
    }
    agg
}
