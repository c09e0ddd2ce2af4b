//! Evaluation of a parsed expression over a grid of evaluation timestamps.
//!
//! Like Prometheus, every node is evaluated for all steps of the query at once: an instant
//! vector becomes a set of series with one point per step at which the series exists, a scalar
//! becomes one number per step. An instant query is the one-step case. Selectors read each
//! series' samples from storage once and slide their look-back or range window across the steps,
//! so the cost is one pass over the samples per series, not one storage read per step.
//!
//! Recursion follows the syntax tree, whose depth the parser bounded.

mod aggregate;
mod aggregate_columns;
mod binary;
pub(crate) mod float_histogram;
mod functions;
mod grid;
mod group_extreme;
mod histogram;
mod histogram_fns;
mod histogram_sum;
mod histogram_trim;
mod info;
mod labels;
mod name_blind;
mod notes;
mod numeric;
mod parallel;
mod prefetch;
mod preselect;
mod pushdown;
mod range_fn;
mod range_hist;
mod rate;
mod selector;
mod series;
mod start_timestamps;

use std::time::{Duration, Instant};

use storage::Querier;

use crate::annotations::Annotations;
use crate::error::{Error, Result};
use crate::options::EngineOptions;
use crate::parser::ast::{AtModifier, BinOp, DurationExpr, DurationOp, Expr, Subquery};

/// Whether native histogram `h` follows `prev` only after a counter reset (Prometheus'
/// `DetectReset`), for storages that assign counter-reset hints on append as Prometheus' TSDB
/// does.
pub use float_histogram::detect_reset as detect_histogram_reset;
pub(crate) use grid::Grid;
pub(crate) use labels::{HashMap, drop_metric_labels};
pub(crate) use series::{
    FPoint, HPoint, Series, duplicate_labelset, has_duplicate_labels, merge_same_labelsets,
};

/// The value of a sub-expression over a grid.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// One value per grid step.
    Scalar(Vec<f64>),
    /// An instant vector: series with points at grid timestamps.
    Vector(Vec<Series>),
    /// A range vector (only at the top of an instant query): series with raw sample points.
    Range(Vec<Series>),
    /// A string.
    Str(String),
}

impl Val {
    fn sample_count(&self) -> usize {
        match self {
            Val::Scalar(v) => v.len(),
            Val::Vector(m) | Val::Range(m) => m.iter().map(|s| s.points.len() + s.hpoints.len()).sum(),
            Val::Str(_) => 0,
        }
    }
}

/// Parameters of the whole query, needed by `start()`, `end()`, `step()`, `range()` and
/// `@ start()`/`@ end()` at any depth.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryParams {
    pub start: i64,
    pub end: i64,
    /// 0 for instant queries.
    pub step: i64,
}

/// Tracks samples held in memory against the limit.
#[derive(Debug, Default)]
pub(crate) struct SampleCounter {
    pub current: usize,
    pub peak: usize,
    pub max: usize,
}

impl SampleCounter {
    fn add(&mut self, n: usize) -> Result<()> {
        self.current += n;
        self.peak = self.peak.max(self.current);
        if self.current > self.max {
            return Err(Error::TooManySamples("query execution"));
        }
        Ok(())
    }
}

/// Evaluation state of one query.
pub(crate) struct Evaluator<'a> {
    pub querier: &'a dyn Querier,
    pub opts: &'a EngineOptions,
    pub query: QueryParams,
    pub deadline: Instant,
    pub annotations: Annotations,
    pub samples: SampleCounter,
    pub samples_read: u64,
    pub series_selected: u64,
    /// What push-down cost (blocks from statistics, blocks and samples decoded).
    pub scan: storage::window_agg::ScanStats,
    /// Time in `Querier::select` (the query's `select_time`).
    pub select_time: Duration,
    /// Time reading from storage, summed over the threads that read (the query's `read_time`).
    pub read_time: Duration,
    /// Where in the query the evaluation is: decides whether selectors read histograms as
    /// Prometheus' `HistogramStatsIterator` would.
    pub hist_stats: HistStatsScope,
    ticks: u32,
    /// Points the per-series loops so far estimated, against `opts.inline_points_max`.
    inline_points: usize,
    /// Range calls computed ahead of evaluation (`prefetch.rs`).
    prefetched: prefetch::PrefetchMap,
    /// Selections made ahead of evaluation (`preselect.rs`).
    preselected: preselect::Preselected,
    /// Range calls whose output names nobody sees (`name_blind.rs`), by node address.
    name_blind: labels::HashSet<usize>,
}

