//! Runs one `eval` against the engine and compares like Prometheus' runner (FORMAT.md §6–§8).

use promql::parser::ast::{AtModifier, Expr};
use promql::parser::{ParseOptions, parse};
use promql::{Engine, QueryResult, Value};
use storage::mem::MemStore;
use storage::{FloatHistogram, Labels};

use crate::script::{AnnotationCheck, Eval, When};
use crate::values::{HistogramLiteral, Slot};

/// Float comparison of the reference runner (relative tolerance 1e-6, NaN equals NaN, the
/// stale marker only equals itself).
pub fn almost_equal(e: f64, a: f64) -> bool {
    const MIN_NORMAL: f64 = 2.2250738585072014e-308;
    const EPS: f64 = 1e-6;
    if storage::is_stale(e) || storage::is_stale(a) {
        return storage::is_stale(e) && storage::is_stale(a);
    }
    if e.is_nan() && a.is_nan() {
        return true;
    }
    if e == a {
        return true;
    }
    let sum = e.abs() + a.abs();
    let diff = (e - a).abs();
    if e == 0.0 || a == 0.0 || sum < MIN_NORMAL {
        return diff < EPS * MIN_NORMAL;
    }
    diff / sum.min(f64::MAX) < EPS
}

fn check_annotations(kind: &str, check: &AnnotationCheck, got: &[String]) -> Result<(), String> {
    match check {
        AnnotationCheck::Unchecked => Ok(()),
        AnnotationCheck::None if got.is_empty() => Ok(()),
        AnnotationCheck::None => Err(format!("expected no {kind}s, got {got:?}")),
        AnnotationCheck::Lines(want) => {
            if got.is_empty() {
                return Err(format!("expected {kind}s, got none"));
            }
            for w in want {
                if !got.iter().any(|g| w.matches(g)) {
                    return Err(format!("no {kind} matches {w:?}; got {got:?}"));
                }
            }
            for g in got {
                if !want.iter().any(|w| w.matches(g)) {
                    return Err(format!("unexpected {kind} {g:?}"));
                }
            }
            Ok(())
        }
    }
}

/// A value of a result: a float or a native histogram.
#[derive(Debug, Clone)]
pub enum Got {
    F(f64),
    H(FloatHistogram),
}

/// Compares an expected histogram with an actual one like the reference runner: both compacted
/// (empty buckets removed), then schema, threshold and layout exactly, counts with tolerance,
/// the hint only if the literal spelled it out (FORMAT.md §7.4).
fn histogram_matches(want: &HistogramLiteral, got: &FloatHistogram) -> bool {
    let e = &want.h;
    let nonzero =
        |v: &[(i32, f64)]| -> Vec<(i32, f64)> { v.iter().copied().filter(|b| b.1 != 0.0).collect() };
    let buckets_match = |a: &[(i32, f64)], b: &[(i32, f64)]| {
        let (a, b) = (nonzero(a), nonzero(b));
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && almost_equal(x.1, y.1))
    };
    e.schema == got.schema
        && almost_equal(e.count, got.count)
        && almost_equal(e.sum, got.sum)
        && almost_equal(e.zero_count, got.zero_count)
        && e.zero_threshold == got.zero_threshold
        && (!e.uses_custom_buckets() || e.custom_values == got.custom_values)
        && buckets_match(&e.positive, &got.positive)
        && buckets_match(&e.negative, &got.negative)
        && (!want.check_hint || e.counter_reset_hint == got.counter_reset_hint)
}

fn value_matches(want: &Slot, got: &Got) -> bool {
    match (want, got) {
        (Slot::Float(w), Got::F(g)) => almost_equal(*w, *g),
        (Slot::Histogram(w), Got::H(g)) => histogram_matches(w, g),
        _ => false,
    }
}

/// The expected values at each timestamp `start + j*step`.
fn expected_points(slots: &[Slot], start: i64, step: i64) -> Vec<(i64, &Slot)> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| !matches!(s, Slot::Omitted))
        .map(|(j, s)| (start + j as i64 * step, s))
        .collect()
}

/// The points of a result series, floats and histograms merged in time order.
fn series_points(s: &promql::Series) -> Vec<(i64, Got)> {
    let mut pts: Vec<(i64, Got)> = s.points.iter().map(|p| (p.t, Got::F(p.v))).collect();
    pts.extend(s.histograms.iter().map(|p| (p.t, Got::H(p.h.clone()))));
    pts.sort_by_key(|p| p.0);
    pts
}

