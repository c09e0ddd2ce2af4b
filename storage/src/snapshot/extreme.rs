//! [`Querier::group_extremes`](crate::Querier::group_extremes) for a [`Snapshot`]: per window,
//! the maximum (or minimum) over a group of series, from block statistics where they answer
//! it, decoding only blocks that can change the answer.
//!
//! Why: `max(max_over_time(x[1h]))` over windows not aligned with the blocks (a dashboard's
//! `now`-relative steps, TSBS cpu-max-all) cuts every block in two, so per series no block is
//! answered from statistics and every sample is decoded. But the group needs only the largest
//! value of each window: a block whose statistics maximum is below a value already found
//! cannot change it, whichever of its samples fall in the window.
//!
//! The same holds for windows narrower than the blocks (`max(max_over_time(x[1m]))` over hour
//! blocks, TSBS groupby-orderby-limit): a window lies inside one block per series, and once a
//! few blocks with the best statistics are decoded, the value found usually leaves out most of
//! the others (on 10,000 TSBS hosts, 1-minute windows decoded a fifth of the samples the
//! per-series loop decodes, in a third of its time). Where it leaves out none, the work is
//! that of the per-series loop: each block decoded once, up to the last window's end.
//!
//! Each series' data in the windows' span is cut into *sources* in time order: its exclusive
//! blocks (as in `window.rs`: no other block, head sample or tombstone in their range), and the
//! head samples between them. A series with a block that is not exclusive (rewritten data,
//! deletions) is one source, its merged samples as `Snapshot::samples` reads them. Then, per
//! window:
//!
//! - a block inside the window gives its statistic ([`Extreme::of_block`]);
//! - decoded samples (head samples, a series read whole, blocks decoded for an earlier window)
//!   give their fold over the window;
//! - the blocks cut by the window are taken best statistic first (the best [`BEST_FIRST`] in
//!   order, the rest as they come), and each is decoded only while it could change the answer
//!   ([`Extreme::cannot_change`] against the best value found so far), and only up to the last
//!   window's end;
//! - the values found are folded in series order and time order, which gives the bits of the
//!   fold over every sample (see [`Extreme`]): the blocks left out hold nothing that could
//!   replace the answer.

use super::Snapshot;
use super::window::{Block, contained, exclusive, file_blocks, read_heads, well_ordered};
use crate::error::Result;
use crate::merge::merge_sources;
use crate::query::{Querier, SeriesRef};
use crate::types::Sample;
use crate::window_agg::{Extreme, ScanStats, fold_extreme, span};

/// A run of one series' data in time order.
enum Source<'a> {
    /// An exclusive block with at least one non-stale value.
    Block(Block<'a>, Decoded),
    /// Samples already in memory (head samples, or a series read whole); never empty.
    Samples(Vec<Sample>),
}

/// What became of a block's samples.
enum Decoded {
    /// Never decoded.
    No,
    /// Decoded for a window, and kept for the next ones that cut the block.
    Kept(Vec<Sample>),
    /// Decoded, and dropped once the windows moved past the block: memory holds the blocks
    /// the current window cuts, not every block decoded.
    Dropped,
}

impl Source<'_> {
    fn range(&self) -> (i64, i64) {
        match self {
            Source::Block(b, _) => b.range(),
            Source::Samples(s) => (s.first().map_or(i64::MAX, |s| s.t), s.last().map_or(i64::MIN, |s| s.t)),
        }
    }
}

/// See the module documentation.
pub(super) fn group_extremes(
    snap: &Snapshot,
    group: &[SeriesRef],
    windows: &[(i64, i64)],
    which: Extreme,
    out: &mut Vec<Option<f64>>,
    stats: &mut ScanStats,
) -> Result<bool> {
    if group.is_empty() || !well_ordered(windows) {
        return Ok(false);
    }
    let Some((mint, maxt)) = span(windows) else { return Ok(false) };
    // Block statistics count histogram markers as float values (see `window.rs`).
    if group.iter().any(|s| snap.may_have_histograms(s.id, mint, maxt)) {
        return Ok(false);
    }
    // Sources of all series, series by series; `series[i]` is the range of series i's.
    let mut sources: Vec<Source<'_>> = Vec::new();
    let mut series = Vec::with_capacity(group.len());
    for s in group {
        let from = sources.len();
        series_sources(snap, s, windows, mint, maxt, &mut sources, stats)?;
        series.push(from..sources.len());
    }

    let mut found: Vec<(usize, Option<f64>)> = Vec::new();
    let mut cut: Vec<(usize, f64)> = Vec::new();
    let mut prev: Option<((i64, i64), Option<f64>)> = None;
    // Per series, the first source a window may still overlap.
    let mut live: Vec<usize> = series.iter().map(|r| r.start).collect();
    for &w in windows {
        let answer = match prev {
            Some((pw, answer)) if pw == w => answer,
            _ => {
                window_extreme(&mut sources, &series, &mut live, w, maxt, which, &mut found, &mut cut, stats)?
            }
        };
        out.push(answer);
        prev = Some((w, answer));
    }
    // Sources hold only blocks that overlap a window.
    stats.blocks_from_stats +=
        sources.iter().filter(|s| matches!(s, Source::Block(_, Decoded::No))).count() as u64;
    Ok(true)
}

