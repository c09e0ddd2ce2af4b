//! `rate`, `increase`, `delta` (with Prometheus' extrapolation), their anchored/smoothed
//! variants, and `irate`/`idelta`.

use super::numeric::interpolate;
use super::{FPoint, start_timestamps};

/// Where a window sits in time, for functions that look at its boundaries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Start of the range (exclusive), ms.
    pub range_start: i64,
    /// End of the range (inclusive), ms.
    pub range_end: i64,
    /// Range length in seconds.
    pub range_secs: f64,
}

/// Prometheus' `extrapolatedRate` for floats: the increase between the first and last sample
/// (corrected for counter resets), extrapolated towards the range boundaries when the samples
/// come close enough to them, and never below the counter's zero point.
///
/// `sts` holds the points' start timestamps (see `start_timestamps`), or is empty. For counters
/// they reveal resets the values hide, and a first sample whose counter started inside the range
/// is counted from zero at that start instead of extrapolated; then one sample is enough.
pub(crate) fn extrapolated_rate(
    w: &[FPoint],
    sts: &[i64],
    b: Bounds,
    is_counter: bool,
    is_rate: bool,
) -> Option<f64> {
    let (first, last) = (*w.first()?, *w.last()?);
    let sts = if is_counter { sts } else { &[] };
    let mut increase = last.f - first.f;
    if is_counter {
        for (i, pair) in w.windows(2).enumerate() {
            let st_reset =
                i + 1 < sts.len() && start_timestamps::is_reset(sts[i], pair[0].t, sts[i + 1], pair[1].t);
            if pair[1].f < pair[0].f || st_reset {
                increase += pair[0].f;
            }
        }
    }
    let s = Sampled { first, last, gaps: w.len() - 1, increase };
    extrapolate(s, sts.first().copied(), b, is_counter, is_rate)
}

/// What [`extrapolate`] needs of a window's samples: the first and last, how many gaps lie
/// between them (samples - 1), and `last - first` with, for counters, the value before each
/// reset added in time order (Prometheus' order, which decides the float's last bits).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampled {
    pub first: FPoint,
    pub last: FPoint,
    pub gaps: usize,
    pub increase: f64,
}

/// The rest of Prometheus' `extrapolatedRate` from [`Sampled`]: shared by the sample-by-sample
/// path and push-down, which finds the same four things in block statistics. `start` is the
/// first sample's start timestamp, if any.
pub(crate) fn extrapolate(
    s: Sampled,
    start: Option<i64>,
    b: Bounds,
    is_counter: bool,
    is_rate: bool,
) -> Option<f64> {
    let Sampled { first, last, gaps, increase: mut result } = s;
    let mut to_start = (first.t - b.range_start) as f64 / 1000.0;
    let mut to_end = (b.range_end - last.t) as f64 / 1000.0;
    let mut sampled = (last.t - first.t) as f64 / 1000.0;
    let avg_gap = if gaps > 0 { sampled / gaps as f64 } else { 0.0 };
    // Extrapolate to a boundary only if a sample "should" have been there; otherwise assume the
    // series started or ended half an average gap beyond the outermost sample.
    let threshold = avg_gap * 1.1;
    match start {
        // The counter started inside the range (the range start is exclusive): assume a zero
        // sample at its start rather than extrapolating to the left.
        Some(st) if st != 0 && st > b.range_start && st < first.t => {
            to_start = 0.0;
            sampled = (last.t - st) as f64 / 1000.0;
            result += first.f;
        }
        _ if gaps == 0 => return None,
        _ => {
            if to_start >= threshold {
                to_start = avg_gap / 2.0;
            }
            if is_counter && result > 0.0 && first.f >= 0.0 {
                // A counter cannot go below zero: do not extrapolate past the point where it would.
                let to_zero = sampled * (first.f / result);
                if to_zero < to_start {
                    to_start = to_zero;
                }
            }
        }
    }
    if to_end >= threshold {
        to_end = avg_gap / 2.0;
    }
    let mut factor = if sampled != 0.0 { (sampled + to_start + to_end) / sampled } else { 1.0 };
    if is_rate {
        factor /= b.range_secs;
    }
    Some(result * factor)
}

