//! The query entry points: parse, evaluate, shape the result.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use storage::Querier;

use crate::annotations::Level;
use crate::error::{Error, Result};
use crate::eval::{Evaluator, Grid, QueryParams, Series, Val, drop_metric_labels};
use crate::options::EngineOptions;
use crate::parser::{self, ast::Expr, ast::ValueType};
use crate::value::{HistogramPoint, Point, QueryResult, QueryStats, Sample, Value};

/// Stack size a query is evaluated with. Parsing, checking and evaluating recurse once per
/// level of the syntax tree, whose depth the parser limits; this leaves ample room even in
/// unoptimised builds, independently of the caller's thread.
pub const EVAL_STACK_BYTES: usize = 64 * 1024 * 1024;

thread_local! {
    /// The stack size the current thread's creator declared with [`declare_thread_stack`]
    /// (0: unknown).
    static DECLARED_STACK: Cell<usize> = const { Cell::new(0) };
}

/// Declares that the calling thread was started with a stack of at least `bytes`. A query run
/// on a thread declared with [`EVAL_STACK_BYTES`] or more is evaluated right there; on any
/// other thread the engine starts a thread of that size for it. The server declares its
/// runtime's threads (started with that stack size) so a query costs no thread start and keeps
/// the allocator's warm per-thread caches: starting and ending a thread per query was about a
/// tenth of a small query's time (thread set-up, and mimalloc returning the thread's heap).
/// Declaring a smaller stack than the thread has is harmless; a larger one is not.
pub fn declare_thread_stack(bytes: usize) {
    DECLARED_STACK.with(|s| s.set(bytes));
}

/// A PromQL engine: configuration plus the entry points for instant and range queries.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    opts: EngineOptions,
}

impl Engine {
    /// An engine with the given options.
    pub fn new(opts: EngineOptions) -> Self {
        Engine { opts }
    }

    /// The engine's options.
    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// Evaluates `query` at `time_ms` (Prometheus' `/api/v1/query`).
    pub fn instant(&self, querier: &dyn Querier, query: &str, time_ms: i64) -> Result<QueryResult> {
        self.run(querier, query, QueryParams { start: time_ms, end: time_ms, step: 0 })
    }

    /// Evaluates `query` at `start_ms, start_ms + step_ms, ... <= end_ms`
    /// (Prometheus' `/api/v1/query_range`). The query must return a scalar or an instant vector.
    pub fn range(
        &self,
        querier: &dyn Querier,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<QueryResult> {
        if step_ms <= 0 {
            return Err(Error::BadData(
                "zero or negative query resolution step widths are not accepted. Try a positive integer"
                    .into(),
            ));
        }
        if end_ms < start_ms {
            return Err(Error::BadData("end timestamp must not be before start time".into()));
        }
        self.run(querier, query, QueryParams { start: start_ms, end: end_ms, step: step_ms })
    }

    /// Parses and type-checks `query` with this engine's feature flags.
    pub fn parse(&self, query: &str) -> Result<Expr> {
        parser::parse(query, &self.opts.parse_options()).map_err(|e| Error::BadData(e.render(query)))
    }

    fn run(&self, querier: &dyn Querier, query: &str, params: QueryParams) -> Result<QueryResult> {
        // Everything that recurses over the syntax tree, including dropping it, happens on a
        // thread with a known, generous stack.
        if DECLARED_STACK.with(Cell::get) >= EVAL_STACK_BYTES {
            return std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.run_on_this_thread(querier, query, params)
            }))
            .unwrap_or_else(|_| Err(Error::Execution("query evaluation panicked".into())));
        }
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name("promql-eval".into())
                .stack_size(EVAL_STACK_BYTES)
                .spawn_scoped(scope, || self.run_on_this_thread(querier, query, params))
                .map_err(|e| Error::Execution(format!("cannot start query thread: {e}")))?;
            handle.join().unwrap_or_else(|_| Err(Error::Execution("query evaluation panicked".into())))
        })
    }

    fn run_on_this_thread(
        &self,
        querier: &dyn Querier,
        query: &str,
        params: QueryParams,
    ) -> Result<QueryResult> {
        let started = Instant::now();
        let expr = match &self.opts.parse_cache {
            Some(cache) => cache.get_or_parse(query, &self.opts.parse_options(), || self.parse(query))?,
            None => std::sync::Arc::new(self.parse(query)?),
        };
        let ty = expr.value_type();
        let is_range = params.step > 0;
        if is_range && ty != ValueType::Scalar && ty != ValueType::Vector {
            return Err(Error::BadData(format!(
                "invalid expression type {:?} for range query, must be Scalar or instant Vector",
                ty.documented()
            )));
        }
        let prepared = Instant::now();
        let deadline = started + self.opts.timeout;
        let mut ev = Evaluator::new(querier, &self.opts, params, deadline);
        let grid = Grid { start: params.start, end: params.end, step: params.step.max(1) };
        ev.check_grid(grid)?;
        ev.find_name_blind(&expr);
        ev.preselect(&expr, grid);
        ev.prefetch(&expr, grid);
        let val = ev.eval(&expr, grid)?;
        // A selector's series are stored series: distinct label sets by construction.
        let distinct = matches!(expr.unparen(), crate::parser::ast::Expr::Vector(_));
        let value = finalize(val, grid, is_range, self.opts.delayed_name_removal, distinct)?;
        let stats = QueryStats {
            samples_read: ev.samples_read,
            series_selected: ev.series_selected,
            blocks_from_stats: ev.scan.blocks_from_stats,
            blocks_decoded: ev.scan.blocks_decoded,
            samples_decoded: ev.scan.samples_decoded,
            peak_samples: ev.samples.peak,
            prepare_time: prepared - started,
            eval_time: prepared.elapsed(),
            select_time: ev.select_time,
            read_time: ev.read_time,
        };
        let annotations = ev.annotations.to_vec();
        let render = |level: Level| -> Vec<String> {
            annotations.iter().filter(|a| a.level == level).map(|a| a.render(query)).collect()
        };
        let (warnings, infos) = (render(Level::Warning), render(Level::Info));
        Ok(QueryResult { value, warnings, infos, annotations, stats })
    }
}

