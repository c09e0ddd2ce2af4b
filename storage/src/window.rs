//! Windowed aggregates: per window of time, the count, minimum, maximum, first and last of a
//! series' values, as `min|max|count|first|last|present_over_time` need them.
//!
//! The point is push-down: a [`Querier`] that keeps per-block statistics (the
//! [`Snapshot`](crate::Snapshot)) answers whole blocks from them instead of decoding their
//! samples. That is only worth anything if the answer is the same, bit for bit, as folding the
//! decoded samples one by one, so the fold here is defined once ([`WindowAgg::push`]) and a
//! block's statistics are merged with [`WindowAgg::merge_block`], which gives the same result as
//! pushing the block's samples in order (see the proof on [`WindowAgg`]).
//!
//! Sums are offered only where they are exact: PromQL's `sum_over_time` and `avg_over_time` use
//! Neumaier-compensated summation (and `avg` switches to an incremental mean on overflow), whose
//! result in general depends on every intermediate value, so a block's plain `sum` statistic
//! cannot be combined into the same bits. But when every value is an integer and every partial
//! sum stays below 2^53 in magnitude, each addition is exact, the compensation stays 0 and the
//! result is the exact integer sum, whatever the order or grouping. [`WindowAgg::exact_sum`]
//! gives that sum when it can vouch for it (integer data, such as counters and the TSBS
//! values, which is most metrics), and `None` otherwise, and callers then decode.

use crate::encoding::BlockStats;
use crate::error::Result;
use crate::query::{Querier, SeriesRef};
use crate::types::{Sample, is_stale};

/// The aggregate of one window's non-stale samples (stale markers are not values in PromQL).
///
/// `min` and `max` follow Prometheus' `min_over_time`/`max_over_time`: starting from the first
/// value, a value replaces the current one if it is smaller (larger) or the current one is NaN.
/// The result is therefore the first occurrence of the smallest non-NaN value, or, if every
/// value is NaN, the last NaN. Folding a block's statistic (computed with the same rule over the
/// block) into a running value with the same rule gives the same bits as folding the block's
/// values one by one: if the running value is NaN, the block's fold restarts from its first
/// value exactly as the sequential fold would; otherwise the block's result either beats the
/// running value (and was its first minimum) or does not (and nothing in the block did). A block
/// without values (only stale markers) is skipped, as its samples would be.
#[derive(Debug, Clone, Copy)]
pub struct WindowAgg {
    /// Non-stale samples in the window; 0 means the window is empty and the floats are NaN.
    pub count: u64,
    /// Smallest value, with the NaN rule above.
    pub min: f64,
    /// Largest value, with the NaN rule above.
    pub max: f64,
    /// Value of the earliest sample.
    pub first: f64,
    /// Value of the latest sample.
    pub last: f64,
    /// The sum of the values, exact while `sum_exact` holds.
    sum: f64,
    /// Sum of the values' magnitudes (or an upper bound on it): bounds every partial sum.
    sum_bound: f64,
    /// True while every value folded in is an integer below 2^53, not -0.0, and `sum_bound`
    /// is below 2^53: then `sum` is exact.
    sum_exact: bool,
    /// Part of a block was folded in by its count and sum alone ([`WindowAgg::merge_part`]):
    /// `count` and the exact sum hold, `min`, `max`, `first` and `last` are unknown.
    partial: bool,
}

/// 2^53: integers below it in magnitude, and their sums while these stay below it, are exact.
pub(crate) const EXACT_LIMIT: f64 = 9_007_199_254_740_992.0;

impl Default for WindowAgg {
    fn default() -> Self {
        WindowAgg {
            count: 0,
            min: f64::NAN,
            max: f64::NAN,
            first: f64::NAN,
            last: f64::NAN,
            sum: 0.0,
            sum_bound: 0.0,
            sum_exact: true,
            partial: false,
        }
    }
}

impl PartialEq for WindowAgg {
    /// Bit-exact comparison of the floats: push-down must not change a single bit. The sum is
    /// not compared: whether it is known exactly depends on how the window was read (block
    /// headers may not tell), and where both know it, it is the same exact value. Of a
    /// [partial](WindowAgg::is_partial) aggregate only the count is known to compare.
    fn eq(&self, o: &Self) -> bool {
        self.count == o.count
            && (self.partial
                || o.partial
                || [self.min, self.max, self.first, self.last]
                    .iter()
                    .zip([o.min, o.max, o.first, o.last])
                    .all(|(a, b)| a.to_bits() == b.to_bits()))
    }
}