/// Interpolation that treats a drop as a counter reset to zero.
fn interpolate_counter(p1: FPoint, p2: FPoint, t: i64, is_counter: bool) -> f64 {
    if is_counter && p2.f < p1.f {
        return interpolate(FPoint { t: p1.t, f: 0.0 }, p2, t);
    }
    interpolate(p1, p2, t)
}

/// Index of the last sample at or before `start`, or 0 (Prometheus' `sort.Search(...) - 1`).
pub(crate) fn first_index_at_or_before(w: &[FPoint], start: i64) -> usize {
    let n = w.len().saturating_sub(1);
    w[..n].partition_point(|p| p.t <= start).saturating_sub(1)
}

/// `rate`/`increase`/`delta` over an `anchored` or `smoothed` range: the difference between
/// the values at the range boundaries (the sample at or before the start for anchored ranges,
/// interpolated values for smoothed ones), without extrapolation.
pub(crate) fn extended_rate(
    w: &[FPoint],
    b: Bounds,
    smoothed: bool,
    is_counter: bool,
    is_rate: bool,
) -> Option<f64> {
    if w.is_empty() {
        return None;
    }
    let mut last = w.len() - 1;
    let mut first = first_index_at_or_before(w, b.range_start);
    if smoothed {
        // Data only after the range: nothing to interpolate from.
        if w[0].t > b.range_end {
            return None;
        }
        last = w[..last].partition_point(|p| p.t < b.range_end);
    }
    if w[last].t <= b.range_start {
        return None;
    }
    let left = if smoothed && w[first].t < b.range_start && first + 1 < w.len() {
        interpolate_counter(w[first], w[first + 1], b.range_start, is_counter)
    } else {
        w[first].f
    };
    let right = if smoothed && last > 0 && w[last].t > b.range_end {
        interpolate_counter(w[last - 1], w[last], b.range_end, is_counter)
    } else {
        w[last].f
    };
    let mut result = right - left;
    if is_counter {
        if w[first].t <= b.range_start {
            first += 1;
        }
        let inner_end = if w[last].t >= b.range_end { last } else { last + 1 };
        let inner = if first < inner_end { &w[first..inner_end] } else { &[][..] };
        let mut prev = left;
        for p in inner {
            if p.f < prev {
                result += prev;
            }
            prev = p.f;
        }
        if right < prev {
            result += prev;
        }
    }
    if is_rate {
        result /= b.range_secs;
    }
    Some(result)
}

