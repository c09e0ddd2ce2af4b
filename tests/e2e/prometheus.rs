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

mod vmalert;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::process::{Prometheus, free_port, highest_sent_ms, peer, start_node_exporter, wait_for};
use crate::common::{Strata, matrix_series, stored_series};

/// How long Prometheus scrapes and sends. The compared interval leaves 5 s at each end.
const RUN: Duration = Duration::from_secs(18);
/// Margin at both ends of the run that the compared interval leaves out: at the start targets
/// may not be scraped yet, at the end the remote-write queue may not have sent yet.
const MARGIN_MS: i64 = 5_000;

/// One series: its labels (with `__name__`) and its samples as (ms, value bits).
type SeriesMap = BTreeMap<Vec<(String, String)>, Vec<(i64, u64)>>;

#[test]
fn strata_stores_exactly_what_prometheus_scraped() {
    let test = "strata_stores_exactly_what_prometheus_scraped";
    let (Some(prometheus), Some(node_exporter)) = (
        peer("prometheus", "prometheus", test),
        peer("prometheus-node-exporter", "prometheus-node-exporter", test),
    ) else {
        return;
    };

    let dir = tempfile::tempdir().unwrap();
    let strata_dir = dir.path().join("strata");
    let mut strata = Strata::start(&strata_dir);
    strata.wait_ready();

    let collectors = ["cpu", "loadavg", "meminfo", "netdev", "stat"];
    let (_node, node_addr) = start_node_exporter(&node_exporter, dir.path(), &collectors);
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let strata_addr = strata.addr().to_string();
    let config = prometheus_config(&node_addr, &prom_addr, &strata_addr, &strata.url("/api/v1/write"));
    let mut prom = Prometheus::start(&prometheus, dir.path(), &prom_addr, &config, &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();

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
    wait_for(prom.log(), "remote write to send past the interval", || {
        highest_sent_ms(&agent, &prom.url).is_some_and(|sent| sent >= to + 3000)
    });
    let expected = prometheus_samples(&prom, from, to);

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
fn prometheus_samples(prom: &Prometheus, from: i64, to: i64) -> SeriesMap {
    let query = format!("{{__name__=~\".+\"}}[{}s]", (to - from) / 1000);
    let answer = prom.query(&[("query", &query), ("time", &(to / 1000).to_string())]);
    matrix_series(&answer)
        .into_iter()
        .map(|(labels, samples)| {
            (labels, samples.into_iter().map(|(t, v)| (t, value_bits(f64::from_bits(v)))).collect())
        })
        .collect()
}

/// A value's bits for comparison. The JSON API writes every NaN as "NaN", so NaN payloads
/// cannot be compared; all (non-stale) NaNs compare equal. Everything else is bit-exact.
fn value_bits(v: f64) -> u64 {
    if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}
