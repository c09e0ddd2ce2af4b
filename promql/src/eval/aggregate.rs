//! Aggregation operators (`sum`, `avg`, `topk`, `count_values`, ...) with `by`/`without`.

use std::cmp::Ordering;

use std::sync::Arc;

use storage::{CounterResetHint, FloatHistogram, Label, Labels};

use super::float_histogram::{self as fh, Combined};
use super::histogram_sum;
use super::labels::group_labels;
use super::numeric::{fmt_g, go_max, go_min, kahan_inc, quantile};
use super::series::{OutputBuilder, StepCursor};
use super::{Evaluator, Grid, HashMap, Val, labels};
use crate::error::{Error, Result};
use crate::parser::ast::{AggOp, AggregateExpr, Expr};

/// Running state of one group at one step.
#[derive(Debug, Clone, Default)]
struct Acc {
    seen: bool,
    value: f64,
    mean: f64,
    kahan_c: f64,
    count: f64,
    incremental_mean: bool,
    drop_name: bool,
    values: Vec<f64>,
    /// `sum`/`avg` of native histograms: the running sum or mean (for the layout and the
    /// annotations), and the histograms, summed precisely at the end (`histogram_sum`).
    hist: Option<FloatHistogram>,
    hists: Vec<Arc<FloatHistogram>>,
    has_float: bool,
    has_hist: bool,
    /// Histograms that cannot be combined (exponential with custom buckets) were met.
    incompatible: bool,
    /// `sum`/`avg` met histograms hinted `reset` and ones hinted `not_reset`: Prometheus warns
    /// about conflicting counter resets once per group and step.
    reset_seen: bool,
    not_reset_seen: bool,
}

/// Why a histogram could not join an aggregation, as a warning (Prometheus'
/// `handleAggregationError`).
fn incompatible_warning(name: &str) -> String {
    format!(
        "vector contains a mix of histograms with exponential and custom buckets schemas for metric name {name:?}"
    )
}

/// An aggregation parameter over all steps, with Go's NaN-propagating min and max.
struct Params {
    values: Vec<f64>,
    min: f64,
    max: f64,
    any_nan: bool,
}

impl Params {
    fn new(values: Vec<f64>) -> Self {
        let any_nan = values.iter().any(|v| v.is_nan());
        let min = values.iter().copied().reduce(go_min).unwrap_or(f64::NAN);
        let max = values.iter().copied().reduce(go_max).unwrap_or(f64::NAN);
        Params { values, min, max, any_nan }
    }
}

/// Orders for `topk` output: descending, NaN last.
fn cmp_desc_nan_last(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
    }
}

