//! Function calls on instant vectors and scalars; range-vector functions live in `range_fn`.

use std::cmp::Ordering;

use storage::{Label, Labels};

use super::numeric::{go_max, go_min};
use super::selector::Pick;
use super::{Evaluator, FPoint, Grid, Series, Val, duplicate_labelset, histogram_fns, labels, series};
use crate::error::{Error, Result};
use crate::parser::ast::{Call, Expr, ValueType};

fn math_fn(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "sqrt" => f64::sqrt,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "rad" => |v| v * std::f64::consts::PI / 180.0,
        "deg" => |v| v * 180.0 / std::f64::consts::PI,
        "sgn" => |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        },
        _ => return None,
    })
}

/// Civil date parts of a Unix time in seconds (UTC).
pub(crate) struct DateParts {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub weekday: u32,
    pub yday: u32,
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Converts Unix seconds to date parts (Howard Hinnant's `civil_from_days`).
pub(crate) fn date_parts(secs: i64) -> DateParts {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut yday = day;
    for m in 1..month {
        yday += days_in_month(year, m);
    }
    DateParts {
        year,
        month,
        day,
        hour: (sod / 3600) as u32,
        minute: ((sod % 3600) / 60) as u32,
        weekday: (days + 4).rem_euclid(7) as u32,
        yday,
    }
}

fn date_fn(name: &str, secs: i64) -> Option<f64> {
    let d = date_parts(secs);
    Some(match name {
        "year" => d.year as f64,
        "month" => f64::from(d.month),
        "day_of_month" => f64::from(d.day),
        "day_of_year" => f64::from(d.yday),
        "day_of_week" => f64::from(d.weekday),
        "days_in_month" => f64::from(days_in_month(d.year, d.month)),
        "hour" => f64::from(d.hour),
        "minute" => f64::from(d.minute),
        _ => return None,
    })
}

/// Go's float-to-int64 conversion as used by the date functions on amd64: truncation, and the
/// minimum value for NaN, infinities and anything out of range.
fn go_f64_to_i64(v: f64) -> i64 {
    if v.is_finite() && v >= i64::MIN as f64 && v < i64::MAX as f64 { v as i64 } else { i64::MIN }
}

/// Compares label values like Prometheus' natural sort (`natsort`): digit runs by value.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let (na, nb) = (a[si..i].trim_start_matches('0'), b[sj..j].trim_start_matches('0'));
            let ord = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if ab[i] != bb[j] {
                return ab[i].cmp(&bb[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (ab.len() - i).cmp(&(bb.len() - j))
}

impl<'a> Evaluator<'a> {
    /// Evaluates a function call.
    pub(crate) fn eval_call(&mut self, c: &Call, g: Grid) -> Result<Val> {
        let name = c.func.name;
        if let Some(mi) = c.args.iter().position(|a| a.value_type() == ValueType::Matrix) {
            return self.eval_range_call(c, g, mi);
        }
        match name {
            "label_replace" => return self.eval_label_replace(c, g),
            "label_join" => return self.eval_label_join(c, g),
            "info" => return self.eval_info(c, g),
            "histogram_quantile" | "histogram_quantiles" | "histogram_fraction" => {
                return self.eval_classic_histogram(c, g);
            }
            _ => {}
        }
        if let Some(Expr::Vector(vs)) = c.args.first().map(Expr::unparen)
            && let Some(pick) = match name {
                // The sample's own timestamp, not the evaluation step.
                "timestamp" => Some(Pick::Timestamp),
                // Start timestamps are only known for samples read by a selector (a smoothed
                // selector's values are interpolated, not samples).
                "start_timestamp" if self.opts.use_start_timestamps && !vs.smoothed => {
                    Some(Pick::StartTimestamp)
                }
                _ => None,
            }
        {
            let Val::Vector(mut m) = self.eval_vector_selector(vs, g, pick)? else {
                return Ok(Val::Vector(Vec::new()));
            };
            for s in &mut m {
                s.drop_metric_name(self.opts.delayed_name_removal);
            }
            return self.finish_elementwise(m);
        }
        let q = self.query;
        let steps = g.len();
        let per_step = |f: &dyn Fn(i64) -> f64| -> Val { Val::Scalar(g.timestamps().map(f).collect()) };
        match name {
            "time" => return Ok(per_step(&|ts| ts as f64 / 1000.0)),
            "pi" => return Ok(Val::Scalar(vec![std::f64::consts::PI; steps])),
            "start" => return Ok(Val::Scalar(vec![q.start as f64 / 1000.0; steps])),
            "end" => return Ok(Val::Scalar(vec![q.end as f64 / 1000.0; steps])),
            "step" => return Ok(Val::Scalar(vec![q.step as f64 / 1000.0; steps])),
            "range" => return Ok(Val::Scalar(vec![(q.end - q.start) as f64 / 1000.0; steps])),
            "min_of" | "max_of" => {
                let a = self.eval_scalar(&c.args[0], g)?;
                let b = self.eval_scalar(&c.args[1], g)?;
                let f = if name == "min_of" { go_min } else { go_max };
                return Ok(Val::Scalar(a.iter().zip(&b).map(|(x, y)| f(*x, *y)).collect()));
            }
            "vector" => {
                let v = self.eval_scalar(&c.args[0], g)?;
                let points = g.timestamps().zip(v).map(|(t, f)| FPoint { t, f }).collect();
                return Ok(Val::Vector(vec![Series::new(Labels::default(), false, points)]));
            }
            "scalar" => {
                let m = self.eval_vector(&c.args[0], g)?;
                let mut out = vec![f64::NAN; steps];
                let mut count = vec![0u32; steps];
                for s in &m {
                    for p in &s.points {
                        let i = g.index(p.t);
                        count[i] += 1;
                        out[i] = p.f;
                    }
                }
                for (o, n) in out.iter_mut().zip(count) {
                    if n != 1 {
                        *o = f64::NAN;
                    }
                }
                return Ok(Val::Scalar(out));
            }
            "absent" => {
                let m = self.eval_vector(&c.args[0], g)?;
                let mut present = vec![false; steps];
                for s in &m {
                    for t in s.points.iter().map(|p| p.t).chain(s.hpoints.iter().map(|p| p.t)) {
                        present[g.index(t)] = true;
                    }
                }
                let points: Vec<FPoint> = g
                    .timestamps()
                    .zip(present)
                    .filter(|(_, p)| !p)
                    .map(|(t, _)| FPoint { t, f: 1.0 })
                    .collect();
                if points.is_empty() {
                    return Ok(Val::Vector(Vec::new()));
                }
                let l = super::range_fn::absent_labels(&c.args[0]);
                return Ok(Val::Vector(vec![Series::new(l, false, points)]));
            }
            "year" | "month" | "day_of_month" | "day_of_year" | "day_of_week" | "days_in_month" | "hour"
            | "minute"
                if c.args.is_empty() =>
            {
                let points =
                    g.timestamps().filter_map(|t| date_fn(name, t / 1000).map(|f| FPoint { t, f })).collect();
                return Ok(Val::Vector(vec![Series::new(Labels::default(), false, points)]));
            }
            "sort" | "sort_desc" | "sort_by_label" | "sort_by_label_desc" => return self.eval_sort(c, g),
            _ => {}
        }
        // Element-wise functions of an instant vector, some with per-step scalar parameters.
        let mut m = self.eval_vector(&c.args[0], g)?;
        let mut params = Vec::new();
        for a in &c.args[1..] {
            params.push(self.eval_scalar(a, g)?);
        }
        let delayed = self.opts.delayed_name_removal;
        let param = |k: usize, t: i64| params.get(k).and_then(|p| p.get(g.index(t))).copied();
        for s in &mut m {
            match name {
                "clamp" | "clamp_min" | "clamp_max" => {
                    s.points.retain_mut(|p| {
                        let (lo, hi) = match name {
                            "clamp" => (param(0, p.t).unwrap_or(f64::NAN), param(1, p.t).unwrap_or(f64::NAN)),
                            "clamp_min" => (param(0, p.t).unwrap_or(f64::NAN), f64::INFINITY),
                            _ => (f64::NEG_INFINITY, param(0, p.t).unwrap_or(f64::NAN)),
                        };
                        if hi < lo {
                            return false;
                        }
                        p.f = go_max(lo, go_min(hi, p.f));
                        true
                    });
                }
                "round" => {
                    for p in &mut s.points {
                        let inv = 1.0 / param(0, p.t).unwrap_or(1.0);
                        p.f = (p.f * inv + 0.5).floor() / inv;
                    }
                }
                "timestamp" => {
                    s.points.extend(s.hpoints.iter().map(|p| FPoint { t: p.t, f: 0.0 }));
                    s.points.sort_by_key(|p| p.t);
                    for p in &mut s.points {
                        p.f = p.t as f64 / 1000.0;
                    }
                }
                "year" | "month" | "day_of_month" | "day_of_year" | "day_of_week" | "days_in_month"
                | "hour" | "minute" => {
                    for p in &mut s.points {
                        p.f = date_fn(name, go_f64_to_i64(p.f)).unwrap_or(f64::NAN);
                    }
                }
                "histogram_count" | "histogram_sum" | "histogram_avg" | "histogram_stddev"
                | "histogram_stdvar" => {
                    // These read native histograms only: float samples are skipped.
                    s.points = s
                        .hpoints
                        .iter()
                        .map(|p| {
                            let h = &p.h;
                            let f = match name {
                                "histogram_count" => h.count,
                                "histogram_sum" => h.sum,
                                "histogram_avg" => h.sum / h.count,
                                "histogram_stddev" => histogram_fns::variance(h).sqrt(),
                                _ => histogram_fns::variance(h),
                            };
                            FPoint { t: p.t, f }
                        })
                        .collect();
                }
                "start_timestamp" => {
                    // Not a selector's samples (or start timestamps are off): none known, so no
                    // result, as in Prometheus.
                    s.points.clear();
                }
                _ => {
                    let Some(f) = math_fn(name) else {
                        return Err(Error::Execution(format!("function {name:?} is not implemented")));
                    };
                    for p in &mut s.points {
                        p.f = f(p.f);
                    }
                }
            }
            // Element-wise functions yield floats; the histogram samples they do not read are
            // dropped, as in Prometheus.
            s.hpoints.clear();
            s.drop_metric_name(delayed);
        }
        m.retain(|s| !s.points.is_empty());
        self.finish_elementwise(m)
    }

    /// Results of functions that keep series apart: duplicate label sets after dropping the
    /// metric name are an error (or are merged later with delayed name removal).
    fn finish_elementwise(&mut self, m: Vec<Series>) -> Result<Val> {
        if !self.opts.delayed_name_removal && series::has_duplicate_labels(&m) {
            return Err(duplicate_labelset());
        }
        Ok(Val::Vector(m))
    }

    fn eval_sort(&mut self, c: &Call, g: Grid) -> Result<Val> {
        let name = c.func.name;
        let mut m = self.eval_vector(&c.args[0], g)?;
        // `sort` and `sort_desc` order by float value and drop histogram samples (at every
        // step of a range query too); the label sorts keep them.
        let by_value = matches!(name, "sort" | "sort_desc");
        if by_value {
            for s in &mut m {
                s.hpoints.clear();
            }
            m.retain(|s| !s.points.is_empty());
        }
        if !g.is_instant() {
            self.annotations.warn(
                "sort is ineffective for range queries since results are always ordered by labels",
                c.start,
            );
            return Ok(Val::Vector(m));
        }
        let mut label_args = Vec::new();
        for a in &c.args[1..] {
            if let Expr::String(s) = a.unparen() {
                label_args.push(s.value.clone());
            }
        }
        // One step: each series has at most one point.
        let mut v: Vec<Series> = m.into_iter().filter(|s| !s.is_empty()).collect();
        let value = |s: &Series| s.points[0].f;
        match name {
            "sort" => v.sort_by(|a, b| cmp_values_nan_last(value(a), value(b))),
            "sort_desc" => v.sort_by(|a, b| cmp_values_nan_last(-value(a), -value(b))),
            _ => {
                let desc = name == "sort_by_label_desc";
                v.sort_by(|a, b| {
                    for l in &label_args {
                        let (x, y) = (a.labels.get(l).unwrap_or(""), b.labels.get(l).unwrap_or(""));
                        if x == y {
                            continue;
                        }
                        let ord = natural_cmp(x, y);
                        return if desc { ord.reverse() } else { ord };
                    }
                    let ord = a.labels.cmp(&b.labels);
                    if desc { ord.reverse() } else { ord }
                });
            }
        }
        Ok(Val::Vector(v))
    }

    fn string_arg(c: &Call, i: usize) -> Result<(String, bool, String)> {
        match c.args.get(i).map(Expr::unparen) {
            Some(Expr::String(s)) => Ok((s.value.clone(), s.valid_utf8, s.raw.clone())),
            _ => Err(Error::BadData(format!(
                "expected a string literal as argument {} of {}",
                i + 1,
                c.func.name
            ))),
        }
    }

    fn eval_label_replace(&mut self, c: &Call, g: Grid) -> Result<Val> {
        let (dst, dst_ok, _) = Self::string_arg(c, 1)?;
        let (repl, _, _) = Self::string_arg(c, 2)?;
        let (src, _, _) = Self::string_arg(c, 3)?;
        let (re_src, _, _) = Self::string_arg(c, 4)?;
        let invalid_regex =
            || Error::Execution(format!("invalid regular expression in label_replace(): {re_src}"));
        // Checked before the vector is evaluated, as Prometheus does, but compiled after it: a
        // compiled regex may need megabytes, and nested calls then hold one at a time.
        storage::matcher::check_wrapped_regex(&re_src).map_err(|_| invalid_regex())?;
        if !labels::is_valid_label_name(&dst, dst_ok) {
            return Err(Error::Execution(format!(
                "invalid destination label name in label_replace(): {dst}"
            )));
        }
        let mut m = self.eval_vector(&c.args[0], g)?;
        let re = storage::matcher::wrapped_regex(&re_src).map_err(|_| invalid_regex())?;
        let mut caps = re.create_captures();
        let mut out = String::new();
        // The label last set, whose strings the next series setting the same value shares
        // (a constant replacement sets one value on every series).
        let mut last: Option<Label> = None;
        for s in &mut m {
            let value = s.labels.get(&src).unwrap_or("");
            re.captures(value, &mut caps);
            if caps.is_match() {
                out.clear();
                // Go's and the regex crate's replacement syntax agree: `$1`, `${name}`, `$$`, and a
                // bare name takes the longest run of name characters.
                caps.interpolate_string_into(value, &repl, &mut out);
                s.labels = if out.is_empty() {
                    labels::set(&s.labels, &dst, "")
                } else {
                    let label = match last.take() {
                        Some(l) if *l.value == *out => l,
                        _ => Label::new(dst.as_str(), out.as_str()),
                    };
                    let set = labels::set_label(&s.labels, &label);
                    last = Some(label);
                    set
                };
                if dst == storage::METRIC_NAME {
                    s.drop_name = false;
                }
            }
        }
        Ok(Val::Vector(series::merge_same_labelsets(m)?))
    }

    fn eval_label_join(&mut self, c: &Call, g: Grid) -> Result<Val> {
        let (dst, dst_ok, _) = Self::string_arg(c, 1)?;
        let (sep, _, _) = Self::string_arg(c, 2)?;
        let mut srcs = Vec::new();
        for i in 3..c.args.len() {
            let (src, ok, _) = Self::string_arg(c, i)?;
            if !labels::is_valid_label_name(&src, ok) {
                return Err(Error::Execution(format!("invalid source label name in label_join(): {src}")));
            }
            srcs.push(src);
        }
        if !labels::is_valid_label_name(&dst, dst_ok) {
            return Err(Error::Execution(format!("invalid destination label name in label_join(): {dst}")));
        }
        let mut m = self.eval_vector(&c.args[0], g)?;
        for s in &mut m {
            let joined: Vec<&str> = srcs.iter().map(|l| s.labels.get(l).unwrap_or("")).collect();
            let value = joined.join(&sep);
            s.labels = labels::set(&s.labels, &dst, &value);
            if dst == storage::METRIC_NAME {
                s.drop_name = false;
            }
        }
        Ok(Val::Vector(series::merge_same_labelsets(m)?))
    }
}

/// Orders values ascending with NaN last.
fn cmp_values_nan_last(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}
