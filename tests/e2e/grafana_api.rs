//! What Grafana's Prometheus data source sends, request by request, against the real `strata`
//! binary, with every answer's shape checked the way Grafana reads it.
//!
//! The sequence follows Grafana's own code (pkg/promlib and packages/grafana-prometheus):
//! - "Save & test": `GET /api/v1/status/buildinfo` (an answer without `features` makes Grafana
//!   treat the source as Prometheus rather than Mimir), then the health query, an instant
//!   `1+1` POSTed as a form with `time=4` (the health check's time range is 1 s..4 s).
//! - Explore opening: `label/__name__/values` with `limit=40000` and whole-second `start`/`end`
//!   (the metric list), `labels` POSTed as a form (the label list), `metadata` (help texts).
//! - The label browser: values of one label for one metric (`match[]`), and `series` with
//!   `match[]={__name__!=""}` and `limit=40000`.
//! - A time-series panel: `query_range` POSTed with step-aligned float times and a float step;
//!   a table panel: an instant `query`; the exemplar probe: `query_exemplars` with millisecond
//!   float times.
//! - The Alerting page: `rules` and `alerts` (empty: strata evaluates no rules).
//! - The resource client's fallback: a POST answered 400 or 405 is retried as a GET with the
//!   body's parameters moved to the URL; label values are GET-only in Prometheus (405 on POST).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{Reply, Strata};
use remote::metadata::{MetricMetadata, MetricType};
use remote::prw::{self, Version};
use serde_json::Value;
use storage::{Batch, Labels, Sample};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

const FORM: [(&str, &str); 1] = [("Content-Type", "application/x-www-form-urlencoded")];

/// Scrape interval of the test data, in ms.
const STEP_MS: i64 = 15_000;
/// Samples per series: 30 minutes at 15 s.
const POINTS: i64 = 120;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn form(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap()
}

/// Parses a Prometheus success envelope and returns `data`, failing with the whole answer
/// otherwise.
fn success(what: &str, reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "{what}: {}", reply.body);
    assert_eq!(reply.content_type.as_deref(), Some("application/json"), "{what}");
    let body: Value =
        serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{what}: {e}: {}", reply.body));
    assert_eq!(body["status"], "success", "{what}: {}", reply.body);
    body["data"].clone()
}

/// Checks an error envelope: status, `errorType`, and a non-empty message.
fn error(what: &str, reply: &Reply, status: u16, error_type: &str) {
    assert_eq!(reply.status, status, "{what}: {}", reply.body);
    let body: Value =
        serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{what}: {e}: {}", reply.body));
    assert_eq!(body["status"], "error", "{what}");
    assert_eq!(body["errorType"], error_type, "{what}: {}", reply.body);
    assert!(body["error"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {}", reply.body);
}

fn strings(what: &str, data: &Value) -> Vec<String> {
    let items = data.as_array().unwrap_or_else(|| panic!("{what}: expected an array, got {data}"));
    items
        .iter()
        .map(|v| v.as_str().unwrap_or_else(|| panic!("{what}: {v} is not a string")).to_owned())
        .collect()
}

/// A `[<unix seconds>, "<value>"]` pair, as Prometheus writes samples.
fn sample_pair(what: &str, pair: &Value) -> (f64, f64) {
    let pair = pair.as_array().unwrap_or_else(|| panic!("{what}: sample {pair} is not a pair"));
    assert_eq!(pair.len(), 2, "{what}: {pair:?}");
    let t = pair[0].as_f64().unwrap_or_else(|| panic!("{what}: timestamp {} is not a number", pair[0]));
    let v = pair[1].as_str().unwrap_or_else(|| panic!("{what}: value {} is not a string", pair[1]));
    (t, v.parse().unwrap_or_else(|e| panic!("{what}: value {v}: {e}")))
}

/// Two hosts' CPU counters and `up`, ending at `end_ms`, plus the metadata Prometheus sends.
fn write_fixture(strata: &Strata, end_ms: i64) {
    let mut batch = Batch::new();
    for instance in ["host-a:9100", "host-b:9100"] {
        for (mode, per_second) in [("idle", 0.9), ("user", 0.1)] {
            let labels = Labels::from_pairs(&[
                ("__name__", "node_cpu_seconds_total"),
                ("cpu", "0"),
                ("instance", instance),
                ("job", "node"),
                ("mode", mode),
            ]);
            let samples = (0..POINTS)
                .map(|i| {
                    let t = end_ms - (POINTS - 1 - i) * STEP_MS;
                    Sample::new(t, 1000.0 + per_second * (i * STEP_MS) as f64 / 1000.0)
                })
                .collect();
            batch.push(labels, samples);
        }
        let up = Labels::from_pairs(&[("__name__", "up"), ("instance", instance), ("job", "node")]);
        batch.push(up, (0..POINTS).map(|i| Sample::new(end_ms - (POINTS - 1 - i) * STEP_MS, 1.0)).collect());
    }
    let metadata = [MetricMetadata {
        metric_family_name: "node_cpu_seconds_total".into(),
        metric_type: MetricType::Counter,
        help: "Seconds the CPUs spent in each mode.".into(),
        unit: String::new(),
    }];
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch, &metadata));
    assert_eq!(reply.status, 204, "{}", reply.body);
}

