//! The trim operators `h </ x` (keep the observations at or below `x`) and `h >/ x` (keep those
//! at or above `x`) on native histograms.
//!
//! A bucket entirely on the kept side stays, one entirely on the other side goes, and one that
//! `x` falls into keeps the interpolated part of its count (exponentially inside exponential
//! buckets, linearly in the zero bucket and custom buckets, as `histogram_fraction` does). If
//! anything was cut, the sum is estimated anew: every kept bucket part contributes its count at
//! a representative value (the geometric mean of its bounds for exponential buckets, the middle
//! for the zero bucket and custom buckets). A trim that cuts nothing returns the histogram as it
//! was, with its exact sum.
//!
//! Buckets without a finite bound follow Prometheus' rules: the zero bucket and the lowest custom
//! bucket are taken to start at 0 when only positive buckets exist (a custom bucket whose upper
//! bound is above 0); a custom bucket reaching to -Inf (upper bound at or below 0) or to +Inf
//! cannot be interpolated: `</ x` drops the +Inf bucket for any finite `x` and keeps the -Inf
//! bucket whole, valued at `x`, when `x` falls inside it; `>/ x` does the mirror image.

use storage::FloatHistogram;

use super::float_histogram::positive_bounds;

/// What happens to one bucket: the part of its count kept and the value that part stands for.
struct Kept {
    fraction: f64,
    value: f64,
}

/// The result of trimming `h`; `upper` is `</` (keep at or below `x`), otherwise `>/`.
pub(crate) fn trim(h: &FloatHistogram, x: f64, upper: bool) -> FloatHistogram {
    let mut out = h.clone();
    let mut changed = false;
    let mut sum = 0.0;
    let mut count = 0.0;
    let custom = h.uses_custom_buckets();
    let only_positive = h.negative.is_empty() && !h.positive.is_empty();
    let only_negative = h.positive.is_empty() && !h.negative.is_empty();
    let mut apply = |c: &mut f64, k: Kept| {
        if *c == 0.0 {
            return;
        }
        if k.fraction != 1.0 {
            changed = true;
        }
        *c *= k.fraction;
        count += *c;
        if *c != 0.0 {
            sum += *c * k.value;
        }
    };
    for b in out.positive.iter_mut() {
        let (lo, up) = positive_bounds(h, b.0);
        let k = if custom {
            custom_bucket(lo, up, x, upper)
        } else {
            let lo = lo.max(h.zero_threshold);
            exponential_bucket(lo, up, x, upper)
        };
        apply(&mut b.1, k);
    }
    for b in out.negative.iter_mut() {
        let (lo, up) = positive_bounds(h, b.0);
        let lo = lo.max(h.zero_threshold);
        // Values in [-up, -lo): trim the mirror image with the mirrored cutoff and direction.
        let k = exponential_bucket(lo, up, -x, !upper);
        apply(&mut b.1, Kept { fraction: k.fraction, value: -k.value });
    }
    if !custom {
        let z = h.zero_threshold;
        let (a, b) = if only_positive {
            (0.0, z)
        } else if only_negative {
            (-z, 0.0)
        } else {
            (-z, z)
        };
        apply(&mut out.zero_count, linear_bucket(a, b, x, upper));
    }
    if !changed {
        return h.clone();
    }
    out.count = count;
    out.sum = sum;
    super::float_histogram::compact(&mut out);
    out
}

/// A bucket `[a, b]` with finite bounds and linear interpolation.
fn linear_bucket(a: f64, b: f64, x: f64, upper: bool) -> Kept {
    let (keep_all, drop_all) = if upper { (x >= b, x <= a) } else { (x <= a, x >= b) };
    if keep_all {
        return Kept { fraction: 1.0, value: (a + b) / 2.0 };
    }
    if drop_all {
        return Kept { fraction: 0.0, value: 0.0 };
    }
    let (ka, kb) = if upper { (a, x) } else { (x, b) };
    Kept { fraction: (kb - ka) / (b - a), value: (ka + kb) / 2.0 }
}

