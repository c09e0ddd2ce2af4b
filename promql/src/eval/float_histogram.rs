//! Arithmetic on native histograms ([`FloatHistogram`]) with Prometheus' semantics: bucket
//! boundaries per schema, schema reduction, zero-bucket reconciliation, addition and subtraction
//! (also of custom-bucket histograms with different bounds), scaling, and counter-reset
//! detection. The estimates PromQL derives from one histogram (quantile, fraction, variance) live
//! in `histogram_fns`.

use storage::{CounterResetHint, FloatHistogram};

/// Why two histograms cannot be combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incompatible {
    /// One uses exponential buckets, the other custom buckets.
    MixedSchemas,
}

/// What combining two histograms noticed that Prometheus reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Combined {
    /// Custom-bucket histograms with different bounds were mapped onto their common bounds.
    pub reconciled_custom_buckets: bool,
    /// A histogram hinted as reset met one hinted as not reset.
    pub counter_reset_collision: bool,
}

/// One bucket with its boundaries, for walking a histogram in value order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bucket {
    pub lower: f64,
    pub upper: f64,
    pub count: f64,
    /// True for the zero bucket.
    pub is_zero: bool,
}

/// Upper bound of positive exponential bucket `idx` in `schema` (Prometheus' `getBound`).
fn exp_bound(idx: i32, schema: i32) -> f64 {
    if schema <= 0 {
        // 2^(idx * 2^-schema), exactly.
        let exp = (idx as i64) << (-schema);
        return if exp > 1024 {
            f64::INFINITY
        } else if exp < -1074 {
            0.0
        } else {
            2f64.powi(exp as i32)
        };
    }
    let per_octave = 1i32 << schema;
    let frac = idx.rem_euclid(per_octave);
    let exp = idx.div_euclid(per_octave);
    let mantissa = 2f64.powf(frac as f64 / per_octave as f64);
    if exp > 1024 { f64::INFINITY } else { mantissa * 2f64.powi(exp) }
}

/// `(lower, upper)` of positive bucket `idx` (custom or exponential).
pub(crate) fn positive_bounds(h: &FloatHistogram, idx: i32) -> (f64, f64) {
    if h.uses_custom_buckets() {
        let cv = &h.custom_values;
        let upper = usize::try_from(idx).ok().and_then(|i| cv.get(i)).copied().unwrap_or(f64::INFINITY);
        let lower = match idx {
            i if i <= 0 => f64::NEG_INFINITY,
            i => cv.get(i as usize - 1).copied().unwrap_or(f64::INFINITY),
        };
        return (lower, upper);
    }
    (exp_bound(idx - 1, h.schema), exp_bound(idx, h.schema))
}

/// Every bucket in ascending value order: negative buckets, the zero bucket (if it has a width or
/// a count), positive buckets. Buckets overlapping the zero bucket are clipped to its threshold
/// (Prometheus' `AllBucketIterator`).
pub(crate) fn all_buckets(h: &FloatHistogram) -> Vec<Bucket> {
    let mut out = Vec::with_capacity(h.negative.len() + h.positive.len() + 1);
    let zt = h.zero_threshold;
    for &(idx, count) in h.negative.iter().rev() {
        let (lo, up) = positive_bounds(h, idx);
        let upper = if -lo > -zt { -zt } else { -lo };
        out.push(Bucket { lower: -up, upper, count, is_zero: false });
    }
    if !h.uses_custom_buckets() && (zt != 0.0 || h.zero_count != 0.0) {
        out.push(Bucket { lower: -zt, upper: zt, count: h.zero_count, is_zero: true });
    }
    for &(idx, count) in &h.positive {
        let (lo, up) = positive_bounds(h, idx);
        let lower = if !h.uses_custom_buckets() && lo < zt { zt } else { lo };
        out.push(Bucket { lower, upper: up, count, is_zero: false });
    }
    out
}

/// The histogram as Prometheus' `FloatHistogram.String()` writes it (`count_values` uses it as a
/// label value): `{count:N, sum:S, [lo,up):c, ..., [-z,z]:c, (lo,up]:c}`, populated buckets only,
/// in value order, numbers in Go's `%g`.
pub(crate) fn to_string(h: &FloatHistogram) -> String {
    use super::numeric::fmt_g;
    let mut out = format!("{{count:{}, sum:{}", fmt_g(h.count), fmt_g(h.sum));
    for &(idx, c) in h.negative.iter().rev().filter(|b| b.1 != 0.0) {
        let (lo, up) = positive_bounds(h, idx);
        out.push_str(&format!(", [{},{}):{}", fmt_g(-up), fmt_g(-lo), fmt_g(c)));
    }
    if h.zero_count != 0.0 {
        let z = h.zero_threshold;
        out.push_str(&format!(", [{},{}]:{}", fmt_g(-z), fmt_g(z), fmt_g(h.zero_count)));
    }
    for &(idx, c) in h.positive.iter().filter(|b| b.1 != 0.0) {
        let (lo, up) = positive_bounds(h, idx);
        out.push_str(&format!(", ({},{}]:{}", fmt_g(lo), fmt_g(up), fmt_g(c)));
    }
    out.push('}');
    out
}