fn to_public(s: Series) -> crate::value::Series {
    crate::value::Series {
        labels: s.labels,
        points: s.points.into_iter().map(|p| Point { t: p.t, v: p.f }).collect(),
        histograms: s.hpoints.into_iter().map(|p| HistogramPoint { t: p.t, h: (*p.h).clone() }).collect(),
    }
}

/// Applies delayed name removal and shapes the evaluator's value as Prometheus returns it.
/// `distinct`: the series are known to have distinct label sets, so an instant vector is not
/// checked for duplicates (a hash of every label set: 7 % of `{__name__=~"cpu_.*"}` over
/// 100,000 series).
fn finalize(val: Val, g: Grid, is_range: bool, delayed: bool, distinct: bool) -> Result<Value> {
    let clean = |mut m: Vec<Series>| -> Result<Vec<Series>> {
        if delayed {
            for s in &mut m {
                if s.drop_name {
                    s.labels = drop_metric_labels(&s.labels);
                }
            }
        }
        Ok(m)
    };
    Ok(match val {
        Val::Str(s) => Value::String { t: g.start, v: s },
        Val::Scalar(v) if !is_range => {
            Value::Scalar { t: g.start, v: v.first().copied().unwrap_or(f64::NAN) }
        }
        Val::Scalar(v) => Value::Matrix(vec![crate::value::Series {
            labels: storage::Labels::default(),
            points: g.timestamps().zip(v).map(|(t, v)| Point { t, v }).collect(),
            histograms: Vec::new(),
        }]),
        Val::Vector(m) if !is_range => {
            let m = clean(m)?;
            if !distinct && crate::eval::has_duplicate_labels(&m) {
                return Err(crate::eval::duplicate_labelset());
            }
            // Sized up front: collecting a filtered iterator grows the vector by doubling,
            // copying it and touching fresh pages each time.
            let mut samples = Vec::with_capacity(m.len());
            samples.extend(
                m.into_iter()
                    // The labels move: 100,000 reference-count updates on as many label sets
                    // were 6 % of `{__name__=~"cpu_.*"}` over 100,000 series.
                    .filter_map(|Series { labels, points, hpoints, .. }| {
                        match (points.first(), hpoints.first()) {
                            (Some(p), _) => Some(Sample { labels, t: g.start, v: p.f, h: None }),
                            (None, Some(p)) => {
                                Some(Sample { labels, t: g.start, v: 0.0, h: Some((*p.h).clone()) })
                            }
                            (None, None) => None,
                        }
                    }),
            );
            Value::Vector(samples)
        }
        Val::Vector(m) | Val::Range(m) => {
            let m = if delayed { crate::eval::merge_same_labelsets(clean(m)?)? } else { m };
            let mut out: Vec<crate::value::Series> = m
                .into_iter()
                .filter(|s| !s.points.is_empty() || !s.hpoints.is_empty())
                .map(to_public)
                .collect();
            // By a copy of each label set (a pointer) beside its index: the pairs sort unstably
            // in the order a stable sort would give, and each series moves once, where a stable
            // sort of the series moved them whole at every level (a tenth of the time of an
            // answer of 100,000 series).
            out.sort_by_cached_key(|s| s.labels.clone());
            Value::Matrix(out)
        }
    })
}
