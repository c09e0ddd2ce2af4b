//! Router tests for the query endpoints: requests go through the full router (gzip layer
//! included) into a database holding the series of tests/golden/api/data.om, and answers are
//! compared byte for byte with what Prometheus 2.42 answered for the same data
//! (tests/golden/api/*.json), or checked for Prometheus 3's messages.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use storage::{Batch, Db, Labels, Options, Sample};
use tower::ServiceExt;

use super::{Evaluation, QueryConfig, QueryRequest, QueryService, encode};
use crate::server::router;
use crate::state::AppState;

/// A database with the golden series, and the router serving it.
struct Fixture {
    _dir: tempfile::TempDir,
    state: Arc<AppState>,
}

/// Samples at 1000 s and 1060 s per `kind`, as in tests/golden/api/data.om.
fn golden_series() -> Vec<(Labels, [f64; 2])> {
    let kinds: [(&str, [f64; 2]); 8] = [
        ("nan", [f64::NAN, f64::NAN]),
        ("pinf", [f64::INFINITY, f64::INFINITY]),
        ("ninf", [f64::NEG_INFINITY, f64::NEG_INFINITY]),
        ("big", [1e21, 1.5e300]),
        ("small", [1e-7, -2.5e-300]),
        ("edge", [999999999999999900000.0, 0.000001]),
        ("frac", [0.1, 123456.789]),
        ("negzero", [-0.0, 1234567890123456789.0]),
    ];
    let mut series: Vec<(Labels, [f64; 2])> = kinds
        .iter()
        .map(|(kind, values)| (Labels::from_pairs(&[("__name__", "golden"), ("kind", kind)]), *values))
        .collect();
    let path = r#"<a&b>"q"\ \u2028"#;
    series.push((Labels::from_pairs(&[("__name__", "golden"), ("kind", "esc"), ("path", path)]), [1.0, 2.0]));
    series
}

fn fixture_with(config: &QueryConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(Options::new(dir.path())).unwrap();
    let mut batch = Batch::new();
    for (labels, [a, b]) in golden_series() {
        batch.push(labels, vec![Sample::new(1_000_000, a), Sample::new(1_060_000, b)]);
    }
    db.append(&batch).unwrap();
    let state = AppState::new().with_query(QueryService::new(config));
    state.set_db(Arc::new(db));
    Fixture { _dir: dir, state: Arc::new(state) }
}

fn fixture() -> Fixture {
    fixture_with(&QueryConfig::default())
}

/// One answer: status, headers and body bytes (decompressed if gzipped).
struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
    /// A gzipped body's XFL header byte (RFC 1952: 4 = the fastest level, 2 = the best).
    gzip_xfl: Option<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

async fn send(state: &Arc<AppState>, request: Request<Body>) -> Answer {
    let response = router(Arc::clone(state)).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await.unwrap();
    let gzipped = headers.get(header::CONTENT_ENCODING).is_some_and(|v| v == "gzip");
    let body = if gzipped {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        text
    } else {
        String::from_utf8(bytes.to_vec()).unwrap()
    };
    let gzip_xfl = gzipped.then(|| bytes[8]);
    Answer { status, headers, body, gzip_xfl }
}

async fn get(state: &Arc<AppState>, uri: &str) -> Answer {
    send(state, Request::get(uri).body(Body::empty()).unwrap()).await
}

async fn post_form(state: &Arc<AppState>, path: &str, form: &str) -> Answer {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .unwrap();
    send(state, request).await
}

fn golden(name: &str) -> String {
    let path = format!("{}/tests/golden/api/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")).trim_end().to_owned()
}

/// Asserts a 400 `bad_data` envelope with exactly `message`.
fn assert_bad_data(answer: &Answer, message: &str) {
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(answer.json(), json!({"status": "error", "errorType": "bad_data", "error": message}));
}

