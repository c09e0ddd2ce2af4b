use std::sync::Arc;

use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{Method, Request, StatusCode};
use storage::{Batch, Db, Labels, MatchOp, Matcher, Querier, STALE_NAN_BITS, Sample};
use tower::ServiceExt;

use super::*;
use crate::server::router;

const T0: i64 = 1_700_000_000_000;

/// A router over a fresh database with two series, admin API on or off.
struct Server {
    dir: tempfile::TempDir,
    state: Arc<AppState>,
    db: Arc<Db>,
}

impl Server {
    fn new(admin: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(storage::Options::new(dir.path())).unwrap());
        let mut batch = Batch::new();
        for job in ["a", "b"] {
            let mut samples: Vec<Sample> = (0..100).map(|i| Sample::new(T0 + i * 1000, i as f64)).collect();
            samples[50].v = f64::from_bits(STALE_NAN_BITS);
            batch.push(Labels::from_pairs(&[("__name__", "up"), ("job", job)]), samples);
        }
        db.append(&batch).unwrap();
        let state = Arc::new(AppState::new().with_admin_api(admin));
        state.set_db(Arc::clone(&db));
        Server { dir, state, db }
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        form: Option<&str>,
    ) -> (StatusCode, Option<String>, String) {
        let mut request = Request::builder().method(method).uri(uri);
        if form.is_some() {
            request = request.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let request = request.body(form.map_or_else(Body::empty, |f| Body::from(f.to_owned()))).unwrap();
        let response = router(Arc::clone(&self.state)).oneshot(request).await.unwrap();
        let status = response.status();
        let retry_after = response.headers().get(RETRY_AFTER).map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, retry_after, String::from_utf8(body.to_vec()).unwrap())
    }
}

/// Every series in `db` with its samples as (t, bits).
fn contents(db: &Db) -> Vec<(String, Vec<(i64, u64)>)> {
    let snapshot = db.snapshot();
    let all = [Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()];
    snapshot
        .select(&all, i64::MIN, i64::MAX)
        .unwrap()
        .into_iter()
        .map(|s| {
            let mut samples = Vec::new();
            snapshot.samples(&s, i64::MIN, i64::MAX, &mut samples).unwrap();
            (s.labels.to_string(), samples.iter().map(|x| (x.t, x.v.to_bits())).collect())
        })
        .collect()
}

#[tokio::test]
async fn disabled_admin_answers_like_prometheus() {
    let server = Server::new(false);
    for path in ["delete_series?match[]=up", "clean_tombstones", "snapshot", "compact"] {
        for method in [Method::POST, Method::PUT] {
            let (status, retry_after, body) =
                server.call(method, &format!("/api/v1/admin/tsdb/{path}"), None).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(retry_after, None, "retrying does not enable the API");
            let json: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                json,
                serde_json::json!({"status": "error", "errorType": "unavailable", "error": "admin APIs disabled"})
            );
        }
    }
    assert_eq!(contents(&server.db).len(), 2, "nothing was deleted");
}