impl<'a> Evaluator<'a> {
    pub(crate) fn eval_aggregate(&mut self, a: &AggregateExpr, g: Grid) -> Result<Val> {
        if a.op == AggOp::CountValues {
            return self.eval_count_values(a, g);
        }
        if let Some(v) = self.eval_group_extreme(a, g)? {
            return Ok(v);
        }
        let params = match &a.param {
            Some(p) => Some(Params::new(self.eval_scalar(p, g)?)),
            None => None,
        };
        let input = self.eval_vector(&a.expr, g)?;
        let param_pos = a.param.as_ref().map_or(a.start, Expr::start);
        if let Some(p) = &params {
            match a.op {
                AggOp::Topk | AggOp::Bottomk | AggOp::Limitk => {
                    if p.max < 1.0 {
                        return Ok(Val::Vector(Vec::new()));
                    }
                    if p.any_nan {
                        return Err(Error::Execution("Parameter value is NaN".into()));
                    }
                    if p.min <= i64::MIN as f64 {
                        return Err(Error::Execution(format!(
                            "Scalar value {} underflows int64",
                            fmt_g(p.min)
                        )));
                    }
                    if p.max >= 9_223_372_036_854_774_784.0 {
                        return Err(Error::Execution(format!(
                            "Scalar value {} overflows int64",
                            fmt_g(p.max)
                        )));
                    }
                }
                AggOp::LimitRatio => {
                    if p.max == 0.0 && p.min == 0.0 {
                        return Ok(Val::Vector(Vec::new()));
                    }
                    if p.any_nan {
                        return Err(Error::Execution("Ratio value is NaN".into()));
                    }
                    if p.max > 1.0 {
                        self.annotations.warn(
                            format!(
                                "ratio value should be between -1 and 1, got {}, capping to 1",
                                fmt_g(p.max)
                            ),
                            param_pos,
                        );
                    }
                    if p.min < -1.0 {
                        self.annotations.warn(
                            format!(
                                "ratio value should be between -1 and 1, got {}, capping to -1",
                                fmt_g(p.min)
                            ),
                            param_pos,
                        );
                    }
                }
                AggOp::Quantile => {
                    let bad: Vec<f64> = [
                        p.any_nan.then_some(f64::NAN),
                        (p.max > 1.0).then_some(p.max),
                        (p.min < 0.0).then_some(p.min),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    for q in bad {
                        self.annotations.warn(
                            format!("quantile value should be between 0 and 1, got {}", fmt_g(q)),
                            param_pos,
                        );
                    }
                }
                _ => {}
            }
        }
        let mut grouping = a.grouping.clone();
        grouping.sort();
        // Map each input series to its group once; labels do not change between steps.
        let mut group_index: HashMap<Labels, usize> = HashMap::default();
        let mut group_of = Vec::with_capacity(input.len());
        let mut group_names: Vec<Labels> = Vec::new();
        for s in &input {
            let key = group_labels(&s.labels, &grouping, a.without);
            let idx = *group_index.entry(key.clone()).or_insert_with(|| {
                group_names.push(key);
                group_names.len() - 1
            });
            group_of.push(idx);
        }
        if self.opts.column_aggregation
            && let Some(out) = self.aggregate_columns(a.op, &input, &group_of, &group_names, g)?
        {
            return Ok(Val::Vector(out));
        }
        let expr_pos = a.expr.start();
        let k_style = matches!(a.op, AggOp::Topk | AggOp::Bottomk | AggOp::Limitk | AggOp::LimitRatio);
        let mut out = OutputBuilder::new(g);
        let mut cursor = StepCursor::new(&input);
        let mut step = Vec::new();
        // One accumulator per group, reused across steps: each is taken (and so reset) when its
        // step's result is written.
        let mut accs = if k_style { Vec::new() } else { vec![Acc::default(); group_names.len()] };
        for (si, ts) in g.timestamps().enumerate() {
            self.check_deadline()?;
            cursor.at(&input, ts, &mut step);
            let param = params.as_ref().and_then(|p| p.values.get(si)).copied().unwrap_or(f64::NAN);
            if k_style {
                self.aggregate_k(a.op, param, &step, &group_of, group_names.len(), ts, a.start, &mut out)?;
                continue;
            }
            for s in &step {
                let acc = &mut accs[group_of[s.idx]];
                let f = s.f;
                if let Some(h) = s.h {
                    self.aggregate_histogram(a.op, acc, h, s.labels, s.drop_name, expr_pos);
                    if matches!(a.op, AggOp::Sum | AggOp::Avg) && !acc.has_float && !acc.incompatible {
                        acc.hists.push(h.clone());
                    }
                    continue;
                }
                if !acc.seen {
                    *acc = Acc {
                        seen: true,
                        value: f,
                        mean: f,
                        count: 1.0,
                        drop_name: s.drop_name,
                        has_float: true,
                        ..Acc::default()
                    };
                    match a.op {
                        AggOp::Stddev | AggOp::Stdvar => {
                            acc.value = if f.is_finite() { 0.0 } else { f64::NAN }
                        }
                        AggOp::Quantile => acc.values.push(f),
                        AggOp::Group => acc.value = 1.0,
                        _ => {}
                    }
                    continue;
                }
                acc.drop_name |= s.drop_name;
                acc.has_float = true;
                match a.op {
                    AggOp::Sum => (acc.value, acc.kahan_c) = kahan_inc(f, acc.value, acc.kahan_c),
                    AggOp::Avg => {
                        acc.count += 1.0;
                        if acc.has_hist {
                            continue;
                        }
                        avg_add(
                            f,
                            acc.count,
                            &mut acc.value,
                            &mut acc.kahan_c,
                            &mut acc.mean,
                            &mut acc.incremental_mean,
                        );
                    }
                    AggOp::Max if acc.value < f || acc.value.is_nan() => acc.value = f,
                    AggOp::Min if acc.value > f || acc.value.is_nan() => acc.value = f,
                    AggOp::Count => acc.count += 1.0,
                    AggOp::Stddev | AggOp::Stdvar => {
                        acc.count += 1.0;
                        let delta = f - acc.mean;
                        acc.mean += delta / acc.count;
                        acc.value += delta * (f - acc.mean);
                    }
                    AggOp::Quantile => acc.values.push(f),
                    _ => {}
                }
            }
            for (gi, acc) in accs.iter_mut().enumerate() {
                if !acc.seen {
                    continue;
                }
                let mut acc = std::mem::take(acc);
                if acc.reset_seen && acc.not_reset_seen {
                    self.annotations
                        .warn("conflicting counter resets during histogram aggregation", expr_pos);
                }
                if matches!(a.op, AggOp::Sum | AggOp::Avg) && acc.has_hist {
                    if acc.has_float {
                        self.annotations
                            .warn("encountered a mix of histograms and floats for aggregation", expr_pos);
                        continue;
                    }
                    if acc.incompatible {
                        continue;
                    }
                    if acc.hist.is_some() {
                        let hs: Vec<&FloatHistogram> = acc.hists.iter().map(|h| &**h).collect();
                        if let Ok((h, _)) = histogram_sum::sum_or_mean(&hs, a.op == AggOp::Avg) {
                            out.push_value(
                                group_names[gi].clone(),
                                acc.drop_name,
                                ts,
                                0.0,
                                Some(Arc::new(h)),
                            )?;
                        }
                    }
                    continue;
                }
                let v = match a.op {
                    AggOp::Sum => acc.value + acc.kahan_c,
                    AggOp::Avg if acc.incremental_mean => acc.mean + acc.kahan_c,
                    AggOp::Avg => acc.value / acc.count + acc.kahan_c / acc.count,
                    AggOp::Count => acc.count,
                    AggOp::Stdvar => acc.value / acc.count,
                    AggOp::Stddev => (acc.value / acc.count).sqrt(),
                    AggOp::Quantile => quantile(param, &mut acc.values),
                    _ => acc.value,
                };
                out.push(group_names[gi].clone(), acc.drop_name, ts, v)?;
            }
        }
        Ok(Val::Vector(out.finish(true)?))
    }

    /// `topk`, `bottomk`, `limitk`, `limit_ratio` at one step: selects input samples, keeping
    /// their labels.
    #[allow(clippy::too_many_arguments)]
    fn aggregate_k(
        &mut self,
        op: AggOp,
        param: f64,
        step: &[super::series::StepSample<'_>],
        group_of: &[usize],
        groups: usize,
        ts: i64,
        pos: usize,
        out: &mut OutputBuilder,
    ) -> Result<()> {
        let mut chosen: Vec<Vec<usize>> = vec![Vec::new(); groups];
        match op {
            AggOp::LimitRatio => {
                if param == 0.0 {
                    return Ok(());
                }
                let r = param.clamp(-1.0, 1.0);
                for (i, s) in step.iter().enumerate() {
                    if ratio_selects(r, s.labels) {
                        chosen[group_of[s.idx]].push(i);
                    }
                }
            }
            _ => {
                let k = (param as i64).min(group_of.len() as i64);
                if k < 1 {
                    return Ok(());
                }
                for (i, s) in step.iter().enumerate() {
                    if s.h.is_some() && matches!(op, AggOp::Topk | AggOp::Bottomk) {
                        let name = if op == AggOp::Topk { "topk" } else { "bottomk" };
                        self.annotations.info(format!("ignored histogram in {name} aggregation"), pos);
                        continue;
                    }
                    chosen[group_of[s.idx]].push(i);
                }
                for c in &mut chosen {
                    match op {
                        AggOp::Topk => c.sort_by(|x, y| cmp_desc_nan_last(step[*x].f, step[*y].f)),
                        AggOp::Bottomk => c.sort_by(|x, y| cmp_desc_nan_last(-step[*x].f, -step[*y].f)),
                        _ => {}
                    }
                    c.truncate(k as usize);
                }
            }
        }
        for c in chosen {
            for i in c {
                let s = &step[i];
                out.push_value(s.labels.clone(), s.drop_name, ts, s.f, s.h.cloned())?;
            }
        }
        Ok(())
    }

    /// Adds one histogram sample to a group of `sum`, `avg`, `count` or `group`; the other
    /// aggregations ignore histograms with an info (Prometheus' `aggregation`).
    fn aggregate_histogram(
        &mut self,
        op: AggOp,
        acc: &mut Acc,
        h: &FloatHistogram,
        l: &Labels,
        drop_name: bool,
        pos: usize,
    ) {
        let ignored = match op {
            AggOp::Min => Some("min"),
            AggOp::Max => Some("max"),
            AggOp::Stddev => Some("stddev"),
            AggOp::Stdvar => Some("stdvar"),
            AggOp::Quantile => Some("quantile"),
            _ => None,
        };
        if let Some(name) = ignored {
            self.annotations.info(format!("ignored histogram in {name} aggregation"), pos);
            return;
        }
        if matches!(op, AggOp::Sum | AggOp::Avg) {
            match h.counter_reset_hint {
                CounterResetHint::Reset => acc.reset_seen = true,
                CounterResetHint::NotReset => acc.not_reset_seen = true,
                _ => {}
            }
        }
        if !acc.seen {
            *acc = Acc {
                seen: true,
                count: 1.0,
                value: 1.0,
                drop_name,
                has_hist: true,
                reset_seen: acc.reset_seen,
                not_reset_seen: acc.not_reset_seen,
                ..Acc::default()
            };
            if matches!(op, AggOp::Sum | AggOp::Avg) {
                acc.hist = Some(h.clone());
            }
            return;
        }
        acc.drop_name |= drop_name;
        match op {
            AggOp::Count => acc.count += 1.0,
            AggOp::Sum | AggOp::Avg => {
                acc.count += 1.0;
                acc.has_hist = true;
                if acc.incompatible {
                    return;
                }
                // A group that had floats is invalid anyway: no need to sum.
                let Some(cur) = acc.hist.as_ref() else { return };
                let next = if op == AggOp::Sum {
                    fh::add(cur, h)
                } else {
                    // mean += h/n - mean/n, like Prometheus, to stay within range.
                    let (mut left, mut right) = (h.clone(), cur.clone());
                    fh::divide(&mut left, acc.count);
                    fh::divide(&mut right, acc.count);
                    fh::sub(&left, &right).and_then(|(d, i1)| {
                        fh::add(cur, &d).map(|(r, i2)| {
                            (
                                r,
                                Combined {
                                    reconciled_custom_buckets: i1.reconciled_custom_buckets
                                        || i2.reconciled_custom_buckets,
                                    counter_reset_collision: false,
                                },
                            )
                        })
                    })
                };
                match next {
                    Ok((r, info)) => {
                        if info.reconciled_custom_buckets {
                            self.annotations
                                .info("mismatched custom buckets were reconciled during aggregation", pos);
                        }
                        acc.hist = Some(r);
                    }
                    Err(_) => {
                        // A name due to be dropped is "" here, as if it had been dropped.
                        let name = if drop_name && !self.opts.delayed_name_removal {
                            ""
                        } else {
                            labels::metric_name(l)
                        };
                        self.annotations.warn(incompatible_warning(name), pos);
                        acc.incompatible = true;
                    }
                }
            }
            _ => {}
        }
    }

    fn eval_count_values(&mut self, a: &AggregateExpr, g: Grid) -> Result<Val> {
        let Some(Expr::String(label)) = a.param.as_ref().map(Expr::unparen) else {
            return Err(Error::BadData("count_values needs a label name".into()));
        };
        if !labels::is_valid_label_name(&label.value, label.valid_utf8) {
            return Err(Error::Execution(format!("invalid label name {}", label.raw)));
        }
        let mut grouping = a.grouping.clone();
        if !a.without {
            grouping.push(label.value.clone());
        }
        grouping.sort();
        let input = self.eval_vector(&a.expr, g)?;
        let mut out = OutputBuilder::new(g);
        let mut cursor = StepCursor::new(&input);
        let mut step = Vec::new();
        for ts in g.timestamps() {
            self.check_deadline()?;
            cursor.at(&input, ts, &mut step);
            let mut counts: Vec<(Labels, f64)> = Vec::new();
            let mut index: HashMap<Labels, usize> = HashMap::default();
            for s in &step {
                let mut l: Vec<Label> =
                    s.labels.iter().filter(|x| x.name.as_ref() != label.value).cloned().collect();
                let value = match s.h {
                    Some(h) => fh::to_string(h),
                    None => format_value(s.f),
                };
                l.push(Label::new(label.value.as_str(), value.as_str()));
                let with_value = Labels::new(l);
                let key = group_labels(&with_value, &grouping, a.without);
                match index.get(&key) {
                    Some(&i) => counts[i].1 += 1.0,
                    None => {
                        index.insert(key.clone(), counts.len());
                        counts.push((key, 1.0));
                    }
                }
            }
            for (l, c) in counts {
                out.push(l, false, ts, c)?;
            }
        }
        Ok(Val::Vector(out.finish(true)?))
    }
}

/// A value as `count_values` writes it into a label (Go's `FormatFloat(f, 'f', -1, 64)`).
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Whether `limit_ratio(r, ...)` keeps a series: a deterministic pseudo-random offset in
/// `[0, 1)` from the label set, compared with the ratio (from the other end for negative ratios).
fn ratio_selects(r: f64, l: &Labels) -> bool {
    let offset = super::labels::hash(l) as f64 / u64::MAX as f64;
    (r >= 0.0 && offset < r) || (r < 0.0 && offset >= 1.0 + r)
}

/// Adds `f` to a running `avg` of `count` values (`f` already counted) as Prometheus does: a
/// Kahan-compensated sum while it stays finite, then an incremental mean from the value that
/// would overflow it. Shared by the step-wise and the column aggregation, which must agree to
/// the bit.
#[inline]
pub(super) fn avg_add(
    f: f64,
    count: f64,
    sum: &mut f64,
    kahan_c: &mut f64,
    mean: &mut f64,
    incremental: &mut bool,
) {
    if !*incremental {
        let (v, c) = kahan_inc(f, *sum, *kahan_c);
        if !v.is_infinite() {
            (*sum, *kahan_c) = (v, c);
            return;
        }
        // The direct sum would overflow: continue with an incremental mean.
        *incremental = true;
        *mean = *sum / (count - 1.0);
        *kahan_c /= count - 1.0;
    }
    let q = (count - 1.0) / count;
    (*mean, *kahan_c) = kahan_inc(f / count, q * *mean, q * *kahan_c);
}