#[tokio::test]
async fn answers_match_prometheus_byte_for_byte() {
    let f = fixture();
    let cases = [
        ("instant_vector", "/api/v1/query?query=golden&time=1030"),
        ("range_matrix", "/api/v1/query_range?query=golden&start=1000&end=1060.5&step=30.25"),
        ("instant_scalar", "/api/v1/query?query=1.5&time=1030.5"),
        ("instant_string", "/api/v1/query?query=%22hello%22&time=1030"),
        ("negative_time", "/api/v1/query?query=vector(1)&time=-1.5"),
        ("instant_matrix", "/api/v1/query?query=golden%5B2m%5D&time=1060"),
        ("range_scalar", "/api/v1/query_range?query=time()%2F7&start=1000&end=1003&step=1"),
        ("scalar_fixed_notation", "/api/v1/query?query=1e21&time=1030.25"),
        ("string_escaped", "/api/v1/query?query=%22%3Ca%3E%22&time=1030.25"),
    ];
    for (name, uri) in cases {
        let answer = get(&f.state, uri).await;
        assert_eq!(answer.status, StatusCode::OK, "{name}: {}", answer.body);
        assert_eq!(answer.headers[header::CONTENT_TYPE], "application/json", "{name}");
        assert_eq!(answer.body, golden(name), "{name}");
    }
}

#[tokio::test]
async fn form_posts_answer_like_gets() {
    let f = fixture();
    let answer = post_form(&f.state, "/api/v1/query", "query=golden&time=1030").await;
    assert_eq!(answer.body, golden("instant_vector"));
    let answer =
        post_form(&f.state, "/api/v1/query_range", "query=golden&start=1000&end=1060.5&step=30.25").await;
    assert_eq!(answer.body, golden("range_matrix"));
    // The body wins over the URL, as Go's FormValue.
    let request = Request::post("/api/v1/query?query=nonexistent&time=1")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("query=golden&time=1030"))
        .unwrap();
    assert_eq!(send(&f.state, request).await.body, golden("instant_vector"));
}

