//! Estimates PromQL derives from one native histogram: `histogram_quantile`,
//! `histogram_fraction`, `histogram_stddev`/`histogram_stdvar` (Prometheus'
//! `HistogramQuantile`, `HistogramFraction` and `histogramVariance`).

use storage::FloatHistogram;

use super::float_histogram::{Bucket, all_buckets};

/// The `q`-quantile of the observations in `h`: the bucket holding the rank is found, and the
/// value interpolated inside it, exponentially for exponential buckets away from zero, linearly
/// for custom buckets and the zero bucket. If `h` has NaN
/// observations (NaN sum), the forward direction is used, so NaNs count as the largest values.
pub(crate) fn quantile(q: f64, h: &FloatHistogram) -> f64 {
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    if h.count == 0.0 || q.is_nan() {
        return f64::NAN;
    }
    let buckets = all_buckets(h);
    let forward = h.sum.is_nan() || q < 0.5;
    let mut rank = if forward { q * h.count } else { (1.0 - q) * h.count };
    let mut count = 0.0;
    let mut bucket: Option<Bucket> = None;
    let iter: Box<dyn Iterator<Item = &Bucket>> =
        if forward { Box::new(buckets.iter()) } else { Box::new(buckets.iter().rev()) };
    for b in iter {
        if b.count == 0.0 {
            continue;
        }
        count += b.count;
        bucket = Some(*b);
        if count >= rank {
            break;
        }
    }
    let Some(mut b) = bucket else { return f64::NAN };
    if !h.uses_custom_buckets() && b.lower < 0.0 && b.upper > 0.0 {
        if h.negative.is_empty() && !h.positive.is_empty() {
            b.lower = 0.0;
        } else if h.positive.is_empty() && !h.negative.is_empty() {
            b.upper = 0.0;
        }
    } else if h.uses_custom_buckets() {
        if b.lower == f64::NEG_INFINITY {
            if b.upper <= 0.0 {
                return b.upper;
            }
            b.lower = 0.0;
        } else if b.upper == f64::INFINITY {
            return b.lower;
        }
    }
    // Float inaccuracies may push the cumulated count above the total.
    if count > h.count {
        count = h.count;
    }
    // The rank was not reached: it lies among the NaN observations (NaN), or float
    // inaccuracies left it just above the total (the upper bound of the last bucket).
    if count < rank {
        return if h.sum.is_nan() { f64::NAN } else { b.upper };
    }
    if forward {
        rank -= count - b.count;
    } else {
        rank = count - rank;
    }
    let fraction = rank / b.count;
    if h.uses_custom_buckets() || (b.lower <= 0.0 && b.upper >= 0.0) {
        return b.lower + (b.upper - b.lower) * fraction;
    }
    let (log_lower, log_upper) = (b.lower.abs().log2(), b.upper.abs().log2());
    if b.lower > 0.0 {
        (log_lower + (log_upper - log_lower) * fraction).exp2()
    } else {
        -(log_upper + (log_lower - log_upper) * (1.0 - fraction)).exp2()
    }
}

/// The observations in buckets (the zero bucket included); less than the count when some
/// observations were NaN.
pub(crate) fn bucket_total(h: &FloatHistogram) -> f64 {
    h.zero_count + h.positive.iter().chain(&h.negative).map(|b| b.1).sum::<f64>()
}

/// Interpolates the rank at `v` inside bucket `b` (`rank` is the count below the bucket):
/// exponentially for exponential buckets away from zero, linearly otherwise.
fn rank_at(h: &FloatHistogram, b: &Bucket, rank: f64, v: f64) -> f64 {
    let linear = h.uses_custom_buckets() || b.is_zero || (b.lower <= 0.0 && b.upper >= 0.0);
    if linear {
        return rank + b.count * (v - b.lower) / (b.upper - b.lower);
    }
    let (ll, lu, lv) = (b.lower.abs().log2(), b.upper.abs().log2(), v.abs().log2());
    let frac = if b.lower > 0.0 { (lv - ll) / (lu - ll) } else { 1.0 - (lv - lu) / (ll - lu) };
    rank + b.count * frac
}

