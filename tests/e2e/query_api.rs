//! The query API of the real `strata` binary over real sockets: samples written with remote
//! write come back through `/api/v1/query` and `/api/v1/query_range`, GET and form POST, and
//! the status endpoints describe the running server.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{Strata, urlencode};
use remote::prw::{self, Version};
use serde_json::{Value, json};
use storage::{Batch, Labels, Sample};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

const FORM: [(&str, &str); 1] = [("Content-Type", "application/x-www-form-urlencoded")];

/// Now, rounded down to a whole minute so step-aligned times are easy to write.
fn minute_ms() -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    now - now % 60_000
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn remote_written_samples_come_back_through_the_query_api() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start_with(dir.path(), &["--query.lookback-delta=2m", "--retention=30d"]);
    strata.wait_ready();

    // Two series, one sample every 15 s for the last 10 minutes (t0 - 585 s ... t0).
    let t0 = minute_ms();
    let mut batch = Batch::new();
    for instance in ["a:9100", "b:9100"] {
        let labels = Labels::from_pairs(&[
            ("__name__", "http_requests_total"),
            ("instance", instance),
            ("job", "api"),
        ]);
        let per_sample = if instance == "a:9100" { 1.0 } else { 2.0 };
        let samples =
            (0..40).map(|i| Sample::new(t0 - 585_000 + i * 15_000, per_sample * i as f64)).collect();
        batch.push(labels, samples);
    }
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);

    let secs = |ms: i64| format!("{}", ms / 1000);

    // Instant query, GET.
    let reply = strata.get(&format!("/api/v1/query?query=http_requests_total&time={}", secs(t0)));
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.content_type.as_deref(), Some("application/json"));
    let body = json(&reply.body);
    assert_eq!(body["status"], "success");
    assert_eq!(body["data"]["resultType"], "vector");
    let result = body["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 2, "{}", reply.body);
    assert_eq!(
        result[0],
        json!({"metric": {"__name__": "http_requests_total", "instance": "a:9100", "job": "api"},
               "value": [t0 / 1000, "39"]})
    );
    assert_eq!(result[1]["value"], json!([t0 / 1000, "78"]));

    // The same as a form POST, aggregated, as Grafana sends it.
    let form = format!("query=sum(rate(http_requests_total%5B1m%5D))&time={}", secs(t0));
    let reply = strata.post("/api/v1/query", &FORM, form.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = json(&reply.body);
    assert_eq!(body["data"]["result"][0]["value"][0], json!(t0 / 1000), "{}", reply.body);
    // a grows by 1 and b by 2 every 15 s: 3/15 per second together.
    let rate: f64 = body["data"]["result"][0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!((rate - 0.2).abs() < 1e-9, "{}", reply.body);

    // Range query over the last 5 minutes at 1m steps: 6 points per series.
    let form = format!(
        "query=http_requests_total%7Binstance%3D%22b%3A9100%22%7D&start={}&end={}&step=60",
        secs(t0 - 300_000),
        secs(t0)
    );
    let reply = strata.post("/api/v1/query_range", &FORM, form.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = json(&reply.body);
    assert_eq!(body["data"]["resultType"], "matrix");
    let values = body["data"]["result"][0]["values"].as_array().unwrap();
    assert_eq!(values.len(), 6, "{}", reply.body);
    assert_eq!(values[5], json!([t0 / 1000, "78"]));
    assert_eq!(values[0], json!([(t0 - 300_000) / 1000, "38"]));

    // The flag's lookback delta applies: 3 minutes after the last sample nothing is current.
    let reply = strata.get(&format!("/api/v1/query?query=http_requests_total&time={}", secs(t0 + 180_000)));
    assert_eq!(json(&reply.body)["data"]["result"], json!([]), "{}", reply.body);

    // A malformed query is a 400 with Prometheus' envelope.
    let reply = strata.get("/api/v1/query?query=sum(");
    assert_eq!(reply.status, 400);
    assert_eq!(json(&reply.body)["errorType"], "bad_data");

    // The status endpoints describe this server.
    let flags = json(&strata.get("/api/v1/status/flags").body);
    assert_eq!(flags["data"]["query.lookback-delta"], "2m");
    assert_eq!(flags["data"]["retention"], "30d");
    assert_eq!(flags["data"]["listen"], "127.0.0.1:0");
    let runtime = json(&strata.get("/api/v1/status/runtimeinfo").body);
    assert_eq!(runtime["data"]["storageRetention"], "30d");
    let build = json(&strata.get("/api/v1/status/buildinfo").body);
    assert!(build["data"]["version"].as_str().unwrap().starts_with("3."));
    let config = json(&strata.get("/api/v1/status/config").body);
    assert!(config["data"]["yaml"].as_str().unwrap().contains("query.lookback-delta: \"2m\""));

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

/// The server's resident memory as its own `/metrics` reports it.
fn resident_bytes(strata: &Strata) -> f64 {
    let reply = strata.get("/metrics");
    assert_eq!(reply.status, 200);
    reply
        .body
        .lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process_resident_memory_bytes in {}", reply.body))
}

/// Compiled regexes are kept (by the regex caches, and inside cached syntax trees) within
/// byte budgets, not by count: 250 distinct `\pL{120}` matchers (5.8 MB compiled each) took
/// the server from 10 MB to 1.6-2.0 GB of RSS while the caches counted entries. A query whose
/// regexes need more than 64 MiB together is refused.
#[test]
fn distinct_big_regexes_do_not_accumulate_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    let reply = strata.post("/write?db=x", &[], b"m v=1 1700000000000000000\n");
    assert_eq!(reply.status, 204, "{}", reply.body);
    let query = |q: &str| {
        let form = format!("query={}&time=1700000000", urlencode(q));
        strata.post("/api/v1/query", &FORM, form.as_bytes())
    };
    assert_eq!(query(r#"{__name__=~"(?:\\pL{120})"}"#).status, 200);
    let before = resident_bytes(&strata);
    for i in 0..64 {
        let reply = query(&format!(r#"{{__name__=~"(?:\\pL{{120}}){i}"}}"#));
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let grown = (resident_bytes(&strata) - before) / 1e6;
    // Kept by count they grew it by 433 MB (debug build), 97 MB now.
    assert!(grown < 200.0, "resident memory grew by {grown:.0} MB");

    let many: Vec<String> = (0..16).map(|i| format!(r#"l{i}=~"(?:\\pL{{120}}){i}""#)).collect();
    let reply = query(&format!("m{{{}}}", many.join(",")));
    assert_eq!(reply.status, 400, "{}", reply.body);
    let body = json(&reply.body);
    assert_eq!(body["errorType"], "bad_data");
    assert!(body["error"].as_str().unwrap().contains("MiB compiled"), "{}", reply.body);
}

/// A compiled regex's search caches (lazy-DFA tables) stay with the query that searched, not
/// with the syntax tree the parse cache keeps: distinct queries whose regex takes the lazy DFA
/// through many states (`(a|b)*a(a|b){14}` over random a/b names) grew a release server from 42
/// to 683 MB over 200 queries while the kept trees' matchers searched.
#[test]
fn regex_search_caches_do_not_outlive_their_query() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    // 4,000 metric names of 40 random a/b letters (a fixed xorshift, so every run is the same).
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut body = String::new();
    for _ in 0..4000 {
        for _ in 0..40 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            body.push(if state & 1 == 0 { 'a' } else { 'b' });
        }
        body.push_str(" v=1 1700000000000000000\n");
    }
    let reply = strata.post("/write?db=x", &[], body.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);
    let query = |i: usize| {
        let q = format!(r#"count({{__name__=~"(?:(?:a|b)*a(?:a|b){{14}}_v)|zz{i}"}})"#);
        let reply = strata.post(
            "/api/v1/query",
            &FORM,
            format!("query={}&time=1700000000", urlencode(&q)).as_bytes(),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        json(&reply.body)["data"]["result"][0]["value"][1].as_str().map(str::to_owned)
    };
    let matched = query(0);
    let before = resident_bytes(&strata);
    for i in 1..80 {
        assert_eq!(query(i), matched);
    }
    let grown = (resident_bytes(&strata) - before) / 1e6;
    // 5 MB in a debug build; 270 MB with the kept trees' matchers searching.
    assert!(grown < 100.0, "resident memory grew by {grown:.0} MB");
}

/// `max(max_over_time(..))` and `min(min_over_time(..))` over data in partition files, with
/// hourly windows not aligned with the hour blocks: answered per group from block statistics
/// (`promql/src/eval/group_extreme.rs`), through the HTTP API, with the values the samples
/// give and the statistics showing blocks left undecoded. Once with the data inside one UTC
/// day (one partition), once across a UTC midnight, whatever the time the test runs.
#[test]
fn group_extremes_over_blocks_equal_the_samples() {
    let (hour, day) = (3_600_000, 86_400_000);
    let today = minute_ms() / day * day;
    // Hour blocks are the grid cells `(k·1h, (k+1)·1h]`, open on the left like PromQL windows,
    // and day partitions `[d, d + 24h)`, closed on the left: the sample at midnight belongs to
    // the cell ending there but is written into the next day's partition, a block of its own.
    // So across midnight the cell before it is two blocks, and the windows overlap 7 blocks of
    // each series instead of 6. Both in the past, well inside the 30d retention.
    let cases = [
        // Yesterday 08:00 to 14:00.
        (today - day + 8 * hour, 6),
        // 21:00 the day before yesterday to 03:00 yesterday: midnight at 3 hours in.
        (today - day - 3 * hour, 7),
    ];
    for (start, blocks_per_series) in cases {
        group_extremes_over_blocks(start, blocks_per_series);
    }
}

/// Four series of a sample every 10 s for 6 hours from `start` (a whole hour), flushed to
/// partition files, queried with 5 hourly windows from `start + 1h20m`: every window cuts two
/// hour blocks of each series, which has `blocks_per_series` blocks in the windows' span.
fn group_extremes_over_blocks(start: i64, blocks_per_series: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start_with(dir.path(), &["--retention=30d"]);
    strata.wait_ready();
    // Four hosts, a sample every 10 s for 6 hours, pseudo-random integers.
    let hour = 3_600_000;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut data: Vec<(String, Vec<Sample>)> = Vec::new();
    let mut batch = Batch::new();
    for host in ["a", "b", "c", "d"] {
        let samples: Vec<Sample> = (1..=6 * 360)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Sample::new(start + i * 10_000, (x % 1000) as f64)
            })
            .collect();
        batch.push(Labels::from_pairs(&[("__name__", "load"), ("host", host)]), samples.clone());
        data.push((host.to_owned(), samples));
    }
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);
    // A clean shutdown flushes the head into partition files (hour blocks).
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
    let mut strata = Strata::start_with(dir.path(), &["--retention=30d"]);
    strata.wait_ready();

    // Steps 20 minutes past the hour: every window cuts two blocks of each series.
    let (from, step, steps) = (start + hour + 20 * 60_000, hour, 5);
    let expect = |hosts: &[&str], max: bool| -> Vec<Value> {
        (0..steps)
            .map(|k| {
                let t = from + k * step;
                let values = data
                    .iter()
                    .filter(|(h, _)| hosts.contains(&h.as_str()))
                    .flat_map(|(_, s)| s.iter().filter(|s| s.t > t - hour && s.t <= t).map(|s| s.v));
                let v = if max { values.fold(f64::MIN, f64::max) } else { values.fold(f64::MAX, f64::min) };
                json!([t / 1000, format!("{v}")])
            })
            .collect()
    };
    let cases: [(&str, &[&str], bool); 3] = [
        ("max(max_over_time(load[1h]))", &["a", "b", "c", "d"], true),
        ("min(min_over_time(load{host=~\"a|b\"}[1h]))", &["a", "b"], false),
        ("max without (host) (max_over_time(load{host!=\"d\"}[1h]))", &["a", "b", "c"], true),
    ];
    for (query, hosts, max) in cases {
        let path = format!(
            "/api/v1/query_range?query={}&start={}&end={}&step={}&stats=all",
            urlencode(query),
            from / 1000,
            (from + (steps - 1) * step) / 1000,
            step / 1000
        );
        let reply = strata.get(&path);
        assert_eq!(reply.status, 200, "{query} from {start}: {}", reply.body);
        let body = json(&reply.body);
        let result = body["data"]["result"].as_array().unwrap();
        assert_eq!(result.len(), 1, "{query} from {start}: {}", reply.body);
        assert_eq!(result[0]["metric"], json!({}), "{query} from {start}");
        assert_eq!(result[0]["values"], json!(expect(hosts, max)), "{query} from {start}");
        let samples = &body["data"]["stats"]["samples"];
        let from_stats = samples["blocksFromStats"].as_u64().unwrap();
        let decoded = samples["blocksDecoded"].as_u64().unwrap();
        // Every block in the windows' span is cut by a window: the per-series path decodes
        // them all. Each is counted once, from its statistics or decoded. Measured inside one
        // day: 7 of 24, 8 of 12, 7 of 18.
        let blocks = blocks_per_series * hosts.len() as u64;
        assert_eq!(from_stats + decoded, blocks, "{query} from {start}: {samples}");
        assert!(decoded <= blocks * 2 / 3, "{query} from {start}: {samples}");
    }
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}
