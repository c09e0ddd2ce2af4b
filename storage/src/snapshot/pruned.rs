//! [`Querier::samples_pruned`](crate::Querier::samples_pruned) for a [`Snapshot`]: a series'
//! samples with the blocks whose values the caller would drop anyway left undecoded.
//!
//! A partition-file block is pruned when it lies wholly inside the read range, is *exclusive*
//! (no other block, head sample or tombstone touches its time range: see `window.rs`), and the
//! caller's test on its smallest and largest value says none of its values can be kept. Its
//! samples are then read as two stale markers, at its first and its last timestamp. By
//! exclusivity no other source has a sample in between, so for every time in the block's range
//! the latest sample at or before it is, in the full read, one of the block's samples, which the
//! caller drops, and in the pruned read a stale marker, which a reader of latest samples drops
//! too; at or after the block's end both reads have the same samples. Everything else is read
//! and merged exactly as [`Querier::samples`](crate::Querier::samples) reads it.

use super::Snapshot;
use super::window::{Block, Use, decode, exclusive, file_blocks, read_heads};
use crate::error::Result;
use crate::query::SeriesRef;
use crate::types::{Sample, stale_nan};
use crate::window_agg::ScanStats;

/// See the module documentation. Returns false, having appended nothing, when no block can be
/// pruned, so the caller reads the series as usual.
pub(super) fn samples_pruned(
    snap: &Snapshot,
    series: &SeriesRef,
    mint: i64,
    maxt: i64,
    may_keep: &dyn Fn(f64, f64) -> bool,
    out: &mut Vec<Sample>,
    stats: &mut ScanStats,
) -> Result<bool> {
    // Block statistics count histogram markers as float values.
    if snap.may_have_histograms(series.id, mint, maxt) {
        return Ok(false);
    }
    let mut blocks = file_blocks(snap, series, mint, maxt)?;
    let candidate = |b: &Block<'_>| {
        let (lo, hi) = b.range();
        lo >= mint && hi <= maxt && !may_keep(b.meta.stats.min, b.meta.stats.max)
    };
    if !blocks.iter().any(candidate) {
        return Ok(false);
    }
    let heads = read_heads(snap, series, mint, maxt);
    let exclusive = exclusive(&blocks, &heads);
    let mut markers = Vec::new();
    for (b, exclusive) in blocks.iter_mut().zip(exclusive) {
        if exclusive && candidate(b) {
            b.use_ = Use::Stats;
            let (lo, hi) = b.range();
            markers.push(Sample::new(lo, stale_nan()));
            if hi > lo {
                markers.push(Sample::new(hi, stale_nan()));
            }
        }
    }
    stats.blocks_from_stats += blocks.iter().filter(|b| b.use_ == Use::Stats).count() as u64;
    let (decoded, _) = decode(&blocks, heads, mint, maxt, stats)?;
    // Both lists are sorted, and no decoded sample lies in a pruned block's range.
    markers.sort_by_key(|s| s.t);
    out.reserve(decoded.len() + markers.len());
    let mut markers = markers.into_iter().peekable();
    for s in decoded {
        while let Some(m) = markers.next_if(|m| m.t < s.t) {
            out.push(m);
        }
        out.push(s);
    }
    out.extend(markers);
    Ok(true)
}
