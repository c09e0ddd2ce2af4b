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
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{DefaultPredicate, Predicate, SizeAbove};

use crate::error::ApiError;
use crate::state::AppState;

/// Every `/api/v1` route except writes, gzip-compressed when the client accepts it.
pub fn routes(state: &AppState) -> Router<Arc<AppState>> {
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
    // Answers below one packet are sent as they are (as Prometheus' gzip handler does, from
    // 1,400 bytes): gzip would save nothing on the wire and costs tens of microseconds, a good
    // part of a small query's time.
    let gzip_when = DefaultPredicate::new().and(SizeAbove::new(GZIP_MIN_BYTES));
    let gzip = CompressionLayer::new().gzip(true).quality(GZIP_LEVEL).compress_when(gzip_when);
    reads.layer(gzip).merge(remote_read)
}

/// How hard the API compresses: the fastest level. Go clients (Grafana's data source,
/// Prometheus' API client, TSBS's query runner) ask for gzip on every request, so this is the
/// path most answers take. Query answers are repetitive JSON: the default level (6) compressed
/// a 3.9 MB answer to 16 % in 207 ms, 25 times the 8 ms the query took; the fastest level gives
/// 21 % in 14 ms (VictoriaMetrics also answers at the fastest level; docs/benchmarks.md,
/// "Answers at gzip's fastest level").
pub const GZIP_LEVEL: CompressionLevel = CompressionLevel::Fastest;

/// Smallest answer the API gzips (when the client accepts gzip).
pub const GZIP_MIN_BYTES: u16 = 1400;

/// The open database, or 503 `unavailable` while it is still opening (the WAL replays).
pub fn db(state: &AppState) -> Result<Arc<Db>, ApiError> {
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
