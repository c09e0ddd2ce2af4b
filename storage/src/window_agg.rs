//! Windowed aggregates: per window of time, the count, minimum, maximum, first and last of a
//! series' values, as `min|max|count|first|last|present_over_time` need them.
//!
//! The point is push-down: a [`Querier`](crate::Querier) that keeps per-block statistics (the
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
//!
//! `rate`, `increase` and `delta` need a window's first and last samples with their times, and
//! for counters the value before each decrease (Prometheus adds it back as a counter reset, in
//! time order, to `last - first`). A block answers them from statistics when it holds no stale
//! marker (its first and last timestamps are then its first and last values' times) and, for
//! counters, never decreases (`BlockStats::no_decrease`): a reset can then only sit between
//! two sources, where the fold sees both values. [`WindowAgg::times`] and
//! [`WindowAgg::resets`] say where that is known.

use crate::encoding::BlockStats;
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
    /// Times of the earliest and latest sample, while `times_known`.
    first_t: i64,
    last_t: i64,
    /// Values before each decrease, in time order (the first `n_resets`); `n_resets` is
    /// [`RESETS_UNKNOWN`] once they are not known: more than [`MAX_RESETS`], or a block merged
    /// whose values may decrease inside it.
    resets: [f64; MAX_RESETS],
    n_resets: u8,
    /// False once a block with stale markers was merged (its time range need not start or end
    /// at a value): then `first_t` and `last_t` are unknown.
    times_known: bool,
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

/// Counter resets a window keeps track of; a window with more is decoded by the caller (resets
/// are rare: a process restart).
pub const MAX_RESETS: usize = 2;
/// `n_resets` once the resets are not known.
const RESETS_UNKNOWN: u8 = u8::MAX;

/// What the caller of [`Querier::window_aggregates`](crate::Querier::window_aggregates) needs of
/// each window, which decides which blocks statistics can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Count, min, max, first and last values (`min|max|count|first|last|present_over_time`):
    /// any block.
    Values,
    /// Count and [exact sum](WindowAgg::exact_sum) (`sum_over_time`, `avg_over_time`): blocks of
    /// integers, also split at a window boundary. Windows may be [partial](WindowAgg::is_partial).
    Sums,
    /// Count, first and last values and their [times](WindowAgg::times) (`delta`): blocks
    /// without stale markers.
    Ends,
    /// As `Ends`, and the [values before each decrease](WindowAgg::resets) (`rate`,
    /// `increase`): blocks without stale markers that never decrease.
    Resets,
}

impl Need {
    /// Whether a block with statistics `b`, wholly inside every window it overlaps and no other
    /// source overlapping it, may be answered from them (for `Sums`, once its values are also
    /// known to be integers).
    pub fn allows(self, b: &BlockStats) -> bool {
        match self {
            Need::Values | Need::Sums => true,
            Need::Ends => b.stale_count == 0,
            Need::Resets => b.stale_count == 0 && b.no_decrease,
        }
    }
}