#[tokio::test]
async fn delete_series_hides_the_matching_range() {
    let server = Server::new(true);
    let before = contents(&server.db);
    // Seconds, as Prometheus takes them: delete job="a" in [T0+10s, T0+19s].
    let form = format!("match[]=up{{job=\"a\"}}&start={}&end={}", (T0 + 10_000) / 1000, (T0 + 19_000) / 1000);
    let (status, _, body) = server.call(Method::POST, "/api/v1/admin/tsdb/delete_series", Some(&form)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert!(body.is_empty());
    let after = contents(&server.db);
    let a: Vec<i64> = after[0].1.iter().map(|s| s.0).collect();
    assert_eq!(a.len(), 90);
    assert!(!a.iter().any(|t| (T0 + 10_000..=T0 + 19_000).contains(t)));
    assert_eq!(after[1], before[1], "job=b untouched");

    // PUT, everything of job="b", in the URL; then cleaning the tombstones keeps the answer.
    let (status, _, _) = server
        .call(Method::PUT, "/api/v1/admin/tsdb/delete_series?match%5B%5D=%7Bjob%3D%22b%22%7D", None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let hidden = contents(&server.db);
    assert_eq!(hidden.len(), 1);
    let (status, _, _) = server.call(Method::POST, "/api/v1/admin/tsdb/clean_tombstones", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(contents(&server.db), hidden);
}

#[tokio::test]
async fn compact_merges_each_partition_into_one_file() {
    let server = Server::new(true);
    server.db.flush().unwrap();
    let mut batch = Batch::new();
    batch.push(Labels::from_pairs(&[("__name__", "up"), ("job", "a")]), vec![Sample::new(T0 + 200_000, 7.0)]);
    server.db.append(&batch).unwrap();
    server.db.flush().unwrap();
    let before = contents(&server.db);
    let files = |db: &Db| db.disk_stats().unwrap().partitions.iter().map(|p| p.files).sum::<usize>();
    assert_eq!(files(&server.db), 2);
    for method in [Method::POST, Method::PUT] {
        let (status, _, body) = server.call(method, "/api/v1/admin/tsdb/compact", None).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        assert!(body.is_empty());
        assert_eq!(files(&server.db), 1);
        assert_eq!(contents(&server.db), before);
    }
}

#[tokio::test]
async fn delete_series_checks_its_parameters() {
    let server = Server::new(true);
    let cases = [
        ("", "no match[] parameter provided"),
        ("match[]=up&start=yesterday", "invalid parameter \"start\""),
        ("match[]=up&end=x", "invalid parameter \"end\""),
        ("match[]={job=~\".*\"}", "match[] must contain at least one non-empty matcher"),
        ("match[]=up{", "parse error"),
    ];
    for (form, message) in cases {
        let (status, _, body) =
            server.call(Method::POST, "/api/v1/admin/tsdb/delete_series", Some(form)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{form}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["errorType"], "bad_data");
        assert!(json["error"].as_str().unwrap().contains(message), "{form}: {body}");
    }
    assert_eq!(contents(&server.db).len(), 2);
}

#[tokio::test]
async fn snapshot_writes_a_copy_a_new_strata_can_open() {
    let server = Server::new(true);
    let expected = contents(&server.db);
    let (status, _, body) = server.call(Method::POST, "/api/v1/admin/tsdb/snapshot", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["status"], "success");
    let name = json["data"]["name"].as_str().unwrap().to_owned();
    assert_eq!(json["data"], serde_json::json!({ "name": name }));
    let dir = server.dir.path().join(SNAPSHOTS_DIR).join(&name);
    assert!(dir.join("MANIFEST").is_file());

    // skip_head=true copies only flushed data: the new samples stay out.
    let mut batch = Batch::new();
    batch.push(Labels::from_pairs(&[("__name__", "late")]), vec![Sample::new(T0, 1.0)]);
    server.db.append(&batch).unwrap();
    let (status, _, body) =
        server.call(Method::PUT, "/api/v1/admin/tsdb/snapshot?skip_head=true", None).await;
    assert_eq!(status, StatusCode::OK);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let skipped = server.dir.path().join(SNAPSHOTS_DIR).join(json["data"]["name"].as_str().unwrap());
    assert_ne!(skipped, dir);

    let copy = Db::open(storage::Options::new(&dir)).unwrap();
    assert_eq!(contents(&copy), expected);
    copy.close().unwrap();
    let copy = Db::open(storage::Options::new(&skipped)).unwrap();
    assert_eq!(contents(&copy), expected, "without the head");
    copy.close().unwrap();
}

#[tokio::test]
async fn snapshot_rejects_a_bad_skip_head() {
    let server = Server::new(true);
    let (status, _, body) =
        server.call(Method::POST, "/api/v1/admin/tsdb/snapshot", Some("skip_head=maybe")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        json["error"],
        "invalid parameter \"skip_head\": unable to parse boolean: strconv.ParseBool: parsing \"maybe\": invalid syntax"
    );
    assert!(!server.dir.path().join(SNAPSHOTS_DIR).exists());
}

#[test]
fn go_bools() {
    for s in ["1", "t", "T", "TRUE", "true", "True"] {
        assert_eq!(parse_go_bool(s), Some(true), "{s}");
    }
    for s in ["0", "f", "F", "FALSE", "false", "False"] {
        assert_eq!(parse_go_bool(s), Some(false), "{s}");
    }
    for s in ["yes", "tRUE", " true", ""] {
        assert_eq!(parse_go_bool(s), None, "{s}");
    }
}

#[test]
fn snapshot_names_look_like_prometheus_ones() {
    let at = UNIX_EPOCH + std::time::Duration::from_secs(1_512_940_344);
    let name = snapshot_name(at);
    let (time, random) = name.split_once('-').unwrap();
    assert_eq!(time, "20171210T211224Z");
    assert_eq!(random.len(), 16);
    let value = u64::from_str_radix(random, 16).unwrap();
    assert!(value < 1 << 63, "a 63-bit number, as Go's rand.Int63");
    assert_ne!(snapshot_name(at), snapshot_name(at), "names made in the same second differ");
}
