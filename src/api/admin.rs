//! The TSDB admin endpoints, with Prometheus' semantics and answers:
//!
//! * `POST|PUT /api/v1/admin/tsdb/delete_series` (`match[]` required, `start`, `end`): hides the
//!   matching samples at once (a tombstone, [`storage::Db::delete`]); 204 No Content. With a
//!   bucket, the answer waits (up to [`MIRROR_WAIT`]) until the tombstone is committed there.
//!   On a query node (`--role query`) it is sent to every `--query.writer`, each deleting in
//!   its own prefix, and answered once all have and the node has read their new records.
//! * `POST|PUT /api/v1/admin/tsdb/clean_tombstones`: rewrites the files tombstones apply to,
//!   dropping the deleted data from disk; 204. On a query node, sent to the writers too.
//! * `POST|PUT /api/v1/admin/tsdb/snapshot` (`skip_head`): writes a consistent copy of the
//!   database to `<data-dir>/snapshots/<name>` ([`storage::Db::backup_to`]) that
//!   `strata --data-dir <that dir>` serves; answers `{"name":"<name>"}`.
//!
//! * `POST|PUT /api/v1/admin/tsdb/compact` (strata's own, not in Prometheus): flushes the head
//!   and merges every partition's files into one ([`storage::Db::compact_all`]), as
//!   VictoriaMetrics' `/internal/force_flush` and `/internal/force_merge` do, for after a bulk
//!   import; 204.
//!
//! All of them are off unless strata runs with `--web.enable-admin-api`, and then answer what
//! Prometheus answers: 503 `unavailable`, "admin APIs disabled" (without `Retry-After`, since
//! retrying does not help). Parameters are read from the URL and the form body.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::RETRY_AFTER;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use crate::api::params::{MAX_TIME_MS, MIN_TIME_MS, Params};
use crate::api::respond::Success;
use crate::api::{self, blocking};
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenant::Scope;

/// The directory inside the data directory that snapshots are written to, as Prometheus.
pub const SNAPSHOTS_DIR: &str = "snapshots";

/// How long a deletion's answer waits for the tombstone to reach the bucket. Past it the
/// deletion is still done here and reaches the bucket with the mirror's next success.
pub const MIRROR_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The admin routes; POST and PUT as in Prometheus.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/admin/tsdb/delete_series", post(delete_series).put(delete_series))
        .route("/api/v1/admin/tsdb/clean_tombstones", post(clean_tombstones).put(clean_tombstones))
        .route("/api/v1/admin/tsdb/snapshot", post(snapshot).put(snapshot))
        .route("/api/v1/admin/tsdb/compact", post(compact).put(compact))
}

/// Prometheus' answer while the admin API is disabled.
fn disabled() -> Response {
    let mut response = ApiError::Unavailable("admin APIs disabled".into()).into_response();
    response.headers_mut().remove(RETRY_AFTER);
    response
}

/// Runs `handler` only when the admin API is enabled, answering errors in the JSON envelope.
async fn gated<F>(state: &AppState, handler: F) -> Response
where
    F: Future<Output = Result<Response, ApiError>>,
{
    if !state.admin_api_enabled() {
        return disabled();
    }
    handler.await.unwrap_or_else(IntoResponse::into_response)
}

