//! The write endpoints of the real `strata` binary over real sockets: our own remote-write 2.0
//! sender (Prometheus 2.42 cannot send 2.0), 1.0 and line protocol side by side, and what
//! storage holds after a clean stop.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{Strata, stored_histograms, stored_series};
use remote::prw::{self, Version};
use storage::{Batch, CounterResetHint, FloatHistogram, HistogramSample, Labels, Sample};

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

const V2_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "2.0.0"),
];

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

#[test]
fn our_v2_sender_is_answered_with_written_counts_and_the_data_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();

    let t = now_ms();
    let mut batch = Batch::new();
    let up = Labels::from_pairs(&[("__name__", "up"), ("instance", "a:9100"), ("job", "node")]);
    let temp = Labels::from_pairs(&[("__name__", "temperature_celsius"), ("room", "kitchen")]);
    let up_samples: Vec<Sample> = (0..10).map(|i| Sample::new(t - 10_000 + i * 1000, 1.0)).collect();
    let temp_samples =
        vec![Sample::new(t - 500, 21.25), Sample::new(t, f64::from_bits(storage::STALE_NAN_BITS))];
    batch.push(up.clone(), up_samples.clone());
    batch.push(temp.clone(), temp_samples.clone());

    let body = prw::encode(Version::V2, &batch, &[]);
    let reply = strata.post("/api/v1/write", &V2_HEADERS, &body);
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Samples-Written"), Some("12"));
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Histograms-Written"), Some("0"));
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Exemplars-Written"), Some("0"));

    // Resending the same request (a sender retrying after a lost answer) changes nothing.
    let retry = strata.post("/api/v1/write", &V2_HEADERS, &body);
    assert_eq!(retry.status, 204, "{}", retry.body);

    // A 1.0 request and a line-protocol request on the same server.
    let mut v1 = Batch::new();
    let v1_series = Labels::from_pairs(&[("__name__", "v1_metric")]);
    v1.push(v1_series.clone(), vec![Sample::new(t, 42.0)]);
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &v1, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Samples-Written"), None);
    let line = format!("weather,city=Oslo temp=-3.5 {t}\n");
    let reply = strata.post("/write?db=test&precision=ms", &[], line.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);

    let metrics = strata.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.contains("strata_ingest_samples_received_total{protocol=\"remote_write_v2\"} 24"),
        "{}",
        metrics.body
    );

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
    let stored = stored_series(dir.path(), i64::MIN, i64::MAX);
    let find = |labels: &Labels| stored.iter().find(|(l, _)| l == labels).map(|(_, s)| s.clone());
    assert_eq!(find(&up), Some(up_samples));
    assert_eq!(find(&temp), Some(temp_samples), "the stale marker is stored bit-exact");
    assert_eq!(find(&v1_series), Some(vec![Sample::new(t, 42.0)]));
    assert_eq!(stored.len(), 4, "{stored:?}");
}

