//! PromQL over HTTP: `/api/v1/query`, `/api/v1/query_range`, `/api/v1/format_query` and
//! `/api/v1/parse_query`, answered as Prometheus 3 answers them.
//!
//! Parameters are read and checked in Prometheus' order with Prometheus' messages (clients show
//! them to users verbatim). A query waits for a slot of the concurrency gate ([`QueryService`]),
//! then parses, evaluates and is encoded on the blocking pool: evaluation reads storage and
//! encoding a large matrix is CPU work ([`encode`] writes the JSON bytes directly). The
//! per-request `timeout` can only shorten `--query.timeout`, and the time spent queueing
//! counts against it, as in Prometheus.

pub mod ast_json;
mod encode;
mod histogram_json;
pub mod pretty;
mod service;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use promql::parser::ast::Expr;
use promql::{Engine, EngineOptions, QueryResult};

pub use service::{
    Admission, DEFAULT_INLINE_MAX_POINTS, DEFAULT_MAX_CONCURRENCY, InlineSlot, QueryConfig, QueryService,
};

use crate::api::params::{Params, parse_duration_ms, parse_time};
use crate::api::respond::{Success, json_bytes};
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenant::Scope;

/// Prometheus refuses range queries with more steps than this per series ("sufficient for 60s
/// resolution for a week or 1h resolution for a year").
pub const MAX_POINTS_PER_SERIES: i64 = 11_000;

/// Prometheus returns at most this many warnings and this many infos, then a count of the rest.
const MAX_ANNOTATIONS: usize = 10;

/// The warning added when `limit` cut a result short (Prometheus 3's text).
const TRUNCATED: &str = "results truncated due to limit";

/// Stack for parsing outside the engine (`format_query`, `parse_query`): the parser and the
/// tree walks recurse once per nesting level, which the parser bounds; this leaves ample room.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;

/// The query routes; GET and form POST everywhere, as Prometheus.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/query", get(instant_query).post(instant_query))
        .route("/api/v1/query_range", get(range_query).post(range_query))
        .route("/api/v1/format_query", get(format_query).post(format_query))
        .route("/api/v1/parse_query", get(parse_query).post(parse_query))
}

/// What to evaluate: one instant or a grid of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluation {
    /// `/api/v1/query` at `time` (ms).
    Instant {
        /// Evaluation time in ms.
        time: i64,
    },
    /// `/api/v1/query_range`: `start, start + step, ... <= end` (ms).
    Range {
        /// First step in ms.
        start: i64,
        /// Last possible step in ms, not before `start`.
        end: i64,
        /// Step width in ms, positive.
        step: i64,
    },
}

/// One query request after its parameters have been checked. Public, with the two
/// constructors that read it from [`Params`], so the fuzz target (`fuzz/`) can drive exactly
/// the parsing the handlers do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryRequest {
    /// The `query` parameter (PromQL text, not parsed yet).
    pub query: String,
    /// Instant or range, with the checked times.
    pub evaluation: Evaluation,
    /// The `timeout` parameter in ms.
    pub timeout_ms: Option<i64>,
    /// The `lookback_delta` parameter in ms; 0 or less means the server's.
    pub lookback_delta_ms: Option<i64>,
    /// The `limit` parameter: most series (or samples of a vector) returned.
    pub limit: Option<usize>,
    /// True if the `stats` parameter is set (to anything, as Prometheus).
    pub stats: bool,
}

impl QueryRequest {
    /// `/api/v1/query`'s parameters, checked in Prometheus' order with its messages; `now_ms`
    /// is the evaluation time when `time` is absent.
    pub fn instant(params: &Params, now_ms: i64) -> Result<Self, ApiError> {
        let limit = params.limit()?;
        let time = match params.get("time") {
            None => now_ms,
            Some(s) => parse_time(s).map_err(|e| {
                ApiError::BadData(format!("invalid parameter \"time\": invalid time value for 'time': {e}"))
            })?,
        };
        let timeout_ms = params.duration("timeout")?;
        let lookback_delta_ms = lookback_delta(params)?;
        Ok(QueryRequest {
            query: params.get("query").unwrap_or_default().to_owned(),
            evaluation: Evaluation::Instant { time },
            timeout_ms,
            lookback_delta_ms,
            limit,
            stats: params.get("stats").is_some(),
        })
    }

