//! The oracle of the `query_api` fuzz target, shared with `tests/fuzz_corpus.rs`, which
//! replays the committed corpus through it in every `cargo test`.
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
use storage::{Labels, Sample};
use strata::api::params::{Params, parse_duration_ms, parse_time};
use strata::api::query::{Evaluation, MAX_POINTS_PER_SERIES, QueryRequest, ast_json, pretty};

fn store() -> &'static MemStore {
    static STORE: OnceLock<MemStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut s = MemStore::new();
        for (name, job) in [("up", "a"), ("up", "b"), ("http_requests_total", "a")] {
            let samples: Vec<Sample> = (0..40i64).map(|i| Sample::new(i * 15_000, (i % 9) as f64)).collect();
            s.append(&Labels::from_pairs(&[("__name__", name), ("job", job)]), &samples);
        }
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
    if let Err(promql::Error::Execution(msg)) = &result {
        assert!(!msg.contains("panicked"), "{:?}: {msg}", request.query);
    }
}
