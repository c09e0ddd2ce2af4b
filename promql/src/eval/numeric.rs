//! Numeric helpers shared by the evaluator's operators and functions: compensated sums, means,
//! quantiles, interpolation and Go's float semantics (`math.Min`/`math.Max`, `%g`).
//!
//! A leaf: it knows the point type and nothing else of the evaluator, so aggregation, range
//! functions, rates and histogram code can share these without depending on one another.

use super::series::FPoint;

/// Neumaier's improved Kahan summation step (Prometheus' `kahansum.Inc`).
pub(crate) fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

pub(crate) fn avg(w: &[FPoint]) -> f64 {
    let (mut sum, mut count) = (w[0].f, 1.0);
    let (mut mean, mut c) = (0.0, 0.0);
    let mut incremental = false;
    for (i, p) in w[1..].iter().enumerate() {
        count = (i + 2) as f64;
        if !incremental {
            let (ns, nc) = kahan_inc(p.f, sum, c);
            if !ns.is_infinite() {
                (sum, c) = (ns, nc);
                continue;
            }
            // The sum would overflow: continue with an incremental mean.
            incremental = true;
            mean = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        (mean, c) = kahan_inc(p.f / count, q * mean, q * c);
    }
    if incremental { mean + c } else { sum / count + c / count }
}

/// The `q`-quantile of `values` with linear interpolation between closest ranks (sorts them).
pub(crate) fn quantile(q: f64, values: &mut [f64]) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    // NaN sorts first, as in Prometheus' vectorByValueHeap.
    values.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal),
    });
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}

/// Linear interpolation between two points at time `t`.
pub(crate) fn interpolate(p1: FPoint, p2: FPoint, t: i64) -> f64 {
    p1.f + (p2.f - p1.f) * (t - p1.t) as f64 / (p2.t - p1.t) as f64
}

/// Go's `math.Min`: NaN wins, and -0 is smaller than +0.
pub(crate) fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == 0.0 && b == 0.0 {
        return if a.is_sign_negative() { a } else { b };
    }
    if a < b { a } else { b }
}

/// Go's `math.Max`: NaN wins, and +0 is larger than -0.
pub(crate) fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == 0.0 && b == 0.0 {
        return if a.is_sign_positive() { a } else { b };
    }
    if a > b { a } else { b }
}

/// Formats a float like Go's `%g` (shortest representation; exponent form below 1e-4 and
/// from 1e6 on).
pub(crate) fn fmt_g(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    let e = format!("{v:e}");
    let Some((mantissa, exp)) = e.split_once('e') else {
        return e;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{v}");
    }
    format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
}
