//! `GET /api/v1/status/tsdb`: Prometheus' cardinality overview, which its UI and Grafana show
//! as the "TSDB status" page and operators use to find the metric or label behind a series
//! explosion.
//!
//! Prometheus computes it over its head block (the last hours); strata's series index spans all
//! stored data, so the numbers cover every live series: `headStats.numSeries` is the series
//! count, `minTime`/`maxTime` the oldest and newest sample of the whole database, and
//! `chunkCount` the chunks in the in-memory heads. The four lists are the `limit` (default 10)
//! largest entries by count, largest first.
//!
//! With tenants, every number is the request's tenants' own (`X-Scope-OrgID`, see
//! [`crate::tenant`]): their series, their creations and refusals, limits counted per tenant.
//!
//! Added fields (clients that know only Prometheus' ignore them) name who creates series:
//! `seriesCreatedTodayByMetricName` and `seriesRejectedTodayByMetricName` (the metrics that
//! created, or had refused by a cardinality limit, the most series since 00:00 UTC) and
//! `seriesLimits` (the limits in force, today's totals and refusals per limit since start).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use storage::Stat;

use crate::api::params::Params;
use crate::api::respond::Success;
use crate::api::{blocking, db};
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenant::Scope;

/// Entries per list when `limit` is not given, as in Prometheus.
const DEFAULT_LIMIT: usize = 10;

fn stats(list: Vec<Stat>) -> Value {
    Value::Array(list.into_iter().map(|s| json!({"name": s.name, "value": s.value})).collect())
}

/// The handler.
pub async fn tsdb_status(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    params: Params,
) -> Result<Response, ApiError> {
    let limit = match params.get("limit") {
        None => DEFAULT_LIMIT,
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| ApiError::BadData("limit must be a positive number".into()))?,
    };
    let db = db(&state)?;
    let data = blocking(move || {
        let snapshot = db.snapshot();
        let s = snapshot.index_stats(limit, &[scope.matcher()])?;
        // Prometheus' values for an empty head.
        let (min_t, max_t) = snapshot.time_bounds().unwrap_or((i64::MAX, i64::MIN));
        let tenants = scope.tenants();
        let c = db.cardinality_stats(&tenants, limit);
        Ok(json!({
            "headStats": {
                "numSeries": s.series,
                "numLabelPairs": s.label_pairs,
                "chunkCount": snapshot.head_chunks(),
                "minTime": min_t,
                "maxTime": max_t,
            },
            "seriesCountByMetricName": stats(s.series_by_metric_name),
            "labelValueCountByLabelName": stats(s.values_by_label_name),
            "memoryInBytesByLabelName": stats(s.value_bytes_by_label_name),
            "seriesCountByLabelValuePair": stats(s.series_by_label_pair),
            "seriesCreatedTodayByMetricName": stats(c.created_today_by_metric),
            "seriesRejectedTodayByMetricName": stats(c.rejected_today_by_metric),
            "seriesLimits": {
                "maxSeries": c.limits.max_series,
                "maxSeriesPerMetric": c.limits.max_series_per_metric,
                "maxNewSeriesPerDay": c.limits.max_new_series_per_day,
                "dayStart": c.day_start_ms,
                "seriesCreatedToday": c.created_today,
                "seriesRejectedToday": c.rejected_today,
                "seriesRejectedTotal": {
                    "max_series": c.rejected_total.max_series,
                    "max_series_per_metric": c.rejected_total.max_series_per_metric,
                    "max_new_series_per_day": c.rejected_total.max_new_series_per_day,
                },
            },
        }))
    })
    .await?;
    Ok(Success::new(data).into_response())
}
