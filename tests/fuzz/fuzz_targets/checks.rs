//! The oracle of the `query_api` fuzz target, shared with `tests/fuzz_corpus.rs`, which
//! replays the named inputs (`tests/fuzz/regressions/`) through it in every `cargo test`.
//!
//! It drives the query API's parameter handling end to end, as `/api/v1/query`,
//! `/api/v1/query_range`, `/api/v1/format_query` and `/api/v1/parse_query` run it: the URL
//! query string and form body are merged ([`Params`]), `time`/`start`/`end` (unix seconds or
//! RFC 3339), `step`/`timeout`/`lookback_delta` (seconds or `1h30m`), `limit` and `match[]` are
//! parsed and checked, and an accepted request is parsed, pretty-printed, translated to the
//! JSON tree and evaluated over a small in-memory store with small limits. Nothing may panic;
//! accepted parameters must satisfy the checks the handlers promise.

use std::sync::OnceLock;
use std::time::Duration;

use promql::parser::duration::format_duration_ms;
use promql::{Engine, EngineOptions};
use storage::mem::MemStore;
use storage::{FloatHistogram, HistogramSample, Labels, Sample};
use strata::api::params::{Params, parse_duration_ms, parse_time};
use strata::api::query::{Evaluation, MAX_POINTS_PER_SERIES, QueryRequest, answer_body, ast_json, pretty};

/// Three float series and a native histogram counter (with a reset) at a 15 s interval from t = 0,
/// so answers carry both kinds of sample.
fn store() -> &'static MemStore {
    static STORE: OnceLock<MemStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut s = MemStore::new();
        for (name, job) in [("up", "a"), ("up", "b"), ("http_requests_total", "a")] {
            let samples: Vec<Sample> = (0..40i64).map(|i| Sample::new(i * 15_000, (i % 9) as f64)).collect();
            s.append(&Labels::from_pairs(&[("__name__", name), ("job", job)]), &samples);
        }
        let histograms: Vec<HistogramSample> = (0..40i64)
            .map(|i| {
                let n = (i % 25) as f64;
                let positive = if n == 0.0 { vec![] } else { vec![(0, n), (2, 2.0 * n)] };
                let h =
                    FloatHistogram { count: 3.0 * n, sum: 1.5 * n, positive, ..FloatHistogram::default() };
                HistogramSample { t: i * 15_000, h }
            })
            .collect();
        s.append_histograms(&Labels::from_pairs(&[("__name__", "rpc_seconds"), ("job", "a")]), &histograms);
        s
    })
}

/// The whole check for one input.
pub fn query_api(data: &[u8]) {
    // The URL query string, then optionally a newline and the form body (a raw newline never
    // appears in either; clients percent-encode it).
    let (url, form) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let Ok(url) = std::str::from_utf8(url) else { return };
    let Ok(params) = Params::from_parts(Some(url), form) else { return };

    // The helpers on their own, as the metadata endpoints use them.
    let _ = params.limit();
    let _ = params.time_range();
    if let Ok(sets) = params.matcher_sets(false) {
        assert!(sets.iter().all(|set| set.iter().any(|m| !m.matches_empty())));
    }
    for name in ["time", "start", "end"] {
        if let Some(v) = params.get(name) {
            let _ = parse_time(v);
        }
    }
    for name in ["step", "timeout", "lookback_delta"] {
        if let Some(v) = params.get(name)
            && let Ok(ms) = parse_duration_ms(v)
        {
            if v.parse::<f64>().is_ok() {
                // Float seconds: refused unless they fit in int64 nanoseconds, as in Prometheus.
                assert!(ms.unsigned_abs() <= i64::MAX as u64 / 1_000_000 + 1, "{v:?} -> {ms}");
            } else {
                // A duration string has no sign, and prints back to the same duration.
                assert!(ms >= 0, "{v:?} -> {ms}");
                let printed = format_duration_ms(ms);
                assert_eq!(parse_duration_ms(&printed), Ok(ms), "{v:?} printed as {printed:?}");
            }
        }
    }

    let instant = QueryRequest::instant(&params, 300_000);
    let range = QueryRequest::range(&params);
    if let Ok(r) = &range {
        let Evaluation::Range { start, end, step } = r.evaluation else { panic!("not a range") };
        assert!(start <= end && step > 0);
        assert!(end.saturating_sub(start) / step <= MAX_POINTS_PER_SERIES);
    }
    for request in [instant, range].into_iter().flatten() {
        run(&request);
    }
}

/// What the handlers do with an accepted request, with small limits so the fuzzer explores
/// parameters rather than slow queries.
fn run(request: &QueryRequest) {
    let mut opts = EngineOptions {
        experimental_functions: true,
        duration_expressions: true,
        max_samples: 10_000,
        timeout: Duration::from_millis(250),
        ..EngineOptions::default()
    };
    if let Some(ms) = request.lookback_delta_ms.filter(|ms| *ms > 0) {
        opts.lookback_delta_ms = ms;
    }
    if let Some(ms) = request.timeout_ms {
        opts.timeout = opts.timeout.min(Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
    }
    let engine = Engine::new(opts);
    let query = request.query.clone();
    let parse_engine = engine.clone();
    // format_query and parse_query, on a thread with the handlers' stack.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            if let Ok(expr) = parse_engine.parse(&query) {
                let _ = pretty::format(&expr, pretty::MAX_BYTES);
                let _ = ast_json::translate(&expr);
            }
        })
        .expect("spawn")
        .join()
        .expect("format_query and parse_query do not panic");
    let result = match request.evaluation {
        Evaluation::Instant { time } => engine.instant(store(), &request.query, time),
        Evaluation::Range { start, end, step } => engine.range(store(), &request.query, start, end, step),
    };
    match result {
        Ok(result) => check_answer(result, request),
        Err(promql::Error::Execution(msg)) => {
            assert!(!msg.contains("panicked"), "{:?}: {msg}", request.query)
        }
        Err(_) => {}
    }
}