/// Native histograms over remote write 1.0 and 2.0 (an integer exponential one, a float one, a
/// custom-bucket one, and a float stale marker ending a histogram series), counted in the 2.0
/// headers and stored.
#[test]
fn native_histograms_of_remote_write_1_and_2_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    let t = now_ms() - 60_000;
    let exp = FloatHistogram {
        counter_reset_hint: CounterResetHint::NotReset,
        schema: 3,
        zero_threshold: 1e-128,
        zero_count: 2.0,
        count: 10.0,
        sum: 12.5,
        positive: vec![(-2, 1.0), (-1, 3.0), (4, 2.0)],
        negative: vec![(1, 2.0)],
        custom_values: Vec::new(),
    };
    let float = FloatHistogram { count: 10.5, sum: 3.25, positive: vec![(0, 0.5), (7, 8.0)], ..exp.clone() };
    let nhcb = FloatHistogram {
        counter_reset_hint: CounterResetHint::Unknown,
        schema: -53,
        zero_threshold: 0.0,
        zero_count: 0.0,
        count: 6.0,
        sum: 4.0,
        positive: vec![(0, 1.0), (1, 2.0), (3, 3.0)],
        negative: Vec::new(),
        custom_values: vec![0.25, 0.5, 1.0],
    };
    let a = Labels::from_pairs(&[("__name__", "rpc_latency_seconds"), ("job", "a")]);
    let b = Labels::from_pairs(&[("__name__", "rpc_latency_seconds"), ("job", "b")]);
    let c = Labels::from_pairs(&[("__name__", "rpc_size_bytes")]);
    let hs = |pairs: &[(i64, &FloatHistogram)]| -> Vec<HistogramSample> {
        pairs.iter().map(|(t, h)| HistogramSample { t: *t, h: (*h).clone() }).collect()
    };
    let mut v2 = Batch::new();
    v2.push_histograms(a.clone(), hs(&[(t, &exp), (t + 15_000, &float)]));
    v2.push(c.clone(), vec![Sample::new(t + 30_000, storage::stale_nan())]);
    v2.push_histograms(c.clone(), hs(&[(t, &nhcb)]));
    let reply = strata.post("/api/v1/write", &V2_HEADERS, &prw::encode(Version::V2, &v2, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Samples-Written"), Some("1"));
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Histograms-Written"), Some("3"));
    let mut v1 = Batch::new();
    v1.push_histograms(b.clone(), hs(&[(t, &nhcb), (t + 15_000, &exp)]));
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &v1, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
    let stored = stored_histograms(dir.path(), i64::MIN, i64::MAX);
    assert_eq!(
        stored,
        vec![
            (a, hs(&[(t, &exp), (t + 15_000, &float)])),
            (b, hs(&[(t, &nhcb), (t + 15_000, &exp)])),
            (c.clone(), hs(&[(t, &nhcb)])),
        ]
    );
    let floats = stored_series(dir.path(), i64::MIN, i64::MAX);
    assert_eq!(floats.len(), 1, "only the stale marker is a float: {floats:?}");
    assert_eq!(floats[0].0, c);
    assert!(storage::is_stale(floats[0].1[0].v));
}

#[test]
fn influx_clients_can_ping_create_a_database_and_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();

    let ping = strata.get("/ping");
    assert_eq!(ping.status, 204);
    assert!(ping.header("X-Influxdb-Version").is_some_and(|v| v.starts_with("1.")));
    let create = strata.post("/query?q=CREATE+DATABASE+%22benchmark%22", &[], b"");
    assert_eq!((create.status, create.body.as_str()), (200, r#"{"results":[{"statement_id":0}]}"#));

    let t = now_ms();
    let body = format!("cpu,host=a usage_user=1.5 {t}\nnot line protocol\ncpu,host=b usage_user=2.5 {t}\n");
    let reply = strata.post("/write?db=benchmark&precision=ms", &[], body.as_bytes());
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("partial write: unable to parse line 2"), "{}", reply.body);

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
    let stored = stored_series(dir.path(), i64::MIN, i64::MAX);
    assert_eq!(stored.len(), 2, "the good lines are stored: {stored:?}");
}

/// A counter whose reset the values hide (it restarted and grew past its old value between two
/// scrapes): only the start timestamps remote write 2.0 carries reveal it. They are stored,
/// survive a restart (WAL replay), and `--enable-feature=use-start-timestamps` queries use them.
#[test]
fn start_timestamps_of_remote_write_2_are_stored_and_used_by_queries() {
    use prost::Message;
    use remote::prw::proto_v2 as v2;

    let dir = tempfile::tempdir().unwrap();
    let args = ["--enable-feature=use-start-timestamps,promql-experimental-functions"];
    let mut strata = Strata::start_with(dir.path(), &args);
    strata.wait_ready();

    // Whole seconds, so the start timestamps compare exactly in the query answers.
    let t0 = now_ms() / 1000 * 1000 - 120_000;
    let (first_start, second_start) = (t0 - 5_000, t0 + 25_000);
    let sample =
        |t: i64, v: f64, st: i64| v2::Sample { value_bits: v.to_bits(), timestamp: t, start_timestamp: st };
    let request = v2::Request {
        symbols: ["", "__name__", "requests_total", "job", "api"].map(String::from).to_vec(),
        timeseries: vec![v2::TimeSeries {
            labels_refs: vec![1, 2, 3, 4],
            samples: vec![
                sample(t0, 10.0, first_start),
                sample(t0 + 15_000, 20.0, first_start),
                // Restarted at `second_start` and already past 20 at the next scrape.
                sample(t0 + 30_000, 25.0, second_start),
                sample(t0 + 45_000, 35.0, second_start),
            ],
            ..Default::default()
        }],
    };
    let body = snap::raw::Encoder::new().compress_vec(&request.encode_to_vec()).unwrap();
    let reply = strata.post("/api/v1/write", &V2_HEADERS, &body);
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.header("X-Prometheus-Remote-Write-Samples-Written"), Some("4"));

    let at = (t0 + 45_000) / 1000;
    let query = |strata: &Strata, q: &str| {
        let reply = strata.get(&format!("/api/v1/query?query={q}&time={at}"));
        assert_eq!(reply.status, 200, "{q}: {}", reply.body);
        let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        let result = &json["data"]["result"];
        assert_eq!(result.as_array().map(Vec::len), Some(1), "{q}: {}", reply.body);
        result[0]["value"][1].as_str().unwrap().to_string()
    };
    let check = |strata: &Strata| {
        assert_eq!(query(strata, "resets(requests_total%5B5m%5D)"), "1", "the hidden reset is seen");
        assert_eq!(query(strata, "start_timestamp(requests_total)"), (second_start / 1000).to_string());
    };
    check(&strata);

    // Without the feature the values alone show no reset.
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
    let mut plain = Strata::start(dir.path());
    plain.wait_ready();
    assert_eq!(query(&plain, "resets(requests_total%5B5m%5D)"), "0");
    assert_eq!(plain.terminate().code(), Some(0), "log:\n{}", plain.log());

    // After restarts the start timestamps are still there.
    let mut again = Strata::start_with(dir.path(), &args);
    again.wait_ready();
    check(&again);
    assert_eq!(again.terminate().code(), Some(0), "log:\n{}", again.log());
}