/// `irate` (`is_rate`) and `idelta`: from the last two samples of the window. `sts` holds the
/// points' start timestamps or is empty; `irate` treats a reset they show like a drop in value.
pub(crate) fn instant_value(w: &[FPoint], sts: &[i64], is_rate: bool) -> Option<f64> {
    let n = w.len();
    if n < 2 {
        return None;
    }
    let (a, b) = (w[n - 2], w[n - 1]);
    let interval = b.t - a.t;
    if interval == 0 {
        return None;
    }
    let reset = is_rate
        && (b.f < a.f || sts.len() == n && start_timestamps::is_reset(sts[n - 2], a.t, sts[n - 1], b.t));
    // For a counter reset the new value itself is the increase since the reset.
    let mut v = if reset { b.f } else { b.f - a.f };
    if is_rate {
        v /= interval as f64 / 1000.0;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(i64, f64)]) -> Vec<FPoint> {
        v.iter().map(|&(t, f)| FPoint { t, f }).collect()
    }

    #[test]
    fn rate_extrapolates_to_the_boundaries() {
        // Samples every 10s from 10s to 50s, increasing by 10; range (0, 60s].
        let w = pts(&[(10_000, 10.0), (20_000, 20.0), (30_000, 30.0), (40_000, 40.0), (50_000, 50.0)]);
        let b = Bounds { range_start: 0, range_end: 60_000, range_secs: 60.0 };
        // The zero point (0s) limits extrapolation at the start; the end extends 10s.
        assert_eq!(extrapolated_rate(&w, &[], b, true, false), Some(60.0));
        assert_eq!(extrapolated_rate(&w, &[], b, true, true), Some(1.0));
        // A gauge (delta) extrapolates fully at both ends.
        assert_eq!(extrapolated_rate(&w, &[], b, false, false), Some(60.0));
    }

    #[test]
    fn rate_handles_counter_resets_and_gaps() {
        let w = pts(&[(0, 5.0), (10_000, 10.0), (20_000, 2.0), (30_000, 7.0)]);
        let b = Bounds { range_start: -10_000, range_end: 40_000, range_secs: 50.0 };
        // Increase 2 + 10 (reset) = 12 over 30s sampled; both ends 10s away (= avg gap, < 1.1x).
        let inc = extrapolated_rate(&w, &[], b, true, false).unwrap();
        assert!((inc - 12.0 * 50.0 / 30.0).abs() < 1e-9, "{inc}");
        // Far boundaries extrapolate only half a gap.
        let b = Bounds { range_start: -100_000, range_end: 100_000, range_secs: 200.0 };
        let inc = extrapolated_rate(&w, &[], b, true, false).unwrap();
        assert!((inc - 12.0 * 40.0 / 30.0).abs() < 1e-9, "{inc}");
        assert_eq!(extrapolated_rate(&w[..1], &[], b, true, false), None);
    }

    #[test]
    fn irate_uses_last_two_samples() {
        let w = pts(&[(0, 1.0), (10_000, 5.0), (20_000, 2.0)]);
        assert_eq!(instant_value(&w, &[], true), Some(0.2));
        assert_eq!(instant_value(&w, &[], false), Some(-3.0));
    }

    #[test]
    fn start_timestamps_reveal_resets_and_replace_left_extrapolation() {
        // A delta-style counter: every sample counts 60 since the previous one.
        let w = pts(&[(60_000, 60.0), (120_000, 60.0), (180_000, 60.0)]);
        let sts = [0, 60_000, 120_000];
        let b = Bounds { range_start: 0, range_end: 180_000, range_secs: 180.0 };
        // Without start timestamps nothing increased; with them, the second pair is a reset
        // (the first pair's start is unknown) and the result is extrapolated to the range.
        assert_eq!(extrapolated_rate(&w, &[], b, true, false), Some(0.0));
        assert_eq!(extrapolated_rate(&w, &sts, b, true, false), Some(90.0));
        // A counter that started inside the range counts from zero there, no extrapolation.
        let w = pts(&[(120_000, 10.0), (180_000, 20.0)]);
        assert_eq!(extrapolated_rate(&w, &[90_000, 90_000], b, true, false), Some(20.0));
        // Even a single sample is enough then.
        assert_eq!(extrapolated_rate(&w[..1], &[90_000], b, true, false), Some(10.0));
        assert_eq!(extrapolated_rate(&w[..1], &[], b, true, false), None);
        // A start at or before the range start, or gauges (`delta`), change nothing.
        assert_eq!(extrapolated_rate(&w[..1], &[0], b, true, false), None);
        assert_eq!(
            extrapolated_rate(&w, &[90_000, 90_000], b, false, false),
            extrapolated_rate(&w, &[], b, false, false)
        );
        // irate: a start-timestamp reset makes the last value the increase.
        assert_eq!(instant_value(&w, &[90_000, 150_000], true), Some(20.0 / 60.0));
        assert_eq!(instant_value(&w, &[90_000, 90_000], true), Some(10.0 / 60.0));
        assert_eq!(instant_value(&w, &[90_000, 150_000], false), Some(10.0));
    }

    #[test]
    fn anchored_increase_uses_the_sample_before_the_range() {
        let w = pts(&[(0, 1.0), (30_000, 4.0), (60_000, 9.0)]);
        let b = Bounds { range_start: 10_000, range_end: 60_000, range_secs: 50.0 };
        assert_eq!(extended_rate(&w, b, false, true, false), Some(8.0));
        let w = pts(&[(0, 0.0), (20_000, 20.0), (40_000, 40.0), (80_000, 80.0)]);
        // Smoothed: interpolate at 10s (10) and 60s (60).
        assert_eq!(extended_rate(&w, b, true, true, false), Some(50.0));
    }
}