/// The ancestors of the node being evaluated that matter for Prometheus'
/// `detectHistogramStatsDecoding`: a selector below `histogram_count`, `histogram_sum` or
/// `histogram_avg` reads histograms through a `HistogramStatsIterator` (which turns `unknown`
/// counter-reset hints into explicit ones, see [`selector::explicit_reset_hints`]) unless a
/// subquery, `histogram_quantile(s)`, `histogram_fraction` or a trim operator is above it too.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HistStatsScope {
    below_stats_fn: bool,
    below_bucket_user: bool,
}

impl HistStatsScope {
    /// Whether selectors evaluated now read histogram statistics only.
    pub fn stats_only(self) -> bool {
        self.below_stats_fn && !self.below_bucket_user
    }

    /// The scope for the arguments of function `name`.
    fn enter_call(mut self, name: &str) -> Self {
        match name {
            "histogram_count" | "histogram_sum" | "histogram_avg" => self.below_stats_fn = true,
            "histogram_quantile" | "histogram_quantiles" | "histogram_fraction" => {
                self.below_bucket_user = true
            }
            _ => {}
        }
        self
    }

    /// Whether the arguments of function `name` are evaluated in the scope of its caller.
    pub fn keeps_default(name: &str) -> bool {
        let s = HistStatsScope::default().enter_call(name);
        !s.below_stats_fn && !s.below_bucket_user
    }

    /// The scope below a subquery or a trim operator, which need whole buckets.
    pub fn enter_bucket_user(mut self) -> Self {
        self.below_bucket_user = true;
        self
    }
}

impl<'a> Evaluator<'a> {
    pub fn new(
        querier: &'a dyn Querier,
        opts: &'a EngineOptions,
        query: QueryParams,
        deadline: Instant,
    ) -> Self {
        Evaluator {
            querier,
            opts,
            query,
            deadline,
            annotations: Annotations::default(),
            samples: SampleCounter { current: 0, peak: 0, max: opts.max_samples },
            samples_read: 0,
            series_selected: 0,
            scan: storage::window_agg::ScanStats::default(),
            select_time: Duration::ZERO,
            read_time: Duration::ZERO,
            hist_stats: HistStatsScope::default(),
            ticks: 0,
            inline_points: 0,
            prefetched: prefetch::PrefetchMap::new(),
            name_blind: labels::HashSet::default(),
            preselected: preselect::Preselected::new(),
        }
    }

