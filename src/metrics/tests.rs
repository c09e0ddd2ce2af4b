//! Tests of the whole `/metrics` answer through the router: what requests and storage activity
//! show up, that the family structure is sound, and that `promtool check metrics` accepts it.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use storage::{Batch, Db, Labels, Sample};
use tower::ServiceExt;

use super::*;
use crate::server::router;

const BASE: i64 = 1_700_000_000_000; // a fixed past time: never too far in the future

async fn get_text(app: Router, path: &str) -> (StatusCode, String) {
    let response = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// A state with an open database in `dir`.
fn state_with_db(dir: &tempfile::TempDir) -> (Arc<AppState>, Arc<Db>) {
    let mut opts = storage::Options::new(dir.path());
    opts.maintenance_interval = std::time::Duration::from_secs(3600); // the tests flush themselves
    let db = Arc::new(Db::open(opts).unwrap());
    let state = Arc::new(AppState::new());
    state.set_db(Arc::clone(&db));
    (state, db)
}

fn append(db: &Db, host: &str, times: &[i64]) {
    let mut batch = Batch::new();
    let labels = Labels::from_pairs(&[("__name__", "up"), ("host", host)]);
    batch.push(labels, times.iter().map(|&t| Sample::new(t, 1.0)).collect());
    db.append(&batch).unwrap();
}

/// The value of the sample line that is exactly `series` (name and labels as written).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn requests_are_counted_by_route_template_code_and_latency() {
    let state = Arc::new(AppState::new());
    let app = Router::new()
        .route("/items/{id}", get(|| async { "item" }))
        .route("/metrics", get(metrics))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), count_requests))
        .with_state(Arc::clone(&state));

    for path in ["/items/1", "/items/2", "/items/3", "/nowhere", "/also/nowhere"] {
        app.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    }
    let (status, text) = get_text(app.clone(), "/metrics").await;
    assert_eq!(status, StatusCode::OK);

    assert_eq!(value(&text, r#"strata_http_requests_total{handler="/items/{id}",code="200"}"#), Some(3.0));
    assert_eq!(value(&text, r#"strata_http_requests_total{handler="other",code="404"}"#), Some(2.0));
    assert!(!text.contains("/items/1"), "raw paths must not become labels:\n{text}");
    let count = r#"strata_http_request_duration_seconds_count{handler="/items/{id}"}"#;
    assert_eq!(value(&text, count), Some(3.0), "{text}");
    let inf = r#"strata_http_request_duration_seconds_bucket{handler="/items/{id}",le="+Inf"}"#;
    assert_eq!(value(&text, inf), Some(3.0), "{text}");
    // The scrape itself is in flight while it renders; nothing else is.
    assert_eq!(value(&text, "strata_http_requests_in_flight"), Some(1.0), "{text}");
    // A scrape is counted once it has answered.
    assert_eq!(state.metrics().http().requests("/metrics", 200), 1);
    assert_eq!(state.metrics().http().in_flight(), 0);
}

#[tokio::test]
async fn a_dropped_request_leaves_the_in_flight_gauge() {
    let http = HttpMetrics::default();
    let guard = http.start();
    assert_eq!(http.in_flight(), 1);
    drop(guard);
    assert_eq!(http.in_flight(), 0);
}

#[tokio::test]
async fn storage_families_follow_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (state, db) = state_with_db(&dir);
    let (_, before) = get_text(router(Arc::clone(&state)), "/metrics").await;
    assert_eq!(value(&before, "strata_storage_partitions"), Some(0.0), "{before}");
    assert_eq!(value(&before, "strata_storage_flushes_total"), Some(0.0));

    append(&db, "a", &[BASE, BASE + 15_000, BASE + 30_000]);
    append(&db, "a", &[BASE + 10_000]);
    let (_, in_head) = get_text(router(Arc::clone(&state)), "/metrics").await;
    assert_eq!(value(&in_head, "strata_head_samples"), Some(4.0), "{in_head}");
    assert_eq!(value(&in_head, "strata_head_series"), Some(1.0));
    assert_eq!(value(&in_head, "strata_ingest_samples_out_of_order_total"), Some(1.0));
    assert_eq!(value(&in_head, "strata_head_out_of_order_samples"), Some(1.0));
    assert_eq!(value(&in_head, "strata_wal_records_total"), Some(2.0));
    assert_eq!(
        value(&in_head, "strata_wal_fsync_duration_seconds_count"),
        value(&in_head, "strata_wal_fsyncs_total")
    );
    assert_eq!(value(&in_head, "strata_wal_group_commit_records_sum"), Some(2.0));
    assert_eq!(value(&in_head, "strata_wal_segments"), Some(1.0));

    db.flush().unwrap();
    let (_, flushed) = get_text(router(Arc::clone(&state)), "/metrics").await;
    assert_eq!(value(&flushed, "strata_head_samples"), Some(0.0), "{flushed}");
    assert_eq!(value(&flushed, "strata_storage_flushes_total"), Some(1.0));
    assert_eq!(value(&flushed, "strata_storage_flush_duration_seconds_count"), Some(1.0));
    assert_eq!(value(&flushed, "strata_storage_partitions"), Some(1.0));
    // 1700000000000 ms is 2023-11-14T22:13:20Z; its day partition starts at midnight.
    let bytes = value(&flushed, r#"strata_storage_partition_bytes{partition="2023-11-14T00:00:00Z"}"#);
    assert!(bytes.is_some_and(|b| b > 0.0), "{flushed}");
    assert_eq!(bytes, value(&flushed, "strata_storage_flush_bytes_written_total"));
    // The in-order samples and the out-of-order one went to a file each.
    let files = value(&flushed, r#"strata_storage_partition_files{partition="2023-11-14T00:00:00Z"}"#);
    assert_eq!(files, Some(2.0));
    let disk = value(&flushed, "strata_storage_disk_bytes").unwrap();
    let wal = value(&flushed, "strata_wal_bytes").unwrap();
    assert_eq!(disk, bytes.unwrap() + wal);
    db.close().unwrap();
}

#[tokio::test]
async fn repeated_queries_hit_the_parse_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (state, db) = state_with_db(&dir);
    append(&db, "a", &[BASE]);
    let query = format!("/api/v1/query?query=sum(up)&time={}", BASE / 1000);
    for _ in 0..3 {
        let (status, body) = get_text(router(Arc::clone(&state)), &query).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, _) = get_text(router(Arc::clone(&state)), "/api/v1/query?query=sum(").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, text) = get_text(router(Arc::clone(&state)), "/metrics").await;
    assert_eq!(value(&text, "strata_query_parse_cache_hits_total"), Some(2.0), "{text}");
    assert_eq!(value(&text, "strata_query_parse_cache_misses_total"), Some(2.0), "{text}");
    assert_eq!(value(&text, "strata_query_parse_cache_entries"), Some(1.0), "{text}");
    db.close().unwrap();
}

#[tokio::test]
async fn every_sample_belongs_to_a_family_announced_once() {
    let dir = tempfile::tempdir().unwrap();
    let (state, db) = state_with_db(&dir);
    append(&db, "a", &[BASE]);
    db.flush().unwrap();
    get_text(router(Arc::clone(&state)), "/-/healthy").await;
    let (_, text) = get_text(router(Arc::clone(&state)), "/metrics").await;

    let mut announced: Vec<(String, String)> = Vec::new();
    let mut helped = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(helped.insert(name.to_owned()), "HELP for {name} twice");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(helped.contains(name), "TYPE before HELP for {name}");
            assert!(announced.iter().all(|(n, _)| n != name), "TYPE for {name} twice");
            announced.push((name.to_owned(), kind.to_owned()));
        } else {
            let series = line.split([' ', '{']).next().unwrap();
            let (family, kind) = announced.last().expect("a sample before any TYPE");
            let belongs = match kind.as_str() {
                "histogram" => {
                    ["_bucket", "_sum", "_count"].iter().any(|s| *series == format!("{family}{s}"))
                }
                _ => series == family,
            };
            assert!(belongs, "{series} follows the TYPE of {family}");
            if kind == "counter" {
                assert!(family.ends_with("_total"), "counter {family} must end in _total");
            }
            assert!(family.starts_with("strata_") || family.starts_with("process_"), "{family}");
        }
    }
    let names: BTreeSet<&str> = announced.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "strata_build_info",
        "strata_http_requests_total",
        "strata_http_request_duration_seconds",
        "strata_http_requests_in_flight",
        "strata_wal_fsync_duration_seconds",
        "strata_storage_partition_bytes",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(names.contains(expected), "{expected} missing from\n{text}");
    }
    db.close().unwrap();
}

