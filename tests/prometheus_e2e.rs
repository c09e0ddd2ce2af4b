//! End to end with the real Prometheus (Debian's `prometheus`, 2.42) and node-exporter:
//! Prometheus scrapes node-exporter, itself and strata's `/metrics` every second and
//! remote-writes to strata; after a short run, the series and raw samples of a fixed past
//! interval that strata stored must be exactly those Prometheus' own query API returns, and
//! strata's own metrics must be among them (Prometheus parsed strata's exposition, and strata
//! stores its own monitoring).
//!
//! Skipped, with a message, when the two binaries are not installed and `CI` is not set; under
//! CI their absence is a failure (`.ci/run` installs them).
//!
//! The `vmalert` module runs a ruler of the same ecosystem against strata (recording rules,
//! alerts and their restored state); it shares this binary rather than linking another.

mod common;
#[path = "prometheus_e2e/vmalert.rs"]
mod vmalert;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::process::{Process, find_binary, free_port, get_text, highest_sent_ms, wait_for};
use common::{Strata, stored_series};

const PROMETHEUS: &str = "prometheus";
const NODE_EXPORTER: &str = "prometheus-node-exporter";

/// How long Prometheus scrapes and sends. The compared interval leaves 5 s at each end.
const RUN: Duration = Duration::from_secs(18);
/// Margin at both ends of the run that the compared interval leaves out: at the start targets
/// may not be scraped yet, at the end the remote-write queue may not have sent yet.
const MARGIN_MS: i64 = 5_000;

/// One series: its labels (with `__name__`) and its samples as (ms, value bits).
type SeriesMap = BTreeMap<Vec<(String, String)>, Vec<(i64, u64)>>;

#[test]
fn strata_stores_exactly_what_prometheus_scraped() {
    let (Some(prometheus), Some(node_exporter)) = (find_binary(PROMETHEUS), find_binary(NODE_EXPORTER))
    else {
        let message = format!(
            "{PROMETHEUS} and {NODE_EXPORTER} must be on PATH for the end-to-end test (Debian packages \
             `prometheus` and `prometheus-node-exporter`; .ci/run installs them)"
        );
        common::skip_outside_ci("strata_stores_exactly_what_prometheus_scraped", &message);
        return;
    };

    let dir = tempfile::tempdir().unwrap();
    let strata_dir = dir.path().join("strata");
    let mut strata = Strata::start(&strata_dir);
    strata.wait_ready();

    let node_addr = format!("127.0.0.1:{}", free_port());
    let _node = Process::spawn(
        &node_exporter,
        &[
            &format!("--web.listen-address={node_addr}"),
            // A few cheap, always-present collectors instead of the full default set.
            "--collector.disable-defaults",
            "--collector.cpu",
            "--collector.loadavg",
            "--collector.meminfo",
            "--collector.netdev",
            "--collector.stat",
        ],
        &dir.path().join("node-exporter.log"),
    );

    let prom_addr = format!("127.0.0.1:{}", free_port());
    let config = dir.path().join("prometheus.yml");
    let strata_addr = strata.addr().to_string();
    std::fs::write(
        &config,
        prometheus_config(&node_addr, &prom_addr, &strata_addr, &strata.url("/api/v1/write")),
    )
    .unwrap();
    let prom_log = dir.path().join("prometheus.log");
    let mut prom = Process::spawn(
        &prometheus,
        &[
            &format!("--config.file={}", config.display()),
            &format!("--storage.tsdb.path={}", dir.path().join("prometheus-data").display()),
            &format!("--web.listen-address={prom_addr}"),
        ],
        &prom_log,
    );
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let prom_url = format!("http://{prom_addr}");
    wait_for(&prom_log, "Prometheus to become ready", || {
        get_text(&agent, &format!("{prom_url}/-/ready")).is_some_and(|(status, _)| status == 200)
    });

    let started = now_ms();
    std::thread::sleep(RUN);
    let ended = now_ms();
    // Whole seconds, so the interval reads the same in Prometheus' seconds and strata's ms.
    let from = (started + MARGIN_MS + 999) / 1000 * 1000;
    let to = (ended - MARGIN_MS) / 1000 * 1000;
    assert!(to > from, "the run is too short for an interval");

    // Everything up to `to` must have left Prometheus' queue before it stops: its shutdown
    // flushes the queue only partly. The gauge is set once strata has answered a batch, in
    // whole seconds; 3 s past `to` also covers scrapes that end (and are queued) after later
    // scrapes of the other target started.
    wait_for(&prom_log, "remote write to send past the interval", || {
        highest_sent_ms(&agent, &prom_url).is_some_and(|sent| sent >= to + 3000)
    });
    let expected = prometheus_samples(&agent, &prom_url, from, to);

    prom.terminate();
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());

    // Prometheus' range selector is left-open, (from, to]; storage's ranges are closed.
    let mut got = SeriesMap::new();
    for (labels, samples) in stored_series(&strata_dir, from + 1, to) {
        // Prometheus' query API hides stale markers.
        let samples: Vec<(i64, u64)> =
            samples.iter().filter(|s| !storage::is_stale(s.v)).map(|s| (s.t, value_bits(s.v))).collect();
        if !samples.is_empty() {
            let labels = labels.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
            got.insert(labels, samples);
        }
    }

    let jobs: std::collections::BTreeSet<&str> = expected
        .keys()
        .filter_map(|labels| labels.iter().find(|(n, _)| n == "job").map(|(_, v)| v.as_str()))
        .collect();
    assert_eq!(jobs, ["node", "prometheus", "strata"].into(), "every target must have been scraped");
    assert!(expected.len() > 100, "only {} series from Prometheus", expected.len());
    let expected_samples: usize = expected.values().map(Vec::len).sum();
    eprintln!("compared {} series, {expected_samples} samples in ({from}, {to}] ms", expected.len());
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).take(5).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(*k)).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "series differ; missing in strata: {missing:?}; extra: {extra:?}"
    );
    let differing: Vec<_> = expected
        .iter()
        .filter(|(labels, samples)| got.get(*labels) != Some(samples))
        .map(|(labels, samples)| (labels, samples, got.get(labels)))
        .take(3)
        .collect();
    assert!(differing.is_empty(), "samples differ (labels, prometheus, strata): {differing:?}");
    strata_monitored_itself(&got);
}

