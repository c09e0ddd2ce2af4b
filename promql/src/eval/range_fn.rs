//! Functions over range vectors (`*_over_time`, `rate`, `deriv`, ...): one pass per series,
//! sliding the window across the evaluation steps.

use storage::{Labels, is_stale};

use super::notes::{note_ignored_histograms, note_possible_non_counter};
use super::numeric::{avg, fmt_g, kahan_inc, quantile};
use super::parallel::{SeriesCtx, estimate_points};
use super::range_hist::{self, HWindow, Out};
use super::rate::{Bounds, extended_rate, extrapolated_rate, first_index_at_or_before, instant_value};
use super::selector::{FloatRead, WindowSpec};
use super::series::{has_duplicate_labels, has_duplicate_labels_without_name};
use super::{
    Evaluator, FPoint, Grid, HPoint, Series, Val, drop_metric_labels, duplicate_labelset, labels, pushdown,
    start_timestamps,
};
use crate::error::{Error, Result};
use crate::parser::ast::{Call, Expr};

const ANCHORED_SAFE: &[&str] = &["changes", "delta", "increase", "rate", "resets"];
const SMOOTHED_SAFE: &[&str] = &["delta", "increase", "rate"];

/// Buffers a range function over a selector reuses from one series to the next.
#[derive(Default)]
pub(crate) struct RangeScratch {
    buf: Vec<storage::Sample>,
    points: Vec<FPoint>,
    st_buf: Vec<storage::query::StartTimestamp>,
    sts: Vec<i64>,
    step_scalars: Vec<f64>,
    hbuf: Vec<HPoint>,
    /// Start timestamps of `hbuf` (0 = unknown), or empty.
    hsts: Vec<i64>,
}

/// Per-window context handed to a range function.
struct Window<'w> {
    points: &'w [FPoint],
    /// Start timestamps of `points` (0 = unknown), or empty when there are none (always for
    /// functions that do not use them, and for subqueries).
    sts: &'w [i64],
    /// Evaluation timestamp of the step.
    ts: i64,
    bounds: Bounds,
    anchored: bool,
    smoothed: bool,
    /// Values of the scalar arguments at this step, in argument order.
    scalars: &'w [f64],
}

/// The first index in `from..end` whose point is later than `bound` (`end` if none), for points
/// in time order from `from` on. A window moves a few points per step on a fine grid and a
/// whole range per step on a coarse one (hourly steps over a day of 10 s samples): short moves
/// are scanned, long ones binary searched.
fn first_after(points: &[FPoint], from: usize, end: usize, bound: i64) -> usize {
    const SCAN: usize = 8;
    let scan_end = from.saturating_add(SCAN).min(end);
    let mut i = from;
    while i < scan_end && points[i].t <= bound {
        i += 1;
    }
    if i < scan_end || i >= end {
        return i;
    }
    i + points[i..end].partition_point(|p| p.t <= bound)
}