fn compare_vector(e: &Eval, got: &[(Labels, Got)]) -> Result<(), String> {
    if e.scalar.is_some() {
        return Err(format!("expected a scalar, got a vector of {} elements", got.len()));
    }
    if e.string.is_some() {
        return Err("expected a string, got a vector".into());
    }
    if got.len() != e.series.len() {
        return Err(format!("expected {} series, got {}: {got:?}", e.series.len(), got.len()));
    }
    for (pos, (labels, v)) in got.iter().enumerate() {
        let Some(idx) = e.series.iter().position(|(l, _)| l == labels) else {
            return Err(format!("unexpected series {labels}"));
        };
        if e.ordered && idx != pos {
            return Err(format!("series {labels} at position {pos}, expected at {idx}"));
        }
        let want = match e.series[idx].1.as_slice() {
            [w] => w,
            other => return Err(format!("expected exactly one value for {labels}, got {other:?}")),
        };
        if !value_matches(want, v) {
            return Err(format!("{labels}: expected {want:?}, got {v:?}"));
        }
    }
    Ok(())
}

fn compare_matrix(e: &Eval, got: &[promql::Series], start: i64, step: i64) -> Result<(), String> {
    if e.ordered {
        return Err("ordered expectations cannot be met by a matrix".into());
    }
    if e.scalar.is_some() || e.string.is_some() {
        return Err("expected a scalar or string, got a matrix".into());
    }
    if got.windows(2).any(|w| w[0].labels > w[1].labels) {
        return Err("matrix is not sorted by labels".into());
    }
    if got.len() != e.series.len() {
        let names: Vec<String> = got.iter().map(|s| s.labels.to_string()).collect();
        return Err(format!("expected {} series, got {}: {names:?}", e.series.len(), got.len()));
    }
    for s in got {
        let Some((_, slots)) = e.series.iter().find(|(l, _)| *l == s.labels) else {
            return Err(format!("unexpected series {}", s.labels));
        };
        let want = expected_points(slots, start, step);
        let pts = series_points(s);
        if want.len() != pts.len() {
            return Err(format!("{}: expected {} points {want:?}, got {pts:?}", s.labels, want.len()));
        }
        for ((wt, wv), (t, v)) in want.iter().zip(&pts) {
            if wt != t || !value_matches(wv, v) {
                return Err(format!("{}: expected {wv:?} at {wt}, got {v:?} at {t}", s.labels));
            }
        }
    }
    Ok(())
}

fn compare(e: &Eval, value: &Value) -> Result<(), String> {
    match value {
        Value::Scalar { v, .. } => match e.scalar {
            Some(want) if almost_equal(want, *v) => Ok(()),
            Some(want) => Err(format!("expected scalar {want}, got {v}")),
            None => Err(format!("expected no scalar, got scalar {v}")),
        },
        Value::String { v, .. } => match &e.string {
            Some(want) if want == v => Ok(()),
            None if v.is_empty() && e.series.is_empty() && e.scalar.is_none() => Ok(()),
            _ => Err(format!("unexpected string {v:?}")),
        },
        Value::Vector(samples) => {
            if e.range_vector.is_some() {
                return Err("expected a range vector, got an instant vector".into());
            }
            let got: Vec<(Labels, Got)> =
                samples.iter().map(|s| (s.labels.clone(), s.h.clone().map_or(Got::F(s.v), Got::H))).collect();
            compare_vector(e, &got)
        }
        Value::Matrix(m) => match (e.when, e.range_vector) {
            (When::Range { start, step, .. }, _) => compare_matrix(e, m, start, step),
            (When::Instant(_), Some((start, _, step))) => compare_matrix(e, m, start, step),
            (When::Instant(_), None) => Err("got a range vector for an instant eval".into()),
        },
    }
}

fn run_query(engine: &Engine, store: &MemStore, e: &Eval, when: When) -> promql::Result<QueryResult> {
    match when {
        When::Instant(t) => engine.instant(store, &e.expr, t),
        When::Range { start, end, step } => engine.range(store, &e.expr, start, end, step),
    }
}

/// Runs the eval with all of the reference runner's checks; `Ok(())` if it passes.
pub fn run_eval(engine: &Engine, store: &MemStore, e: &Eval) -> Result<(), String> {
    run_eval_at(engine, store, e, e.when)?;
    pinned_check(engine, store, e).unwrap_or(Ok(()))
}

fn run_eval_at(engine: &Engine, store: &MemStore, e: &Eval, when: When) -> Result<(), String> {
    let result = run_query(engine, store, e, when);
    let res = match (result, &e.fail) {
        (Err(err), Some(m)) => {
            return if m.matches(&err.to_string()) {
                Ok(())
            } else {
                Err(format!("failed as expected, but the message differs: {err}"))
            };
        }
        (Err(err), None) => return Err(format!("unexpected error: {err}")),
        (Ok(_), Some(_)) => return Err("expected the query to fail, but it succeeded".into()),
        (Ok(r), None) => r,
    };
    check_annotations("warning", &e.warn, &res.warnings)?;
    check_annotations("info", &e.info, &res.infos)?;
    compare(e, &res.value)?;
    if let When::Instant(t) = when {
        range_cross_check(engine, store, e, t)?;
    }
    Ok(())
}

