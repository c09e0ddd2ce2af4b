//! Router tests without sockets: requests go straight into the `Router` with `oneshot`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use tower::ServiceExt;

use super::router;
use crate::state::AppState;

async fn call(state: &Arc<AppState>, method: Method, path: &str) -> (StatusCode, String) {
    let request = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
    let response = router(Arc::clone(state)).oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

fn open_db(dir: &tempfile::TempDir) -> Arc<storage::Db> {
    Arc::new(storage::Db::open(storage::Options::new(dir.path())).unwrap())
}

#[tokio::test]
async fn healthy_answers_even_while_the_database_is_opening() {
    let state = Arc::new(AppState::new());
    assert_eq!(
        call(&state, Method::GET, "/-/healthy").await,
        (StatusCode::OK, "strata is Healthy.\n".into())
    );
}

#[tokio::test]
async fn ready_is_503_while_the_database_is_opening() {
    let state = Arc::new(AppState::new());
    let (status, body) = call(&state, Method::GET, "/-/ready").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("opening"), "{body}");
}

#[tokio::test]
async fn ready_is_200_once_the_database_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let state = Arc::new(AppState::new());
    state.set_db(open_db(&dir));
    assert_eq!(call(&state, Method::GET, "/-/ready").await, (StatusCode::OK, "strata is Ready.\n".into()));
}

#[tokio::test]
async fn ready_is_503_with_the_reason_when_storage_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let state = Arc::new(AppState::new());
    let db = open_db(&dir);
    // A closed database reports itself unwritable, like one whose WAL hit an fsync error.
    db.close().unwrap();
    let reason = db.health().reason.unwrap();
    state.set_db(db);
    let (status, body) = call(&state, Method::GET, "/-/ready").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains(&reason), "{body:?} should name {reason:?}");
}

#[tokio::test]
async fn ready_is_503_once_shutdown_has_begun_while_healthy_stays_200() {
    let dir = tempfile::tempdir().unwrap();
    let state = Arc::new(AppState::new());
    state.set_db(open_db(&dir));
    state.begin_stopping();
    let (status, body) = call(&state, Method::GET, "/-/ready").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("shutting down"), "{body}");
    assert_eq!(call(&state, Method::GET, "/-/healthy").await.0, StatusCode::OK);
}

#[tokio::test]
async fn head_requests_get_the_status_without_a_body() {
    let state = Arc::new(AppState::new());
    assert_eq!(call(&state, Method::HEAD, "/-/healthy").await, (StatusCode::OK, String::new()));
    assert_eq!(
        call(&state, Method::HEAD, "/-/ready").await,
        (StatusCode::SERVICE_UNAVAILABLE, String::new())
    );
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405() {
    let state = Arc::new(AppState::new());
    assert_eq!(
        call(&state, Method::GET, "/nope").await,
        (StatusCode::NOT_FOUND, "404 page not found\n".into())
    );
    assert_eq!(call(&state, Method::POST, "/-/ready").await.0, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish() {
    use std::sync::Mutex;
    use tokio::sync::oneshot;

    let (started_tx, started_rx) = oneshot::channel::<()>();
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let hooks = Arc::new(Mutex::new(Some((started_tx, release_rx))));
    let app = axum::Router::new().route(
        "/slow",
        axum::routing::get(move || {
            let hooks = hooks.lock().unwrap().take();
            async move {
                let (started, release) = hooks.expect("one request");
                started.send(()).unwrap();
                release.await.unwrap();
                "done"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    let (stop, server) = super::spawn_server(listener, app, std::time::Duration::from_secs(60));

    let client = tokio::task::spawn_blocking(move || {
        let mut response = ureq::get(&url).call().unwrap();
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    });
    started_rx.await.unwrap();
    stop.send(()).unwrap();
    // Shutdown has begun but cannot complete while the request is in flight.
    assert!(!server.is_finished());
    release_tx.send(()).unwrap();
    assert_eq!(client.await.unwrap(), (200, "done".to_owned()));
    server.await.unwrap().unwrap();
}
