//! `histogram_quantile`, `histogram_quantiles` and `histogram_fraction` over classic
//! (`le`-bucket) histograms and native histograms.

use storage::Labels;

use super::numeric::fmt_g;
use super::series::{OutputBuilder, StepCursor};
use super::{Evaluator, Grid, HashMap, Val, drop_metric_labels, histogram_fns, labels};
use crate::error::{Error, Result};
use crate::parser::ast::{Call, Expr};

/// Relative difference below which neighbouring bucket counts are treated as equal (floating
/// point noise, e.g. from sharded summation).
const SMALL_DELTA_TOLERANCE: f64 = 1e-12;

/// One classic bucket: upper bound and cumulative count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bucket {
    pub upper: f64,
    pub count: f64,
}

/// Prometheus' float comparison with relative tolerance (`util/almost.Equal`).
pub(crate) fn almost_equal(a: f64, b: f64, epsilon: f64) -> bool {
    const MIN_NORMAL: f64 = 2.2250738585072014e-308;
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || sum < MIN_NORMAL {
        return diff < epsilon * MIN_NORMAL;
    }
    diff / sum.min(f64::MAX) < epsilon
}

/// Sorts buckets, merges equal bounds, and repairs counts that decrease. Returns the buckets and
/// whether monotonicity had to be forced. `None` if the highest bucket is not `+Inf`.
fn prepare(mut buckets: Vec<Bucket>) -> Option<(Vec<Bucket>, bool)> {
    buckets.sort_by(|a, b| a.upper.partial_cmp(&b.upper).unwrap_or(std::cmp::Ordering::Equal));
    if buckets.last().is_none_or(|b| b.upper != f64::INFINITY) {
        return None;
    }
    let mut merged: Vec<Bucket> = Vec::with_capacity(buckets.len());
    for b in buckets {
        match merged.last_mut() {
            Some(last) if last.upper == b.upper => last.count += b.count,
            _ => merged.push(b),
        }
    }
    let mut forced = false;
    let mut prev = merged[0].count;
    for b in merged.iter_mut().skip(1) {
        let curr = b.count;
        if curr == prev {
            continue;
        }
        if almost_equal(prev, curr, SMALL_DELTA_TOLERANCE) {
            b.count = prev;
            continue;
        }
        if curr < prev {
            b.count = prev;
            forced = true;
            continue;
        }
        prev = curr;
    }
    Some((merged, forced))
}

/// The `q`-quantile of a classic histogram (Prometheus' `BucketQuantile`), and whether the
/// bucket counts had to be made monotonic.
pub(crate) fn bucket_quantile(q: f64, buckets: Vec<Bucket>) -> (f64, bool) {
    if q.is_nan() {
        return (f64::NAN, false);
    }
    if q < 0.0 {
        return (f64::NEG_INFINITY, false);
    }
    if q > 1.0 {
        return (f64::INFINITY, false);
    }
    let Some((b, forced)) = prepare(buckets) else {
        return (f64::NAN, false);
    };
    if b.len() < 2 {
        return (f64::NAN, false);
    }
    let observations = b[b.len() - 1].count;
    if observations == 0.0 {
        return (f64::NAN, false);
    }
    let mut rank = q * observations;
    let i = b[..b.len() - 1].partition_point(|x| x.count < rank);
    if i == b.len() - 1 {
        return (b[b.len() - 2].upper, forced);
    }
    if i == 0 && b[0].upper <= 0.0 {
        return (b[0].upper, forced);
    }
    let (mut start, end, mut count) = (0.0, b[i].upper, b[i].count);
    if i > 0 {
        start = b[i - 1].upper;
        count -= b[i - 1].count;
        rank -= b[i - 1].count;
    }
    (start + (end - start) * (rank / count), forced)
}

/// The fraction of observations between `lower` and `upper` (Prometheus' `BucketFraction`):
/// linear interpolation inside finite buckets; inside a bucket of infinite width a bound counts
/// as lying at the bucket's finite end, so such a bucket is included only when the range
/// reaches its infinite end. The lowest bucket starts at 0 if its upper bound is positive.
pub(crate) fn bucket_fraction(lower: f64, upper: f64, buckets: Vec<Bucket>) -> f64 {
    if lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    let Some((b, _)) = prepare(buckets) else {
        return f64::NAN;
    };
    let total = b[b.len() - 1].count;
    if total == 0.0 {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }
    let rank_of = |v: f64| -> f64 {
        let mut rank = 0.0;
        let mut prev_cum = 0.0;
        for (i, bk) in b.iter().enumerate() {
            let lo =
                if i == 0 { if bk.upper > 0.0 { 0.0 } else { f64::NEG_INFINITY } } else { b[i - 1].upper };
            let count = bk.count - prev_cum;
            prev_cum = bk.count;
            if v <= lo {
                return rank;
            }
            if v < bk.upper {
                if lo == f64::NEG_INFINITY {
                    return rank + count;
                }
                if bk.upper == f64::INFINITY {
                    return rank;
                }
                return rank + count * (v - lo) / (bk.upper - lo);
            }
            rank += count;
        }
        rank
    };
    (rank_of(upper) - rank_of(lower)) / total
}

