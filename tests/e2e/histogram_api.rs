//! Native histograms through the real `strata` binary: remote-written (integer exponential with
//! a zero bucket and a negative bucket, float, custom buckets, and a series that turns from
//! floats to histograms), read back with `/api/v1/query` and `/api/v1/query_range` in
//! Prometheus' exact JSON (`histogram`/`histograms` keys, string counts, bucket boundary rules),
//! and evaluated with `rate` and `histogram_quantile` over HTTP.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::Strata;
use remote::prw::{self, Version};
use serde_json::Value;
use storage::{Batch, CounterResetHint, FloatHistogram, HistogramSample, Labels, Sample};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

const V2_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "2.0.0"),
];

/// Now, rounded down to a whole minute.
fn minute_ms() -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    now - now % 60_000
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The exponential integer histogram of step `i`: schema 0, zero bucket `[-0.001, 0.001]` with 1,
/// negative bucket `[-2, -1)` with 2, and positive buckets `(1, 2]` and `(2, 4]` growing by 15
/// each step.
fn exponential(i: i64) -> FloatHistogram {
    let grow = 10.0 + 15.0 * i as f64;
    FloatHistogram {
        counter_reset_hint: if i == 0 { CounterResetHint::Unknown } else { CounterResetHint::NotReset },
        schema: 0,
        zero_threshold: 0.001,
        zero_count: 1.0,
        count: 3.0 + 2.0 * grow,
        sum: 50.5 + 45.0 * i as f64,
        positive: vec![(1, grow), (2, grow)],
        negative: vec![(1, 2.0)],
        custom_values: Vec::new(),
    }
}

/// A float histogram (fractional counts), schema -1: buckets `(0.25, 1]` and `(4, 16]`.
fn float() -> FloatHistogram {
    FloatHistogram {
        counter_reset_hint: CounterResetHint::Gauge,
        schema: -1,
        zero_threshold: 0.0,
        zero_count: 0.0,
        count: 1.75,
        sum: 3.5,
        positive: vec![(0, 0.5), (2, 1.25)],
        negative: Vec::new(),
        custom_values: Vec::new(),
    }
}

/// Custom buckets (schema -53) with bounds 1, 10, 100: `[-Inf, 1]`, `(1, 10]`, `(100, +Inf]`.
fn custom() -> FloatHistogram {
    FloatHistogram {
        counter_reset_hint: CounterResetHint::Unknown,
        schema: FloatHistogram::CUSTOM_BUCKETS_SCHEMA,
        zero_threshold: 0.0,
        zero_count: 0.0,
        count: 6.0,
        sum: 150.0,
        positive: vec![(0, 2.0), (1, 3.0), (3, 1.0)],
        negative: Vec::new(),
        custom_values: vec![1.0, 10.0, 100.0],
    }
}

const FLOAT_JSON: &str =
    r#"{"count":"1.75","sum":"3.5","buckets":[[0,"0.25","1","0.5"],[0,"4","16","1.25"]]}"#;
const CUSTOM_JSON: &str =
    r#"{"count":"6","sum":"150","buckets":[[3,"-Inf","1","2"],[0,"1","10","3"],[0,"100","+Inf","1"]]}"#;

