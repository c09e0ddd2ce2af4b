//! Cardinality limits on the real `strata` binary over HTTP: remote write and line protocol
//! hitting each of `--series-max`, `--series-per-metric-max` and `--new-series-per-day-max`.
//! The new series beyond a limit are refused with a 400 naming the limit, everything else in
//! the request is stored, the refusals are counted in `/metrics`, and `/api/v1/status/tsdb`
//! names the metric that creates series.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::Strata;
use remote::prw::{self, Version};
use serde_json::Value;
use storage::{Batch, Labels, Sample};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A remote-write 1.0 request with one sample at `t` for each series `(metric, id)`.
fn remote_write(strata: &Strata, series: &[(&str, &str)], t: i64) -> crate::common::Reply {
    let mut batch = Batch::new();
    for &(metric, id) in series {
        batch.push(Labels::from_pairs(&[("__name__", metric), ("id", id)]), vec![Sample::new(t, 1.0)]);
    }
    strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch, &[]))
}

/// The value of the `/metrics` sample line that is exactly `series`.
fn metric(strata: &Strata, series: &str) -> f64 {
    let text = strata.get("/metrics").body;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
}

/// `data` of a successful API answer.
fn api(strata: &Strata, path: &str) -> Value {
    let reply = strata.get(path);
    assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    body["data"].clone()
}

/// Number of series matching `selector` with a sample in the last hour.
fn series_count(strata: &Strata, selector: &str) -> usize {
    let t = now_ms() as f64 / 1000.0;
    let path = format!("/api/v1/series?match[]={selector}&start={}&end={}", t - 3600.0, t + 60.0);
    api(strata, &path).as_array().unwrap().len()
}

/// Samples of `selector` in the last hour, summed over series.
fn sample_count(strata: &Strata, selector: &str) -> f64 {
    let t = now_ms() as f64 / 1000.0 + 1.0;
    let query = format!("sum(count_over_time({selector}[1h]))");
    let query: String = query.bytes().map(|b| format!("%{b:02X}")).collect();
    let data = api(strata, &format!("/api/v1/query?query={query}&time={t}"));
    data["result"][0]["value"][1].as_str().unwrap().parse().unwrap()
}

fn start(args: &[&str]) -> (tempfile::TempDir, Strata) {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start_with(dir.path(), args);
    strata.wait_ready();
    (dir, strata)
}

