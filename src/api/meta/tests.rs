//! Router tests of the metadata endpoints: requests go through the full router (gzip, body
//! limits, extractors) with `oneshot`, against a real database in a temporary directory.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use remote::metadata::{MetricMetadata, MetricType};
use serde_json::{Value, json};
use storage::{Batch, Db, Labels, Options, Sample};
use tower::ServiceExt;

use crate::server::router;
use crate::state::AppState;

/// Seconds of the recent samples; `old_metric` is a day older.
const BASE_S: i64 = 1_700_000_000;

struct Fixture {
    state: Arc<AppState>,
    _dir: tempfile::TempDir,
}

fn series(pairs: &[(&str, &str)], t_s: i64) -> (Labels, Vec<Sample>) {
    (Labels::from_pairs(pairs), vec![Sample::new(t_s * 1000, 1.0), Sample::new((t_s + 30) * 1000, 2.0)])
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(Options::new(dir.path())).unwrap();
    let mut batch = Batch::new();
    for (labels, samples) in [
        series(&[("__name__", "up"), ("job", "api"), ("instance", "a")], BASE_S),
        series(&[("__name__", "up"), ("job", "web"), ("instance", "b")], BASE_S),
        series(&[("__name__", "http_requests_total"), ("job", "api"), ("method", "GET")], BASE_S),
        series(&[("__name__", "http_requests_total"), ("job", "api"), ("method", "POST")], BASE_S),
        series(&[("__name__", "utf8_metric"), ("http.method", "GET")], BASE_S),
        series(&[("__name__", "old_metric"), ("job", "old"), ("zone", "z1")], BASE_S - 86_400),
    ] {
        batch.push(labels, samples);
    }
    db.append(&batch).unwrap();
    let state = Arc::new(AppState::new());
    state.set_db(Arc::new(db));
    state.metadata().update(
        None,
        vec![
            MetricMetadata {
                metric_family_name: "up".into(),
                metric_type: MetricType::Gauge,
                help: "Whether the target is up.".into(),
                unit: String::new(),
            },
            MetricMetadata {
                metric_family_name: "http_requests_total".into(),
                metric_type: MetricType::Counter,
                help: "Requests.".into(),
                unit: "requests".into(),
            },
        ],
    );
    Fixture { state, _dir: dir }
}

/// Sends a request; a `body` makes it a form POST. Returns the status and the JSON body
/// (`Value::Null` for an empty body).
async fn call(state: &Arc<AppState>, method: Method, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    let request = request.body(body.map_or_else(Body::empty, |b| Body::from(b.to_string()))).unwrap();
    let response = router(Arc::clone(state)).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
    let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
    (status, value)
}

async fn get(state: &Arc<AppState>, uri: &str) -> (StatusCode, Value) {
    call(state, Method::GET, uri, None).await
}

async fn post(state: &Arc<AppState>, path: &str, form: &str) -> (StatusCode, Value) {
    call(state, Method::POST, path, Some(form)).await
}

fn ok(data: Value) -> (StatusCode, Value) {
    (StatusCode::OK, json!({"status": "success", "data": data}))
}

fn truncated(data: Value) -> (StatusCode, Value) {
    (
        StatusCode::OK,
        json!({"status": "success", "data": data, "warnings": ["results truncated due to limit"]}),
    )
}

fn bad(message: &str) -> (StatusCode, Value) {
    (StatusCode::BAD_REQUEST, json!({"status": "error", "errorType": "bad_data", "error": message}))
}

/// `start`/`end` around the recent samples only.
fn recent() -> String {
    format!("start={}&end={}", BASE_S - 60, BASE_S + 60)
}

#[tokio::test]
async fn series_by_get_and_form_post() {
    let f = fixture();
    let want = ok(json!([
        {"__name__": "up", "instance": "a", "job": "api"},
        {"__name__": "up", "instance": "b", "job": "web"},
    ]));
    assert_eq!(get(&f.state, "/api/v1/series?match[]=up").await, want);
    assert_eq!(post(&f.state, "/api/v1/series", "match%5B%5D=up").await, want);
    // Several selectors are a union, sorted by labels, without duplicates.
    let union = "/api/v1/series?match[]=up{job=\"web\"}&match[]={job=\"api\"}&match[]=up";
    let (status, body) =
        get(&f.state, &union.replace('"', "%22").replace('{', "%7B").replace('}', "%7D")).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<String> = body["data"].as_array().unwrap().iter().map(|s| s.to_string()).collect();
    assert_eq!(names.len(), 4, "{body}");
    assert!(names.windows(2).all(|w| w[0] != w[1]));
    assert_eq!(body["data"][0]["__name__"], "http_requests_total");
}

