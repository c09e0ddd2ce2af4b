//! [`Querier::samples_latest`](crate::Querier::samples_latest) for a [`Snapshot`]: the latest
//! sample of a series in a range from the statistics of the block that holds it.
//!
//! An instant selector needs one sample per series, the latest in its lookback window, which
//! usually ends a partition-file block of an hour or more. That block's statistics hold its
//! last timestamp and its last non-stale value, which is its last sample when it has no stale
//! marker. They answer when the block is *exclusive* (see `window.rs`: nothing else touches its
//! time range), ends inside the range, and nothing else (no other block, no head sample) lies
//! after its end in the range; otherwise the series is read as usual.
//!
//! Recent data lives in the active head, the newest source, whose value wins at any timestamp
//! it holds. Its in-order chunks keep their last sample, so when that sample lies in the range
//! and no other source (frozen head, file) holds anything after it in the range, it is the
//! answer without decoding anything.

use super::Snapshot;
use super::window::{exclusive, file_blocks, read_heads};
use crate::error::Result;
use crate::query::SeriesRef;
use crate::types::Sample;

/// Where [`latest_without_reading`] found the sample.
pub(super) enum Latest {
    /// The statistics of a block.
    Stats(Sample),
    /// The active head's last in-order sample.
    Head(Sample),
}

/// The latest sample of `series` in `[mint, maxt]` if a block's statistics or the head's last
/// sample give it (see the module documentation); `None` if the series must be read.
pub(super) fn latest_without_reading(
    snap: &Snapshot,
    series: &SeriesRef,
    mint: i64,
    maxt: i64,
) -> Result<Option<Latest>> {
    // The head's sample wins over every other source at its time and is later than theirs,
    // so only the head's own histograms matter there (`Head::latest_in_order` checks them).
    if let Some(s) = latest_in_head(snap, series, mint, maxt) {
        return Ok(Some(Latest::Head(s)));
    }
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
    Ok(Some(Latest::Stats(Sample::new(end, st.last))))
}

/// The active head's newest sample of the series, if it is the latest in `[mint, maxt]` of
/// every source (see the module documentation); None if that takes reading.
fn latest_in_head(snap: &Snapshot, series: &SeriesRef, mint: i64, maxt: i64) -> Option<Sample> {
    let s = snap.state.head.latest_in_order(series.id, mint, maxt)?;
    let later_in_frozen =
        snap.state.frozen.iter().any(|f| f.head.series_bounds(series.id).is_some_and(|(_, hi)| hi > s.t));
    if later_in_frozen {
        return None;
    }
    // A file holding the series with data after `s.t` in the range might hold a later sample.
    let after = s.t.saturating_add(1);
    let later_in_files = after <= maxt
        && snap.partitions_in(after, maxt).flatten().any(|f| {
            f.entry.max_t >= after && f.entry.min_t <= maxt && f.may_hold(|p| p.contains(series.id))
        });
    (!later_in_files).then_some(s)
}