/// Appends the sources of series `s` in `[mint, maxt]` (see the module documentation).
fn series_sources<'a>(
    snap: &'a Snapshot,
    s: &SeriesRef,
    windows: &[(i64, i64)],
    mint: i64,
    maxt: i64,
    out: &mut Vec<Source<'a>>,
    stats: &mut ScanStats,
) -> Result<()> {
    let mut blocks = file_blocks(snap, s, mint, maxt)?;
    let heads = read_heads(snap, s, mint, maxt);
    if !exclusive(&blocks, &heads).into_iter().all(|e| e) {
        let mut samples = Vec::new();
        snap.samples(s, mint, maxt, &mut samples)?;
        stats.blocks_decoded += blocks.len() as u64;
        stats.samples_decoded += samples.len() as u64;
        if !samples.is_empty() {
            out.push(Source::Samples(samples));
        }
        return Ok(());
    }
    let mut head = Vec::new();
    merge_sources(heads, &mut head);
    stats.samples_decoded += head.len() as u64;
    // Blocks that overlap no window, or hold only stale markers, give nothing.
    blocks.retain(|b| b.meta.stats.count > 0 && contained(b.range(), windows).is_some());
    blocks.sort_by_key(Block::range);
    // Exclusive: no head sample falls inside a block, so the head samples split into the runs
    // between the blocks.
    let mut rest = &head[..];
    for b in blocks {
        let before = rest.partition_point(|x| x.t < b.range().0);
        if before > 0 {
            out.push(Source::Samples(rest[..before].to_vec()));
        }
        rest = &rest[before..];
        out.push(Source::Block(b, Decoded::No));
    }
    if !rest.is_empty() {
        out.push(Source::Samples(rest.to_vec()));
    }
    Ok(())
}

/// Cut blocks decoded in order of their statistic before the rest (see [`window_extreme`]).
const BEST_FIRST: usize = 16;

/// The group's extreme over window `w = (lo, hi)`: see the module documentation. `live[i]` is
/// the first source of series `i` that this window or a later one may overlap (window starts
/// never decrease), advanced here; no window ends after `maxt`; `found` and `cut` are scratch
/// space.
#[allow(clippy::too_many_arguments)]
fn window_extreme(
    sources: &mut [Source<'_>],
    series: &[std::ops::Range<usize>],
    live: &mut [usize],
    (lo, hi): (i64, i64),
    maxt: i64,
    which: Extreme,
    found: &mut Vec<(usize, Option<f64>)>,
    cut: &mut Vec<(usize, f64)>,
    stats: &mut ScanStats,
) -> Result<Option<f64>> {
    found.clear();
    cut.clear();
    // The best value (not NaN) found so far.
    let mut best: Option<f64> = None;
    let note = |best: &mut Option<f64>, v: Option<f64>| {
        if let Some(v) = v.filter(|v| !v.is_nan()) {
            which.fold(best, v);
        }
    };
    for (r, live) in series.iter().zip(live.iter_mut()) {
        // A series' sources are disjoint and in time order: those overlapping the window are
        // a contiguous run. Blocks before it were decoded for the last time.
        let own = &sources[r.clone()];
        let first = r.start + own.partition_point(|s| s.range().1 < lo);
        let end = r.start + own.partition_point(|s| s.range().0 <= hi);
        for src in &mut sources[*live..first.max(*live)] {
            if let Source::Block(_, d @ Decoded::Kept(_)) = src {
                *d = Decoded::Dropped;
            }
        }
        *live = first.max(*live);
        for (i, src) in sources.iter().enumerate().take(end).skip(first) {
            let v = match src {
                Source::Block(b, Decoded::No | Decoded::Dropped) => {
                    let (blo, bhi) = b.range();
                    let st = which.of_block(&b.meta.stats);
                    if lo <= blo && bhi <= hi {
                        Some(st)
                    } else {
                        cut.push((i, st));
                        continue;
                    }
                }
                Source::Block(_, Decoded::Kept(samples)) | Source::Samples(samples) => {
                    let mut acc = None;
                    fold_extreme(which, &mut acc, samples, lo, hi);
                    acc
                }
            };
            note(&mut best, v);
            found.push((i, v));
        }
    }
    // Best statistic first, NaN (a block of NaN only) last: the best few in order, which
    // usually find a value that leaves out the rest, and the rest as they come (a full sort
    // cost more than the decoding it saved with thousands of series per window).
    let better = |a: &(usize, f64), b: &(usize, f64)| {
        a.1.is_nan().cmp(&b.1.is_nan()).then_with(|| match which {
            Extreme::Max => b.1.total_cmp(&a.1),
            Extreme::Min => a.1.total_cmp(&b.1),
        })
    };
    if cut.len() > BEST_FIRST {
        cut.select_nth_unstable_by(BEST_FIRST, better);
    }
    let head = cut.len().min(BEST_FIRST);
    cut[..head].sort_by(better);
    for &(i, bound) in cut.iter() {
        if best.is_some_and(|b| which.cannot_change(bound, b)) {
            continue;
        }
        let Source::Block(b, decoded) = &mut sources[i] else { continue };
        if !matches!(decoded, Decoded::Kept(_)) {
            // Cut blocks of this window are `No` (or `Dropped`, never in practice: a block is
            // dropped only once the windows start after it).
            // Windows never end after `maxt`: the rest of the block is not read.
            let mut samples = Vec::new();
            b.file.file()?.read_block_until(&b.meta, maxt, &mut samples)?;
            stats.blocks_decoded += 1;
            stats.samples_decoded += samples.len() as u64;
            *decoded = Decoded::Kept(samples);
        }
        let Decoded::Kept(samples) = decoded else { continue };
        let mut acc = None;
        fold_extreme(which, &mut acc, samples, lo, hi);
        note(&mut best, acc);
        found.push((i, acc));
    }
    // In series order, then time order: the order of the sources.
    found.sort_by_key(|f| f.0);
    let mut answer = None;
    for v in found.iter().filter_map(|f| f.1) {
        which.fold(&mut answer, v);
    }
    Ok(answer)
}