#[test]
fn grafana_data_source_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    // Whole seconds, so every time Grafana derives from it is exact.
    let end_ms = now_ms() / 1000 * 1000;
    write_fixture(&strata, end_ms);
    let (start_s, end_s) = ((end_ms - POINTS * STEP_MS) / 1000, end_ms / 1000);
    let (start, end) = (start_s.to_string(), end_s.to_string());

    // "Save & test": build info decides the flavour; no `features` means plain Prometheus.
    let info = success("buildinfo", &strata.get("/api/v1/status/buildinfo"));
    let version = info["version"].as_str().expect("buildinfo version");
    let major: u32 = version.split('.').next().and_then(|m| m.parse().ok()).expect("semver version");
    assert!(major >= 2, "Grafana needs a Prometheus 2+ version, got {version}");
    assert!(info.get("features").is_none_or(|f| f.as_object().is_some_and(|f| f.is_empty())), "{info}");
    for field in ["revision", "branch", "buildUser", "buildDate", "goVersion"] {
        assert!(info[field].is_string(), "buildinfo.{field}: {info}");
    }

    // The health query.
    let health = success(
        "health 1+1",
        &strata.post("/api/v1/query", &FORM, form(&[("query", "1+1"), ("time", "4")]).as_bytes()),
    );
    assert_eq!(health["resultType"], "scalar");
    assert_eq!(sample_pair("health", &health["result"]), (4.0, 2.0));

    // Explore: the metric list (label values are GET-only in Grafana's client).
    let path = format!(
        "/api/v1/label/__name__/values?{}",
        form(&[("start", &start), ("end", &end), ("limit", "40000")])
    );
    let names = strings("metric names", &success("metric names", &strata.get(&path)));
    assert_eq!(names, ["node_cpu_seconds_total", "up"]);

    // The label list, POSTed as a form.
    let body = form(&[("limit", "40000"), ("start", &start), ("end", &end)]);
    let labels =
        strings("labels", &success("labels", &strata.post("/api/v1/labels", &FORM, body.as_bytes())));
    assert_eq!(labels, ["__name__", "cpu", "instance", "job", "mode"]);

    // Help texts for the metric list.
    let metadata = success("metadata", &strata.get("/api/v1/metadata"));
    let cpu = &metadata["node_cpu_seconds_total"];
    assert_eq!(cpu[0]["type"], "counter", "{metadata}");
    assert_eq!(cpu[0]["help"], "Seconds the CPUs spent in each mode.", "{metadata}");
    assert!(cpu[0]["unit"].is_string(), "{metadata}");

    // The label browser: one label's values for one metric, then the series of everything.
    let path = format!(
        "/api/v1/label/mode/values?{}",
        form(&[
            ("limit", "40000"),
            ("start", &start),
            ("end", &end),
            ("match[]", "{__name__=\"node_cpu_seconds_total\"}")
        ])
    );
    assert_eq!(strings("mode values", &success("mode values", &strata.get(&path))), ["idle", "user"]);
    let path = format!("/api/v1/label/mode/values?{}", form(&[("match[]", "up"), ("limit", "40000")]));
    assert!(strings("mode values of up", &success("mode values of up", &strata.get(&path))).is_empty());
    let body = form(&[("start", &start), ("end", &end), ("match[]", "{__name__!=\"\"}"), ("limit", "40000")]);
    let series = success("series", &strata.post("/api/v1/series", &FORM, body.as_bytes()));
    let series = series.as_array().expect("series array");
    assert_eq!(series.len(), 6, "{series:?}");
    for s in series {
        let labels = s.as_object().expect("series are label objects");
        assert!(labels.values().all(Value::is_string), "{s}");
        assert!(labels.contains_key("__name__") && labels.contains_key("instance"), "{s}");
    }

    // A time-series panel: step-aligned float times, float step, POSTed.
    let step = 60;
    let (from, to) = ((start_s + 300) / step * step, end_s / step * step);
    let body = form(&[
        ("query", "sum by (mode) (rate(node_cpu_seconds_total[2m]))"),
        ("start", &format!("{from}")),
        ("end", &format!("{to}")),
        ("step", &format!("{step}")),
    ]);
    let panel = success("query_range", &strata.post("/api/v1/query_range", &FORM, body.as_bytes()));
    assert_eq!(panel["resultType"], "matrix");
    let result = panel["result"].as_array().expect("matrix result");
    assert_eq!(result.len(), 2, "{panel}");
    for (series, (mode, expected_rate)) in result.iter().zip([("idle", 1.8), ("user", 0.2)]) {
        assert_eq!(series["metric"], serde_json::json!({ "mode": mode }));
        let values = series["values"].as_array().expect("values");
        assert_eq!(values.len() as i64, (to - from) / step + 1, "{mode}");
        for (i, pair) in values.iter().enumerate() {
            let (t, v) = sample_pair("query_range", pair);
            assert_eq!(t, (from + i as i64 * step) as f64, "{mode}: timestamps are the step grid");
            assert!((v - expected_rate).abs() < 1e-9, "{mode} at {t}: {v}");
        }
    }

    // A table panel: an instant query at the panel's end.
    let body = form(&[("query", "up"), ("time", &format!("{}.5", end_s))]);
    let table = success("instant", &strata.post("/api/v1/query", &FORM, body.as_bytes()));
    assert_eq!(table["resultType"], "vector");
    let rows = table["result"].as_array().expect("vector result");
    assert_eq!(rows.len(), 2, "{table}");
    for row in rows {
        assert_eq!(row["metric"]["__name__"], "up");
        assert_eq!(sample_pair("instant", &row["value"]), (end_s as f64 + 0.5, 1.0));
    }

    // The exemplar probe, with millisecond float times.
    let body = form(&[
        ("query", "node_cpu_seconds_total"),
        ("start", &format!("{start_s}.123")),
        ("end", &format!("{end_s}.456")),
    ]);
    let exemplars = success("exemplars", &strata.post("/api/v1/query_exemplars", &FORM, body.as_bytes()));
    assert!(exemplars.is_array(), "{exemplars}");

    // The fallback: label values refuse POST with 405, and the GET retry with the body's
    // parameters in the URL answers.
    let body = form(&[("limit", "40000"), ("start", &start), ("end", &end)]);
    let post = strata.post("/api/v1/label/job/values", &FORM, body.as_bytes());
    assert_eq!(post.status, 405, "{}", post.body);
    let retry = strata.get(&format!("/api/v1/label/job/values?{body}"));
    assert_eq!(strings("job values", &success("job values retry", &retry)), ["node"]);

    // A bad query is a 400 envelope by POST and by the GET retry alike.
    let body = form(&[("query", "sum(rate(x[5m]"), ("time", "4")]);
    error("bad query by POST", &strata.post("/api/v1/query", &FORM, body.as_bytes()), 400, "bad_data");
    error("bad query by GET", &strata.get(&format!("/api/v1/query?{body}")), 400, "bad_data");

    // The Alerting page ("Manage alerts via Alerting UI", on by default) lists the source's
    // rules and alerts: strata has none, and a 404 would show as "Errors loading rules".
    let rules = success("rules", &strata.get("/api/v1/rules"));
    assert_eq!(rules["groups"], Value::Array(Vec::new()), "{rules}");
    let alerts = success("alerts", &strata.get("/api/v1/alerts"));
    assert_eq!(alerts["alerts"], Value::Array(Vec::new()), "{alerts}");
}