/// The rank at `v` inside bucket `b`, as [`rank_at`], except in a custom bucket of infinite
/// width, where no interpolation is possible: `v` counts as lying at the bucket's finite end
/// (all of a `(-Inf, x]` bucket lies below it, none of an `(x, +Inf]` bucket), as for
/// classic histograms.
fn rank_in(h: &FloatHistogram, b: &Bucket, rank: f64, v: f64) -> f64 {
    if b.lower == f64::NEG_INFINITY {
        rank + b.count
    } else if b.upper == f64::INFINITY {
        rank
    } else {
        rank_at(h, b, rank, v)
    }
}

/// The fraction of observations in `h` between `lower` and `upper`, interpolated inside the
/// buckets the bounds fall into.
pub(crate) fn fraction(lower: f64, upper: f64, h: &FloatHistogram) -> f64 {
    if h.count == 0.0 || lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }
    let (mut rank, mut lower_rank, mut upper_rank) = (0.0, 0.0, 0.0);
    let (mut lower_set, mut upper_set) = (false, false);
    for mut b in all_buckets(h) {
        if h.uses_custom_buckets() {
            if b.lower == f64::NEG_INFINITY && b.upper > 0.0 {
                b.lower = 0.0;
            }
        } else if b.lower < 0.0 && b.upper > 0.0 {
            if h.negative.is_empty() && !h.positive.is_empty() {
                b.lower = 0.0;
            } else if h.positive.is_empty() && !h.negative.is_empty() {
                b.upper = 0.0;
            }
        }
        if !lower_set && b.lower >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && b.lower >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && b.lower < lower && b.upper > lower {
            lower_rank = rank_in(h, &b, rank, lower);
            lower_set = true;
        }
        if !upper_set && b.lower < upper && b.upper > upper {
            upper_rank = rank_in(h, &b, rank, upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank += b.count;
    }
    // Beyond the last bucket: all observations in buckets, which leaves out NaN observations.
    let total = if h.sum.is_nan() { bucket_total(h).min(h.count) } else { h.count };
    if !lower_set || lower_rank > total {
        lower_rank = total;
    }
    if !upper_set || upper_rank > total {
        upper_rank = total;
    }
    (upper_rank - lower_rank) / h.count
}

/// The estimated variance of the observations: each bucket's observations are taken to sit at
/// its geometric mean (arithmetic mean for custom buckets, 0 in the zero bucket).
pub(crate) fn variance(h: &FloatHistogram) -> f64 {
    let mean = h.sum / h.count;
    let (mut sum, mut c) = (0.0, 0.0);
    for b in all_buckets(h) {
        if b.count == 0.0 {
            continue;
        }
        let val = if h.uses_custom_buckets() {
            (b.upper + b.lower) / 2.0
        } else if b.lower <= 0.0 && b.upper >= 0.0 {
            0.0
        } else {
            let v = (b.upper * b.lower).sqrt();
            if b.upper < 0.0 { -v } else { v }
        };
        let delta = val - mean;
        (sum, c) = super::numeric::kahan_inc(b.count * delta * delta, sum, c);
    }
    (sum + c) / h.count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(positive: &[(i32, f64)]) -> FloatHistogram {
        let count = positive.iter().map(|b| b.1).sum();
        FloatHistogram { schema: 0, count, sum: count, positive: positive.to_vec(), ..Default::default() }
    }

    #[test]
    fn quantile_interpolates_exponentially() {
        // Two observations in (1, 2]: the median is at the geometric middle.
        let h = hist(&[(1, 2.0)]);
        assert!((quantile(0.5, &h) - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(quantile(1.0, &h), 2.0);
        assert_eq!(quantile(-1.0, &h), f64::NEG_INFINITY);
        assert!(quantile(0.5, &hist(&[])).is_nan());
    }

    #[test]
    fn fraction_covers_whole_buckets() {
        let h = hist(&[(1, 1.0), (2, 3.0)]);
        assert_eq!(fraction(1.0, 2.0, &h), 0.25);
        assert_eq!(fraction(f64::NEG_INFINITY, f64::INFINITY, &h), 1.0);
        assert_eq!(fraction(3.0, 1.0, &h), 0.0);
    }

    #[test]
    fn variance_of_one_bucket_is_zero_at_its_mean() {
        let mut h = hist(&[(1, 2.0)]);
        h.sum = 2.0 * 2f64.sqrt();
        assert!(variance(&h).abs() < 1e-12);
    }
}
