//! Router tests for the status endpoints.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{PROMETHEUS_VERSION, StatusConfig, StatusInfo, go_time};
use crate::server::router;
use crate::state::AppState;

fn state() -> Arc<AppState> {
    let flags = BTreeMap::from([
        ("data-dir".to_owned(), "./data".to_owned()),
        ("query.timeout".to_owned(), "2m".to_owned()),
        ("log-level".to_owned(), String::new()),
        ("weird".to_owned(), "a \"quoted\"\nvalue: x".to_owned()),
    ]);
    let status = StatusInfo::new(StatusConfig { flags, retention: "15d".into() });
    // The status endpoints answer while the database is still opening.
    Arc::new(AppState::new().with_status(status))
}

async fn get(state: &Arc<AppState>, uri: &str) -> (StatusCode, Value) {
    let response =
        router(Arc::clone(state)).oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn buildinfo_makes_grafana_see_prometheus_3() {
    let (status, body) = get(&state(), "/api/v1/status/buildinfo").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "success");
    let data = body["data"].as_object().unwrap();
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    assert_eq!(keys, ["branch", "buildDate", "buildUser", "goVersion", "revision", "version"]);
    assert_eq!(data["version"], PROMETHEUS_VERSION);
    assert!(PROMETHEUS_VERSION.starts_with("3."));
    assert_eq!(data["revision"], format!("strata-{}", env!("CARGO_PKG_VERSION")));
}

#[tokio::test]
async fn runtimeinfo_has_every_prometheus_field() {
    let (status, body) = get(&state(), "/api/v1/status/runtimeinfo").await;
    assert_eq!(status, StatusCode::OK);
    let data = &body["data"];
    for key in ["startTime", "lastConfigTime", "CWD", "GOGC", "GODEBUG"] {
        assert!(data[key].is_string(), "{key}: {data}");
    }
    for key in ["corruptionCount", "goroutineCount", "GOMAXPROCS", "GOMEMLIMIT"] {
        assert!(data[key].is_number(), "{key}: {data}");
    }
    assert_eq!(data["reloadConfigSuccess"], true);
    assert_eq!(data["storageRetention"], "15d");
    assert_eq!(data["GOMEMLIMIT"], i64::MAX);
    assert!(data["GOMAXPROCS"].as_u64().unwrap() >= 1);
    assert!(chrono::DateTime::parse_from_rfc3339(data["startTime"].as_str().unwrap()).is_ok());
    assert_eq!(data["startTime"], data["lastConfigTime"]);
}

#[tokio::test]
async fn flags_are_every_flag_as_text() {
    let (status, body) = get(&state(), "/api/v1/status/flags").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["data"],
        json!({"data-dir": "./data", "query.timeout": "2m", "log-level": "", "weird": "a \"quoted\"\nvalue: x"})
    );
}

#[tokio::test]
async fn config_is_yaml_of_the_flags() {
    let (status, body) = get(&state(), "/api/v1/status/config").await;
    assert_eq!(status, StatusCode::OK);
    let yaml = body["data"]["yaml"].as_str().unwrap();
    assert!(yaml.starts_with("# strata is configured by command-line flags only"), "{yaml}");
    assert!(yaml.contains("\ndata-dir: \"./data\"\n"), "{yaml}");
    assert!(yaml.contains("\nlog-level: \"\"\n"), "{yaml}");
    assert!(yaml.contains("\nweird: \"a \\\"quoted\\\"\\nvalue: x\"\n"), "{yaml}");
    assert_eq!(yaml.lines().count(), 5);
}

#[test]
fn times_are_written_as_go_writes_them() {
    let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&chrono::Utc);
    assert_eq!(go_time(t("2024-05-01T10:00:00Z")), "2024-05-01T10:00:00Z");
    assert_eq!(go_time(t("2024-05-01T10:00:00.120Z")), "2024-05-01T10:00:00.12Z");
    assert_eq!(go_time(t("2024-05-01T10:00:00.000000001Z")), "2024-05-01T10:00:00.000000001Z");
}

#[tokio::test]
async fn walreplay_reports_the_segments_of_the_opening_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = storage::Db::open(storage::Options::new(dir.path())).unwrap();
    let mut batch = storage::Batch::new();
    batch.push(storage::Labels::from_pairs(&[("__name__", "up")]), vec![storage::Sample::new(1_000, 1.0)]);
    db.append(&batch).unwrap();
    // Dropped without `close`: like a crash, the sample stays in WAL segment 1 only.
    drop(db);

    let opts = storage::Options::new(dir.path());
    let state = Arc::new(AppState::new().with_wal_replay(Arc::clone(&opts.wal_replay_progress)));
    let (status, body) = get(&state, "/api/v1/status/walreplay").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"status": "success", "data": {"min": 0, "max": 0, "current": 0}}));

    let db = storage::Db::open(opts).unwrap();
    state.set_db(Arc::new(db));
    let (status, body) = get(&state, "/api/v1/status/walreplay").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"status": "success", "data": {"min": 1, "max": 1, "current": 1}}));
}
