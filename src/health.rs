//! `/-/healthy` and `/-/ready`, answered in plain text as Prometheus answers them.
//!
//! Healthy means the process is alive and serving HTTP. Ready means it can do its job: the
//! database is open (the WAL replay at startup is over), writes can be made durable (on a query
//! node, which never writes: it has read the bucket's manifests), and it is not shutting down. Orchestrators restart on failed liveness and route traffic on readiness,
//! so only readiness depends on storage.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use crate::state::AppState;

/// Whether strata can serve, and if not, why (the text of a 503 from `/-/ready`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The database is open and writable.
    Ready,
    /// `Db::open` is still running (replaying the WAL).
    Opening,
    /// `--log.url` is set and the ingest log is not connected yet.
    ConnectingLog,
    /// Storage cannot make writes durable right now (e.g. after an fsync failure).
    Unwritable(String),
    /// SIGTERM or SIGINT arrived; in-flight requests are finishing.
    Stopping,
}

impl Readiness {
    /// Reads the current readiness from the shared state. `Db::health` is a cheap status read,
    /// so it is called on the async thread.
    pub fn of(state: &AppState) -> Readiness {
        if state.is_stopping() {
            return Readiness::Stopping;
        }
        if state.log_mode() && state.distributor().is_none() {
            return Readiness::ConnectingLog;
        }
        if state.is_distributor_only() {
            return Readiness::Ready;
        }
        let Some(db) = state.db() else {
            return Readiness::Opening;
        };
        let health = db.health();
        // A query node is ready once open: it never writes.
        if health.writable || db.reads_only() {
            Readiness::Ready
        } else {
            Readiness::Unwritable(health.reason.unwrap_or_else(|| "no reason given".into()))
        }
    }
}

/// `GET /-/healthy`: 200 whenever the process can answer at all.
pub async fn healthy() -> &'static str {
    "strata is Healthy.\n"
}

/// `GET /-/ready`: 200 when [`Readiness::Ready`], else 503 with the reason.
pub async fn ready(State(state): State<Arc<AppState>>) -> (StatusCode, String) {
    let unavailable =
        |why: String| (StatusCode::SERVICE_UNAVAILABLE, format!("strata is not ready: {why}\n"));
    match Readiness::of(&state) {
        Readiness::Ready => (StatusCode::OK, "strata is Ready.\n".into()),
        Readiness::Opening => unavailable("the database is opening (replaying the WAL)".into()),
        Readiness::ConnectingLog => unavailable("connecting to the ingest log (--log.url)".into()),
        Readiness::Unwritable(reason) => unavailable(format!("storage cannot take writes: {reason}")),
        Readiness::Stopping => unavailable("shutting down".into()),
    }
}