/// Prometheus' `FloatHistogram.Equals` on compacted histograms: the same layout and the same
/// numbers (NaN sums equal by bits), the counter-reset hint aside.
pub(crate) fn same(a: &FloatHistogram, b: &FloatHistogram) -> bool {
    let nonzero = |v: &[(i32, f64)]| -> Vec<(i32, u64)> {
        v.iter().filter(|x| x.1 != 0.0).map(|x| (x.0, x.1.to_bits())).collect()
    };
    a.schema == b.schema
        && a.zero_threshold == b.zero_threshold
        && a.zero_count.to_bits() == b.zero_count.to_bits()
        && a.count.to_bits() == b.count.to_bits()
        && a.sum.to_bits() == b.sum.to_bits()
        && a.custom_values == b.custom_values
        && nonzero(&a.positive) == nonzero(&b.positive)
        && nonzero(&a.negative) == nonzero(&b.negative)
}

/// Removes buckets with a count of exactly zero (Prometheus' `Compact(0)` on sparse buckets).
pub(crate) fn compact(h: &mut FloatHistogram) {
    h.positive.retain(|b| b.1 != 0.0);
    h.negative.retain(|b| b.1 != 0.0);
}

/// Merges `buckets` of schema `from` into the lower resolution `to` (`to <= from`).
fn reduce_buckets(buckets: &[(i32, f64)], from: i32, to: i32) -> Vec<(i32, f64)> {
    if from == to {
        return buckets.to_vec();
    }
    let shift = from - to;
    let mut out: Vec<(i32, f64)> = Vec::with_capacity(buckets.len());
    for &(idx, c) in buckets {
        let t = ((idx - 1) >> shift) + 1;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 += c,
            _ => out.push((t, c)),
        }
    }
    out
}

/// The histogram in the lower resolution `schema` (exponential schemas only, `schema <=
/// h.schema`).
pub(crate) fn reduce_resolution(h: &FloatHistogram, schema: i32) -> FloatHistogram {
    let mut r = h.clone();
    // Only between exponential schemas (-4..=8); anything else would shift out of range.
    if schema < h.schema && schema >= -4 && !h.uses_custom_buckets() {
        r.positive = reduce_buckets(&h.positive, h.schema, schema);
        r.negative = reduce_buckets(&h.negative, h.schema, schema);
        r.schema = schema;
    }
    r
}

/// What `h`'s zero count would be with the larger threshold `larger`, and the threshold actually
/// needed: if `larger` falls inside a populated bucket, it grows to that bucket's upper bound
/// (Prometheus' `zeroCountForLargerThreshold`).
fn zero_count_for_larger_threshold(h: &FloatHistogram, mut larger: f64) -> (f64, f64) {
    if larger <= h.zero_threshold {
        return (h.zero_count, h.zero_threshold);
    }
    'outer: loop {
        let mut count = h.zero_count;
        for &(idx, c) in &h.positive {
            let (lo, up) = positive_bounds(h, idx);
            if lo >= larger {
                break;
            }
            count += c;
            if up > larger {
                if c != 0.0 {
                    larger = up;
                }
                break;
            }
        }
        for &(idx, c) in &h.negative {
            let (lo, up) = positive_bounds(h, idx);
            if lo >= larger {
                break;
            }
            count += c;
            if up > larger {
                if c != 0.0 {
                    larger = up;
                    continue 'outer;
                }
                break;
            }
        }
        return (count, larger);
    }
}

/// Makes both histograms' zero buckets equal: the wider threshold wins, grown further if it
/// falls inside a populated bucket of either (Prometheus' `reconcileZeroBuckets`).
fn reconcile_zero_buckets(a: &mut FloatHistogram, b: &mut FloatHistogram) {
    while a.zero_threshold != b.zero_threshold {
        if a.zero_threshold > b.zero_threshold {
            grow_zero_bucket(b, a.zero_threshold);
        }
        if b.zero_threshold > a.zero_threshold {
            grow_zero_bucket(a, b.zero_threshold);
        }
    }
}

