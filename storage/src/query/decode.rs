//! The decoding answers of the push-down calls, for any [`Querier`]: what
//! [`Querier::window_aggregates`] and [`Querier::group_extremes`] must equal, computed from the
//! samples alone. The oracles the push-down paths are tested against.

use super::{Querier, SeriesRef};
use crate::error::Result;
use crate::window_agg::{Extreme, ScanStats, WindowAgg, aggregate_sorted, fold_extreme, span};

/// The decoding answer, for any [`Querier`]: reads the samples covering all windows once and
/// folds each window. The oracle the push-down path is tested against.
pub fn decode_window_aggregates<Q: Querier + ?Sized>(
    q: &Q,
    series: &SeriesRef,
    windows: &[(i64, i64)],
    out: &mut Vec<WindowAgg>,
    stats: &mut ScanStats,
) -> Result<()> {
    let Some((mint, maxt)) = span(windows) else {
        out.extend(windows.iter().map(|_| WindowAgg::default()));
        return Ok(());
    };
    let mut samples = Vec::new();
    q.samples(series, mint, maxt, &mut samples)?;
    stats.samples_decoded += samples.len() as u64;
    aggregate_sorted(&samples, windows, out);
    Ok(())
}

/// The decoding answer for [`Querier::group_extremes`], for any [`Querier`]: every series'
/// samples read once and folded into each window, series by series in `group` order. Appends
/// one entry per window (`None`: no series has a non-stale sample in it). The oracle the
/// push-down path is tested against.
pub fn decode_group_extremes<Q: Querier + ?Sized>(
    q: &Q,
    group: &[SeriesRef],
    windows: &[(i64, i64)],
    which: Extreme,
    out: &mut Vec<Option<f64>>,
    stats: &mut ScanStats,
) -> Result<()> {
    let base = out.len();
    out.extend(windows.iter().map(|_| None));
    let Some((mint, maxt)) = span(windows) else { return Ok(()) };
    let mut samples = Vec::new();
    for s in group {
        samples.clear();
        q.samples(s, mint, maxt, &mut samples)?;
        stats.samples_decoded += samples.len() as u64;
        for (acc, &(lo, hi)) in out[base..].iter_mut().zip(windows) {
            fold_extreme(which, acc, &samples, lo, hi);
        }
    }
    Ok(())
}