/// Every endpoint answers a malformed parameter with 400 and the Prometheus error envelope.
#[test]
fn malformed_parameters_are_bad_data_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    let cases: &[(&str, &str)] = &[
        ("/api/v1/query", "query=up&time=yesterday"),
        ("/api/v1/query", "time=4"),
        ("/api/v1/query", "query=up&timeout=soon"),
        ("/api/v1/query", "query=up{"),
        ("/api/v1/query", "query=up&limit=-1"),
        ("/api/v1/query_range", "query=up&start=1&end=x&step=15"),
        ("/api/v1/query_range", "query=up&start=10&end=1&step=15"),
        ("/api/v1/query_range", "query=up&start=1&end=10&step=0"),
        ("/api/v1/query_range", "query=up&start=1&end=10"),
        ("/api/v1/query_range", "query=up&start=0&end=100000000&step=1"),
        ("/api/v1/series", "start=1&end=10"),
        ("/api/v1/series", "match[]=up{&start=1"),
        ("/api/v1/series", "match[]={job=~\".*\"}"),
        ("/api/v1/series", "match[]=up&start=x"),
        ("/api/v1/labels", "match[]=up&end=x"),
        ("/api/v1/labels", "limit=many"),
        ("/api/v1/label/job/values", "match[]=)"),
        ("/api/v1/label/job/values", "start=x"),
        ("/api/v1/query_exemplars", "query=up&start=x"),
        ("/api/v1/query_exemplars", "query=up{&start=1&end=2"),
        ("/api/v1/format_query", "query=up{"),
        ("/api/v1/parse_query", "query=sum("),
        ("/api/v1/metadata", "limit=x"),
    ];
    // Prometheus answers an empty range on the metadata endpoints with an empty list, not an error.
    for path in ["/api/v1/labels", "/api/v1/series?match[]=up&", "/api/v1/label/job/values"] {
        let sep = if path.ends_with('&') { "" } else { "?" };
        let reply = strata.get(&format!("{path}{sep}start=10&end=1").replace("[]", "%5B%5D"));
        assert_eq!((reply.status, reply.body.as_str()), (200, r#"{"status":"success","data":[]}"#), "{path}");
    }
    for (path, raw) in cases {
        // Written readable above; sent percent-encoded as a client would.
        let pairs: Vec<(&str, &str)> =
            raw.split('&').map(|kv| kv.split_once('=').unwrap_or((kv, ""))).collect();
        let query = form(&pairs);
        let what = format!("GET {path}?{raw}");
        error(&what, &strata.get(&format!("{path}?{query}")), 400, "bad_data");
        if !path.starts_with("/api/v1/label/") && !path.starts_with("/api/v1/metadata") {
            let what = format!("POST {path} {raw}");
            error(&what, &strata.post(path, &FORM, query.as_bytes()), 400, "bad_data");
        }
    }
}
