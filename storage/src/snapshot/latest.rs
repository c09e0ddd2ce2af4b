//! [`Querier::samples_latest`](crate::Querier::samples_latest) for a [`Snapshot`]: the latest
//! sample of a series in a range from the statistics of the block that holds it.
//!
//! An instant selector needs one sample per series, the latest in its lookback window, which
//! usually ends a partition-file block of an hour or more. That block's statistics hold its
//! last timestamp and its last non-stale value, which is its last sample when it has no stale
//! marker. They answer when the block is *exclusive* (see `window.rs`: nothing else touches its
//! time range), ends inside the range, and nothing else (no other block, no head sample) lies
//! after its end in the range; otherwise the series is read as usual.

use super::Snapshot;
use super::window::{exclusive, file_blocks, read_heads};
use crate::error::Result;
use crate::query::SeriesRef;
use crate::types::Sample;

/// The latest sample of `series` in `[mint, maxt]` if a block's statistics give it (see the
/// module documentation); `None` if the series must be read.
pub(super) fn latest_from_stats(
    snap: &Snapshot,
    series: &SeriesRef,
    mint: i64,
    maxt: i64,
) -> Result<Option<Sample>> {
    // Block statistics count histogram markers as float values.
    if snap.may_have_histograms(series.id, mint, maxt) {
        return Ok(None);
    }
    let blocks = file_blocks(snap, series, mint, maxt)?;
    let Some((last, b)) = blocks.iter().enumerate().max_by_key(|(_, b)| b.range().1) else {
        return Ok(None);
    };
    let (_, end) = b.range();
    let st = &b.meta.stats;
    if end > maxt || st.stale_count > 0 || st.count == 0 {
        return Ok(None);
    }
    // A head sample after the block's end is later; one inside its range makes the block not
    // exclusive.
    let heads = read_heads(snap, series, mint, maxt);
    if heads.iter().any(|run| run.last().is_some_and(|s| s.t > end)) || !exclusive(&blocks, &heads)[last] {
        return Ok(None);
    }
    Ok(Some(Sample::new(end, st.last)))
}