/// Widens `h`'s zero bucket to at least `threshold`, moving the buckets inside it into the
/// zero count.
fn grow_zero_bucket(h: &mut FloatHistogram, threshold: f64) {
    let (count, t) = zero_count_for_larger_threshold(h, threshold);
    h.zero_count = count;
    h.zero_threshold = t;
    let schema_h = h.clone();
    h.positive.retain(|&(idx, _)| positive_bounds(&schema_h, idx).0 >= t);
    h.negative.retain(|&(idx, _)| positive_bounds(&schema_h, idx).0 >= t);
}

/// Maps custom buckets onto `bounds` (a subset of the histogram's bounds): each bucket goes to
/// the first kept bound at or above its upper bound, or to the overflow bucket.
fn remap_custom(h: &FloatHistogram, bounds: &[f64]) -> Vec<(i32, f64)> {
    let mut out: Vec<(i32, f64)> = Vec::new();
    for &(idx, c) in &h.positive {
        let (_, up) = positive_bounds(h, idx);
        let t = bounds.partition_point(|b| *b < up) as i32;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 += c,
            _ => out.push((t, c)),
        }
    }
    out
}

/// The custom bounds two custom-bucket histograms have in common (the layout both are
/// reconciled to).
fn common_bounds(a: &FloatHistogram, b: &FloatHistogram) -> Vec<f64> {
    a.custom_values.iter().copied().filter(|v| b.custom_values.contains(v)).collect()
}

/// `h` in the layout of `like` (a sum `h` took part in): `like`'s schema, zero threshold and
/// custom bounds, which are never finer than `h`'s.
pub(crate) fn to_layout(h: &FloatHistogram, like: &FloatHistogram) -> FloatHistogram {
    if h.uses_custom_buckets() {
        let mut r = h.clone();
        if h.custom_values != like.custom_values {
            r.positive = remap_custom(h, &like.custom_values);
            r.custom_values = like.custom_values.clone();
        }
        return r;
    }
    let mut r = reduce_resolution(h, like.schema);
    if r.zero_threshold < like.zero_threshold {
        grow_zero_bucket(&mut r, like.zero_threshold);
    }
    r
}