#[tokio::test]
async fn series_honour_the_time_range_and_limit() {
    let f = fixture();
    let all = "match[]=%7Bjob%3D~%22.%2B%22%7D";
    let (_, body) = get(&f.state, &format!("/api/v1/series?{all}")).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 5, "{body}");
    let (_, body) = get(&f.state, &format!("/api/v1/series?{all}&{}", recent())).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 4, "old_metric has no data in range: {body}");
    let old = format!("/api/v1/series?match[]=old_metric&start={}&end={}", BASE_S - 86_400, BASE_S - 86_400);
    assert_eq!(
        get(&f.state, &old).await,
        ok(json!([{"__name__": "old_metric", "job": "old", "zone": "z1"}]))
    );
    assert_eq!(
        get(&f.state, "/api/v1/series?match[]=up&limit=1").await,
        truncated(json!([{"__name__": "up", "instance": "a", "job": "api"}]))
    );
    // A limit the answer fits in adds no warning.
    let (_, body) = get(&f.state, "/api/v1/series?match[]=up&limit=2").await;
    assert!(body.get("warnings").is_none(), "{body}");
    // Nothing selected, or end before start (Prometheus answers that with nothing, too): [].
    assert_eq!(get(&f.state, "/api/v1/series?match[]=nope").await, ok(json!([])));
    assert_eq!(get(&f.state, "/api/v1/series?match[]=up&start=10&end=5").await, ok(json!([])));
}

#[tokio::test]
async fn series_parameter_errors() {
    let f = fixture();
    assert_eq!(get(&f.state, "/api/v1/series").await, bad("no match[] parameter provided"));
    assert_eq!(post(&f.state, "/api/v1/series", "start=1").await, bad("no match[] parameter provided"));
    let (status, body) = get(&f.state, "/api/v1/series?match[]=up%7B").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errorType"], "bad_data");
    assert_eq!(
        get(&f.state, "/api/v1/series?match[]=%7Bjob%3D~%22.*%22%7D").await,
        bad("match[] must contain at least one non-empty matcher")
    );
    assert_eq!(
        get(&f.state, "/api/v1/series?match[]=up&start=yesterday").await,
        bad("invalid parameter \"start\": cannot parse \"yesterday\" to a valid timestamp")
    );
    assert_eq!(
        get(&f.state, "/api/v1/series?match[]=up&end=x").await,
        bad("invalid parameter \"end\": cannot parse \"x\" to a valid timestamp")
    );
    let (status, body) = get(&f.state, "/api/v1/series?match[]=up&limit=-1").await;
    assert_eq!(
        (status, body["error"].as_str().unwrap().starts_with("invalid parameter \"limit\"")),
        (StatusCode::BAD_REQUEST, true)
    );
    let (status, _) = get(&f.state, "/api/v1/series?match[]=up&limit=many").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn label_names_with_and_without_selectors() {
    let f = fixture();
    let everything = json!(["__name__", "http.method", "instance", "job", "method", "zone"]);
    assert_eq!(get(&f.state, "/api/v1/labels").await, ok(everything.clone()));
    assert_eq!(post(&f.state, "/api/v1/labels", "").await, ok(everything));
    assert_eq!(
        get(&f.state, &format!("/api/v1/labels?{}", recent())).await,
        ok(json!(["__name__", "http.method", "instance", "job", "method"]))
    );
    assert_eq!(get(&f.state, "/api/v1/labels?match[]=up").await, ok(json!(["__name__", "instance", "job"])));
    // A union over selectors.
    assert_eq!(
        post(&f.state, "/api/v1/labels", "match[]=up&match[]=old_metric").await,
        ok(json!(["__name__", "instance", "job", "zone"]))
    );
    assert_eq!(get(&f.state, "/api/v1/labels?limit=2").await, truncated(json!(["__name__", "http.method"])));
    assert_eq!(get(&f.state, "/api/v1/labels?match[]=nope").await, ok(json!([])));
    assert_eq!(get(&f.state, "/api/v1/labels?start=10&end=5").await, ok(json!([])));
    let (status, _) = get(&f.state, "/api/v1/labels?match[]=up(").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        get(&f.state, "/api/v1/labels?start=x").await,
        bad("invalid parameter \"start\": cannot parse \"x\" to a valid timestamp")
    );
}