#[test]
fn native_histograms_come_back_through_the_query_api_as_prometheus_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();

    let t0 = minute_ms() - 60_000;
    let s = t0 / 1000;
    let hs = |samples: Vec<(i64, FloatHistogram)>| -> Vec<HistogramSample> {
        samples.into_iter().map(|(t, h)| HistogramSample { t, h }).collect()
    };
    let latency = Labels::from_pairs(&[("__name__", "req_seconds"), ("job", "a")]);
    let gauge = Labels::from_pairs(&[("__name__", "req_seconds"), ("job", "b")]);
    let size = Labels::from_pairs(&[("__name__", "size_bytes")]);
    let mixed = Labels::from_pairs(&[("__name__", "mixed")]);

    // Remote write 2.0: the integer histogram every 15 s for two minutes, and custom buckets.
    let mut v2 = Batch::new();
    v2.push_histograms(latency, hs((0..=8).map(|i| (t0 - 120_000 + i * 15_000, exponential(i))).collect()));
    v2.push_histograms(size, hs(vec![(t0 - 60_000, custom()), (t0, custom())]));
    let reply = strata.post("/api/v1/write", &V2_HEADERS, &prw::encode(Version::V2, &v2, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Histograms-Written"), Some("11"));
    // Remote write 1.0: the float histogram, and a series that was a float before.
    let mut v1 = Batch::new();
    v1.push_histograms(gauge, hs(vec![(t0 - 60_000, float()), (t0, float())]));
    v1.push(mixed.clone(), vec![Sample::new(t0 - 60_000, 7.0)]);
    v1.push_histograms(mixed, hs(vec![(t0, float())]));
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &v1, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);

    // Instant query: the whole answer, byte for byte.
    let reply = strata.get(&format!("/api/v1/query?query=req_seconds&time={s}"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let expected = format!(
        concat!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":["#,
            r#"{{"metric":{{"__name__":"req_seconds","job":"a"}},"histogram":[{s},"#,
            r#"{{"count":"263","sum":"410.5","buckets":[[1,"-2","-1","2"],[3,"-0.001","0.001","1"],"#,
            r#"[0,"1","2","130"],[0,"2","4","130"]]}}]}},"#,
            r#"{{"metric":{{"__name__":"req_seconds","job":"b"}},"histogram":[{s},{float}]}}]}}}}"#
        ),
        s = s,
        float = FLOAT_JSON
    );
    assert_eq!(reply.body, expected);

    // Range queries: histograms only ("values" left out), and floats then histograms.
    let range = |query: &str| {
        let reply =
            strata.get(&format!("/api/v1/query_range?query={query}&start={}&end={s}&step=30", s - 60));
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body
    };
    let expected = format!(
        concat!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{"__name__":"size_bytes"}},"#,
            r#""histograms":[[{a},{c}],[{b},{c}],[{s},{c}]]}}]}}}}"#
        ),
        a = s - 60,
        b = s - 30,
        s = s,
        c = CUSTOM_JSON
    );
    assert_eq!(range("size_bytes"), expected);
    let expected = format!(
        concat!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{"__name__":"mixed"}},"#,
            r#""values":[[{a},"7"],[{b},"7"]],"histograms":[[{s},{f}]]}}]}}}}"#
        ),
        a = s - 60,
        b = s - 30,
        s = s,
        f = FLOAT_JSON
    );
    assert_eq!(range("mixed"), expected);

    // rate over the integer histogram: each positive bucket grows by 1 per second, the zero and
    // negative buckets stay (so their rate is 0 and they are left out of the JSON).
    let reply =
        strata.get(&format!("/api/v1/query?query=rate(req_seconds%7Bjob%3D%22a%22%7D%5B1m%5D)&time={s}"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = json(&reply.body);
    let result = &body["data"]["result"][0];
    assert_eq!(result["metric"], serde_json::json!({"job": "a"}), "{}", reply.body);
    let h = &result["histogram"][1];
    let num = |v: &Value| -> f64 { v.as_str().unwrap().parse().unwrap() };
    assert!((num(&h["count"]) - 2.0).abs() < 1e-9, "{}", reply.body);
    assert!((num(&h["sum"]) - 3.0).abs() < 1e-9, "{}", reply.body);
    let buckets = h["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 2, "{}", reply.body);
    assert_eq!(&buckets[0].as_array().unwrap()[..3], &[Value::from(0), "1".into(), "2".into()]);
    assert!((num(&buckets[0][3]) - 1.0).abs() < 1e-9, "{}", reply.body);

    // histogram_quantile over the rate, as a dashboard asks for it: the median is the top of
    // (1, 2], the 25th percentile is interpolated exponentially inside it (sqrt(2)).
    for (q, want) in [(0.5, 2.0), (0.25, std::f64::consts::SQRT_2)] {
        let reply = strata.get(&format!(
            "/api/v1/query?query=histogram_quantile({q},rate(req_seconds%7Bjob%3D%22a%22%7D%5B1m%5D))&time={s}"
        ));
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body = json(&reply.body);
        let got = num(&body["data"]["result"][0]["value"][1]);
        assert!((got - want).abs() < 1e-9, "q={q}: {}", reply.body);
    }

    // Over a range, the rate is a histogram at every step.
    let body = json(&range("rate(req_seconds%7Bjob%3D%22a%22%7D%5B1m%5D)"));
    let series = &body["data"]["result"][0];
    assert!(series.get("values").is_none(), "{series}");
    assert_eq!(series["histograms"].as_array().unwrap().len(), 3, "{series}");
    // histogram_count of the custom buckets is a float series.
    let body = json(&range("histogram_count(size_bytes)"));
    assert_eq!(
        body["data"]["result"][0]["values"],
        serde_json::json!([[s - 60, "6"], [s - 30, "6"], [s, "6"]])
    );

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}