    /// `/api/v1/query_range`'s parameters, checked in Prometheus' order with its messages:
    /// `end` not before `start`, a positive `step`, at most [`MAX_POINTS_PER_SERIES`] steps.
    pub fn range(params: &Params) -> Result<Self, ApiError> {
        let limit = params.limit()?;
        // Unlike `time`, these are required and parsed without the "invalid time value" wrapper.
        let time = |name: &str| {
            parse_time(params.get(name).unwrap_or_default())
                .map_err(|e| ApiError::BadData(format!("invalid parameter \"{name}\": {e}")))
        };
        let start = time("start")?;
        let end = time("end")?;
        if end < start {
            return Err(ApiError::BadData(
                "invalid parameter \"end\": end timestamp must not be before start time".into(),
            ));
        }
        let step = parse_duration_ms(params.get("step").unwrap_or_default())
            .map_err(|e| ApiError::BadData(format!("invalid parameter \"step\": {e}")))?;
        if step <= 0 {
            return Err(ApiError::BadData(
                "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. \
                 Try a positive integer"
                    .into(),
            ));
        }
        if end.saturating_sub(start) / step > MAX_POINTS_PER_SERIES {
            return Err(ApiError::BadData(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query \
                 resolution (?step=XX)"
                    .into(),
            ));
        }
        let timeout_ms = params.duration("timeout")?;
        let lookback_delta_ms = lookback_delta(params)?;
        Ok(QueryRequest {
            query: params.get("query").unwrap_or_default().to_owned(),
            evaluation: Evaluation::Range { start, end, step },
            timeout_ms,
            lookback_delta_ms,
            limit,
            stats: params.get("stats").is_some(),
        })
    }
}

/// `GET|POST /api/v1/query`.
async fn instant_query(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    params: Params,
) -> Result<Response, ApiError> {
    let request = QueryRequest::instant(&params, chrono::Utc::now().timestamp_millis())?;
    execute(&state, request, scope).await
}

/// `GET|POST /api/v1/query_range`.
async fn range_query(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    params: Params,
) -> Result<Response, ApiError> {
    let request = QueryRequest::range(&params)?;
    execute(&state, request, scope).await
}

/// The `lookback_delta` parameter (Prometheus 3), with Prometheus' message when it is bad.
fn lookback_delta(params: &Params) -> Result<Option<i64>, ApiError> {
    params
        .get("lookback_delta")
        .map(|s| {
            parse_duration_ms(s)
                .map_err(|e| ApiError::BadData(format!("error parsing lookback delta duration: {e}")))
        })
        .transpose()
}