/// Functions whose result depends on the evaluation time even with pinned inputs.
const TIME_DEPENDENT: &[&str] = &[
    "days_in_month",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "hour",
    "minute",
    "month",
    "year",
    "predict_linear",
    "time",
    "timestamp",
    "start",
    "end",
    "range",
    "step",
];

/// Pins every selector and subquery without `@` (outside subqueries) to `@ t`; returns false
/// if the expression uses a time-dependent function, which makes pinning meaningless.
fn pin(e: &mut Expr, t: i64) -> bool {
    match e {
        Expr::Vector(vs) => {
            vs.at.get_or_insert(AtModifier::Timestamp(t));
            true
        }
        Expr::Matrix(ms) => {
            ms.vs.at.get_or_insert(AtModifier::Timestamp(t));
            true
        }
        // Selectors inside a subquery keep following the subquery's own steps.
        Expr::Subquery(sq) => {
            sq.at.get_or_insert(AtModifier::Timestamp(t));
            true
        }
        Expr::Number(_) | Expr::String(_) => true,
        Expr::Paren(p) => pin(&mut p.expr, t),
        Expr::Unary(u) => pin(&mut u.expr, t),
        Expr::Binary(b) => pin(&mut b.lhs, t) & pin(&mut b.rhs, t),
        Expr::Aggregate(a) => a.param.as_mut().is_none_or(|p| pin(p, t)) & pin(&mut a.expr, t),
        Expr::Call(c) => {
            let mut ok = !TIME_DEPENDENT.contains(&c.func.name);
            for a in &mut c.args {
                ok &= pin(a, t);
            }
            ok
        }
    }
}

/// The reference runner's third check (FORMAT.md §8.2, step 3): the expression with every
/// selector pinned to `@ T` must give the same result at other evaluation times. Returns
/// `None` if the check does not apply.
fn pinned_check(engine: &Engine, store: &MemStore, e: &Eval) -> Option<Result<(), String>> {
    let When::Instant(t) = e.when else { return None };
    if e.range_vector.is_some() || e.string.is_some() {
        return None;
    }
    let mut tree = parse(&e.expr, &ParseOptions::all_features()).ok()?;
    if !pin(&mut tree, t) {
        return None;
    }
    let pinned = Eval { expr: tree.to_string(), ..e.clone() };
    let times = if t == 0 { vec![-1000, 0, 1000] } else { vec![-10 * t, 0, t / 5, t, 10 * t] };
    for at in times {
        if let Err(why) = run_eval_at(engine, store, &pinned, When::Instant(at)) {
            return Some(Err(format!("pinned as {:?} and evaluated at {at}: {why}", pinned.expr)));
        }
    }
    Some(Ok(()))
}

/// The reference runner also evaluates an instant eval as a range query around its time and
/// expects the same result at that time (FORMAT.md §8.2, step 2).
fn range_cross_check(engine: &Engine, store: &MemStore, e: &Eval, t: i64) -> Result<(), String> {
    if e.range_vector.is_some() || e.string.is_some() {
        return Ok(());
    }
    if ["start()", "end()", "range()", "step()"].iter().any(|f| e.expr.contains(f)) {
        return Ok(());
    }
    let res = run_query(engine, store, e, When::Range { start: t - 60_000, end: t + 60_000, step: 60_000 })
        .map_err(|err| format!("range-mode cross-check failed: {err}"))?;
    let Value::Matrix(m) = res.value else {
        return Err("range-mode cross-check did not return a matrix".into());
    };
    if !e.ordered && m.windows(2).any(|w| w[0].labels > w[1].labels) {
        return Err("range-mode cross-check: matrix not sorted".into());
    }
    let at_t: Vec<(Labels, Got)> = m
        .iter()
        .filter_map(|s| series_points(s).into_iter().find(|p| p.0 == t).map(|p| (s.labels.clone(), p.1)))
        .collect();
    if let Some(want) = e.scalar {
        let got = at_t.first().map(|(_, v)| v.clone());
        return match got {
            Some(Got::F(v)) if almost_equal(want, v) => Ok(()),
            other => Err(format!("range-mode cross-check: expected scalar {want}, got {other:?}")),
        };
    }
    // Ordering cannot be checked on a matrix.
    let unordered = Eval { ordered: false, ..e.clone() };
    compare_vector(&unordered, &at_t).map_err(|err| format!("range-mode cross-check: {err}"))
}