/// `POST|PUT /api/v1/admin/tsdb/delete_series`.
async fn delete_series(State(state): State<Arc<AppState>>, scope: Scope, params: Params) -> Response {
    gated(&state, async {
        // Only the series of the request's tenants.
        let sets = params
            .matcher_sets(true)?
            .iter()
            .map(|set| scope.restrict(set))
            .collect::<Result<Vec<_>, _>>()?;
        let start = params.time_or("start", MIN_TIME_MS)?;
        let end = params.time_or("end", MAX_TIME_MS)?;
        let db = api::db(&state)?;
        if db.reads_only() {
            let form: Vec<(&str, &str)> = ["match[]", "start", "end"]
                .into_iter()
                .flat_map(|name| params.all(name).into_iter().map(move |v| (name, v)))
                .collect();
            let tenant = scope.header_value();
            return forward(&state, db, "delete", "/api/v1/admin/tsdb/delete_series", &form, tenant).await;
        }
        blocking(move || {
            for matchers in &sets {
                db.delete(matchers, start, end)?;
            }
            // So that a query node that reads the bucket (and asked for this deletion) sees
            // it as soon as this answers.
            db.wait_mirrored(MIRROR_WAIT);
            Ok(())
        })
        .await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// `POST|PUT /api/v1/admin/tsdb/clean_tombstones`.
async fn clean_tombstones(State(state): State<Arc<AppState>>) -> Response {
    if let Ok(db) = api::db(&state)
        && db.reads_only()
        && state.admin_api_enabled()
    {
        return forward(&state, db, "clean tombstones", "/api/v1/admin/tsdb/clean_tombstones", &[], None)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    maintenance(&state, storage::Db::clean_tombstones).await
}

/// On a query node: sends the admin request `path` (doing `what`) with `form` to every
/// `--query.writer`, then reads the writers' new records, so that what they did shows in the
/// next query; 204. Without writers, the request is refused as every change on a query node is.
async fn forward(
    state: &AppState,
    db: Arc<storage::Db>,
    what: &'static str,
    path: &'static str,
    form: &[(&str, &str)],
    tenant: Option<String>,
) -> Result<Response, ApiError> {
    let Some(writers) = state.writers().cloned() else {
        return Err(storage::Error::ReadOnly(what).into());
    };
    let body = serde_urlencoded::to_string(form).map_err(|e| ApiError::Internal(e.to_string()))?;
    blocking(move || {
        writers.forward_admin(path, body.as_bytes(), tenant.as_deref()).map_err(ApiError::Unavailable)?;
        db.refresh_bucket()?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST|PUT /api/v1/admin/tsdb/compact`.
async fn compact(State(state): State<Arc<AppState>>) -> Response {
    maintenance(&state, storage::Db::compact_all).await
}

/// Runs a maintenance operation of the database off the async threads; 204 when it is done.
async fn maintenance(state: &AppState, work: fn(&storage::Db) -> storage::Result<()>) -> Response {
    gated(state, async {
        let db = api::db(state)?;
        blocking(move || Ok(work(&db)?)).await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// `POST|PUT /api/v1/admin/tsdb/snapshot`.
async fn snapshot(State(state): State<Arc<AppState>>, params: Params) -> Response {
    gated(&state, async {
        let skip_head = match params.get("skip_head") {
            None => false,
            Some(s) => parse_go_bool(s).ok_or_else(|| {
                ApiError::BadData(format!(
                    "invalid parameter \"skip_head\": unable to parse boolean: strconv.ParseBool: parsing \
                     {s:?}: invalid syntax"
                ))
            })?,
        };
        let db = api::db(&state)?;
        let name = snapshot_name(SystemTime::now());
        let dir: PathBuf = db.dir().join(SNAPSHOTS_DIR).join(&name);
        blocking(move || {
            db.backup_to(&dir, !skip_head).map_err(|e| ApiError::Internal(format!("create snapshot: {e}")))
        })
        .await?;
        Ok(Success::new(json!({ "name": name })).into_response())
    })
    .await
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A snapshot name as Prometheus makes them: UTC time as `20060102T150405Z` and 16 hex digits
/// of a random 63-bit number, e.g. `20171210T211224Z-2be650b6d019eb54`.
fn snapshot_name(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let time = chrono::DateTime::from_timestamp(secs, 0).unwrap_or_default();
    format!("{}-{:016x}", time.format("%Y%m%dT%H%M%SZ"), random_u63())
}

/// 63 random bits from the standard library's per-process random hash keys, mixed with the
/// clock so two snapshots in one second differ.
fn random_u63() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    hasher.finish() >> 1
}

#[cfg(test)]
mod tests;