#[test]
fn series_per_metric_limit_refuses_new_series_and_names_the_offender() {
    let (_dir, mut strata) = start(&["--series-per-metric-max", "2"]);
    let t = now_ms();
    let reply = remote_write(&strata, &[("req", "1"), ("req", "2")], t - 2000);
    assert_eq!(reply.status, 204, "{}", reply.body);

    // One existing series, two new ones over the limit, one new series of another metric.
    let reply = remote_write(&strata, &[("req", "1"), ("req", "3"), ("req", "4"), ("other", "1")], t - 1000);
    assert_eq!(reply.status, 400, "{}", reply.body);
    for needle in
        ["max_series_per_metric (2)", "metric \"req\"", "id=\"3\"", "the other 2 samples were stored"]
    {
        assert!(reply.body.contains(needle), "{needle:?} not in {}", reply.body);
    }
    assert_eq!(series_count(&strata, "req"), 2);
    assert_eq!(sample_count(&strata, "req{id=\"1\"}"), 2.0);
    assert_eq!(series_count(&strata, "other"), 1);

    // Line protocol: line 3 creates the third series of `lp_v`.
    let lines = format!("lp,host=a v=1 {t}\nlp,host=b v=1 {t}\nlp,host=c v=1 {t}\nlp,host=a v=2 {}\n", t + 1);
    let reply = strata.post("/write?db=x&precision=ms", &[], lines.as_bytes());
    assert_eq!(reply.status, 400, "{}", reply.body);
    for needle in ["partial write", "max_series_per_metric (2)", "lp_v", "line 3", "dropped=1"] {
        assert!(reply.body.contains(needle), "{needle:?} not in {}", reply.body);
    }
    assert_eq!(sample_count(&strata, "lp_v"), 3.0);

    assert_eq!(metric(&strata, "strata_series_rejected_total{limit=\"max_series_per_metric\"}"), 3.0);
    assert_eq!(metric(&strata, "strata_series_rejected_total{limit=\"max_series\"}"), 0.0);
    assert_eq!(metric(&strata, "strata_ingest_samples_rejected_total{reason=\"series_limit\"}"), 3.0);

    let status = api(&strata, "/api/v1/status/tsdb");
    // Prometheus' fields are unchanged ...
    assert_eq!(status["headStats"]["numSeries"], 5);
    assert_eq!(status["seriesCountByMetricName"][0]["name"], "lp_v");
    // ... and the added ones name who creates and who is refused.
    assert_eq!(status["seriesRejectedTodayByMetricName"][0], serde_json::json!({"name": "req", "value": 2}));
    let created = status["seriesCreatedTodayByMetricName"].as_array().unwrap();
    assert!(created.contains(&serde_json::json!({"name": "req", "value": 2})), "{created:?}");
    assert_eq!(status["seriesLimits"]["maxSeriesPerMetric"], 2);
    assert_eq!(status["seriesLimits"]["seriesCreatedToday"], 5);
    assert_eq!(status["seriesLimits"]["seriesRejectedTotal"]["max_series_per_metric"], 3);
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

#[test]
fn series_max_refuses_any_new_series_once_reached() {
    let (_dir, mut strata) = start(&["--series-max", "3"]);
    let t = now_ms();
    let reply = remote_write(&strata, &[("a", "1"), ("b", "1"), ("c", "1")], t - 1000);
    assert_eq!(reply.status, 204, "{}", reply.body);
    let reply = remote_write(&strata, &[("a", "1"), ("d", "1")], t);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("max_series (3) reached"), "{}", reply.body);
    assert_eq!(sample_count(&strata, "a"), 2.0);
    assert_eq!(series_count(&strata, "d"), 0);

    let reply = strata.post("/write?db=x&precision=ms", &[], format!("new,x=1 v=1 {t}\n").as_bytes());
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("max_series (3)") && reply.body.contains("line 1"), "{}", reply.body);

    assert_eq!(metric(&strata, "strata_series_rejected_total{limit=\"max_series\"}"), 2.0);
    let status = api(&strata, "/api/v1/status/tsdb");
    assert_eq!(status["seriesLimits"]["seriesRejectedTotal"]["max_series"], 2);
    assert_eq!(status["headStats"]["numSeries"], 3);
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

#[test]
fn new_series_per_day_limit_refuses_series_beyond_the_daily_allowance() {
    let (_dir, mut strata) = start(&["--new-series-per-day-max", "2"]);
    let t = now_ms();
    let reply = remote_write(&strata, &[("a", "1"), ("a", "2"), ("a", "3")], t - 1000);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("max_new_series_per_day (2) reached"), "{}", reply.body);
    assert_eq!(series_count(&strata, "a"), 2);
    // Existing series keep being written.
    let reply = remote_write(&strata, &[("a", "1")], t);
    assert_eq!(reply.status, 204, "{}", reply.body);

    let reply =
        strata.post("/api/v2/write?bucket=x&precision=ms", &[], format!("m,x=1 v=1 {t}\n").as_bytes());
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("max_new_series_per_day (2)"), "{}", reply.body);

    assert_eq!(metric(&strata, "strata_series_rejected_total{limit=\"max_new_series_per_day\"}"), 2.0);
    let status = api(&strata, "/api/v1/status/tsdb");
    assert_eq!(status["seriesLimits"]["seriesCreatedToday"], 2);
    assert_eq!(status["seriesLimits"]["seriesRejectedToday"], 2);
    assert_eq!(status["seriesRejectedTodayByMetricName"][0], serde_json::json!({"name": "a", "value": 1}));
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}