/// `promtool check metrics` reads an exposition on stdin and reports format errors and
/// violations of Prometheus' naming conventions. Skipped (with a message) when promtool is not
/// installed, except under CI, which installs it with the `prometheus` package.
#[tokio::test]
async fn promtool_accepts_the_exposition() {
    let dir = tempfile::tempdir().unwrap();
    let (state, db) = state_with_db(&dir);
    append(&db, "a", &[BASE, BASE + 15_000]);
    db.flush().unwrap();
    get_text(router(Arc::clone(&state)), "/-/ready").await;
    let (_, text) = get_text(router(Arc::clone(&state)), "/metrics").await;
    db.close().unwrap();

    let Some(result) = promtool_check_metrics(&text) else {
        let message = "promtool is not on PATH (Debian package `prometheus`; .ci/run installs it)";
        assert!(!under_ci(), "{message}");
        let _ = writeln!(std::io::stderr(), "SKIPPED promtool_accepts_the_exposition: {message}");
        return;
    };
    let (success, report) = result;
    assert!(success && report.trim().is_empty(), "promtool check metrics:\n{report}\n---\n{text}");
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

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

#[tokio::test]
async fn scrapes_that_accept_gzip_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _db) = state_with_db(&dir);
    let request = Request::get("/metrics").header("Accept-Encoding", "gzip").body(Body::empty()).unwrap();
    let response = router(Arc::clone(&state)).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(response.headers()["content-type"], CONTENT_TYPE_TEXT);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
    assert_eq!(value(&text, "strata_storage_partitions"), Some(0.0), "{text}");
    assert!(bytes.len() * 3 < text.len(), "{} bytes for {}", bytes.len(), text.len());
}