/// Waits for a slot, evaluates and encodes the answer: on this async runtime thread if the
/// query turns out small and a spare thread is left ([`QueryService::try_inline`]), otherwise
/// on the blocking pool. The query sees the series of `scope`'s tenants.
async fn execute(state: &AppState, request: QueryRequest, scope: Scope) -> Result<Response, ApiError> {
    let started = Instant::now();
    let service = state.query();
    let server_timeout = service.options().timeout;
    let timeout = match request.timeout_ms {
        Some(ms) => Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(server_timeout),
        None => server_timeout,
    };
    let deadline = started + timeout;
    let db = crate::api::db(state)?;
    let admission = service.admit(deadline).await?;
    let queued = admission.queued;
    let mut options = service.options().clone();
    if let Some(ms) = request.lookback_delta_ms.filter(|ms| *ms > 0) {
        options.lookback_delta_ms = ms;
    }
    let max_response_bytes = service.max_response_bytes();
    let writers = state.writers().cloned();
    // Bucket reads of an inline attempt the engine declined: the query's too, though the run
    // that answers finds what they fetched in the cache.
    let declined_reads = [AtomicU64::new(0), AtomicU64::new(0)];
    // The answer, or `None` if the engine declined to run the query inline.
    let run = move |db: &storage::Db, mut options: EngineOptions, request: &QueryRequest| {
        options.timeout = deadline.saturating_duration_since(Instant::now());
        let pool = options.parallel.clone();
        let (result, bucket_reads) = evaluate(db, writers.as_ref(), &scope, options, request);
        let (reads, bytes) = bucket_reads.get();
        let result = match result {
            Err(promql::Error::NotInline) => {
                declined_reads[0].fetch_add(reads, Ordering::Relaxed);
                declined_reads[1].fetch_add(bytes, Ordering::Relaxed);
                return Ok(None);
            }
            result => result.map_err(|err| query_error(request, err))?,
        };
        let bucket_reads = (
            reads + declined_reads[0].load(Ordering::Relaxed),
            bytes + declined_reads[1].load(Ordering::Relaxed),
        );
        let timings = Timings { queued, total: started.elapsed(), bucket_reads };
        // The phases are logged (by the gzip layer) only when debug logging is on.
        let logged = tracing::enabled!(tracing::Level::DEBUG).then(|| result.stats.clone());
        let answer =
            answer(result, request, request.stats.then_some(timings), max_response_bytes, pool.as_ref())?;
        let phases = logged.map(|stats| QueryPhases {
            query: request.query.clone(),
            queued,
            stats,
            encode: answer.encode_time,
            bytes: answer.body.len(),
        });
        Ok(Some((answer.body, phases)))
    };
    if let Some(slot) = service.try_inline() {
        let inline = EngineOptions { inline_points_max: Some(slot.max_points), ..options.clone() };
        // The engine catches its own panics; this catches the encoder's, as the blocking
        // pool's join does.
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&db, inline, &request)))
            .unwrap_or_else(|_| Err(ApiError::Internal("query task panicked".into())));
        drop(slot);
        if let Some(answer) = attempt.transpose() {
            drop(admission);
            return answer.map(respond);
        }
    }
    let answer = crate::api::blocking(move || run(&db, options, &request)).await?;
    drop(admission);
    // Without `inline_points_max` the engine never declines.
    answer.map(respond).ok_or_else(|| ApiError::Internal("query declined outside the async runtime".into()))
}

/// The response for an answer's body, carrying its phases for the log (see [`QueryPhases`]).
fn respond((body, phases): (Vec<u8>, Option<QueryPhases>)) -> Response {
    let mut response = json_bytes(body);
    if let Some(phases) = phases {
        response.extensions_mut().insert(phases);
    }
    response
}

/// Where a successful query's time went, logged at debug level once its answer is compressed
/// (or found not worth compressing) by the gzip layer, which every `/api/v1` read route goes
/// through ([`crate::api::routes`]): it travels there as an extension of the response, never
/// sent, and only when debug logging is on for this module.
#[derive(Debug, Clone)]
pub(crate) struct QueryPhases {
    /// The query's text.
    pub(crate) query: String,
    /// Time waiting for a slot (`execQueueTime`).
    pub(crate) queued: Duration,
    /// The engine's statistics, with its phase timings.
    pub(crate) stats: promql::QueryStats,
    /// Time writing the JSON answer (`strataEncodeTime`).
    pub(crate) encode: Duration,
    /// The answer's size before compression.
    pub(crate) bytes: usize,
}

impl QueryPhases {
    /// Logs the phases; `compress` is the gzip layer's time, `None` if it sent the answer as
    /// it was. Times in microseconds; `eval_us` is evaluation's wall time, which holds
    /// `select_us`; `read_us` is thread time, summed over the query's threads, so it may
    /// exceed `eval_us` when the query pool read in parallel.
    pub(crate) fn log(&self, compress: Option<Duration>) {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let s = &self.stats;
        tracing::debug!(
            query = %self.query,
            queue_us = us(self.queued),
            prepare_us = us(s.prepare_time),
            eval_us = us(s.eval_time),
            select_us = us(s.select_time),
            read_us = us(s.read_time),
            encode_us = us(self.encode),
            compress_us = compress.map(us),
            bytes = self.bytes,
            series = s.series_selected,
            samples = s.samples_read,
            "query phases"
        );
    }
}

