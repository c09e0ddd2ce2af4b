//! Engine configuration: limits and optional language features.

use std::time::Duration;

/// Default of [`EngineOptions::parallel_min_work`], in microseconds.
const PARALLEL_MIN_WORK_US: u64 = 100;

/// Configuration of an [`crate::Engine`]. Defaults follow Prometheus' defaults: experimental
/// features are off, limits are `--query.max-samples=50000000` and `--query.timeout=2m`.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// How far back an instant selector looks for the latest sample (`--query.lookback-delta`).
    pub lookback_delta_ms: i64,
    /// Maximum number of samples held in memory at once by one query.
    pub max_samples: usize,
    /// Maximum number of series one selector may match; 0 means no limit.
    pub max_series: usize,
    /// Wall-clock limit for one query.
    pub timeout: Duration,
    /// Resolution of subqueries written without a step (`x[1h:]`).
    pub default_subquery_step_ms: i64,
    /// Maximum nesting depth of a query; deeper queries are rejected as bad data.
    pub max_depth: usize,
    /// Experimental functions and aggregations (`limitk`, `info`, `sort_by_label`, `step()`, ...)
    /// (`--enable-feature=promql-experimental-functions`).
    pub experimental_functions: bool,
    /// Arithmetic in durations, `[5m + 30s]`, `offset step()`
    /// (`--enable-feature=promql-duration-expr`).
    pub duration_expressions: bool,
    /// `anchored` and `smoothed` range selectors
    /// (`--enable-feature=promql-extended-range-selectors`).
    pub extended_range_selectors: bool,
    /// `fill()`, `fill_left()`, `fill_right()` on binary operators
    /// (`--enable-feature=promql-binop-fill-modifiers`).
    pub binop_fill_modifiers: bool,
    /// Drop `__name__` at the end of evaluation instead of in each function, so e.g.
    /// `label_replace` can act on it (`--enable-feature=promql-delayed-name-removal`).
    pub delayed_name_removal: bool,
    /// Use the `__type__` label to decide whether `rate()` input looks like a counter
    /// (`--enable-feature=type-and-unit-labels`).
    pub type_and_unit_labels: bool,
    /// Read samples' start timestamps (created timestamps) where the storage has them:
    /// `rate`, `increase`, `irate` and `resets` then also see counter resets that the values
    /// hide, `rate`/`increase` count from zero at a start inside the range instead of
    /// extrapolating, and `start_timestamp()` returns them (Prometheus' engine option
    /// `UseStartTimestamps`, off by default).
    pub use_start_timestamps: bool,
    /// Ask storage for windowed aggregates for `min|max|count|first|last|present_over_time`
    /// over a plain range selector, so blocks can be answered from their statistics (see
    /// `eval/pushdown.rs`). The answer is the same bit for bit; off is for measuring and as
    /// the oracle in tests.
    pub pushdown: bool,
    /// Compute `sum|avg|min|max|count|group` over float series a series at a time into
    /// per-group columns (`eval/aggregate_columns.rs`) instead of a step at a time. The answer
    /// is the same bit for bit; off is for measuring and as the oracle in tests.
    pub column_aggregation: bool,
    /// Worker threads for the per-series loops of large selectors (see [`crate::QueryPool`]);
    /// `None` evaluates every query on its own thread only. The answer is the same either way.
    pub parallel: Option<crate::QueryPool>,
    /// Parsed queries kept for the next query with the same text (see [`crate::ParseCache`]);
    /// `None` parses every query. The answer is the same either way.
    pub parse_cache: Option<crate::ParseCache>,
    /// A selector's series are split across [`EngineOptions::parallel`] when it matches at least
    /// this many series...
    pub parallel_min_series: usize,
    /// ... or when its series times the estimated points per series (steps plus samples in
    /// the read range at one per 15 s) reach this many. Below both, the loop stays on the
    /// query's thread: a dashboard panel of a few series pays nothing for the pool. 10,000
    /// points is about a tenth of a millisecond of decoding, against tens of microseconds to
    /// hand chunks to the pool: TSBS `double-groupby-1` over 8 h (100 series, ~190,000
    /// estimated points) went from 4.75 to 2.85 ms p50 when the threshold went from 250,000 to
    /// 50,000, and `cpu-max-all-8` (ten selectors of 8 series, ~15,000 points each) from 3.53
    /// to 2.67-3.01 ms when it went to 10,000, on an idle second core
    /// (docs/benchmarks/query.md#parallel-evaluation-under-load).
    pub parallel_min_points: usize,
    /// A loop past those thresholds first evaluates its first series on the query's thread and
    /// goes to the pool only if that series' time, times the series left, reaches this much:
    /// the point estimate cannot know that push-down answers a series from block statistics in
    /// microseconds, and waking the pool for a loop of that size costs more than it saves.
    /// Zero: no trial, the thresholds alone decide (the tests use it to force the pool).
    pub parallel_min_work: Duration,
    /// Evaluation on a thread that must not be held long (the server runs small queries on its
    /// async runtime's own threads, saving the hand-off to a blocking thread and back, about
    /// 50 us of a 0.2 ms request): `Some(n)` makes the query stop with
    /// [`crate::Error::NotInline`] as soon as it is not small, which the caller answers by
    /// running it again where it may take long. Small means: every selector has an equality
    /// matcher on a non-empty value (so looking its series up is cheap), no selector loop
    /// matches `parallel_min_series` series, and the per-series loops together estimate fewer
    /// than `n` points (steps plus samples read, as for `parallel_min_points`). `None` (the
    /// default): any size.
    pub inline_points_max: Option<usize>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            lookback_delta_ms: 5 * 60 * 1000,
            max_samples: 50_000_000,
            max_series: 0,
            timeout: Duration::from_secs(120),
            default_subquery_step_ms: 60 * 1000,
            max_depth: crate::parser::DEFAULT_MAX_DEPTH,
            experimental_functions: false,
            duration_expressions: false,
            extended_range_selectors: false,
            binop_fill_modifiers: false,
            delayed_name_removal: false,
            type_and_unit_labels: false,
            use_start_timestamps: false,
            pushdown: true,
            column_aggregation: true,
            parallel: None,
            parse_cache: None,
            parallel_min_series: 256,
            parallel_min_points: 10_000,
            parallel_min_work: Duration::from_micros(PARALLEL_MIN_WORK_US),
            inline_points_max: None,
        }
    }
}

impl EngineOptions {
    /// The parser options implied by the feature flags.
    pub fn parse_options(&self) -> crate::parser::ParseOptions {
        crate::parser::ParseOptions {
            experimental_functions: self.experimental_functions,
            duration_expressions: self.duration_expressions,
            extended_range_selectors: self.extended_range_selectors,
            binop_fill_modifiers: self.binop_fill_modifiers,
            max_depth: self.max_depth,
        }
    }
}