impl WindowAgg {
    /// True if the window holds no (non-stale) sample: PromQL produces no point for it.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The exact sum of the window's values, if every value is an integer (not -0.0) and the
    /// sum of their magnitudes is below 2^53. Then Prometheus' compensated `sum_over_time` and
    /// `avg_over_time` folds are exact at every step and equal `sum` and `sum / count`.
    /// `None` if unknown, and for an empty window.
    pub fn exact_sum(&self) -> Option<f64> {
        (self.sum_exact && self.count > 0).then_some(self.sum)
    }

    /// Adds `magnitude` (a bound on the magnitude of every partial sum of `sum`) and `sum` (exact
    /// by the caller's guarantee) to the running sum, or gives up on it.
    fn add_exact(&mut self, sum: f64, magnitude: f64, known: bool) {
        if !self.sum_exact {
            return;
        }
        let bound = self.sum_bound + magnitude;
        // `<` on rounded values is safe: rounding is monotone and 2^53 is representable, so a
        // true bound at or above 2^53 never rounds below it.
        if known && bound < EXACT_LIMIT {
            self.sum += sum;
            self.sum_bound = bound;
        } else {
            self.sum_exact = false;
        }
    }

    /// Folds in the next value, in time order. Stale markers are ignored.
    pub fn push(&mut self, v: f64) {
        if is_stale(v) {
            return;
        }
        self.add_exact(v, v.abs(), is_small_integer(v));
        if self.count == 0 {
            (self.count, self.min, self.max, self.first, self.last) = (1, v, v, v, v);
            return;
        }
        self.count += 1;
        if v < self.min || self.min.is_nan() {
            self.min = v;
        }
        if v > self.max || self.max.is_nan() {
            self.max = v;
        }
        self.last = v;
    }

    /// True if part of a block was folded in by its count and sum alone: only `count` and
    /// [`exact_sum`](Self::exact_sum) are meaningful then, not `min`, `max`, `first`, `last`.
    /// Only `Querier::window_aggregates` asked for sums answers so.
    pub fn is_partial(&self) -> bool {
        self.partial
    }

    /// Folds in, next in time order, `count` non-stale integer values (each below 2^53, not
    /// -0.0) whose exact sum is `sum` and whose magnitudes sum to at most `bound`: the rest of
    /// a block after a window boundary, its statistics less the decoded part before the
    /// boundary. Makes the aggregate [partial](Self::is_partial).
    pub fn merge_part(&mut self, count: u64, sum: f64, bound: f64) {
        if count == 0 {
            return;
        }
        self.add_exact(sum, bound, true);
        self.count += count;
        self.partial = true;
    }

    /// Folds in a whole block that comes next in time order, from its statistics alone. The
    /// result equals pushing the block's samples one by one (see the type's documentation).
    /// `integral`: the block's non-stale values are known to be integers below 2^53, not -0.0
    /// (`encoding::integral_values`); only then does its `sum` statistic count towards an exact
    /// sum. Its plain sum is then exact too: `max(|min|, |max|) × count` bounds its partial sums.
    pub fn merge_block(&mut self, b: &BlockStats, integral: bool) {
        if b.count == 0 {
            return;
        }
        self.add_exact(b.sum, b.min.abs().max(b.max.abs()) * f64::from(b.count), integral);
        if self.count == 0 {
            (self.count, self.min, self.max, self.first, self.last) =
                (u64::from(b.count), b.min, b.max, b.first, b.last);
            return;
        }
        self.count += u64::from(b.count);
        if b.min < self.min || self.min.is_nan() {
            self.min = b.min;
        }
        if b.max > self.max || self.max.is_nan() {
            self.max = b.max;
        }
        self.last = b.last;
    }
}

/// True if `v` is an integer below 2^53 in magnitude and not -0.0.
fn is_small_integer(v: f64) -> bool {
    // Below 2^53 the conversion to i64 is exact for integers and truncates anything else (a
    // single instruction, where `trunc` is a libm call on baseline x86-64).
    v.abs() < EXACT_LIMIT && (v as i64) as f64 == v && v.to_bits() != (-0.0f64).to_bits()
}