#[tokio::test]
async fn every_bad_parameter_is_a_400_with_prometheus_message() {
    let f = fixture();
    let cases: [(&str, &str); 16] = [
        ("/api/v1/query", "invalid parameter \"query\": 1:1: parse error: no expression found in input"),
        (
            "/api/v1/query?query=1&time=abc",
            "invalid parameter \"time\": invalid time value for 'time': cannot parse \"abc\" to a valid timestamp",
        ),
        (
            "/api/v1/query?query=1&timeout=abc",
            "invalid parameter \"timeout\": cannot parse \"abc\" to a valid duration",
        ),
        (
            "/api/v1/query?query=sum(up",
            "invalid parameter \"query\": 1:7: parse error: unclosed left parenthesis",
        ),
        (
            "/api/v1/query?query=foo%7B",
            "invalid parameter \"query\": 1:5: parse error: unexpected end of input inside braces",
        ),
        (
            "/api/v1/query?query=1&lookback_delta=abc",
            "error parsing lookback delta duration: cannot parse \"abc\" to a valid duration",
        ),
        ("/api/v1/query?query=1&limit=-1", "invalid parameter \"limit\": limit must be non-negative"),
        (
            "/api/v1/query_range?query=1&start=10&end=5&step=1",
            "invalid parameter \"end\": end timestamp must not be before start time",
        ),
        (
            "/api/v1/query_range?query=1&start=0&end=5&step=0",
            "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. \
             Try a positive integer",
        ),
        (
            "/api/v1/query_range?query=1&start=0&end=5&step=abc",
            "invalid parameter \"step\": cannot parse \"abc\" to a valid duration",
        ),
        (
            "/api/v1/query_range?query=1&start=0&end=100000&step=1",
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution \
             (?step=XX)",
        ),
        (
            "/api/v1/query_range?query=1&end=5&step=1",
            "invalid parameter \"start\": cannot parse \"\" to a valid timestamp",
        ),
        (
            "/api/v1/query_range?query=1&start=x&end=5&step=1",
            "invalid parameter \"start\": cannot parse \"x\" to a valid timestamp",
        ),
        (
            "/api/v1/query_range?query=%22a%22&start=0&end=5&step=1",
            "invalid expression type \"string\" for range query, must be Scalar or instant Vector",
        ),
        (
            "/api/v1/query_range?query=golden%5B1m%5D&start=0&end=5&step=1",
            "invalid expression type \"range vector\" for range query, must be Scalar or instant Vector",
        ),
        (
            "/api/v1/query_range?query=sum(up&start=0&end=5&step=1",
            "1:7: parse error: unclosed left parenthesis",
        ),
    ];
    for (uri, message) in cases {
        assert_bad_data(&get(&f.state, uri).await, message);
    }
    // 11,000 steps is still allowed (the check is "more than").
    assert_eq!(
        get(&f.state, "/api/v1/query_range?query=1&start=0&end=11000&step=1").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn limit_truncates_with_prometheus_3_warning() {
    let f = fixture();
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030&limit=2").await;
    let body = answer.json();
    assert_eq!(body["data"]["result"].as_array().unwrap().len(), 2);
    assert_eq!(body["warnings"], json!(["results truncated due to limit"]));
    let answer = get(&f.state, "/api/v1/query_range?query=golden&start=1000&end=1060&step=30&limit=1").await;
    let body = answer.json();
    assert_eq!(body["data"]["result"].as_array().unwrap().len(), 1);
    assert_eq!(body["data"]["result"][0]["values"].as_array().unwrap().len(), 3);
    assert_eq!(body["warnings"], json!(["results truncated due to limit"]));
    // A limit the result fits in adds nothing.
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030&limit=9").await;
    assert!(answer.json().get("warnings").is_none(), "{}", answer.body);
}

#[tokio::test]
async fn lookback_delta_parameter_overrides_the_server_default() {
    let f = fixture();
    // 40 s after the last sample: inside the default 5m lookback, outside 30s.
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1100").await;
    assert_eq!(answer.json()["data"]["result"].as_array().unwrap().len(), 9);
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1100&lookback_delta=30s").await;
    assert_eq!(answer.json()["data"]["result"], json!([]));
    // 0 means the server's default, as in Prometheus.
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1100&lookback_delta=0").await;
    assert_eq!(answer.json()["data"]["result"].as_array().unwrap().len(), 9);
}

#[tokio::test]
async fn stats_have_prometheus_shape() {
    let f = fixture();
    for stats in ["1", "all"] {
        let answer = get(&f.state, &format!("/api/v1/query?query=golden&time=1030&stats={stats}")).await;
        let stats = &answer.json()["data"]["stats"];
        for timing in [
            "evalTotalTime",
            "resultSortTime",
            "queryPreparationTime",
            "innerEvalTime",
            "execQueueTime",
            "execTotalTime",
            // strata's phases, under names Prometheus' cannot take.
            "strataSelectTime",
            "strataReadTime",
            "strataEncodeTime",
        ] {
            let seconds = stats["timings"][timing].as_f64();
            assert!(seconds.is_some_and(|s| s >= 0.0), "{timing}: {stats}");
        }
        // Selecting is part of evaluating, on the query's own thread.
        let timing = |name: &str| stats["timings"][name].as_f64().unwrap();
        assert!(timing("strataSelectTime") <= timing("innerEvalTime"), "{stats}");
        assert_eq!(stats["samples"]["peakSamples"], 9, "{stats}");
        assert!(stats["samples"]["totalQueryableSamples"].as_u64().unwrap() >= 9, "{stats}");
    }
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030").await;
    assert!(answer.json()["data"].get("stats").is_none());
}

#[test]
fn stats_carry_the_engine_s_phases_and_the_encoder_s() {
    let stats = promql::QueryStats {
        prepare_time: Duration::from_millis(250),
        eval_time: Duration::from_secs(3),
        select_time: Duration::from_millis(1500),
        read_time: Duration::from_millis(4750),
        ..promql::QueryStats::default()
    };
    let timings = super::Timings {
        queued: Duration::from_millis(125),
        total: Duration::from_secs(4),
        bucket_reads: (3, 4096),
    };
    let mut out = Vec::new();
    super::stats(&mut out, &stats, timings, Duration::from_millis(500));
    let stats: Value = serde_json::from_slice(&out).unwrap();
    let timings = &stats["timings"];
    assert_eq!(timings["innerEvalTime"], 3.0, "{stats}");
    assert_eq!(timings["strataSelectTime"], 1.5, "{stats}");
    // Thread time: more than the evaluation's wall time when the pool read in parallel.
    assert_eq!(timings["strataReadTime"], 4.75, "{stats}");
    assert_eq!(timings["strataEncodeTime"], 0.5, "{stats}");
    assert_eq!(stats["samples"]["bucketRangeReads"], 3, "{stats}");
    assert_eq!(stats["samples"]["bucketBytesRead"], 4096, "{stats}");

    // The answer reports the encoding time it measured itself.
    let request = QueryRequest {
        query: "1".into(),
        evaluation: Evaluation::Instant { time: 0 },
        timeout_ms: None,
        lookback_delta_ms: None,
        limit: None,
        stats: true,
    };
    let result = promql::QueryResult {
        value: promql::Value::Scalar { t: 0, v: 1.0 },
        warnings: Vec::new(),
        infos: Vec::new(),
        annotations: Vec::new(),
        stats: promql::QueryStats::default(),
    };
    let timings = super::Timings { queued: Duration::ZERO, total: Duration::ZERO, bucket_reads: (0, 0) };
    let answer = super::answer(result, &request, Some(timings), 0, None).unwrap();
    let body: Value = serde_json::from_slice(&answer.body).unwrap();
    let encode = body["data"]["stats"]["timings"]["strataEncodeTime"].as_f64();
    assert_eq!(encode, Some(answer.encode_time.as_secs_f64()), "{body}");
}

#[tokio::test]
async fn stats_explain_push_down() {
    let f = fixture();
    let answer = get(&f.state, "/api/v1/query?query=max_over_time(golden[1h])&time=3600&stats=all").await;
    let samples = &answer.json()["data"]["stats"]["samples"];
    // Nothing is flushed yet: both samples of each of the 9 series are read from the head, and
    // the statistics say so (no block, 18 samples read one by one).
    assert_eq!(samples["seriesMatched"], 9, "{samples}");
    assert_eq!(samples["totalQueryableSamples"], 18, "{samples}");
    assert_eq!((&samples["blocksFromStats"], &samples["blocksDecoded"]), (&json!(0), &json!(0)), "{samples}");
    assert_eq!(samples["samplesDecoded"], 18, "{samples}");

    // Flushed, each series is one block inside the hour (0 s, 3600 s]: the window of an
    // hourly step covers it, and its statistics answer.
    f.state.db().unwrap().flush().unwrap();
    let answer = get(&f.state, "/api/v1/query?query=max_over_time(golden[1h])&time=3600&stats=all").await;
    let samples = &answer.json()["data"]["stats"]["samples"];
    assert_eq!(samples["seriesMatched"], 9, "{samples}");
    assert_eq!(samples["blocksFromStats"], 9, "{samples}");
    assert_eq!((&samples["blocksDecoded"], &samples["samplesDecoded"]), (&json!(0), &json!(0)), "{samples}");
}

#[tokio::test]
async fn annotations_are_returned_as_infos_and_warnings() {
    let f = fixture();
    let answer = get(&f.state, "/api/v1/query?query=rate(golden%5B2m%5D)&time=1060").await;
    let body = answer.json();
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let infos = body["infos"].as_array().unwrap_or_else(|| panic!("no infos: {}", answer.body));
    assert!(
        infos.iter().any(|i| i.as_str().unwrap().starts_with("PromQL info: metric might not be a counter")),
        "{infos:?}"
    );
}

#[tokio::test]
async fn annotations_are_capped_at_ten_of_each() {
    let many: Vec<String> = (0..13).map(|i| format!("w{i}")).collect();
    let capped = super::cap_annotations(many, "warning");
    assert_eq!(capped.len(), 11);
    assert_eq!(capped[10], "3 more warning annotations omitted");
    assert_eq!(super::cap_annotations(vec!["a".into()], "info"), vec!["a".to_owned()]);
}

#[tokio::test]
async fn gzip_is_used_when_accepted_from_one_packet_on() {
    let f = fixture();
    let gzip_get =
        |uri: &str| Request::get(uri).header(header::ACCEPT_ENCODING, "gzip").body(Body::empty()).unwrap();
    // 1,135 bytes: below a packet, sent as is.
    let answer =
        send(&f.state, gzip_get("/api/v1/query_range?query=golden&start=1000&end=1060.5&step=30.25")).await;
    assert!(answer.headers.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(answer.body, golden("range_matrix"));
    assert!(answer.body.len() < crate::api::gzip::MIN_BYTES);
    // 61 points a series: gzipped.
    let answer =
        send(&f.state, gzip_get("/api/v1/query_range?query=golden&start=1000&end=1060&step=1")).await;
    assert_eq!(answer.headers[header::CONTENT_ENCODING], "gzip");
    assert_eq!(answer.json()["status"], "success");
    assert!(answer.body.len() > crate::api::gzip::MIN_BYTES);
    // At the fastest level (crate::api::gzip), which the header's XFL byte says.
    assert_eq!(answer.gzip_xfl, Some(4));
}

#[tokio::test]
async fn timeouts_and_unavailability_use_the_right_status() {
    let f = fixture();
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030&timeout=0").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.json()["errorType"], "timeout");
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030&timeout=1m").await;
    assert_eq!(answer.status, StatusCode::OK);

    let opening = Arc::new(AppState::new());
    let answer = get(&opening, "/api/v1/query?query=1").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.json()["errorType"], "unavailable");
}

#[tokio::test]
async fn sample_limit_is_an_execution_error() {
    let config = QueryConfig {
        options: promql::EngineOptions { max_samples: 2, ..promql::EngineOptions::default() },
        ..QueryConfig::default()
    };
    let f = fixture_with(&config);
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030").await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", answer.body);
    assert_eq!(answer.json()["errorType"], "execution");
}

#[tokio::test]
async fn series_and_response_size_limits_are_execution_errors_naming_their_flag() {
    // 9 golden series; one selector may match at most 5.
    let config = QueryConfig {
        options: promql::EngineOptions { max_series: 5, ..promql::EngineOptions::default() },
        ..QueryConfig::default()
    };
    let f = fixture_with(&config);
    let answer = get(&f.state, "/api/v1/query?query=golden&time=1030").await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", answer.body);
    assert!(answer.body.contains("--query.max-series"), "{}", answer.body);
    let small = get(&f.state, "/api/v1/query?query=golden%7Bkind%3D%22frac%22%7D&time=1030").await;
    assert_eq!(small.status, StatusCode::OK, "{}", small.body);

    // An answer of 9 series does not fit in 600 bytes; one series does.
    let config = QueryConfig { max_response_bytes: 600, ..QueryConfig::default() };
    let f = fixture_with(&config);
    let answer = get(&f.state, "/api/v1/query_range?query=golden&start=1000&end=1060&step=1").await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", answer.body);
    assert_eq!(answer.json()["errorType"], "execution");
    assert!(answer.body.contains("--query.max-response-bytes"), "{}", answer.body);
    let small = get(&f.state, "/api/v1/query?query=golden%7Bkind%3D%22frac%22%7D&time=1030").await;
    assert_eq!(small.status, StatusCode::OK, "{}", small.body);
}

#[tokio::test]
async fn feature_flags_reach_the_parser() {
    let f = fixture();
    let uri = "/api/v1/query?query=sort_by_label(golden,%22kind%22)&time=1030";
    assert_eq!(get(&f.state, uri).await.status, StatusCode::BAD_REQUEST);
    let config = QueryConfig {
        options: promql::EngineOptions { experimental_functions: true, ..promql::EngineOptions::default() },
        ..QueryConfig::default()
    };
    let f = fixture_with(&config);
    let answer = get(&f.state, uri).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.json()["data"]["result"][0]["metric"]["kind"], "big");
}