/// The answer the handlers would send is JSON in Prometheus' shape and carries the engine's
/// values: labels (any bytes `label_replace` made of them), float values bit for bit (NaN as
/// any NaN), histogram counts and sums, times to the millisecond, `limit` applied.
fn check_answer(result: promql::QueryResult, request: &QueryRequest) {
    use promql::Value;
    let query = &request.query;
    let value = result.value.clone();
    let body = answer_body(result, request)
        .unwrap_or_else(|e| panic!("{query:?}: no answer without a size limit: {e:?}"));
    let json: serde_json::Value =
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{query:?}: the answer is not JSON: {e}"));
    assert_eq!(json["status"], "success", "{query:?}");
    let data = &json["data"];
    let limit = request.limit.unwrap_or(usize::MAX);
    let items = |kind: &str| {
        assert_eq!(data["resultType"], kind, "{query:?}");
        data["result"].as_array().unwrap_or_else(|| panic!("{query:?}: result is not an array"))
    };
    match &value {
        Value::Scalar { t, v } => {
            let r = items("scalar");
            check_time(query, &r[0], *t);
            check_float(query, &r[1], *v);
        }
        Value::String { t, v } => {
            let r = items("string");
            check_time(query, &r[0], *t);
            assert_eq!(r[1].as_str(), Some(v.as_str()), "{query:?}");
        }
        Value::Vector(samples) => {
            let r = items("vector");
            assert_eq!(r.len(), samples.len().min(limit), "{query:?}");
            for (j, s) in r.iter().zip(samples) {
                check_labels(query, &j["metric"], &s.labels);
                match &s.h {
                    None => check_point(query, &j["value"], s.t, s.v),
                    Some(h) => check_histogram(query, &j["histogram"], s.t, h),
                }
            }
        }
        Value::Matrix(series) => {
            let r = items("matrix");
            assert_eq!(r.len(), series.len().min(limit), "{query:?}");
            for (j, s) in r.iter().zip(series) {
                check_labels(query, &j["metric"], &s.labels);
                let points = j["values"].as_array().map_or(&[][..], |a| a.as_slice());
                assert_eq!(points.len(), s.points.len(), "{query:?}");
                for (jp, p) in points.iter().zip(&s.points) {
                    check_point(query, jp, p.t, p.v);
                }
                let hists = j["histograms"].as_array().map_or(&[][..], |a| a.as_slice());
                assert_eq!(hists.len(), s.histograms.len(), "{query:?}");
                for (jh, p) in hists.iter().zip(&s.histograms) {
                    check_histogram(query, jh, p.t, &p.h);
                }
            }
        }
    }
}

fn check_labels(query: &str, json: &serde_json::Value, labels: &Labels) {
    let map = json.as_object().unwrap_or_else(|| panic!("{query:?}: metric is not an object"));
    assert_eq!(map.len(), labels.len(), "{query:?}: {json}");
    for l in labels.iter() {
        assert_eq!(map.get(&*l.name).and_then(|v| v.as_str()), Some(&*l.value), "{query:?}");
    }
}

/// `[<seconds>, "<value>"]`.
fn check_point(query: &str, json: &serde_json::Value, t: i64, v: f64) {
    check_time(query, &json[0], t);
    check_float(query, &json[1], v);
}

/// `[<seconds>, {"count": "..", "sum": "..", "buckets": [[rule, "lower", "upper", "count"], ..]}]`.
fn check_histogram(query: &str, json: &serde_json::Value, t: i64, h: &FloatHistogram) {
    check_time(query, &json[0], t);
    let object = &json[1];
    check_float(query, &object["count"], h.count);
    check_float(query, &object["sum"], h.sum);
    for bucket in object["buckets"].as_array().map_or(&[][..], |a| a.as_slice()) {
        assert!(bucket[0].is_u64(), "{query:?}: {bucket}");
        for k in 1..4 {
            assert!(bucket[k].as_str().is_some_and(|s| s.parse::<f64>().is_ok()), "{query:?}: {bucket}");
        }
    }
}

/// Times are seconds with millisecond decimals; checked where an `f64` holds them exactly enough.
fn check_time(query: &str, json: &serde_json::Value, t: i64) {
    let secs = json.as_f64().unwrap_or_else(|| panic!("{query:?}: time {json} is not a number"));
    if t.unsigned_abs() < 1 << 50 {
        assert_eq!((secs * 1000.0).round(), t as f64, "{query:?}: time {json} for {t} ms");
    }
}

/// Values are strings Go's `strconv.ParseFloat` reads back (`NaN`, `+Inf`, `-Inf`, digits).
fn check_float(query: &str, json: &serde_json::Value, v: f64) {
    let text = json.as_str().unwrap_or_else(|| panic!("{query:?}: value {json} is not a string"));
    let parsed: f64 = text.parse().unwrap_or_else(|_| panic!("{query:?}: value {text:?} is not a number"));
    assert!(
        parsed.to_bits() == v.to_bits() || (parsed.is_nan() && v.is_nan()),
        "{query:?}: {text:?} for {v:?}"
    );
}
