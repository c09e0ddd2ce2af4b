//! `/api/v1/rules`, `/api/v1/alerts`, `/api/v1/targets`, `/api/v1/targets/metadata` and
//! `/api/v1/alertmanagers`: Prometheus' listings of what its rule engine, scraper and notifier
//! hold.
//!
//! strata stores and queries; it evaluates no rules, scrapes no targets and notifies no
//! Alertmanager, so each listing is empty, exactly as Prometheus answers when it has none
//! (same members, same parameter checks). They exist because clients call them: Grafana's
//! Prometheus data source lists a source's rules and alerts in its Alerting UI ("Manage alerts
//! via Alerting UI", on by default) and shows "Errors loading rules" for a source that answers
//! 404; the Prometheus UI reads targets and Alertmanagers. GET only, as in Prometheus.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use serde_json::json;

use crate::api::params::{self, Params};
use crate::api::respond::Success;
use crate::error::ApiError;
use crate::state::AppState;

/// The listing routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/rules", get(rules))
        .route("/api/v1/alerts", get(alerts))
        .route("/api/v1/targets", get(targets))
        .route("/api/v1/targets/metadata", get(targets_metadata))
        .route("/api/v1/alertmanagers", get(alertmanagers))
}

/// `GET /api/v1/rules`: no rule groups. The filters are checked as Prometheus checks them
/// (`type` is `alert` or `record`, `match[]` are selectors), then select from nothing.
async fn rules(params: Params) -> Result<Success, ApiError> {
    match params.get("type") {
        None | Some("" | "alert" | "record") => {}
        Some(other) => {
            return Err(ApiError::BadData(format!(
                "invalid parameter \"type\": not supported value {other:?}"
            )));
        }
    }
    for selector in params.all("match[]") {
        params::parse_matchers(selector)?;
    }
    Ok(Success::new(json!({ "groups": [] })))
}

/// `GET /api/v1/alerts`: no active alerts.
async fn alerts() -> Success {
    Success::new(json!({ "alerts": [] }))
}

/// `GET /api/v1/targets`: no scrape targets, whatever `state` asks for.
async fn targets() -> Success {
    Success::new(json!({ "activeTargets": [], "droppedTargets": [], "droppedTargetCounts": {} }))
}

/// `GET /api/v1/targets/metadata`: no metadata from targets (a `match_target` must still be a
/// selector). Metric metadata that senders remote-wrote is served by `/api/v1/metadata`.
async fn targets_metadata(params: Params) -> Result<Success, ApiError> {
    if let Some(selector) = params.get("match_target").filter(|s| !s.is_empty()) {
        promql::parser::parse_metric_selector(selector).map_err(|e| ApiError::BadData(e.render(selector)))?;
    }
    Ok(Success::new(json!([])))
}

/// `GET /api/v1/alertmanagers`: none.
async fn alertmanagers() -> Success {
    Success::new(json!({ "activeAlertmanagers": [], "droppedAlertmanagers": [] }))
}

#[cfg(test)]
mod tests;