#[tokio::test]
async fn format_query_prettifies_as_prometheus() {
    let f = fixture();
    let answer =
        get(&f.state, "/api/v1/format_query?query=sum(rate(foo%7Ba%3D%22b%22%7D%5B5m%5D))by(job)").await;
    assert_eq!(answer.body, r#"{"status":"success","data":"sum by (job) (rate(foo{a=\"b\"}[5m]))"}"#);
    // Answers of Prometheus 2.42 for queries longer than a line.
    let cases = [
        (
            "histogram_quantile(0.99, sum by (le, job) (rate(http_request_duration_seconds_bucket{handler=\"/api/v1/query_range\"}[5m])))",
            "histogram_quantile(\n  0.99,\n  sum by (le, job) (rate(http_request_duration_seconds_bucket{handler=\"/api/v1/query_range\"}[5m]))\n)",
        ),
        (
            "-(rate(some_really_long_metric_name_that_goes_on_and_on_total{label_one=\"value_one_is_longer\"}[5m]) + 12345)",
            "-(\n    rate(some_really_long_metric_name_that_goes_on_and_on_total{label_one=\"value_one_is_longer\"}[5m])\n  +\n    12345\n)",
        ),
        (
            "max_over_time((rate(some_really_long_metric_name_that_goes_on_and_on_total{label_one=\"value_one\"}[5m]) * on (instance) group_left (node) node_info)[1h:5m] offset 1d)",
            "max_over_time(\n  (\n      rate(some_really_long_metric_name_that_goes_on_and_on_total{label_one=\"value_one\"}[5m])\n    * on (instance) group_left (node)\n      node_info\n  )[1h:5m] offset 1d\n)",
        ),
        // Matchers sorted and joined by a bare comma; infinities signed (Prometheus 2.42 too).
        ("up{job=\"a\",instance=\"b\"}", "up{instance=\"b\",job=\"a\"}"),
        ("{__name__=~\"a.*\",job=\"x\"}", "{__name__=~\"a.*\",job=\"x\"}"),
        ("x > +Inf", "x > +Inf"),
        ("x > -Inf", "x > -Inf"),
    ];
    for (query, want) in cases {
        let answer = post_form(
            &f.state,
            "/api/v1/format_query",
            &serde_urlencoded::to_string([("query", query)]).unwrap(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        assert_eq!(answer.json()["data"], want, "{query}");
    }
    assert_bad_data(
        &get(&f.state, "/api/v1/format_query?query=sum(").await,
        "invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis",
    );
}

#[tokio::test]
async fn parse_query_returns_prometheus_3_tree() {
    let f = fixture();
    let query = "sum by (job) (rate(foo{a=\"b\"}[5m] offset 1m)) > bool on (job) group_left (x) -bar";
    let answer =
        post_form(&f.state, "/api/v1/parse_query", &serde_urlencoded::to_string([("query", query)]).unwrap())
            .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let want = json!({
        "type": "binaryExpr",
        "op": ">",
        "bool": true,
        "matching": {
            "card": "many-to-one", "labels": ["job"], "on": true, "include": ["x"],
            "fillValues": {"lhs": null, "rhs": null},
        },
        "lhs": {
            "type": "aggregation", "op": "sum", "grouping": ["job"], "without": false, "param": null,
            "expr": {
                "type": "call",
                "func": {"name": "rate", "argTypes": ["matrix"], "variadic": 0, "returnType": "vector"},
                "args": [{
                    "type": "matrixSelector", "name": "foo", "range": 300000, "offset": 60000,
                    "matchers": [
                        {"name": "a", "type": "=", "value": "b"},
                        {"name": "__name__", "type": "=", "value": "foo"},
                    ],
                    "timestamp": null, "startOrEnd": null, "anchored": false, "smoothed": false,
                }],
            },
        },
        "rhs": {
            "type": "unaryExpr", "op": "-",
            "expr": {
                "type": "vectorSelector", "name": "bar", "offset": 0,
                "matchers": [{"name": "__name__", "type": "=", "value": "bar"}],
                "timestamp": null, "startOrEnd": null, "anchored": false, "smoothed": false,
            },
        },
    });
    assert_eq!(answer.json()["data"], want);
    let answer = get(&f.state, "/api/v1/parse_query?query=-1e21").await;
    assert_eq!(answer.json()["data"], json!({"type": "numberLiteral", "val": "-1000000000000000000000"}));
    let answer = get(&f.state, "/api/v1/parse_query?query=x%20@%20start()").await;
    assert_eq!(answer.json()["data"]["startOrEnd"], "start");
    assert_bad_data(
        &get(&f.state, "/api/v1/parse_query?query=foo%7B").await,
        "invalid parameter \"query\": 1:5: parse error: unexpected end of input inside braces",
    );
}

/// Encodes a matrix of `series` × `points` and checks it is valid JSON of that shape;
/// returns the encoding time and the encoded size.
fn encode_matrix(series: usize, points: usize) -> (Duration, usize) {
    let matrix: Vec<promql::Series> = (0..series)
        .map(|i| promql::Series {
            labels: Labels::from_pairs(&[
                ("__name__", "node_cpu_seconds_total"),
                ("cpu", &(i % 64).to_string()),
                ("instance", &format!("host-{}.example.com:9100", i / 64)),
                ("job", "node"),
                ("mode", "user"),
            ]),
            points: (0..points)
                .map(|j| promql::Point { t: 1_700_000_000_000 + j as i64 * 15_000, v: (i * j) as f64 * 0.37 })
                .collect(),
            histograms: Vec::new(),
        })
        .collect();
    let value = promql::Value::Matrix(matrix);
    let started = std::time::Instant::now();
    let mut out = Vec::with_capacity(super::estimated_size(&value));
    out.push(b'{');
    encode::result(&mut out, &value, None);
    out.push(b'}');
    let took = started.elapsed();
    let parsed: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(parsed["result"].as_array().unwrap().len(), series);
    assert_eq!(parsed["result"][series - 1]["values"].as_array().unwrap().len(), points);
    (took, out.len())
}

#[test]
fn large_matrices_encode_to_valid_json() {
    encode_matrix(100, 100);
}

/// The measurement reported in docs: `STRATA_SLOW_TESTS=1 cargo test --release -p strata
/// encode_speed -- --nocapture`.
#[test]
fn encode_speed_10k_series_by_1k_points() {
    if std::env::var_os("STRATA_SLOW_TESTS").is_none() {
        return;
    }
    let (took, bytes) = encode_matrix(10_000, 1_000);
    println!(
        "encoded 10,000 series x 1,000 points ({} MB) in {took:?}: {:.1} M points/s, {:.0} MB/s",
        bytes >> 20,
        10.0 / took.as_secs_f64(),
        (bytes >> 20) as f64 / took.as_secs_f64()
    );
}

/// A query answers the same, byte for byte, whether it runs inline on a runtime thread, is
/// declined there and rerun on the blocking pool, or goes to the pool directly; errors too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_and_blocking_evaluation_answer_alike() {
    let inline = fixture();
    let declines = fixture_with(&QueryConfig { inline_max_points: 1, ..QueryConfig::default() });
    let blocking = fixture_with(&QueryConfig { inline_max_points: 0, ..QueryConfig::default() });
    for uri in [
        "/api/v1/query?query=golden&time=1030",
        "/api/v1/query?query=sum(golden)&time=1030",
        "/api/v1/query_range?query=golden&start=1000&end=1060&step=7",
        "/api/v1/query_range?query=max_over_time(golden%7Bkind%3D%22frac%22%7D%5B1m%5D)&start=1000&end=1060&step=5",
        "/api/v1/query?query=count(%7Bkind%3D~%22n.*%22%7D)&time=1030",
        "/api/v1/query?query=vector(1)&time=1030",
        "/api/v1/query?query=sum(&time=1030",
        "/api/v1/query?query=golden%20%2B%20on()%20golden&time=1030",
    ] {
        let want = get(&blocking.state, uri).await;
        for f in [&inline, &declines] {
            let got = get(&f.state, uri).await;
            assert_eq!((got.status, &got.body), (want.status, &want.body), "{uri}");
        }
    }
}

/// Of two runtime threads one may evaluate inline at a time; the other stays free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_inline_slot_per_spare_runtime_thread() {
    let service = QueryService::new(&QueryConfig::default());
    let slot = service.try_inline().expect("one spare thread of two");
    assert!(service.try_inline().is_none());
    drop(slot);
    assert!(service.try_inline().is_some());
    let off = QueryService::new(&QueryConfig { inline_max_points: 0, ..QueryConfig::default() });
    assert!(off.try_inline().is_none());
}

#[tokio::test]
async fn a_single_runtime_thread_never_evaluates_inline() {
    assert!(QueryService::new(&QueryConfig::default()).try_inline().is_none());
}

#[test]
fn an_answer_written_in_parts_is_the_same_bytes() {
    let pool = promql::QueryPool::new(2);
    let histogram = storage::FloatHistogram { count: 3.0, sum: 1.5, ..storage::FloatHistogram::default() };
    let labels = |i: usize| Labels::from_pairs(&[("__name__", "m"), ("i", &i.to_string()), ("q", "\"<x>\"")]);
    for n in [0, 1, 2, 3, 7, 8, 9, 100, 1001] {
        let matrix = promql::Value::Matrix(
            (0..n)
                .map(|i| promql::Series {
                    labels: labels(i),
                    points: (0..i % 4)
                        .map(|j| promql::Point { t: j as i64 * 1_500, v: (i * j) as f64 / 3.0 })
                        .collect(),
                    histograms: (0..i % 3)
                        .map(|j| promql::HistogramPoint { t: 10_000 + j as i64, h: histogram.clone() })
                        .collect(),
                })
                .collect(),
        );
        let vector = promql::Value::Vector(
            (0..n)
                .map(|i| promql::Sample {
                    labels: labels(i),
                    t: 1_234,
                    v: i as f64 * 0.1,
                    h: (i % 5 == 0).then(|| histogram.clone()),
                })
                .collect(),
        );
        for value in [matrix, vector] {
            let (mut whole, mut parts) = (Vec::new(), Vec::new());
            encode::result(&mut whole, &value, None);
            encode::result(&mut parts, &value, Some(encode::Split { pool: &pool, estimate: 64 }));
            assert_eq!(String::from_utf8_lossy(&parts), String::from_utf8_lossy(&whole), "{n} elements");
        }
    }
}
