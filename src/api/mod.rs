//! The Prometheus HTTP API (`/api/v1/...` except the write endpoints, which live in
//! [`crate::ingest`]).
//!
//! Shared pieces: [`params`] reads parameters from the URL and form bodies exactly as
//! Prometheus does, [`respond`] writes the success envelope; errors are
//! [`ApiError`](crate::error::ApiError)s. Each group of endpoints is a module with its own
//! `routes()`: [`query`] (PromQL evaluation, parse/format), [`meta`] (series, label names and
//! values, metadata, exemplars, TSDB status), [`status`] (build/runtime info, flags, config),
//! [`read`] (remote read), [`admin`] (delete series, clean tombstones, snapshot) and [`rules`]
//! (the rule, alert, target and Alertmanager listings, empty: strata has none of them).
//!
//! Handlers never block the async runtime: anything that touches storage or evaluates PromQL
//! runs through [`blocking`].

pub mod admin;
pub mod gzip;
pub mod meta;
pub mod params;
pub mod query;
pub mod read;
pub mod respond;
pub mod rules;
pub mod status;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use storage::Db;

use crate::error::ApiError;
use crate::state::AppState;

/// Every `/api/v1` route except writes, gzip-compressed when the client accepts it.
pub fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let reads = Router::new()
        .merge(query::routes())
        .merge(meta::routes())
        .merge(status::routes())
        .merge(rules::routes())
        .merge(admin::routes())
        .layer(DefaultBodyLimit::max(params::FORM_BODY_MAX));
    // Remote read bodies are snappy protobufs bounded like write bodies.
    let remote_read = read::routes().layer(DefaultBodyLimit::max(state.limits().body_bytes_max));
    // Remote read answers are snappy-compressed already; gzip on top would only cost CPU, and
    // Prometheus' remote-read client does not ask for it.
    // Strong reads (X-Read-Consistency: strong) wait before the handler, whatever it reads.
    reads
        .layer(axum::middleware::from_fn(gzip::layer))
        .merge(remote_read)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(state), crate::log::consistency::strong_reads))
}

/// The open database, or 503 `unavailable` while it is still opening (the WAL replays).
pub fn db(state: &AppState) -> Result<Arc<Db>, ApiError> {
    if state.is_distributor_only() {
        return Err(ApiError::Unavailable(
            "this process is a distributor (--role distributor): it only forwards writes to the ingest log; \
             ask a query node or an ingester"
                .into(),
        ));
    }
    state
        .db()
        .cloned()
        .ok_or_else(|| ApiError::Unavailable("strata is starting up (replaying the WAL); retry later".into()))
}

/// Runs `work` on tokio's blocking pool: storage reads and PromQL evaluation take CPU time that
/// must not stall the threads serving other requests.
pub async fn blocking<T, F>(work: F) -> Result<T, ApiError>
where
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Internal(format!("request task failed: {e}")))?
}