/// Runs the query against a snapshot of the database (and on a query node, its writers'
/// recent data) as `scope` sees it; also returns what it read from the bucket.
fn evaluate(
    db: &storage::Db,
    writers: Option<&Arc<crate::query_node::Writers>>,
    scope: &Scope,
    options: EngineOptions,
    request: &QueryRequest,
) -> (Result<QueryResult, promql::Error>, storage::BucketReads) {
    let engine = Engine::new(options);
    let (querier, reads) = crate::query_node::querier(db, writers, scope);
    let result = match request.evaluation {
        Evaluation::Instant { time } => engine.instant(&*querier, &request.query, time),
        Evaluation::Range { start, end, step } => engine.range(&*querier, &request.query, start, end, step),
    };
    (result, reads)
}

/// The API error for an engine error of this request.
fn query_error(request: &QueryRequest, err: promql::Error) -> ApiError {
    match request.evaluation {
        Evaluation::Instant { .. } => instant_error(err),
        Evaluation::Range { .. } => ApiError::from(err),
    }
}

/// Prometheus reports an instant query that does not parse as a bad `query` parameter; a
/// range query's parse errors carry no prefix.
fn instant_error(err: promql::Error) -> ApiError {
    match ApiError::from(err) {
        ApiError::BadData(msg) if is_parse_error(&msg) => {
            ApiError::BadData(format!("invalid parameter \"query\": {msg}"))
        }
        other => other,
    }
}

/// True for messages of the form `<line>:<column>: parse error: ...`.
fn is_parse_error(msg: &str) -> bool {
    let mut parts = msg.splitn(3, ':');
    let is_number =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    is_number(parts.next())
        && is_number(parts.next())
        && parts.next().is_some_and(|r| r.starts_with(" parse error"))
}

/// Where a query's time went before encoding, for `stats`.
#[derive(Debug, Clone, Copy)]
struct Timings {
    queued: Duration,
    total: Duration,
    /// Ranged reads from the bucket and their bytes (`storage::BucketReads`).
    bucket_reads: (u64, u64),
}

/// Answers estimated at this many bytes or more are written in parts on the query pool: half
/// a millisecond of writing on one thread, against tens of microseconds to wake the pool.
const SPLIT_BYTES: usize = 512 * 1024;

/// A query's answer, encoded.
struct Answer {
    body: Vec<u8>,
    /// Time writing the JSON answer up to its statistics (`strataEncodeTime`).
    encode_time: Duration,
}

/// The whole success envelope for a query result: truncated to `limit`, annotations capped as
/// Prometheus caps them, statistics if asked for. An answer estimated (before encoding) or
/// found (after) to be larger than `max_bytes` (0: no limit) is refused with 422 instead. An
/// answer of [`SPLIT_BYTES`] or more is written in parts on `pool` if one is given.
fn answer(
    mut result: QueryResult,
    request: &QueryRequest,
    timings: Option<Timings>,
    max_bytes: usize,
    pool: Option<&promql::QueryPool>,
) -> Result<Answer, ApiError> {
    let began = Instant::now();
    let mut warnings = std::mem::take(&mut result.warnings);
    if let Some(limit) = request.limit
        && truncate(&mut result.value, limit)
    {
        warnings.push(TRUNCATED.to_owned());
    }
    let warnings = cap_annotations(warnings, "warning");
    let infos = cap_annotations(std::mem::take(&mut result.infos), "info");

    let too_large = |size: usize| {
        ApiError::Execution(format!(
            "query answer too large: about {size} bytes (limit: {max_bytes} bytes, --query.max-response-bytes; \
             narrow the selectors or the time range, or raise the limit)"
        ))
    };
    let estimate = estimated_size(&result.value);
    if max_bytes > 0 && estimate > max_bytes {
        return Err(too_large(estimate));
    }
    // Half as much again: points with long float values take more than the estimate's 24
    // bytes, and growing the buffer once copied it whole (7 % of a 3,600-point answer's time);
    // pages the encoder never writes cost no memory.
    let mut out = Vec::with_capacity(estimate.saturating_add(estimate / 2));
    out.extend_from_slice(b"{\"status\":\"success\",\"data\":{");
    let split = pool.filter(|_| estimate >= SPLIT_BYTES).map(|pool| encode::Split { pool, estimate });
    encode::result(&mut out, &result.value, split);
    // The statistics and the annotations after them are a few hundred bytes at most.
    let encode_time = began.elapsed();
    if let Some(timings) = timings {
        out.extend_from_slice(b",\"stats\":");
        stats(&mut out, &result.stats, timings, encode_time);
    }
    out.push(b'}');
    if !warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":");
        encode::string_array(&mut out, &warnings);
    }
    if !infos.is_empty() {
        out.extend_from_slice(b",\"infos\":");
        encode::string_array(&mut out, &infos);
    }
    out.push(b'}');
    if max_bytes > 0 && out.len() > max_bytes {
        return Err(too_large(out.len()));
    }
    Ok(Answer { body: out, encode_time })
}

