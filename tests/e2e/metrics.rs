//! `/metrics` of the real binary: after writes it shows the requests, the stored samples, a
//! flush with the partition it wrote, and the process' own numbers; and `promtool check
//! metrics` (Debian's `prometheus` package) accepts it. That Prometheus can scrape it and strata
//! can store the result is in `prometheus.rs`.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::Strata;

/// Bound on waiting for the background flush. Not a performance bound.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// The value of the sample line that is exactly `series` (name and labels as written).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_show_writes_flushes_partitions_and_the_process() {
    let dir = tempfile::tempdir().unwrap();
    // A head of 10 samples is due for a flush at once, so the background worker writes a
    // partition file right after the write below.
    let mut strata = Strata::start_with(dir.path(), &["--head-samples-max", "10"]);
    strata.wait_ready();

    let first = strata.get("/metrics");
    assert_eq!(first.status, 200);
    assert_eq!(first.content_type.as_deref(), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert_eq!(value(&first.body, "strata_storage_flushes_total"), Some(0.0), "{}", first.body);
    assert_eq!(value(&first.body, "strata_storage_partitions"), Some(0.0));

    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let lines: String =
        (0..20).map(|i| format!("cpu,host=a value={i} {}\n", now - 20_000 + i * 1000)).collect();
    let reply = strata.post("/write?db=test&precision=ms", &[], lines.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);

    // Wait for the event (the flush), bounded by a guard that fails with the log.
    let deadline = Instant::now() + HANG_GUARD;
    let text = loop {
        let text = strata.get("/metrics").body;
        if value(&text, "strata_storage_flushes_total").is_some_and(|n| n >= 1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "no flush after {HANG_GUARD:?}; log:\n{}", strata.log());
        std::thread::sleep(Duration::from_millis(50));
    };

    assert_eq!(
        value(&text, r#"strata_http_requests_total{handler="/write",code="204"}"#),
        Some(1.0),
        "{text}"
    );
    let scrapes = value(&text, r#"strata_http_requests_total{handler="/metrics",code="200"}"#).unwrap();
    assert!(scrapes >= 1.0);
    let scrape_latencies = r#"strata_http_request_duration_seconds_count{handler="/metrics"}"#;
    assert_eq!(value(&text, scrape_latencies), Some(scrapes), "{text}");
    assert_eq!(value(&text, "strata_ingest_samples_appended_total"), Some(20.0));
    assert_eq!(value(&text, "strata_storage_series_created_total"), Some(1.0));
    assert!(value(&text, "strata_wal_fsyncs_total").is_some_and(|n| n >= 1.0), "{text}");
    assert_eq!(
        value(&text, "strata_storage_flush_duration_seconds_count"),
        value(&text, "strata_storage_flushes_total")
    );
    assert!(value(&text, "strata_storage_partitions").is_some_and(|n| n >= 1.0), "{text}");
    let partition_bytes: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("strata_storage_partition_bytes{partition=\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(!partition_bytes.is_empty() && partition_bytes.iter().all(|b| *b > 0.0), "{text}");
    assert!(value(&text, "strata_storage_disk_bytes").unwrap() >= partition_bytes.iter().sum());
    assert!(value(&text, "process_resident_memory_bytes").is_some_and(|b| b > 1e6), "{text}");
    assert!(value(&text, "process_open_fds").is_some_and(|n| n >= 3.0), "{text}");
    assert!(value(&text, "process_threads").is_some_and(|n| n >= 2.0), "{text}");
    assert!(value(&text, "process_start_time_seconds").is_some_and(|s| s > 1e9), "{text}");

    match promtool_check_metrics(&text) {
        Some((success, report)) => {
            assert!(success && report.trim().is_empty(), "promtool check metrics:\n{report}\n---\n{text}")
        }
        None => {
            let message = "promtool is not on PATH (Debian package `prometheus`; .ci/run installs it)";
            crate::common::skip_outside_ci("the promtool check", message);
        }
    }
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

/// Runs `promtool check metrics` on `text`: `None` if promtool is missing, else whether it
/// passed and what it printed.
fn promtool_check_metrics(text: &str) -> Option<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.success(), report))
}