/// What answering windowed aggregates cost: shown to users in query statistics so they can see
/// why a query was fast or slow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Partition-file blocks answered from their statistics, without decoding.
    pub blocks_from_stats: u64,
    /// Partition-file blocks decoded.
    pub blocks_decoded: u64,
    /// Samples decoded or read one by one (from decoded blocks and from the in-memory heads).
    pub samples_decoded: u64,
}

impl ScanStats {
    /// Adds `o`'s counters to these.
    pub fn add(&mut self, o: &ScanStats) {
        self.blocks_from_stats += o.blocks_from_stats;
        self.blocks_decoded += o.blocks_decoded;
        self.samples_decoded += o.samples_decoded;
    }
}

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

/// The smallest range covering every non-empty window, None if all are empty.
pub(crate) fn span(windows: &[(i64, i64)]) -> Option<(i64, i64)> {
    windows.iter().filter(|(lo, hi)| lo <= hi).fold(None, |acc, &(lo, hi)| match acc {
        None => Some((lo, hi)),
        Some((a, b)) => Some((a.min(lo), b.max(hi))),
    })
}

/// Appends one aggregate per window over `samples` (ascending by time, unique timestamps).
pub(crate) fn aggregate_sorted(samples: &[Sample], windows: &[(i64, i64)], out: &mut Vec<WindowAgg>) {
    for &(lo, hi) in windows {
        let mut agg = WindowAgg::default();
        let from = samples.partition_point(|s| s.t < lo);
        for s in samples[from..].iter().take_while(|s| s.t <= hi) {
            agg.push(s.v);
        }
        out.push(agg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::stale_nan;
    use proptest::prelude::*;

    /// Values where the NaN and signed-zero rules matter, plus ordinary ones.
    pub(crate) fn arb_value() -> impl Strategy<Value = f64> {
        prop_oneof![
            3 => (-4i32..4).prop_map(f64::from),
            1 => any::<f64>(),
            1 => prop_oneof![
                Just(f64::NAN), Just(-f64::NAN), Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
                Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0), Just(0.0), Just(stale_nan()),
            ],
        ]
    }

    fn arb_samples(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Sample>> {
        proptest::collection::vec(arb_value(), n)
            .prop_map(|vs| vs.into_iter().enumerate().map(|(i, v)| Sample::new(i as i64 * 10, v)).collect())
    }

    fn fold(samples: &[Sample]) -> WindowAgg {
        let mut a = WindowAgg::default();
        for s in samples {
            a.push(s.v);
        }
        a
    }

    #[test]
    fn nan_and_stale_rules() {
        let vals = [f64::NAN, 3.0, stale_nan(), f64::NAN, -0.0, 0.0, 1.0];
        let samples: Vec<Sample> = vals.iter().enumerate().map(|(i, &v)| Sample::new(i as i64, v)).collect();
        let a = fold(&samples);
        assert_eq!(a.count, 6);
        assert_eq!((a.min.to_bits(), a.max), ((-0.0f64).to_bits(), 3.0));
        assert!(a.first.is_nan());
        assert_eq!(a.last, 1.0);
        assert!(fold(&[Sample::new(0, stale_nan())]).is_empty());
    }

    proptest! {
        /// Merging block statistics equals pushing the samples, for any cut into blocks.
        #[test]
        fn merge_block_equals_push(samples in arb_samples(1..120), cuts in proptest::collection::vec(0usize..120, 0..6)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (samples.len() + 1)).collect();
            cuts.push(0);
            cuts.push(samples.len());
            cuts.sort_unstable();
            let mut merged = WindowAgg::default();
            for w in cuts.windows(2) {
                let block = &samples[w[0]..w[1]];
                let integral = block.iter().all(|s| is_stale(s.v) || is_small_integer(s.v));
                merged.merge_block(&BlockStats::from_samples(block), integral);
            }
            let folded = fold(&samples);
            prop_assert_eq!(merged, folded);
            // A sum vouched for from statistics is the one pushing the samples gives.
            if let Some(sum) = merged.exact_sum() {
                prop_assert_eq!(Some(sum.to_bits()), folded.exact_sum().map(f64::to_bits));
            }
        }
    }
}