/// The body the handlers answer a successful evaluation of `request` with (statistics with zero
/// queueing and total times if asked for, no size limit). Public for the `query_api` fuzz
/// target, whose oracle checks that every answer is JSON that carries the engine's values.
pub fn answer_body(result: QueryResult, request: &QueryRequest) -> Result<Vec<u8>, ApiError> {
    let timings = Timings { queued: Duration::ZERO, total: Duration::ZERO, bucket_reads: (0, 0) };
    answer(result, request, request.stats.then_some(timings), 0, None).map(|a| a.body)
}

/// Cuts a vector or matrix to `limit` elements (series for a matrix); true if it did.
fn truncate(value: &mut promql::Value, limit: usize) -> bool {
    match value {
        promql::Value::Vector(v) if v.len() > limit => v.truncate(limit),
        promql::Value::Matrix(m) if m.len() > limit => m.truncate(limit),
        _ => return false,
    }
    true
}

/// At most [`MAX_ANNOTATIONS`], then "N more warning annotations omitted".
fn cap_annotations(mut items: Vec<String>, kind: &str) -> Vec<String> {
    if items.len() > MAX_ANNOTATIONS {
        let omitted = items.len() - MAX_ANNOTATIONS;
        items.truncate(MAX_ANNOTATIONS);
        items.push(format!("{omitted} more {kind} annotations omitted"));
    }
    items
}

/// A guess at the encoded size so large answers are written without reallocating.
fn estimated_size(value: &promql::Value) -> usize {
    const PER_POINT: usize = 24;
    const PER_LABEL_BYTE_OVERHEAD: usize = 6;
    let labels = |l: &storage::Labels| {
        l.iter().map(|l| l.name.len() + l.value.len() + PER_LABEL_BYTE_OVERHEAD).sum::<usize>() + 32
    };
    // A histogram is an object of count and sum plus a 4-element array per bucket.
    let histogram = |h: &storage::FloatHistogram| 64 + (h.positive.len() + h.negative.len() + 1) * 56;
    let body = match value {
        promql::Value::Vector(v) => {
            v.iter().map(|s| labels(&s.labels) + PER_POINT + s.h.as_ref().map_or(0, histogram)).sum()
        }
        promql::Value::Matrix(m) => m
            .iter()
            .map(|s| {
                labels(&s.labels)
                    + s.points.len() * PER_POINT
                    + s.histograms.iter().map(|p| PER_POINT + histogram(&p.h)).sum::<usize>()
            })
            .sum(),
        promql::Value::String { v, .. } => v.len() + PER_POINT,
        promql::Value::Scalar { .. } => PER_POINT,
    };
    body + 256
}