/// A positive exponential bucket `(a, b]` (`0 < a < b`) with exponential interpolation.
fn exponential_bucket(a: f64, b: f64, x: f64, upper: bool) -> Kept {
    if a <= 0.0 {
        return linear_bucket(a, b, x, upper);
    }
    let (keep_all, drop_all) = if upper { (x >= b, x <= a) } else { (x <= a, x >= b) };
    if keep_all {
        return Kept { fraction: 1.0, value: (a * b).sqrt() };
    }
    if drop_all {
        return Kept { fraction: 0.0, value: 0.0 };
    }
    let (ka, kb) = if upper { (a, x) } else { (x, b) };
    Kept { fraction: (kb.log2() - ka.log2()) / (b.log2() - a.log2()), value: (ka * kb).sqrt() }
}

/// A custom bucket `(a, b]`, either bound possibly infinite.
fn custom_bucket(a: f64, b: f64, x: f64, upper: bool) -> Kept {
    let drop = Kept { fraction: 0.0, value: 0.0 };
    match (a.is_infinite(), b.is_infinite()) {
        (true, true) => {
            // Only an infinite cutoff on the kept side keeps the one all-covering bucket.
            let keep = if upper { x == f64::INFINITY } else { x == f64::NEG_INFINITY };
            if keep { Kept { fraction: 1.0, value: 0.0 } } else { drop }
        }
        (false, true) => {
            if upper {
                if x == f64::INFINITY { Kept { fraction: 1.0, value: a } } else { drop }
            } else if x <= a {
                Kept { fraction: 1.0, value: a }
            } else if x == f64::INFINITY {
                drop
            } else {
                Kept { fraction: 1.0, value: x }
            }
        }
        (true, false) if b > 0.0 => {
            // Taken as (0, b]; a cutoff below 0 drops it for `>/`, keeps nothing for `</`.
            if !upper && x < 0.0 {
                return if x == f64::NEG_INFINITY { Kept { fraction: 1.0, value: b / 2.0 } } else { drop };
            }
            linear_bucket(0.0, b, x, upper)
        }
        (true, false) => {
            if upper {
                if x >= b {
                    Kept { fraction: 1.0, value: b }
                } else if x == f64::NEG_INFINITY {
                    drop
                } else {
                    Kept { fraction: 1.0, value: x }
                }
            } else if x == f64::NEG_INFINITY {
                Kept { fraction: 1.0, value: b }
            } else {
                drop
            }
        }
        (false, false) => linear_bucket(a, b, x, upper),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cbh() -> FloatHistogram {
        FloatHistogram {
            schema: FloatHistogram::CUSTOM_BUCKETS_SCHEMA,
            count: 15.0,
            sum: 172.5,
            custom_values: vec![5.0, 10.0, 15.0, 20.0],
            positive: vec![(0, 1.0), (1, 6.0), (2, 4.0), (3, 3.0), (4, 1.0)],
            ..FloatHistogram::default()
        }
    }

    #[test]
    fn custom_buckets_interpolate_linearly_and_reestimate_the_sum() {
        let t = trim(&cbh(), 13.0, true);
        assert!((t.count - 9.4).abs() < 1e-12);
        // 1 at 2.5, 6 at 7.5, 2.4 at 11.5.
        assert!((t.sum - 75.1).abs() < 1e-9);
        let t = trim(&cbh(), 15.0, false);
        assert_eq!(t.positive, vec![(3, 3.0), (4, 1.0)]);
        assert!((t.sum - 72.5).abs() < 1e-9);
    }

    #[test]
    fn a_trim_that_cuts_nothing_keeps_the_exact_sum() {
        assert_eq!(trim(&cbh(), f64::INFINITY, true), cbh());
        assert_eq!(trim(&cbh(), 0.0, false), cbh());
        assert_eq!(trim(&cbh(), 0.0, true).count, 0.0);
    }

    #[test]
    fn exponential_buckets_interpolate_exponentially() {
        // Two observations in (1, 2]; cutting at sqrt(2) keeps half of them.
        let h = FloatHistogram {
            schema: 0,
            count: 2.0,
            sum: 3.0,
            positive: vec![(1, 2.0)],
            ..Default::default()
        };
        let t = trim(&h, 2f64.sqrt(), true);
        assert!((t.count - 1.0).abs() < 1e-12);
        assert!((t.sum - 2f64.sqrt().sqrt()).abs() < 1e-12);
    }
}
