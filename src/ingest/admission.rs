//! Admission of write requests: at most `--write.max-concurrency` write requests are read,
//! decoded and stored at once; the others wait for a slot, in arrival order, for at most
//! `--write.max-queue-duration`, and are then answered 503 with `Retry-After`.
//!
//! This bounds ingest memory when writers outrun the disk: a request's body is read only once
//! it holds a slot (the middleware runs before the handler extracts the body), so at most
//! `max_concurrency` compressed bodies are in memory, whatever the number of senders; of those,
//! at most one per core is decompressed and decoded at a time ([`WriteAdmission::decode_slot`]). Waiting requests cost a task and a socket. A 503 is what a remote-write sender
//! retries with backoff (a 429 would make Prometheus drop the batch), and what the Influx
//! clients retry too. VictoriaMetrics has the same two knobs (`-maxConcurrentInserts`,
//! `-insert.maxQueueDuration`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::metrics::Protocol;
use crate::state::AppState;

/// The write slots and how long a request may wait for one.
#[derive(Debug, Clone)]
pub struct WriteAdmission {
    slots: Arc<Semaphore>,
    max_concurrency: usize,
    max_queue: Duration,
    /// Of the admitted requests, those decoding and writing to the WAL now: one per core.
    decoders: Arc<Semaphore>,
}

impl WriteAdmission {
    /// `max_concurrency` slots (at least 1); a request waits at most `max_queue` for one.
    pub fn new(max_concurrency: usize, max_queue: Duration) -> Self {
        let max_concurrency = max_concurrency.max(1);
        let decoders = Arc::new(Semaphore::new(Self::cores().min(max_concurrency)));
        WriteAdmission {
            slots: Arc::new(Semaphore::new(max_concurrency)),
            max_concurrency,
            max_queue,
            decoders,
        }
    }

    fn cores() -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }

    /// Waits for one of the decode slots, one per core, that an admitted request holds while
    /// it decompresses, decodes and writes its batch to the WAL, and gives back before it
    /// waits for the WAL's fsync. A request's decoded form is several times its body, so
    /// decoding more requests than there are cores would only hold more of them in memory at
    /// once (measured: 4 at once on 2 cores took 45 MiB more peak memory for the same
    /// throughput); the admitted requests beyond that wait with their compressed bodies.
    /// `None` only if the semaphore were closed, which it never is: then the request goes on.
    pub async fn decode_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.decoders).acquire_owned().await.ok()
    }

    /// The default slot count: two per core, so that while one request per core decodes,
    /// others wait for the WAL's group commit or are read off the network.
    pub fn default_concurrency() -> usize {
        2 * Self::cores()
    }

    /// Slots in use now (for `/metrics`).
    pub fn in_flight(&self) -> usize {
        self.max_concurrency - self.slots.available_permits()
    }

    /// Most requests processed at once.
    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }
}

impl Default for WriteAdmission {
    fn default() -> Self {
        WriteAdmission::new(Self::default_concurrency(), Duration::from_secs(60))
    }
}

/// How a write route answers errors: each route passes its own to [`admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Prometheus remote write (1.0 or 2.0, told apart by the content type): the Prometheus
    /// error envelope.
    RemoteWrite,
    /// Influx line protocol: InfluxDB's `{"error": ...}` and version headers.
    Influx,
}

/// Middleware on a write route: runs the request once it holds a slot, or answers 503 in the
/// route's dialect.
pub async fn admit(
    State((state, dialect)): State<(Arc<AppState>, Dialect)>,
    request: Request,
    next: Next,
) -> Response {
    let admission = state.write_admission();
    let slot = tokio::time::timeout(admission.max_queue, Arc::clone(&admission.slots).acquire_owned()).await;
    match slot {
        Ok(Ok(_slot)) => next.run(request).await,
        // The semaphore is never closed; should it be, refusing is the safe answer.
        Ok(Err(_)) | Err(_) => refuse(&state, dialect, &request, admission),
    }
}

fn refuse(state: &AppState, dialect: Dialect, request: &Request, admission: &WriteAdmission) -> Response {
    let err = ApiError::Unavailable(format!(
        "strata is busy: {} write requests are being processed and this one waited {:?} for a slot; retry later",
        admission.max_concurrency, admission.max_queue
    ));
    if dialect == Dialect::RemoteWrite {
        let v2 = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("io.prometheus.write.v2"));
        let protocol = if v2 { Protocol::RemoteWriteV2 } else { Protocol::RemoteWriteV1 };
        super::count_rejection(state, protocol, err).into_response()
    } else {
        let mut response = super::count_rejection(state, Protocol::Influx, err).into_influx_response();
        response.headers_mut().extend(crate::influx::version_headers());
        response
    }
}