#[tokio::test]
async fn label_values_sorted_filtered_and_limited() {
    let f = fixture();
    assert_eq!(get(&f.state, "/api/v1/label/job/values").await, ok(json!(["api", "old", "web"])));
    assert_eq!(
        get(&f.state, &format!("/api/v1/label/job/values?{}", recent())).await,
        ok(json!(["api", "web"]))
    );
    assert_eq!(
        get(&f.state, "/api/v1/label/__name__/values?match[]=%7Bjob%3D%22api%22%7D").await,
        ok(json!(["http_requests_total", "up"]))
    );
    assert_eq!(
        get(
            &f.state,
            "/api/v1/label/instance/values?match[]=up%7Bjob%3D%22web%22%7D&match[]=up%7Bjob%3D%22api%22%7D"
        )
        .await,
        ok(json!(["a", "b"]))
    );
    assert_eq!(get(&f.state, "/api/v1/label/job/values?limit=1").await, truncated(json!(["api"])));
    assert_eq!(get(&f.state, "/api/v1/label/job/values?limit=40000").await, ok(json!(["api", "old", "web"])));
    assert_eq!(get(&f.state, "/api/v1/label/nope/values").await, ok(json!([])));
    assert_eq!(get(&f.state, "/api/v1/label/job/values?match[]=nope").await, ok(json!([])));
    // Prometheus serves label values on GET only; Grafana retries a 405 with GET.
    let (status, _) = post(&f.state, "/api/v1/label/job/values", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn label_names_in_the_path_may_be_u_escaped() {
    let f = fixture();
    assert_eq!(get(&f.state, "/api/v1/label/U__http_2e_method/values").await, ok(json!(["GET"])));
    // A literal name that merely starts like an escape and does not decode is taken as it is.
    assert_eq!(get(&f.state, "/api/v1/label/U__bad_zz_/values").await, ok(json!([])));
    assert_eq!(get(&f.state, "/api/v1/label/U__/values").await, bad("invalid label name: \"\""));
    let (status, body) = get(&f.state, "/api/v1/label/%FF/values").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().unwrap().starts_with("invalid label name: "), "{body}");
    // The name is checked before the other parameters, as in Prometheus.
    assert_eq!(get(&f.state, "/api/v1/label/U__/values?start=x").await, bad("invalid label name: \"\""));
    assert_eq!(
        get(&f.state, "/api/v1/label/job/values?end=x").await,
        bad("invalid parameter \"end\": cannot parse \"x\" to a valid timestamp")
    );
}

#[tokio::test]
async fn metadata_as_prometheus_shapes_it() {
    let f = fixture();
    let both = json!({
        "http_requests_total": [{"type": "counter", "help": "Requests.", "unit": "requests"}],
        "up": [{"type": "gauge", "help": "Whether the target is up.", "unit": ""}],
    });
    assert_eq!(get(&f.state, "/api/v1/metadata").await, ok(both.clone()));
    assert_eq!(get(&f.state, "/api/v1/metadata?limit=-1&limit_per_metric=1").await, ok(both));
    assert_eq!(
        get(&f.state, "/api/v1/metadata?metric=up").await,
        ok(json!({"up": [{"type": "gauge", "help": "Whether the target is up.", "unit": ""}]}))
    );
    let (_, body) = get(&f.state, "/api/v1/metadata?limit=1").await;
    assert_eq!(body["data"].as_object().unwrap().len(), 1, "{body}");
    assert_eq!(get(&f.state, "/api/v1/metadata?limit=0").await, ok(json!({})));
    assert_eq!(get(&f.state, "/api/v1/metadata?metric=nope").await, ok(json!({})));
    assert_eq!(get(&f.state, "/api/v1/metadata?limit=x").await, bad("limit must be a number"));
    assert_eq!(
        get(&f.state, "/api/v1/metadata?limit_per_metric=few").await,
        bad("limit_per_metric must be a number")
    );
}

#[tokio::test]
async fn exemplars_validate_like_prometheus_and_are_empty() {
    let f = fixture();
    assert_eq!(get(&f.state, "/api/v1/query_exemplars?query=up").await, ok(json!([])));
    // Grafana's probe: form POST with millisecond times.
    assert_eq!(
        post(
            &f.state,
            "/api/v1/query_exemplars",
            "query=rate(up%5B5m%5D)&start=1700000000.123&end=1700000600.456"
        )
        .await,
        ok(json!([]))
    );
    // No selector in the query: 204 without a body.
    assert_eq!(
        get(&f.state, "/api/v1/query_exemplars?query=1%2B1").await,
        (StatusCode::NO_CONTENT, Value::Null)
    );
    assert_eq!(
        get(&f.state, "/api/v1/query_exemplars?query=up&start=10&end=5").await,
        bad("end timestamp must not be before start timestamp")
    );
    assert_eq!(
        get(&f.state, "/api/v1/query_exemplars?query=up&start=x").await,
        bad("invalid parameter \"start\": cannot parse \"x\" to a valid timestamp")
    );
    let (status, body) = get(&f.state, "/api/v1/query_exemplars?query=up(").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().contains("parse error"), "{body}");
    let (status, _) = get(&f.state, "/api/v1/query_exemplars").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn tsdb_status_counts_the_index() {
    let f = fixture();
    let (status, body) = get(&f.state, "/api/v1/status/tsdb").await;
    assert_eq!(status, StatusCode::OK);
    let data = &body["data"];
    let head = &data["headStats"];
    assert_eq!(head["numSeries"], 6);
    // __name__ 4 values, job 3, instance 2, method 2, http.method 1, zone 1.
    assert_eq!(head["numLabelPairs"], 13);
    assert_eq!(head["minTime"], (BASE_S - 86_400) * 1000);
    assert_eq!(head["maxTime"], (BASE_S + 30) * 1000);
    assert_eq!(head["chunkCount"], 6);
    assert_eq!(
        data["seriesCountByMetricName"],
        json!([
            {"name": "http_requests_total", "value": 2},
            {"name": "up", "value": 2},
            {"name": "old_metric", "value": 1},
            {"name": "utf8_metric", "value": 1},
        ])
    );
    assert_eq!(data["labelValueCountByLabelName"][0], json!({"name": "__name__", "value": 4}));
    assert_eq!(data["seriesCountByLabelValuePair"][0], json!({"name": "job=api", "value": 3}));
    let names_bytes = "http_requests_total".len() + "up".len() + "old_metric".len() + "utf8_metric".len();
    assert_eq!(data["memoryInBytesByLabelName"][0], json!({"name": "__name__", "value": names_bytes}));

    let (_, body) = get(&f.state, "/api/v1/status/tsdb?limit=1").await;
    assert_eq!(body["data"]["seriesCountByLabelValuePair"].as_array().unwrap().len(), 1);
    for limit in ["0", "-3", "x"] {
        assert_eq!(
            get(&f.state, &format!("/api/v1/status/tsdb?limit={limit}")).await,
            bad("limit must be a positive number")
        );
    }
}

#[tokio::test]
async fn an_empty_database_answers_empty_lists() {
    let dir = tempfile::tempdir().unwrap();
    let state = Arc::new(AppState::new());
    state.set_db(Arc::new(Db::open(Options::new(dir.path())).unwrap()));
    assert_eq!(get(&state, "/api/v1/labels").await, ok(json!([])));
    assert_eq!(get(&state, "/api/v1/label/job/values").await, ok(json!([])));
    assert_eq!(get(&state, "/api/v1/series?match[]=up").await, ok(json!([])));
    assert_eq!(get(&state, "/api/v1/metadata").await, ok(json!({})));
    let (_, body) = get(&state, "/api/v1/status/tsdb").await;
    let mut data = body["data"].clone();
    // strata's added `seriesLimits` names the current UTC day; the rest is fixed.
    let limits = data.as_object_mut().unwrap().remove("seriesLimits").unwrap();
    assert_eq!((limits["maxSeries"].as_u64(), limits["seriesCreatedToday"].as_u64()), (Some(0), Some(0)));
    assert_eq!(
        data,
        json!({
            "headStats": {"numSeries": 0, "numLabelPairs": 0, "chunkCount": 0, "minTime": i64::MAX, "maxTime": i64::MIN},
            "seriesCountByMetricName": [],
            "labelValueCountByLabelName": [],
            "memoryInBytesByLabelName": [],
            "seriesCountByLabelValuePair": [],
            "seriesCreatedTodayByMetricName": [],
            "seriesRejectedTodayByMetricName": [],
        })
    );
}

#[tokio::test]
async fn storage_endpoints_are_unavailable_while_the_database_opens() {
    let state = Arc::new(AppState::new());
    for uri in
        ["/api/v1/labels", "/api/v1/label/job/values", "/api/v1/series?match[]=up", "/api/v1/status/tsdb"]
    {
        let (status, body) = get(&state, uri).await;
        assert_eq!(
            (status, &body["errorType"]),
            (StatusCode::SERVICE_UNAVAILABLE, &json!("unavailable")),
            "{uri}"
        );
    }
}