    /// Returns an error once the query's time is up. Cheap enough for inner loops: the clock
    /// is read every 64 calls.
    pub fn check_deadline(&mut self) -> Result<()> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(64) && Instant::now() > self.deadline {
            return Err(Error::Timeout("expression evaluation"));
        }
        Ok(())
    }

    /// Rejects a grid with more steps than samples may be held, before anything is allocated
    /// for it.
    pub fn check_grid(&self, g: Grid) -> Result<()> {
        let steps = (g.end.saturating_sub(g.start) / g.step).saturating_add(1);
        if g.end >= g.start && steps as u64 > self.opts.max_samples as u64 {
            return Err(Error::TooManySamples("query execution"));
        }
        Ok(())
    }

    /// Counts `n` more samples held in memory.
    pub fn track(&mut self, n: usize) -> Result<()> {
        self.samples.add(n)
    }

    /// Evaluates `e` over `g`.
    pub fn eval(&mut self, e: &Expr, g: Grid) -> Result<Val> {
        if Instant::now() > self.deadline {
            return Err(Error::Timeout("expression evaluation"));
        }
        let before = self.samples.current;
        let v = self.eval_node(e, g)?;
        // The children's values are consumed by now; only the result stays in memory.
        self.samples.current = before;
        self.track(v.sample_count())?;
        Ok(v)
    }

    fn eval_node(&mut self, e: &Expr, g: Grid) -> Result<Val> {
        match e {
            Expr::Number(n) => Ok(Val::Scalar(vec![n.value; g.len()])),
            Expr::String(s) => Ok(Val::Str(s.value.clone())),
            Expr::Paren(p) => self.eval(&p.expr, g),
            Expr::Unary(u) => {
                let v = self.eval(&u.expr, g)?;
                if !u.negate {
                    return Ok(v);
                }
                match v {
                    Val::Scalar(mut s) => {
                        s.iter_mut().for_each(|x| *x = -*x);
                        Ok(Val::Scalar(s))
                    }
                    Val::Vector(mut m) => {
                        for s in &mut m {
                            s.drop_metric_name(self.opts.delayed_name_removal);
                            s.points.iter_mut().for_each(|p| p.f = -p.f);
                            for p in &mut s.hpoints {
                                let h = std::sync::Arc::make_mut(&mut p.h);
                                float_histogram::scale(h, -1.0);
                                // A negated counter is no counter: Prometheus marks it a gauge.
                                h.counter_reset_hint = storage::CounterResetHint::Gauge;
                            }
                        }
                        if !self.opts.delayed_name_removal {
                            m = series::merge_same_labelsets(m)?;
                        }
                        Ok(Val::Vector(m))
                    }
                    other => Ok(other),
                }
            }
            Expr::Vector(vs) => self.eval_vector_selector(vs, g, selector::Pick::Value),
            Expr::Matrix(ms) => {
                if !g.is_instant() {
                    return Err(Error::Execution("cannot do range evaluation of matrix selector".into()));
                }
                self.eval_matrix_selector_raw(ms, g.start)
            }
            Expr::Subquery(sq) => {
                if !g.is_instant() {
                    return Err(Error::Execution("cannot do range evaluation of subquery".into()));
                }
                self.eval_subquery_raw(sq, g.start)
            }
            Expr::Binary(b) if matches!(b.op, BinOp::TrimUpper | BinOp::TrimLower) => {
                let saved = self.hist_stats;
                self.hist_stats = saved.enter_bucket_user();
                let v = self.eval_binary(b, g);
                self.hist_stats = saved;
                v
            }
            Expr::Binary(b) => self.eval_binary(b, g),
            Expr::Aggregate(a) => self.eval_aggregate(a, g),
            Expr::Call(c) => {
                let saved = self.hist_stats;
                self.hist_stats = saved.enter_call(c.func.name);
                let v = self.eval_call(c, g);
                self.hist_stats = saved;
                v
            }
        }
    }

    /// Evaluates a scalar-typed argument into one value per step.
    pub fn eval_scalar(&mut self, e: &Expr, g: Grid) -> Result<Vec<f64>> {
        match self.eval(e, g)? {
            Val::Scalar(v) => Ok(v),
            _ => Err(Error::Execution("expected a scalar".into())),
        }
    }

    /// Evaluates an instant-vector-typed expression.
    pub fn eval_vector(&mut self, e: &Expr, g: Grid) -> Result<Vec<Series>> {
        match self.eval(e, g)? {
            Val::Vector(m) => Ok(m),
            _ => Err(Error::Execution("expected an instant vector".into())),
        }
    }

    /// Resolves a duration expression to milliseconds. `allow_negative` is for offsets.
    pub fn duration_ms(&self, d: &DurationExpr, allow_negative: bool) -> Result<i64> {
        if let DurationExpr::Literal(v) = d {
            // Literals: rounded to nanoseconds, then truncated to milliseconds (Go's
            // time.Duration semantics in the parser).
            let ns = (v * 1e9).round();
            if !ns.is_finite() || ns.abs() > 9.2e18 {
                return Err(Error::BadData("duration out of range".into()));
            }
            return Ok((ns as i64) / 1_000_000);
        }
        let secs = self.duration_secs(d)?;
        if secs <= 0.0 && !allow_negative {
            return Err(Error::BadData("duration must be greater than 0".into()));
        }
        let ms = secs * 1000.0;
        if !ms.is_finite() || ms.abs() > 9.2e15 {
            return Err(Error::BadData("duration is out of range".into()));
        }
        Ok(ms.trunc() as i64)
    }

    fn duration_secs(&self, d: &DurationExpr) -> Result<f64> {
        Ok(match d {
            DurationExpr::Literal(v) => *v,
            DurationExpr::Step => self.query.step as f64 / 1000.0,
            DurationExpr::Range => (self.query.end - self.query.start) as f64 / 1000.0,
            DurationExpr::Neg(x) => -self.duration_secs(x)?,
            DurationExpr::Binary(op, a, b) => {
                let (a, b) = (self.duration_secs(a)?, self.duration_secs(b)?);
                match op {
                    DurationOp::Add => a + b,
                    DurationOp::Sub => a - b,
                    DurationOp::Mul => a * b,
                    DurationOp::Div if b == 0.0 => return Err(Error::BadData("division by zero".into())),
                    DurationOp::Div => a / b,
                    DurationOp::Mod if b == 0.0 => return Err(Error::BadData("modulo by zero".into())),
                    DurationOp::Mod => a % b,
                    DurationOp::Pow => a.powf(b),
                    DurationOp::Min => a.min(b),
                    DurationOp::Max => a.max(b),
                }
            }
        })
    }

    /// Resolves an optional offset to milliseconds (0 when absent).
    pub fn offset_ms(&self, d: &Option<DurationExpr>) -> Result<i64> {
        d.as_ref().map_or(Ok(0), |d| self.duration_ms(d, true))
    }

    /// Resolves `@` to a timestamp in milliseconds.
    pub fn at_ms(&self, at: Option<AtModifier>) -> Option<i64> {
        at.map(|a| match a {
            AtModifier::Timestamp(t) => t,
            AtModifier::Start => self.query.start,
            AtModifier::End => self.query.end,
        })
    }

    /// A top-level subquery of an instant query: the inner points in `(t - range, t]`.
    fn eval_subquery_raw(&mut self, sq: &Subquery, t: i64) -> Result<Val> {
        let (inner, range, refs) = self.eval_subquery_inner(sq, Grid { start: t, end: t, step: 1 })?;
        let ref_t = refs.first().copied().unwrap_or(t);
        let mut out = Vec::with_capacity(inner.len());
        for mut s in inner {
            s.points.retain(|p| p.t > ref_t - range && p.t <= ref_t);
            s.hpoints.retain(|p| p.t > ref_t - range && p.t <= ref_t);
            if !s.is_empty() {
                out.push(s);
            }
        }
        Ok(Val::Range(out))
    }

    /// Evaluates a subquery's inner expression on its own grid, covering the windows of all
    /// steps of `g`. Returns the inner series, the range in ms, and each step's window end.
    pub fn eval_subquery_inner(&mut self, sq: &Subquery, g: Grid) -> Result<(Vec<Series>, i64, Vec<i64>)> {
        let range = self.duration_ms(&sq.range, false)?;
        let step = match &sq.step {
            Some(s) => self.duration_ms(s, false)?,
            None => self.opts.default_subquery_step_ms,
        };
        if step <= 0 {
            return Err(Error::BadData("subquery step must be greater than 0".into()));
        }
        let offset = self.offset_ms(&sq.offset)?;
        let at = self.at_ms(sq.at);
        let refs: Vec<i64> = g.timestamps().map(|ts| at.unwrap_or(ts).saturating_sub(offset)).collect();
        let (Some(&first), Some(&last)) = (refs.first(), refs.last()) else {
            return Ok((Vec::new(), range, refs));
        };
        let lowest = first.min(last).saturating_sub(range);
        // The first multiple of the step strictly after the window start (Prometheus aligns
        // subquery steps to the epoch so results do not depend on the query's start).
        let start = lowest.div_euclid(step).saturating_mul(step).saturating_add(step);
        let inner_grid = Grid { start, end: first.max(last), step };
        self.check_grid(inner_grid)?;
        let saved = self.hist_stats;
        self.hist_stats = saved.enter_bucket_user();
        let inner =
            if inner_grid.len() == 0 { Ok(Vec::new()) } else { self.eval_vector(&sq.expr, inner_grid) };
        self.hist_stats = saved;
        let mut inner = inner?;
        // A subquery's points are samples of a result, not consecutive stored samples: the
        // counter-reset hints of the storage do not hold between them, so resets must be
        // detected from the buckets (as Prometheus does).
        for p in inner.iter_mut().flat_map(|s| s.hpoints.iter_mut()) {
            if matches!(
                p.h.counter_reset_hint,
                storage::CounterResetHint::NotReset | storage::CounterResetHint::Reset
            ) {
                std::sync::Arc::make_mut(&mut p.h).counter_reset_hint = storage::CounterResetHint::Unknown;
            }
        }
        Ok((inner, range, refs))
    }
}