/// Prometheus' `data.stats`: timings in seconds and sample counts. strata's engine reports
/// preparation and evaluation times; sorting happens inside evaluation, so
/// `resultSortTime` is 0. `timings` also carries strata's phases (`strata` names, which
/// Prometheus' cannot take): `strataSelectTime`, selecting series (within `innerEvalTime`);
/// `strataReadTime`, reading and decoding samples, push-down's scans included (thread time,
/// summed over the query's threads, so it may exceed `innerEvalTime`); `strataEncodeTime`,
/// writing this JSON answer up to these statistics (after `execTotalTime`). `samples` also
/// carries strata's explain counters: series matched by selectors, the blocks answered
/// from statistics, blocks decoded and samples decoded by push-down of range aggregations, and
/// the ranged reads from the bucket (`--storage.bucket`: opening files, fetching blocks the
/// local cache lacks) and their bytes.
fn stats(out: &mut Vec<u8>, stats: &promql::QueryStats, timings: Timings, encode_time: Duration) {
    let secs = |out: &mut Vec<u8>, d: Duration| encode::json_number(out, d.as_secs_f64());
    out.extend_from_slice(b"{\"timings\":{\"evalTotalTime\":");
    secs(out, stats.prepare_time + stats.eval_time);
    out.extend_from_slice(b",\"resultSortTime\":0,\"queryPreparationTime\":");
    secs(out, stats.prepare_time);
    out.extend_from_slice(b",\"innerEvalTime\":");
    secs(out, stats.eval_time);
    out.extend_from_slice(b",\"execQueueTime\":");
    secs(out, timings.queued);
    out.extend_from_slice(b",\"execTotalTime\":");
    secs(out, timings.total);
    // strata's own phases: where the evaluation and the answer's time went.
    for (name, d) in [
        ("strataSelectTime", stats.select_time),
        ("strataReadTime", stats.read_time),
        ("strataEncodeTime", encode_time),
    ] {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        secs(out, d);
    }
    out.extend_from_slice(b"},\"samples\":{\"totalQueryableSamples\":");
    encode::integer(out, stats.samples_read);
    out.extend_from_slice(b",\"peakSamples\":");
    encode::integer(out, stats.peak_samples);
    // strata's own explain counters: how much storage push-down answered from block statistics.
    for (name, n) in [
        ("seriesMatched", stats.series_selected),
        ("blocksFromStats", stats.blocks_from_stats),
        ("blocksDecoded", stats.blocks_decoded),
        ("samplesDecoded", stats.samples_decoded),
        ("bucketRangeReads", timings.bucket_reads.0),
        ("bucketBytesRead", timings.bucket_reads.1),
    ] {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        encode::integer(out, n);
    }
    out.extend_from_slice(b"}}");
}

/// `GET|POST /api/v1/format_query`: the query pretty-printed as Prometheus' `Pretty(0)`.
async fn format_query(State(state): State<Arc<AppState>>, params: Params) -> Result<Response, ApiError> {
    let text = with_parsed_query(&state, &params, |expr| match pretty::format(expr, pretty::MAX_BYTES) {
        Some(text) => Ok(serde_json::Value::String(text)),
        None => Err(ApiError::BadData(format!(
            "the formatted query would be longer than {} MiB",
            pretty::MAX_BYTES >> 20
        ))),
    })
    .await?;
    Ok(Success::new(text).into_response())
}

/// `GET|POST /api/v1/parse_query`: the syntax tree as the JSON Prometheus 3's UI reads.
async fn parse_query(State(state): State<Arc<AppState>>, params: Params) -> Result<Response, ApiError> {
    let tree = with_parsed_query(&state, &params, |expr| Ok(ast_json::translate(expr))).await?;
    Ok(Success::new(tree).into_response())
}

/// Parses the `query` parameter with the server's language features and applies `f` to the
/// tree, on a thread with a large stack.
async fn with_parsed_query<F>(state: &AppState, params: &Params, f: F) -> Result<serde_json::Value, ApiError>
where
    F: FnOnce(&Expr) -> Result<serde_json::Value, ApiError> + Send + 'static,
{
    let query = params.get("query").unwrap_or_default().to_owned();
    let engine = Engine::new(state.query().options().clone());
    crate::api::blocking(move || {
        let work = move || -> Result<serde_json::Value, ApiError> {
            let expr = engine.parse(&query).map_err(|e| {
                ApiError::BadData(format!("invalid parameter \"query\": {}", ApiError::from(e)))
            })?;
            f(&expr)
        };
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("promql-parse".into())
                .stack_size(PARSE_STACK_BYTES)
                .spawn_scoped(scope, work)
                .map_err(|e| ApiError::Internal(format!("cannot start parser thread: {e}")))?
                .join()
                .unwrap_or_else(|_| Err(ApiError::Internal("query parsing panicked".into())))
        })
    })
    .await
}