/// strata's own series, scraped by Prometheus and remote-written back, are in its storage: the
/// scrape succeeded every time (`up` is 1, so Prometheus parsed the exposition), and the
/// remote-write requests it served counted up.
fn strata_monitored_itself(got: &SeriesMap) {
    let strata_series = |name: &str, extra: &[(&str, &str)]| -> Vec<f64> {
        let found = got.iter().find(|(labels, _)| {
            let has = |n: &str, v: &str| labels.iter().any(|(ln, lv)| ln == n && lv == v);
            has("__name__", name) && has("job", "strata") && extra.iter().all(|(n, v)| has(n, v))
        });
        let samples = found.unwrap_or_else(|| panic!("no {name}{extra:?} of job strata stored")).1;
        samples.iter().map(|(_, bits)| f64::from_bits(*bits)).collect()
    };
    let up = strata_series("up", &[]);
    assert!(up.iter().all(|v| *v == 1.0), "a scrape of strata failed: up = {up:?}");
    let writes =
        strata_series("strata_http_requests_total", &[("handler", "/api/v1/write"), ("code", "204")]);
    assert!(writes.windows(2).all(|w| w[0] <= w[1]), "a counter went down: {writes:?}");
    assert!(writes.first() < writes.last(), "remote writes were not counted: {writes:?}");
    let latencies = strata_series(
        "strata_http_request_duration_seconds_bucket",
        &[("handler", "/api/v1/write"), ("le", "+Inf")],
    );
    assert!(latencies.last().is_some_and(|n| *n > 0.0), "{latencies:?}");
    let appended = strata_series("strata_ingest_samples_appended_total", &[]);
    assert!(appended.first() < appended.last(), "{appended:?}");
    let rss = strata_series("process_resident_memory_bytes", &[]);
    assert!(rss.iter().all(|b| *b > 0.0), "{rss:?}");
}

fn prometheus_config(node: &str, prometheus: &str, strata: &str, strata_write_url: &str) -> String {
    format!(
        "global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['{node}']
  - job_name: prometheus
    static_configs:
      - targets: ['{prometheus}']
  - job_name: strata
    static_configs:
      - targets: ['{strata}']
remote_write:
  - url: {strata_write_url}
    queue_config:
      batch_send_deadline: 1s
      max_samples_per_send: 500
"
    )
}

/// The raw samples Prometheus holds in `(from, to]` for every series, stale markers hidden.
fn prometheus_samples(agent: &ureq::Agent, url: &str, from: i64, to: i64) -> SeriesMap {
    let range_s = (to - from) / 1000;
    let query = format!("{{__name__=~\".+\"}}[{range_s}s]");
    let reply = agent
        .get(format!("{url}/api/v1/query"))
        .query("query", &query)
        .query("time", (to / 1000).to_string())
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(json["status"], "success", "{reply}");
    assert_eq!(json["data"]["resultType"], "matrix");
    let mut out = SeriesMap::new();
    for series in json["data"]["result"].as_array().unwrap() {
        let mut labels: Vec<(String, String)> = series["metric"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        labels.sort();
        let samples = series["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                let seconds = pair[0].as_f64().unwrap();
                // Go formats with the shortest representation that parses back to the same bits.
                let value = parse_go_float(pair[1].as_str().unwrap());
                ((seconds * 1000.0).round() as i64, value_bits(value))
            })
            .collect();
        out.insert(labels, samples);
    }
    out
}

fn parse_go_float(text: &str) -> f64 {
    match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap(),
    }
}

/// A value's bits for comparison. The JSON API writes every NaN as "NaN", so NaN payloads
/// cannot be compared; all (non-stale) NaNs compare equal. Everything else is bit-exact.
fn value_bits(v: f64) -> u64 {
    if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}