/// Least-squares slope and intercept (at `intercept_t`) with Kahan-compensated sums.
pub(crate) fn linear_regression(w: &[FPoint], intercept_t: i64) -> (f64, f64) {
    let (mut n, mut sx, mut cx, mut sy, mut cy, mut sxy, mut cxy, mut sx2, mut cx2) =
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let init_y = w[0].f;
    let mut const_y = true;
    for (i, p) in w.iter().enumerate() {
        if const_y && i > 0 && p.f != init_y {
            const_y = false;
        }
        n += 1.0;
        let x = (p.t - intercept_t) as f64 / 1e3;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(p.f, sy, cy);
        (sxy, cxy) = kahan_inc(x * p.f, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    if const_y {
        if init_y.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init_y);
    }
    let (sx, sy, sxy, sx2) = (sx + cx, sy + cy, sxy + cxy, sx2 + cx2);
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    (slope, sy / n - slope * sx / n)
}

fn variance(w: &[FPoint]) -> f64 {
    let (mut count, mut mean, mut cm, mut aux, mut ca) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in w {
        count += 1.0;
        let delta = p.f - (mean + cm);
        (mean, cm) = kahan_inc(delta / count, mean, cm);
        (aux, ca) = kahan_inc(delta * (p.f - (mean + cm)), aux, ca);
    }
    (aux + ca) / count
}

fn compare_over_time(w: &[FPoint], better: impl Fn(f64, f64) -> bool, want_ts: bool) -> f64 {
    let (mut best, mut best_t) = (w[0].f, w[0].t);
    for p in w {
        if better(p.f, best) || best.is_nan() {
            best = p.f;
            best_t = p.t;
        }
    }
    if want_ts { best_t as f64 / 1000.0 } else { best }
}

/// `max_over_time` (with `pick` = `f64::max`) or `min_over_time` (`f64::min`) of `w` (not
/// empty): the same bits as [`compare_over_time`]'s sequential loop, which starts from the first
/// value and takes a later one when it is strictly better or the current one is NaN. That loop
/// ends on the first value (in time order) equal to the extreme of the values that are not NaN,
/// or on the last value when all are NaN. Its chain of compares, each waiting for the one
/// before, took 15 % of TSBS cpu-max-all-8's CPU time; here four independent lanes fold with
/// `pick`, which ignores NaN. Equal values have equal bits, except zeros: for an extreme of
/// zero the first zero is taken, as the loop keeps it over a later zero of the other sign.
fn extreme_over_time(w: &[FPoint], pick: impl Fn(f64, f64) -> f64) -> f64 {
    let mut lanes = [f64::NAN; 4];
    let mut quads = w.chunks_exact(4);
    for q in &mut quads {
        for (lane, p) in lanes.iter_mut().zip(q) {
            *lane = pick(*lane, p.f);
        }
    }
    let mut m = pick(pick(lanes[0], lanes[1]), pick(lanes[2], lanes[3]));
    for p in quads.remainder() {
        m = pick(m, p.f);
    }
    if m.is_nan() {
        return w.last().map_or(m, |p| p.f);
    }
    if m == 0.0 {
        return w.iter().find(|p| p.f == 0.0).map_or(m, |p| p.f);
    }
    m
}

fn double_exponential_smoothing(w: &[FPoint], sf: f64, tf: f64) -> Result<Option<f64>> {
    if sf <= 0.0 || sf >= 1.0 {
        return Err(Error::Execution(format!(
            "invalid smoothing factor. Expected: 0 < sf < 1, got: {sf:.6}"
        )));
    }
    if tf <= 0.0 || tf >= 1.0 {
        return Err(Error::Execution(format!("invalid trend factor. Expected: 0 < tf < 1, got: {tf:.6}")));
    }
    if w.len() < 2 {
        return Ok(None);
    }
    let (mut s0, mut s1) = (0.0, w[0].f);
    let mut b = w[1].f - w[0].f;
    for (i, p) in w.iter().enumerate().skip(1) {
        let x = sf * p.f;
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        (s0, s1) = (s1, x + y);
    }
    Ok(Some(s1))
}

/// The range functions that fold a window's values alone (no scalars, bounds or start
/// timestamps): resolved once per call, so the per-window loop skips the name dispatch and the
/// window's context (a tenth of a small range query's evaluation).
#[derive(Debug, Clone, Copy)]
enum Fold {
    Avg,
    Count,
    Sum,
    Min,
    Max,
    First,
    Last,
    Present,
}

impl Fold {
    fn of(name: &str) -> Option<Fold> {
        Some(match name {
            "avg_over_time" => Fold::Avg,
            "count_over_time" => Fold::Count,
            "sum_over_time" => Fold::Sum,
            "min_over_time" => Fold::Min,
            "max_over_time" => Fold::Max,
            "first_over_time" => Fold::First,
            "last_over_time" => Fold::Last,
            "present_over_time" => Fold::Present,
            _ => return None,
        })
    }

    /// The function's value over `p` (not empty).
    #[inline]
    fn apply(self, p: &[FPoint]) -> f64 {
        match self {
            Fold::Avg => avg(p),
            Fold::Count => p.len() as f64,
            Fold::Sum => {
                let (mut sum, mut c) = (0.0, 0.0);
                for x in p {
                    (sum, c) = kahan_inc(x.f, sum, c);
                }
                if sum.is_infinite() { sum } else { sum + c }
            }
            Fold::Min => extreme_over_time(p, f64::min),
            Fold::Max => extreme_over_time(p, f64::max),
            Fold::First => p[0].f,
            Fold::Last => p[p.len() - 1].f,
            Fold::Present => 1.0,
        }
    }
}

/// Applies the named range function to one window.
fn apply(name: &str, w: &Window<'_>) -> Result<Option<f64>> {
    let p = w.points;
    if let Some(f) = Fold::of(name) {
        return Ok(Some(f.apply(p)));
    }
    Ok(match name {
        "rate" | "increase" | "delta" => {
            let (is_counter, is_rate) = (name != "delta", name == "rate");
            if w.anchored || w.smoothed {
                extended_rate(p, w.bounds, w.smoothed, is_counter, is_rate)
            } else {
                extrapolated_rate(p, w.sts, w.bounds, is_counter, is_rate)
            }
        }
        "irate" => instant_value(p, w.sts, true),
        "idelta" => instant_value(p, w.sts, false),
        "ts_of_min_over_time" => Some(compare_over_time(p, |cur, best| cur <= best, true)),
        "ts_of_max_over_time" => Some(compare_over_time(p, |cur, best| cur >= best, true)),
        "ts_of_first_over_time" => Some(p[0].t as f64 / 1000.0),
        "ts_of_last_over_time" => Some(p[p.len() - 1].t as f64 / 1000.0),
        "absent_over_time" => Some(1.0),
        "stdvar_over_time" => Some(variance(p)),
        "stddev_over_time" => Some(variance(p).sqrt()),
        "quantile_over_time" => {
            let mut vals: Vec<f64> = p.iter().map(|x| x.f).collect();
            Some(quantile(w.scalars.first().copied().unwrap_or(f64::NAN), &mut vals))
        }
        "mad_over_time" => {
            if p.iter().any(|x| x.f.is_nan()) {
                return Ok(Some(f64::NAN));
            }
            let mut vals: Vec<f64> = p.iter().map(|x| x.f).collect();
            let median = quantile(0.5, &mut vals);
            let mut dev: Vec<f64> = p.iter().map(|x| (x.f - median).abs()).collect();
            Some(quantile(0.5, &mut dev))
        }
        "changes" | "resets" => {
            let first = if w.anchored {
                if p[p.len() - 1].t <= w.bounds.range_start {
                    return Ok(None);
                }
                first_index_at_or_before(p, w.bounds.range_start)
            } else {
                0
            };
            let sts = w.sts.get(first..).unwrap_or_default();
            let mut n = 0;
            for (i, pair) in p[first..].windows(2).enumerate() {
                let (a, b) = (pair[0].f, pair[1].f);
                let hit = if name == "changes" {
                    a != b && !(a.is_nan() && b.is_nan())
                } else {
                    b < a
                        || i + 1 < sts.len()
                            && start_timestamps::is_reset(sts[i], pair[0].t, sts[i + 1], pair[1].t)
                };
                if hit {
                    n += 1;
                }
            }
            Some(n as f64)
        }
        "deriv" => {
            if p.len() < 2 {
                return Ok(None);
            }
            Some(linear_regression(p, p[0].t).0)
        }
        "predict_linear" => {
            if p.len() < 2 {
                return Ok(None);
            }
            let (slope, intercept) = linear_regression(p, w.ts);
            Some(slope * w.scalars.first().copied().unwrap_or(0.0) + intercept)
        }
        "double_exponential_smoothing" => {
            let sf = w.scalars.first().copied().unwrap_or(f64::NAN);
            let tf = w.scalars.get(1).copied().unwrap_or(f64::NAN);
            double_exponential_smoothing(p, sf, tf)?
        }
        other => return Err(Error::Execution(format!("function {other:?} does not take a range vector"))),
    })
}

/// Whether `name` reads start timestamps (Prometheus' anchored and smoothed `rate`/`increase`
/// do not).
fn uses_start_timestamps(name: &str, anchored: bool, smoothed: bool) -> bool {
    match name {
        "rate" | "increase" => !anchored && !smoothed,
        "irate" | "resets" => true,
        _ => false,
    }
}

/// Where the windows' points come from: a range selector (its series and read range) or a
/// subquery.
pub(crate) enum Source {
    Selector(Vec<storage::SeriesRef>, i64, i64),
    Subquery(Vec<Series>),
}

/// What a call over a range vector works out once, before its per-series loop. The work on one
/// series reads only this, the series and its own context, so series can be handled by several
/// threads (`parallel.rs`), and the selector calls of one query can share one loop
/// (`prefetch.rs`).
pub(crate) struct RangeCall {
    name: &'static str,
    /// The other arguments' values, one per step.
    scalar_args: Vec<Vec<f64>>,
    spec: WindowSpec,
    /// The reference time of each step's window (the step's time, `@` and offset applied).
    refs: Vec<i64>,
    anchored: bool,
    smoothed: bool,
    /// Whether start timestamps are read (see `EngineOptions::use_start_timestamps`).
    want_sts: bool,
    /// The call's position in the query, for annotations.
    pos: usize,
    /// Range aggregations storage may answer from block statistics (see `pushdown`).
    pushed: Option<pushdown::Plan>,
    keep_name: bool,
    /// A name the call drops stays in its output labels, the series marked `drop_name`: with
    /// delayed name removal, or where no one sees it (`name_blind.rs`).
    names_kept: bool,
    /// Every step sees the same window (`@`, a pinned subquery): computed once.
    invariant: bool,
    check_overlap: bool,
    fold: Option<Fold>,
    g: Grid,
    /// Selectors read histogram statistics only (see `HistStatsScope`).
    stats_only: bool,
}

/// Whether range function `name` keeps its input's metric name (`last_over_time` and
/// `first_over_time`; every other one drops it).
fn keeps_name(name: &str) -> bool {
    name == "last_over_time" || name == "first_over_time"
}

impl<'a> Evaluator<'a> {
    /// Evaluates a call whose argument `mi` is a range vector.
    pub(crate) fn eval_range_call(&mut self, c: &Call, g: Grid, mi: usize) -> Result<Val> {
        if let Some(out) = self.take_prefetched(c, g)? {
            return self.finish_range_call(c, g, mi, out);
        }
        let (rc, source) = self.range_call(c, g, mi)?;
        let out = match source {
            Source::Selector(series, mint, maxt) => {
                let est = estimate_points(g.len(), mint, maxt);
                self.map_series(&series, est, |ctx, scratch: &mut RangeScratch, r| {
                    rc.selector_series(ctx, scratch, r, mint, maxt)
                })?
            }
            // Subqueries cut the propagation of start timestamps: their points are results.
            Source::Subquery(inner) => {
                let est = inner.iter().map(|s| s.points.len()).max().unwrap_or(0).max(g.len());
                self.map_series(&inner, est, |ctx, step_scalars: &mut Vec<f64>, s| {
                    if !s.hpoints.is_empty() {
                        return rc.run_hist(
                            ctx,
                            step_scalars,
                            &s.labels,
                            s.drop_name,
                            &s.points,
                            &s.hpoints,
                            &[],
                        );
                    }
                    rc.run(ctx, step_scalars, &s.labels, s.drop_name, &s.points, &[])
                })?
            }
        };
        self.finish_range_call(c, g, mi, out)
    }

    /// What is left after the per-series loop of a range call: `absent_over_time`'s answer, and
    /// the check for series that lost their names into the same label set.
    pub(crate) fn finish_range_call(&self, c: &Call, g: Grid, mi: usize, out: Vec<Series>) -> Result<Val> {
        if c.func.name == "absent_over_time" {
            return Ok(Val::Vector(absent_over_time(&out, g, &c.args[mi])));
        }
        if !self.opts.delayed_name_removal {
            // A call that keeps names has its input's distinct label sets, blind or not.
            let duplicates = if self.is_name_blind(c) && !keeps_name(c.func.name) {
                has_duplicate_labels_without_name(&out)
            } else {
                has_duplicate_labels(&out)
            };
            if duplicates {
                return Err(duplicate_labelset());
            }
        }
        Ok(Val::Vector(out))
    }

    /// Works out a range call's windows and where its points come from: evaluates the other
    /// arguments, then selects the series (or evaluates the subquery).
    pub(crate) fn range_call(&mut self, c: &Call, g: Grid, mi: usize) -> Result<(RangeCall, Source)> {
        let name = c.func.name;
        let arg = &c.args[mi];
        let mut scalar_args = Vec::new();
        for (i, a) in c.args.iter().enumerate() {
            if i != mi {
                scalar_args.push(self.eval_scalar(a, g)?);
            }
        }
        let (source, spec, refs, anchored, smoothed) = match arg {
            Expr::Matrix(ms) => {
                if ms.vs.anchored && !ANCHORED_SAFE.contains(&name) {
                    return Err(Error::Execution(format!(
                        "anchored modifier can only be used with: {} - not with {name}",
                        ANCHORED_SAFE.join(", ")
                    )));
                }
                if ms.vs.smoothed && !SMOOTHED_SAFE.contains(&name) {
                    return Err(Error::Execution(format!(
                        "smoothed modifier can only be used with: {} - not with {name}",
                        SMOOTHED_SAFE.join(", ")
                    )));
                }
                let spec = self.window_spec(ms)?;
                let refs = self.refs(&ms.vs, g)?;
                let (mint, maxt) = spec.span(&refs);
                let series = self.select(&ms.vs.matchers, mint, maxt)?;
                (Source::Selector(series, mint, maxt), spec, refs, ms.vs.anchored, ms.vs.smoothed)
            }
            Expr::Subquery(sq) => {
                let (inner, range, refs) = self.eval_subquery_inner(sq, g)?;
                (Source::Subquery(inner), WindowSpec { range, before: range, after: 0 }, refs, false, false)
            }
            _ => return Err(Error::Execution(format!("expected a range vector argument for {name}"))),
        };
        // Range aggregations storage may answer from block statistics (see `pushdown`); not
        // where start timestamps may mark counter resets the values hide.
        let want_sts = self.opts.use_start_timestamps && uses_start_timestamps(name, anchored, smoothed);
        let pos = c.args[0].start();
        let names_kept = self.opts.delayed_name_removal || self.is_name_blind(c);
        let pushed = match &source {
            Source::Selector(..) if self.opts.pushdown && !anchored && !smoothed && !want_sts => {
                pushdown::Pushed::of(name).map(|f| pushdown::Plan::new(f, &refs, spec, pos, names_kept))
            }
            _ => None,
        };
        let keep_name = keeps_name(name);
        // With `@` (or a pinned subquery) every step sees the same window: compute it once
        // (not for predict_linear, which also depends on the evaluation time).
        let invariant = refs.len() > 1
            && refs.windows(2).all(|w| w[0] == w[1])
            && name != "predict_linear"
            && scalar_args.iter().all(|s| s.windows(2).all(|w| w[0].to_bits() == w[1].to_bits()));
        // Overlapping start timestamps are worth a warning where Prometheus gives one: for the
        // counters `rate` and `increase` extrapolate.
        let check_overlap = (name == "rate" || name == "increase") && !anchored && !smoothed;
        let fold = Fold::of(name);
        let stats_only = self.hist_stats.stats_only();
        let rc = RangeCall {
            name,
            scalar_args,
            spec,
            refs,
            anchored,
            smoothed,
            want_sts,
            pos,
            pushed,
            keep_name,
            names_kept,
            invariant,
            check_overlap,
            fold,
            g,
            stats_only,
        };
        Ok((rc, source))
    }
}

impl RangeCall {
    /// The windows of each step, as storage takes them, when the call may be pushed down
    /// (see `pushdown`).
    pub(crate) fn pushdown_windows(&self) -> Option<&[(i64, i64)]> {
        self.pushed.as_ref().map(|p| &p.windows[..])
    }

    /// The work on one series of a selector: its windows from block statistics where storage
    /// can answer them so, else its samples read and the windows slid over them.
    pub(crate) fn selector_series(
        &self,
        ctx: &mut SeriesCtx<'_>,
        scratch: &mut RangeScratch,
        r: &storage::SeriesRef,
        mint: i64,
        maxt: i64,
    ) -> Result<Option<Series>> {
        if let Some(plan) = &self.pushed
            && let Some(answer) = ctx.pushdown_series(plan, r, self.g)?
        {
            return Ok(answer);
        }
        let RangeScratch { buf, points, st_buf, sts, step_scalars, hbuf, hsts } = scratch;
        ctx.load_series(r, mint, maxt, FloatRead::All, self.stats_only, buf, hbuf)?;
        // Without stale markers (the common case) the samples are the points, used
        // in place: copying them was 6 % of cpu-max-all-8's CPU time. Counting the
        // markers (no early exit) vectorises, where `any` tested a sample per branch.
        let points: &[FPoint] = if count_stale(buf) > 0 {
            points.clear();
            points.extend(buf.iter().filter(|s| !is_stale(s.v)).map(|s| FPoint { t: s.t, f: s.v }));
            points
        } else {
            bytemuck::cast_slice(buf)
        };
        if self.want_sts {
            ctx.load_start_timestamps(r, mint, maxt, st_buf)?;
        }
        if !hbuf.is_empty() {
            hsts.clear();
            if self.want_sts {
                start_timestamps::align_times(hbuf.iter().map(|p| p.t), st_buf, hsts);
            }
            return self.run_hist(ctx, step_scalars, &r.labels, false, points, hbuf, hsts);
        }
        if self.want_sts {
            start_timestamps::align(points, st_buf, sts);
        }
        self.run(ctx, step_scalars, &r.labels, false, points, sts)
    }

    /// Slides the windows over one series' float points.
    fn run(
        &self,
        ctx: &mut SeriesCtx<'_>,
        step_scalars: &mut Vec<f64>,
        labels: &Labels,
        drop_name: bool,
        points: &[FPoint],
        sts: &[i64],
    ) -> Result<Option<Series>> {
        step_scalars.resize(self.scalar_args.len(), 0.0);
        let mut result: Vec<FPoint> = Vec::with_capacity(self.refs.len().min(points.len()));
        let mut overlap_warned = false;
        let (mut lo, mut hi) = (0usize, 0usize);
        for (i, &r) in self.refs.iter().enumerate() {
            ctx.check_deadline()?;
            if self.invariant && i > 0 {
                if let Some(first) = result.first().copied() {
                    result.push(FPoint { t: self.g.ts(i), f: first.f });
                }
                continue;
            }
            if i > 0 && r < self.refs[i - 1] {
                (lo, hi) = (0, 0);
            }
            let (lower, upper) = (r.saturating_sub(self.spec.before), r.saturating_add(self.spec.after));
            hi = first_after(points, hi, points.len(), upper);
            lo = first_after(points, lo, hi, lower);
            if lo >= hi {
                continue;
            }
            if let Some(f) = self.fold {
                result.push(FPoint { t: self.g.ts(i), f: f.apply(&points[lo..hi]) });
                continue;
            }
            for (k, s) in self.scalar_args.iter().enumerate() {
                step_scalars[k] = s.get(i).copied().unwrap_or(f64::NAN);
            }
            if self.name == "quantile_over_time" {
                let q = step_scalars.first().copied().unwrap_or(f64::NAN);
                if q.is_nan() || !(0.0..=1.0).contains(&q) {
                    let msg = format!("quantile value should be between 0 and 1, got {}", fmt_g(q));
                    ctx.annotations.warn(msg, self.pos);
                }
            }
            let window_sts = sts.get(lo..hi).unwrap_or_default();
            if self.check_overlap
                && !overlap_warned
                && start_timestamps::any_overlap(&points[lo..hi], window_sts)
            {
                overlap_warned = true;
                let msg = format!(
                    "sample has start time that overlaps with previous sample timestamp for metric {:?}",
                    labels::metric_name(labels)
                );
                ctx.annotations.warn(msg, self.pos);
            }
            let w = Window {
                points: &points[lo..hi],
                sts: window_sts,
                ts: self.g.ts(i),
                bounds: Bounds {
                    range_start: r.saturating_sub(self.spec.range),
                    range_end: r,
                    range_secs: self.spec.range as f64 / 1000.0,
                },
                anchored: self.anchored,
                smoothed: self.smoothed,
                scalars: step_scalars,
            };
            if let Some(v) = apply(self.name, &w)? {
                result.push(FPoint { t: self.g.ts(i), f: v });
            }
        }
        if result.is_empty() {
            return Ok(None);
        }
        if self.name == "rate" || self.name == "increase" {
            note_possible_non_counter(ctx.opts, &mut ctx.annotations, labels, self.pos);
        }
        let out_labels =
            if !self.keep_name && !self.names_kept { drop_metric_labels(labels) } else { labels.clone() };
        // `last_over_time` and `first_over_time` keep the name, unless the series was already
        // due to lose it (a subquery over a name-dropping function).
        Ok(Some(Series::new(out_labels, !self.keep_name || drop_name, result)))
    }

    /// The same for a series with histogram samples: every step's window is split into its
    /// floats and its histograms (`range_hist`).
    #[allow(clippy::too_many_arguments)]
    fn run_hist(
        &self,
        ctx: &mut SeriesCtx<'_>,
        step_scalars: &mut Vec<f64>,
        labels: &Labels,
        drop_name: bool,
        points: &[FPoint],
        hpoints: &[HPoint],
        hsts: &[i64],
    ) -> Result<Option<Series>> {
        step_scalars.resize(self.scalar_args.len(), 0.0);
        let (mut fout, mut hout): (Vec<FPoint>, Vec<HPoint>) = (Vec::new(), Vec::new());
        for (i, &r) in self.refs.iter().enumerate() {
            ctx.check_deadline()?;
            let (lower, upper) = (r.saturating_sub(self.spec.before), r.saturating_add(self.spec.after));
            let fw =
                &points[points.partition_point(|p| p.t <= lower)..points.partition_point(|p| p.t <= upper)];
            let (hlo, hhi) =
                (hpoints.partition_point(|p| p.t <= lower), hpoints.partition_point(|p| p.t <= upper));
            let hw = &hpoints[hlo..hhi];
            let hw_sts = hsts.get(hlo..hhi).unwrap_or_default();
            if fw.is_empty() && hw.is_empty() {
                continue;
            }
            for (k, s) in self.scalar_args.iter().enumerate() {
                step_scalars[k] = s.get(i).copied().unwrap_or(f64::NAN);
            }
            let bounds = Bounds {
                range_start: r.saturating_sub(self.spec.range),
                range_end: r,
                range_secs: self.spec.range as f64 / 1000.0,
            };
            let t = self.g.ts(i);
            if hw.is_empty() || range_hist::ignores_histograms(self.name) {
                if fw.is_empty() {
                    continue;
                }
                if !hw.is_empty() {
                    note_ignored_histograms(&mut ctx.annotations, labels, self.pos);
                }
                let w = Window {
                    points: fw,
                    sts: &[],
                    ts: t,
                    bounds,
                    anchored: self.anchored,
                    smoothed: self.smoothed,
                    scalars: step_scalars,
                };
                if let Some(v) = apply(self.name, &w)? {
                    fout.push(FPoint { t, f: v });
                }
                continue;
            }
            let (mut fw, mut hw) = (fw, hw);
            if self.anchored && (self.name == "changes" || self.name == "resets") {
                // From the last sample at or before the range start, of either kind.
                let rs = bounds.range_start;
                let newest = fw.last().map_or(i64::MIN, |p| p.t).max(hw.last().map_or(i64::MIN, |p| p.t));
                if newest <= rs {
                    continue;
                }
                let from = fw.iter().map(|p| p.t).chain(hw.iter().map(|p| p.t)).filter(|t| *t <= rs).max();
                if let Some(from) = from {
                    fw = &fw[fw.partition_point(|p| p.t < from)..];
                    hw = &hw[hw.partition_point(|p| p.t < from)..];
                }
            } else if self.anchored || self.smoothed {
                let w = HWindow { floats: fw, hists: hw, sts: &[], bounds, labels, pos: self.pos };
                let v = match self.name {
                    "rate" | "increase" | "delta" => {
                        range_hist::extended_rate(self.name, &w, self.smoothed, &mut ctx.annotations)
                    }
                    _ => None,
                };
                match v {
                    Some(Out::F(f)) => fout.push(FPoint { t, f }),
                    Some(Out::H(h)) => hout.push(HPoint { t, h }),
                    None => {}
                }
                continue;
            }
            // An self.anchored window may have lost samples at its start.
            let sts = hw_sts.get(hw_sts.len().saturating_sub(hw.len())..).unwrap_or_default();
            let w = HWindow { floats: fw, hists: hw, sts, bounds, labels, pos: self.pos };
            match range_hist::apply(self.name, &w, &mut ctx.annotations) {
                Some(Out::F(f)) => fout.push(FPoint { t, f }),
                Some(Out::H(h)) => hout.push(HPoint { t, h }),
                None => {}
            }
        }
        if fout.is_empty() && hout.is_empty() {
            return Ok(None);
        }
        if (self.name == "rate" || self.name == "increase") && !fout.is_empty() {
            note_possible_non_counter(ctx.opts, &mut ctx.annotations, labels, self.pos);
        }
        let out_labels =
            if !self.keep_name && !self.names_kept { drop_metric_labels(labels) } else { labels.clone() };
        Ok(Some(Series::with_histograms(out_labels, !self.keep_name || drop_name, fout, hout)))
    }
}

/// The stale markers among `samples`.
fn count_stale(samples: &[storage::Sample]) -> usize {
    samples.iter().fold(0, |n, s| n + usize::from(is_stale(s.v)))
}

/// `absent_over_time`: 1 at every step where no series had a sample in its window.
fn absent_over_time(present: &[Series], g: Grid, arg: &Expr) -> Vec<Series> {
    let mut found = vec![false; g.len()];
    for s in present {
        for t in s.points.iter().map(|p| p.t).chain(s.hpoints.iter().map(|p| p.t)) {
            found[g.index(t)] = true;
        }
    }
    let points: Vec<FPoint> =
        g.timestamps().zip(found).filter(|(_, f)| !f).map(|(t, _)| FPoint { t, f: 1.0 }).collect();
    if points.is_empty() {
        return Vec::new();
    }
    vec![Series::new(absent_labels(arg), true, points)]
}

/// Labels for `absent()`/`absent_over_time()`: the equality matchers of the selector, except a
/// label matched more than once (Prometheus' `createLabelsForAbsentFunction`).
pub(crate) fn absent_labels(arg: &Expr) -> Labels {
    let matchers = match arg.unparen() {
        Expr::Vector(vs) => &vs.matchers,
        Expr::Matrix(ms) => &ms.vs.matchers,
        _ => return Labels::default(),
    };
    // An equality matcher sets its label the first time it is seen; any other matcher, or a
    // repeated equality matcher, removes it.
    let mut set: Vec<(String, String)> = Vec::new();
    let mut has: Vec<&str> = Vec::new();
    for m in matchers {
        if m.name == storage::METRIC_NAME {
            continue;
        }
        if m.op == storage::MatchOp::Equal && !has.contains(&m.name.as_str()) {
            set.retain(|(n, _)| *n != m.name);
            set.push((m.name.clone(), m.value.clone()));
            has.push(&m.name);
        } else {
            set.retain(|(n, _)| *n != m.name);
        }
    }
    Labels::new(set.into_iter().map(|(n, v)| storage::Label::new(n.as_str(), v.as_str())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `first_after` finds what a plain scan finds, for short and long moves.
        #[test]
        fn first_after_is_the_scan(
            gaps in proptest::collection::vec(1i64..50, 0..200),
            from in 0usize..200,
            end in 0usize..200,
            bound in -10i64..6000,
        ) {
            let mut t = 0;
            let points: Vec<FPoint> = gaps.iter().map(|g| { t += g; FPoint { t, f: 0.0 } }).collect();
            let end = end.min(points.len());
            let from = from.min(end);
            let mut want = from;
            while want < end && points[want].t <= bound {
                want += 1;
            }
            prop_assert_eq!(first_after(&points, from, end, bound), want);
        }

        /// The four-lane `max_over_time`/`min_over_time` gives the sequential loop's bits,
        /// over values drawn to collide: NaNs, zeros of both signs, infinities, repeats.
        #[test]
        fn extreme_over_time_is_the_sequential_loop(
            picks in proptest::collection::vec(0usize..9, 1..40),
        ) {
            const VALUES: [f64; 9] = [f64::NAN, 0.0, -0.0, 1.0, -1.0, 2.5, f64::INFINITY, f64::NEG_INFINITY, -3.0];
            let w: Vec<FPoint> = (0i64..).zip(&picks).map(|(t, &i)| FPoint { t, f: VALUES[i] }).collect();
            let max = compare_over_time(&w, |cur, best| cur > best, false);
            let min = compare_over_time(&w, |cur, best| cur < best, false);
            prop_assert_eq!(extreme_over_time(&w, f64::max).to_bits(), max.to_bits());
            prop_assert_eq!(extreme_over_time(&w, f64::min).to_bits(), min.to_bits());
        }
    }
}
