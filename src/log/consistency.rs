//! Strong reads: a request with `X-Read-Consistency: strong` (Mimir's header) sees every write
//! acknowledged before it, on a writer that consumes the ingest log, and on a query node through
//! its writers (`--query.writer`).
//!
//! A writer asks the log for the last offset of each partition it consumes, then holds the
//! request until it has appended up to those offsets (at most [`CATCH_UP_MAX`], then 503). A
//! query node first sends each writer a request with the same header, which returns once that
//! writer has caught up; its remote reads that follow see the writer's data at least as new.
//! Without the header (Mimir's `eventual`), a read answers at once with what is stored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::HeaderName;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ingester::Offsets;
use super::{Log, LogError};
use crate::error::ApiError;
use crate::state::AppState;

/// The header, as Mimir names it.
pub const READ_CONSISTENCY: HeaderName = HeaderName::from_static("x-read-consistency");

/// How long a strong read waits for its writer to catch up before it is answered 503.
pub const CATCH_UP_MAX: Duration = Duration::from_secs(30);

/// Whether `request` asks for a strong read.
fn strong(request: &Request) -> bool {
    request
        .headers()
        .get(READ_CONSISTENCY)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("strong"))
}

/// Middleware of the read routes: holds a strong read until this process (or each of its
/// writers) has stored every write acknowledged before it.
pub async fn strong_reads(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if !strong(&request) {
        return next.run(request).await;
    }
    let caught_up = if let Some(writers) = state.writers() {
        let writers = Arc::clone(writers);
        match tokio::task::spawn_blocking(move || writers.catch_up(READ_CONSISTENCY.as_str(), "strong")).await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ApiError::Unavailable(format!("strong read: {e}"))),
            Err(e) => Err(ApiError::Internal(format!("strong read: {e}"))),
        }
    } else if state.log_mode() && !state.is_distributor_only() {
        match (state.distributor(), state.log_offsets()) {
            (Some(d), Some(offsets)) => catch_up(d.log().as_ref(), offsets, CATCH_UP_MAX)
                .await
                .map_err(|e| ApiError::Unavailable(format!("strong read: {e}"))),
            _ => Err(ApiError::Unavailable(
                "strong read: the ingest log is not connected yet; retry later".into(),
            )),
        }
    } else {
        // Without a log every acknowledged write is stored before its answer.
        Ok(())
    };
    match caught_up {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// Waits until every partition consumed here has been appended up to the offset its last
/// record had when this was called.
pub async fn catch_up(log: &dyn Log, offsets: &Offsets, within: Duration) -> Result<(), LogError> {
    let deadline = Instant::now() + within;
    let held = offsets.held();
    let mut targets = Vec::with_capacity(held.len());
    for &p in held.keys() {
        // A log that lost a server answers again once its streams have leaders: retried until
        // the deadline.
        let target = loop {
            match log.last_offset(p).await {
                Ok(offset) => break offset,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        targets.push((p, target));
    }
    loop {
        let now = offsets.held();
        // A partition given up meanwhile is another writer's to catch up on.
        if targets.iter().all(|(p, target)| now.get(p).is_none_or(|&at| at >= *target)) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let behind: Vec<_> =
                targets.iter().filter(|(p, t)| now.get(p).is_some_and(|at| at < t)).collect();
            return Err(LogError::Unavailable(format!(
                "not caught up with the ingest log after {} s (partition, offset to reach): {behind:?}",
                within.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