/// Formats a quantile for a label value like OpenMetrics (`0.5`, `1.0`, `+Inf`).
pub(crate) fn format_openmetrics_float(v: f64) -> String {
    let s = fmt_g(v);
    if v.is_finite() && !s.contains(['e', '.']) { format!("{s}.0") } else { s }
}

/// Parses an `le` value like Go's `strconv.ParseFloat` for the forms that occur (decimal,
/// exponent, `+Inf`, `NaN`).
fn parse_go_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

struct Group {
    labels: Labels,
    buckets: Vec<Bucket>,
}

impl<'a> Evaluator<'a> {
    /// Evaluates `histogram_quantile`, `histogram_quantiles` or `histogram_fraction` over
    /// classic and native histograms.
    pub(crate) fn eval_classic_histogram(&mut self, c: &Call, g: Grid) -> Result<Val> {
        let name = c.func.name;
        let (vec_idx, scalar_idx): (usize, Vec<usize>) = match name {
            "histogram_quantile" => (1, vec![0]),
            "histogram_fraction" => (2, vec![0, 1]),
            _ => (0, (2..c.args.len()).collect()),
        };
        let quantile_label = if name == "histogram_quantiles" {
            match c.args.get(1).map(Expr::unparen) {
                Some(Expr::String(s)) => Some(s.value.clone()),
                _ => return Err(Error::BadData("histogram_quantiles needs a label name".into())),
            }
        } else {
            None
        };
        let mut scalars = Vec::with_capacity(scalar_idx.len());
        for &i in &scalar_idx {
            scalars.push(self.eval_scalar(&c.args[i], g)?);
        }
        let m = self.eval_vector(&c.args[vec_idx], g)?;
        let arg_pos = c.args[vec_idx].start();
        let delayed = self.opts.delayed_name_removal;
        let mut out = OutputBuilder::new(g);
        let mut cursor = StepCursor::new(&m);
        let mut step = Vec::new();
        let mut groups: Vec<Group> = Vec::new();
        let mut index: HashMap<Labels, usize> = HashMap::default();
        let mut hpos = vec![0usize; m.len()];
        for (si, ts) in g.timestamps().enumerate() {
            self.check_deadline()?;
            let qs: Vec<f64> = scalars.iter().map(|s| s.get(si).copied().unwrap_or(f64::NAN)).collect();
            if name != "histogram_fraction" {
                for (k, q) in qs.iter().enumerate() {
                    if q.is_nan() || *q < 0.0 || *q > 1.0 {
                        let pos = c.args[scalar_idx[k]].start();
                        self.annotations.warn(
                            format!("quantile value should be between 0 and 1, got {}", fmt_g(*q)),
                            pos,
                        );
                    }
                }
            }
            cursor.at(&m, ts, &mut step);
            groups.iter_mut().for_each(|g| g.buckets.clear());
            // Native histograms are handled below, from their own points.
            for s in step.iter().filter(|s| s.h.is_none()) {
                let le = s.labels.get("le").unwrap_or("");
                let Some(upper) = parse_go_float(le) else {
                    let metric = if delayed { labels::metric_name(s.labels) } else { "" };
                    let mut msg =
                        format!("bucket label \"le\" is missing or has a malformed value of {le:?}");
                    if !metric.is_empty() {
                        msg.push_str(&format!(" for metric name {metric:?}"));
                    }
                    self.annotations.warn(msg, arg_pos);
                    continue;
                };
                let key = labels::without(s.labels, &["le"]);
                let gi = match index.get(&key) {
                    Some(&i) => i,
                    None => {
                        index.insert(key.clone(), groups.len());
                        groups.push(Group { labels: key, buckets: Vec::new() });
                        groups.len() - 1
                    }
                };
                groups[gi].buckets.push(Bucket { upper, count: s.f });
            }
            let quantiles: Vec<f64> = if name == "histogram_fraction" { vec![0.0] } else { qs.clone() };
            // Native histograms at this step; a native histogram with the labels of a classic
            // one's buckets makes both unusable.
            let mut natives = Vec::new();
            for (i, s) in m.iter().enumerate() {
                let p = &mut hpos[i];
                while *p < s.hpoints.len() && s.hpoints[*p].t < ts {
                    *p += 1;
                }
                if let Some(hp) = s.hpoints.get(*p).filter(|hp| hp.t == ts) {
                    let key = labels::without(&s.labels, &["le"]);
                    if let Some(&gi) = index.get(&key)
                        && !groups[gi].buckets.is_empty()
                    {
                        let msg = format!(
                            "vector contains a mix of classic and native histograms for metric name {:?}",
                            labels::metric_name(&s.labels)
                        );
                        self.annotations.warn(msg, arg_pos);
                        groups[gi].buckets.clear();
                        continue;
                    }
                    natives.push((i, hp.h.clone()));
                }
            }
            for (i, h) in natives {
                let s = &m[i];
                // Observations of NaN are counted but in no bucket (and make the sum NaN).
                let nan_observations = h.sum.is_nan() && h.count > histogram_fns::bucket_total(&h);
                for &q in &quantiles {
                    let v = if name == "histogram_fraction" {
                        histogram_fns::fraction(qs[0], qs[1], &h)
                    } else {
                        histogram_fns::quantile(q, &h)
                    };
                    if nan_observations {
                        let metric = labels::metric_name(&s.labels);
                        let msg = if name == "histogram_fraction" {
                            format!(
                                "input to histogram_fraction has NaN observations, which are excluded from all fractions for metric name {metric:?}"
                            )
                        } else if v.is_nan() {
                            format!(
                                "input to histogram_quantile has NaN observations, result is NaN for metric name {metric:?}"
                            )
                        } else {
                            format!(
                                "input to histogram_quantile has NaN observations, result is skewed higher for metric name {metric:?}"
                            )
                        };
                        self.annotations.info(msg, arg_pos);
                    }
                    let mut l = if delayed { s.labels.clone() } else { drop_metric_labels(&s.labels) };
                    if let Some(label) = &quantile_label {
                        l = labels::set(&l, label, &format_openmetrics_float(q));
                    }
                    out.push(l, true, ts, v)?;
                }
            }
            for q in quantiles {
                for grp in groups.iter().filter(|g| !g.buckets.is_empty()) {
                    let v = if name == "histogram_fraction" {
                        bucket_fraction(qs[0], qs[1], grp.buckets.clone())
                    } else {
                        let (v, forced) = bucket_quantile(q, grp.buckets.clone());
                        if forced {
                            let metric = if delayed { labels::metric_name(&grp.labels) } else { "" };
                            let mut msg = "input to histogram_quantile needed to be fixed for monotonicity (see \
                                 https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile)"
                                .to_string();
                            if !metric.is_empty() {
                                msg.push_str(&format!(" for metric name {metric:?}"));
                            }
                            self.annotations.info(msg, arg_pos);
                        }
                        v
                    };
                    let mut l = if delayed { grp.labels.clone() } else { drop_metric_labels(&grp.labels) };
                    if let Some(label) = &quantile_label {
                        l = labels::set(&l, label, &format_openmetrics_float(q));
                    }
                    out.push(l, true, ts, v)?;
                }
            }
        }
        Ok(Val::Vector(out.finish(delayed)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &[(f64, f64)]) -> Vec<Bucket> {
        v.iter().map(|&(upper, count)| Bucket { upper, count }).collect()
    }

    #[test]
    fn quantile_interpolates_within_buckets() {
        let bs = b(&[(0.1, 10.0), (0.2, 20.0), (f64::INFINITY, 40.0)]);
        assert_eq!(bucket_quantile(0.25, bs.clone()), (0.1, false));
        assert!((bucket_quantile(0.375, bs.clone()).0 - 0.15).abs() < 1e-12);
        // In the +Inf bucket: the second-highest bound.
        assert_eq!(bucket_quantile(0.9, bs.clone()).0, 0.2);
        assert_eq!(bucket_quantile(-1.0, bs.clone()).0, f64::NEG_INFINITY);
        assert!(bucket_quantile(0.5, b(&[(1.0, 3.0)])).0.is_nan());
    }

    #[test]
    fn quantile_forces_monotonicity() {
        let bs = b(&[(1.0, 5.0), (2.0, 4.0), (f64::INFINITY, 10.0)]);
        let (v, forced) = bucket_quantile(0.5, bs);
        assert!(forced);
        assert_eq!(v, 1.0);
        // Tiny floating point noise is fixed silently.
        let bs = b(&[(1.0, 5.0), (2.0, 5.0 - 1e-14), (f64::INFINITY, 10.0)]);
        assert!(!bucket_quantile(0.5, bs).1);
    }

    #[test]
    fn fraction_handles_infinite_buckets() {
        let bs = b(&[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)]);
        assert!((bucket_fraction(0.0, 1.5, bs.clone()) - 0.02).abs() < 1e-12);
        assert!((bucket_fraction(400.0, f64::INFINITY, bs.clone()) - 0.94).abs() < 1e-12);
        assert_eq!(bucket_fraction(4.0, 5.0, bs.clone()), 0.0);
        let neg = b(&[(-3.0, 10.0), (-2.0, 12.0), (-1.0, 15.0), (f64::INFINITY, 100.0)]);
        assert!((bucket_fraction(-4.0, -2.0, neg.clone()) - 0.02).abs() < 1e-12);
        assert!((bucket_fraction(f64::NEG_INFINITY, -1.5, neg) - 0.135).abs() < 1e-12);
    }

    #[test]
    fn openmetrics_floats() {
        assert_eq!(format_openmetrics_float(1.0), "1.0");
        assert_eq!(format_openmetrics_float(0.25), "0.25");
        assert_eq!(format_openmetrics_float(0.0), "0.0");
    }
}