impl Default for WindowAgg {
    fn default() -> Self {
        WindowAgg {
            count: 0,
            min: f64::NAN,
            max: f64::NAN,
            first: f64::NAN,
            last: f64::NAN,
            first_t: 0,
            last_t: 0,
            resets: [0.0; MAX_RESETS],
            n_resets: 0,
            times_known: true,
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
    /// [partial](WindowAgg::is_partial) aggregate only the count is known to compare. Times
    /// and resets are compared where both sides know them.
    fn eq(&self, o: &Self) -> bool {
        self.count == o.count
            && (self.partial
                || o.partial
                || [self.min, self.max, self.first, self.last]
                    .iter()
                    .zip([o.min, o.max, o.first, o.last])
                    .all(|(a, b)| a.to_bits() == b.to_bits()))
            && match (self.times(), o.times()) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
            && match (self.resets(), o.resets()) {
                (Some(a), Some(b)) => a.iter().map(|v| v.to_bits()).eq(b.iter().map(|v| v.to_bits())),
                _ => true,
            }
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

    /// The times of the window's first and last values, if known ([`Need::Ends`] and
    /// [`Need::Resets`] keep them known); `None` for an empty window.
    pub fn times(&self) -> Option<(i64, i64)> {
        (self.times_known && !self.partial && self.count > 0).then_some((self.first_t, self.last_t))
    }

    /// The value before each decrease between consecutive values (`v[i] < v[i - 1]`, as
    /// Prometheus detects a counter reset), in time order, if known ([`Need::Resets`] keeps
    /// them known for up to [`MAX_RESETS`]).
    pub fn resets(&self) -> Option<&[f64]> {
        if self.partial {
            return None;
        }
        self.resets.get(..usize::from(self.n_resets))
    }

    /// Records a decrease after `prev`.
    fn note_reset(&mut self, prev: f64) {
        match self.resets.get_mut(usize::from(self.n_resets)) {
            Some(slot) => {
                *slot = prev;
                self.n_resets += 1;
            }
            None => self.n_resets = RESETS_UNKNOWN,
        }
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

    /// Folds in the next sample, in time order. Stale markers are ignored.
    pub fn push(&mut self, t: i64, v: f64) {
        if is_stale(v) {
            return;
        }
        self.add_exact(v, v.abs(), is_small_integer(v));
        if self.count == 0 {
            (self.count, self.min, self.max, self.first, self.last) = (1, v, v, v, v);
            (self.first_t, self.last_t) = (t, t);
            return;
        }
        if v < self.last {
            self.note_reset(self.last);
        }
        self.last_t = t;
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
    ///
    /// The window's [times](Self::times) stay known if the block holds no stale marker (its
    /// time range then starts and ends with values), its [resets](Self::resets) if the block
    /// never decreases (so any reset is at its first value, compared here with the last value
    /// before it).
    pub fn merge_block(&mut self, b: &BlockStats, integral: bool) {
        if b.count == 0 {
            return;
        }
        self.add_exact(b.sum, b.min.abs().max(b.max.abs()) * f64::from(b.count), integral);
        if b.stale_count > 0 {
            self.times_known = false;
        }
        if !b.no_decrease {
            self.n_resets = RESETS_UNKNOWN;
        }
        if self.count == 0 {
            (self.count, self.min, self.max, self.first, self.last) =
                (u64::from(b.count), b.min, b.max, b.first, b.last);
            (self.first_t, self.last_t) = (b.min_t, b.max_t);
            return;
        }
        if b.first < self.last {
            self.note_reset(self.last);
        }
        self.last_t = b.max_t;
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

/// Which extreme a group of series is folded to per window: what PromQL's
/// `max(max_over_time(x[r]))` and `min(min_over_time(x[r]))` compute, with or without grouping
/// labels ([`Querier::group_extremes`](crate::Querier::group_extremes)).
///
/// Both levels of those queries fold with one rule: starting from the first value, a value
/// replaces the running one if it is larger (`Max`; smaller for `Min`) or the running one is
/// NaN. That fold over the concatenation of two lists equals the fold of the two lists' folds
/// (if the first fold is NaN, every value of the first list was NaN and the second list's fold
/// takes over, as the sequential fold would; otherwise the second list's fold replaces it
/// exactly when one of its values would have). So the per-series `max_over_time` folded across
/// the series in order is the fold of all the group's samples, series by series, each in time
/// order, and any run of samples in that order can be replaced by its own fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extreme {
    /// The largest value (`max`, `max_over_time`).
    Max,
    /// The smallest value (`min`, `min_over_time`).
    Min,
}

impl Extreme {
    /// Whether `v` replaces the running value `cur` (see the type's documentation).
    pub fn replaces(self, cur: f64, v: f64) -> bool {
        cur.is_nan()
            || match self {
                Extreme::Max => cur < v,
                Extreme::Min => cur > v,
            }
    }

    /// Folds `v` into `acc` (`None`: no value yet).
    pub fn fold(self, acc: &mut Option<f64>, v: f64) {
        match acc {
            Some(cur) if !self.replaces(*cur, v) => {}
            _ => *acc = Some(v),
        }
    }

    /// The block's fold of its non-stale values, from its statistics.
    pub fn of_block(self, b: &BlockStats) -> f64 {
        match self {
            Extreme::Max => b.max,
            Extreme::Min => b.min,
        }
    }

    /// Whether a source whose non-NaN values all lie on this side of `bound` (at most `bound`
    /// for `Max`) leaves the fold's bits unchanged once a value `best` (not NaN) was seen: its
    /// values lose to `best` (NaN never replaces a number), or equal it with the same bits.
    /// Equal zeros are kept, as `-0.0 == 0.0` and the first in order wins. A NaN bound means the
    /// source holds only NaN.
    pub fn cannot_change(self, bound: f64, best: f64) -> bool {
        let loses = match self {
            Extreme::Max => bound < best,
            Extreme::Min => bound > best,
        };
        bound.is_nan() || loses || (bound == best && best != 0.0)
    }
}

/// Folds the non-stale values of `samples` (ascending by time) in `[lo, hi]` into `acc`.
pub(crate) fn fold_extreme(which: Extreme, acc: &mut Option<f64>, samples: &[Sample], lo: i64, hi: i64) {
    let from = samples.partition_point(|s| s.t < lo);
    let to = from + samples[from..].partition_point(|s| s.t <= hi);
    let mut live = samples[from..to].iter().map(|s| s.v).filter(|v| !is_stale(*v));
    let Some(first) = acc.or_else(|| live.next()) else { return };
    // One loop per extreme, without the `Option`: this is the decoding path's inner loop.
    let folded = match which {
        Extreme::Max => live.fold(first, |cur, v| if cur < v || cur.is_nan() { v } else { cur }),
        Extreme::Min => live.fold(first, |cur, v| if cur > v || cur.is_nan() { v } else { cur }),
    };
    *acc = Some(folded);
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
            agg.push(s.t, s.v);
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
            a.push(s.t, s.v);
        }
        a
    }

    #[test]
    fn resets_and_times() {
        let vals = [5.0, 7.0, 2.0, stale_nan(), 1.0, f64::NAN, 0.5, 9.0];
        let samples: Vec<Sample> =
            vals.iter().enumerate().map(|(i, &v)| Sample::new(i as i64 * 10, v)).collect();
        let a = fold(&samples);
        // 7 -> 2 and 2 -> 1 drop (the stale marker is no value); NaN never compares lower.
        assert_eq!(a.resets(), Some(&[7.0, 2.0][..]));
        assert_eq!(a.times(), Some((0, 70)));
        let b = fold(&samples[..5]);
        assert_eq!(b.times(), Some((0, 40)));
        // A third reset is more than a window keeps: unknown.
        let c = fold(&[Sample::new(0, 3.0), Sample::new(1, 2.0), Sample::new(2, 1.0), Sample::new(3, 0.0)]);
        assert_eq!(c.resets(), None);
        assert_eq!(fold(&[]).times(), None);
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
            let (mut stale_free, mut rising) = (true, true);
            for w in cuts.windows(2) {
                let block = &samples[w[0]..w[1]];
                let integral = block.iter().all(|s| is_stale(s.v) || is_small_integer(s.v));
                let st = BlockStats::from_samples(block);
                if st.count > 0 {
                    stale_free &= st.stale_count == 0;
                    rising &= st.no_decrease;
                }
                merged.merge_block(&st, integral);
            }
            let folded = fold(&samples);
            prop_assert_eq!(merged, folded);
            // Times and resets are known exactly where `Need::Ends`/`Need::Resets` rely on it.
            if stale_free {
                prop_assert_eq!(merged.times(), folded.times());
                prop_assert_eq!(merged.times().is_some(), folded.count > 0);
                if rising && folded.resets().is_some() {
                    prop_assert!(merged.resets().is_some());
                }
            }
            // A sum vouched for from statistics is the one pushing the samples gives.
            if let Some(sum) = merged.exact_sum() {
                prop_assert_eq!(Some(sum.to_bits()), folded.exact_sum().map(f64::to_bits));
            }
        }
    }
}
