//! Router tests for the empty listings, against what Prometheus 2.42 answers with none.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::server::router;
use crate::state::AppState;

async fn call(method: &str, uri: &str) -> (StatusCode, Option<Value>) {
    let request = Request::builder().method(method).uri(uri).body(Body::empty()).unwrap();
    let response = router(Arc::new(AppState::new())).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, serde_json::from_slice(&bytes).ok())
}

#[tokio::test]
async fn listings_are_prometheus_empty_answers() {
    let cases = [
        ("/api/v1/rules", json!({ "groups": [] })),
        ("/api/v1/rules?type=alert&rule_name[]=x&match[]=up", json!({ "groups": [] })),
        ("/api/v1/rules?type=record", json!({ "groups": [] })),
        ("/api/v1/alerts", json!({ "alerts": [] })),
        ("/api/v1/targets", json!({ "activeTargets": [], "droppedTargets": [], "droppedTargetCounts": {} })),
        (
            "/api/v1/targets?state=dropped",
            json!({ "activeTargets": [], "droppedTargets": [], "droppedTargetCounts": {} }),
        ),
        ("/api/v1/targets/metadata", json!([])),
        ("/api/v1/targets/metadata?match_target=%7Bjob%3D%22x%22%7D&metric=up", json!([])),
        ("/api/v1/alertmanagers", json!({ "activeAlertmanagers": [], "droppedAlertmanagers": [] })),
    ];
    for (uri, data) in cases {
        let (status, body) = call("GET", uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert_eq!(body, Some(json!({ "status": "success", "data": data })), "{uri}");
    }
}

#[tokio::test]
async fn bad_filters_are_refused_and_posts_are_not_allowed() {
    let (status, body) = call("GET", "/api/v1/rules?type=foo").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let body = body.unwrap();
    assert_eq!(body["errorType"], "bad_data");
    assert_eq!(body["error"], "invalid parameter \"type\": not supported value \"foo\"");
    for uri in ["/api/v1/rules?match[]=sum(", "/api/v1/targets/metadata?match_target=%7B"] {
        assert_eq!(call("GET", uri).await.0, StatusCode::BAD_REQUEST, "{uri}");
    }
    for uri in ["/api/v1/rules", "/api/v1/alerts", "/api/v1/targets", "/api/v1/alertmanagers"] {
        assert_eq!(call("POST", uri).await.0, StatusCode::METHOD_NOT_ALLOWED, "{uri}");
    }
}