/// Merges two sorted sparse bucket lists, combining counts of equal indexes with `op`.
fn merge_buckets(a: &[(i32, f64)], b: &[(i32, f64)], sign: f64) -> Vec<(i32, f64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                out.push((x.0, x.1 + sign * y.1));
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                out.push(*x);
                i += 1;
            }
            (Some(x), None) => {
                out.push(*x);
                i += 1;
            }
            (_, Some(y)) => {
                out.push((y.0, sign * y.1));
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// The counter-reset hint of a sum (Prometheus' rule in `FloatHistogram.Add`); the flag is true
/// for the collision of `reset` and `not_reset`.
fn combine_hints(a: CounterResetHint, b: CounterResetHint) -> (CounterResetHint, bool) {
    use CounterResetHint::*;
    match (a, b) {
        _ if a == b => (a, false),
        (Gauge, _) | (_, Gauge) => (Gauge, false),
        (Unknown, _) | (_, Unknown) => (Unknown, false),
        _ => (Unknown, true),
    }
}

/// `a + sign·b` with both brought to a common layout.
fn combine(
    a: &FloatHistogram,
    b: &FloatHistogram,
    sign: f64,
) -> Result<(FloatHistogram, Combined), Incompatible> {
    if a.uses_custom_buckets() != b.uses_custom_buckets() {
        return Err(Incompatible::MixedSchemas);
    }
    let mut info = Combined::default();
    let (mut x, mut y);
    if a.uses_custom_buckets() {
        x = a.clone();
        y = b.clone();
        if a.custom_values != b.custom_values {
            info.reconciled_custom_buckets = true;
            let common = common_bounds(a, b);
            x.positive = remap_custom(a, &common);
            y.positive = remap_custom(b, &common);
            x.custom_values = common.clone();
            y.custom_values = common;
        }
    } else {
        let schema = a.schema.min(b.schema);
        x = reduce_resolution(a, schema);
        y = reduce_resolution(b, schema);
        reconcile_zero_buckets(&mut x, &mut y);
    }
    // Subtraction combines the hints as addition does (Prometheus' `Sub` adjusts them alike).
    let (hint, collision) = combine_hints(a.counter_reset_hint, b.counter_reset_hint);
    info.counter_reset_collision = collision;
    x.counter_reset_hint = hint;
    x.count += sign * y.count;
    x.sum += sign * y.sum;
    x.zero_count += sign * y.zero_count;
    x.positive = merge_buckets(&x.positive, &y.positive, sign);
    x.negative = merge_buckets(&x.negative, &y.negative, sign);
    Ok((x, info))
}

/// `a + b` (Prometheus' `Add`): the result has the lower of the two schemas and the wider zero
/// bucket; custom buckets with different bounds are reconciled to the bounds both have.
pub(crate) fn add(
    a: &FloatHistogram,
    b: &FloatHistogram,
) -> Result<(FloatHistogram, Combined), Incompatible> {
    combine(a, b, 1.0)
}

/// `a - b` (Prometheus' `Sub`), laid out like [`add`], with the hint and the collision flag as
/// for [`add`].
pub(crate) fn sub(
    a: &FloatHistogram,
    b: &FloatHistogram,
) -> Result<(FloatHistogram, Combined), Incompatible> {
    combine(a, b, -1.0)
}

/// Scales every count and the sum by `factor` (Prometheus' `Mul`).
pub(crate) fn scale(h: &mut FloatHistogram, factor: f64) {
    h.count *= factor;
    h.sum *= factor;
    h.zero_count *= factor;
    h.positive.iter_mut().for_each(|b| b.1 *= factor);
    h.negative.iter_mut().for_each(|b| b.1 *= factor);
}

/// Divides every count and the sum by `divisor` (Prometheus' `Div`). Division by zero leaves
/// the count, sum and zero bucket infinite (or NaN) and drops all other buckets, as Prometheus
/// does.
pub(crate) fn divide(h: &mut FloatHistogram, divisor: f64) {
    h.count /= divisor;
    h.sum /= divisor;
    h.zero_count /= divisor;
    if divisor == 0.0 {
        h.positive.clear();
        h.negative.clear();
        return;
    }
    h.positive.iter_mut().for_each(|b| b.1 /= divisor);
    h.negative.iter_mut().for_each(|b| b.1 /= divisor);
}

/// True if `h` follows `prev` only after a counter reset (Prometheus' `DetectReset`): the hint
/// decides if it is `reset` or `not_reset`; otherwise any count that went down, a bucket that lost
/// its observations, a finer schema or a narrower zero bucket is a reset.
pub fn detect_reset(h: &FloatHistogram, prev: &FloatHistogram) -> bool {
    match h.counter_reset_hint {
        CounterResetHint::Reset => return true,
        CounterResetHint::NotReset => return false,
        _ => {}
    }
    if h.count < prev.count || h.schema > prev.schema || h.zero_threshold < prev.zero_threshold {
        return true;
    }
    if h.uses_custom_buckets() != prev.uses_custom_buckets() {
        return true;
    }
    if h.uses_custom_buckets() && h.custom_values != prev.custom_values {
        // Changed custom bounds alone are no reset: both are compared in the bounds they share,
        // as they would be subtracted.
        let common = common_bounds(h, prev);
        return buckets_reset(&remap_custom(h, &common), remap_custom(prev, &common).iter());
    }
    let (prev_zero, threshold) = zero_count_for_larger_threshold(prev, h.zero_threshold);
    if threshold != h.zero_threshold || h.zero_count < prev_zero {
        return true;
    }
    let prev = reduce_resolution(prev, h.schema);
    let above = |b: &&(i32, f64)| positive_bounds(h, b.0).1 > h.zero_threshold;
    buckets_reset(&h.positive, prev.positive.iter().filter(above))
        || buckets_reset(&h.negative, prev.negative.iter().filter(above))
}

/// True if a populated bucket of `prev` is missing from, or larger than, the same bucket in `cur`.
fn buckets_reset<'b>(cur: &[(i32, f64)], prev: impl Iterator<Item = &'b (i32, f64)>) -> bool {
    let mut j = 0;
    for &(idx, c) in prev {
        while j < cur.len() && cur[j].0 < idx {
            j += 1;
        }
        let now = match cur.get(j) {
            Some(&(i, v)) if i == idx => v,
            _ => 0.0,
        };
        if c != 0.0 && now < c {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(schema: i32, count: f64, positive: &[(i32, f64)]) -> FloatHistogram {
        FloatHistogram { schema, count, sum: count, positive: positive.to_vec(), ..Default::default() }
    }

    #[test]
    fn bounds_of_exponential_and_custom_buckets() {
        let x = h(0, 0.0, &[]);
        assert_eq!(positive_bounds(&x, 0), (0.5, 1.0));
        assert_eq!(positive_bounds(&x, 2), (2.0, 4.0));
        let y = h(1, 0.0, &[]);
        assert!((positive_bounds(&y, 1).1 - 2f64.sqrt()).abs() < 1e-15);
        let c = FloatHistogram { schema: -53, custom_values: vec![1.0, 5.0], ..Default::default() };
        assert_eq!(positive_bounds(&c, 0), (f64::NEG_INFINITY, 1.0));
        assert_eq!(positive_bounds(&c, 2), (5.0, f64::INFINITY));
    }

    #[test]
    fn addition_reduces_to_the_coarser_schema() {
        let a = h(0, 3.0, &[(1, 1.0), (2, 2.0)]);
        let b = h(1, 2.0, &[(1, 1.0), (2, 1.0), (3, 0.0)]);
        let (s, info) = add(&a, &b).unwrap();
        assert_eq!(s.schema, 0);
        // Schema 1 indexes 1 and 2 both fall into schema 0 index 1.
        assert_eq!(s.positive, vec![(1, 3.0), (2, 2.0)]);
        assert_eq!(s.count, 5.0);
        assert_eq!(info, Combined::default());
    }

    #[test]
    fn custom_buckets_with_different_bounds_are_reconciled() {
        let a = FloatHistogram {
            schema: -53,
            custom_values: vec![1.0, 2.0, 3.0],
            positive: vec![(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)],
            count: 4.0,
            ..Default::default()
        };
        let b =
            FloatHistogram { custom_values: vec![2.0], positive: vec![(0, 1.0)], count: 1.0, ..a.clone() };
        let (s, info) = add(&a, &b).unwrap();
        assert!(info.reconciled_custom_buckets);
        assert_eq!(s.custom_values, vec![2.0]);
        assert_eq!(s.positive, vec![(0, 3.0), (1, 2.0)]);
        assert_eq!(add(&a, &h(0, 1.0, &[])), Err(Incompatible::MixedSchemas));
    }

    #[test]
    fn resets_are_detected_per_bucket() {
        let prev = h(0, 3.0, &[(1, 1.0), (2, 2.0)]);
        assert!(!detect_reset(&h(0, 4.0, &[(1, 2.0), (2, 2.0)]), &prev));
        assert!(detect_reset(&h(0, 4.0, &[(1, 4.0)]), &prev));
        assert!(detect_reset(&h(0, 2.0, &[(1, 1.0), (2, 1.0)]), &prev));
        let mut hinted = h(0, 4.0, &[(1, 4.0)]);
        hinted.counter_reset_hint = CounterResetHint::NotReset;
        assert!(!detect_reset(&hinted, &prev));
    }

    #[test]
    fn subtraction_combines_hints_like_addition() {
        let mut a = h(0, 2.0, &[(1, 2.0)]);
        let mut b = h(0, 1.0, &[(1, 1.0)]);
        a.counter_reset_hint = CounterResetHint::Reset;
        b.counter_reset_hint = CounterResetHint::NotReset;
        let (d, info) = sub(&a, &b).unwrap();
        assert!(info.counter_reset_collision);
        assert_eq!(d.counter_reset_hint, CounterResetHint::Unknown);
        assert_eq!(d.positive, vec![(1, 1.0)]);
    }

    #[test]
    fn changed_custom_bounds_are_compared_in_the_bounds_both_have() {
        let custom = |bounds: &[f64], positive: &[(i32, f64)]| FloatHistogram {
            schema: -53,
            count: positive.iter().map(|b| b.1).sum(),
            custom_values: bounds.to_vec(),
            positive: positive.to_vec(),
            ..Default::default()
        };
        let prev = custom(&[2.0, 4.0], &[(0, 1.0), (1, 2.0)]);
        // Finer bounds whose merged buckets grew: no reset.
        assert!(!detect_reset(&custom(&[2.0, 3.0, 4.0], &[(0, 1.0), (1, 1.0), (2, 1.0)]), &prev));
        // Merged into (2, 4] the finer buckets hold less than before: a reset.
        assert!(detect_reset(&custom(&[2.0, 3.0, 4.0], &[(0, 2.0), (1, 0.5), (2, 0.5)]), &prev));
    }

    #[test]
    fn zero_bucket_widening_absorbs_buckets() {
        let mut a = FloatHistogram { zero_threshold: 1.0, zero_count: 1.0, count: 1.0, ..Default::default() };
        let mut b = h(0, 2.0, &[(0, 1.0), (1, 1.0)]);
        reconcile_zero_buckets(&mut a, &mut b);
        assert_eq!(b.zero_threshold, 1.0);
        assert_eq!(b.zero_count, 1.0);
        assert_eq!(b.positive, vec![(1, 1.0)]);
    }
}
