//! `POST /api/v1/read`: Prometheus remote read, so a Prometheus (or anything speaking the
//! protocol) can use strata as `remote_read` storage.
//!
//! The body is a snappy-compressed `prometheus.ReadRequest` ([`remote::read`]). Each query's
//! matchers select series with samples in its closed range `[start, end]`; hints (step, range,
//! function) are only hints and strata returns raw samples, except that `func: "series"` (a
//! metadata lookup) gets the series without samples in the sampled answer, as from Prometheus'
//! TSDB. The answer type is the first of the client's `accepted_response_types` that strata
//! supports (none listed means `SAMPLES`):
//!
//! * `SAMPLES`: one snappy-compressed `ReadResponse`, native histograms in each series'
//!   `histograms`. At most `--storage.remote.read-sample-limit` samples (histograms included)
//!   per query; more is a 400 `exceeded sample limit (N)`, as Prometheus.
//! * `STREAMED_XOR_CHUNKS`: framed `ChunkedReadResponse`s of chunks (≤ 120 samples each): XOR
//!   chunks for float samples, Prometheus' `HISTOGRAM`/`FLOAT_HISTOGRAM` chunks for native
//!   histograms (`remote::read::histogram_chunk`), in time order. One series per frame, frames
//!   cut at `--storage.remote.read-max-bytes-in-frame`. A blocking task reads series by series
//!   and sends each frame through a small channel as soon as it is encoded, so memory stays at
//!   about one series however large the answer; the sample limit does not apply, as in
//!   Prometheus.
//!
//! A request with the `strata-bucket-records` header comes from a query node (`--role query`)
//! and is answered only from what that node cannot read from the bucket yet
//! (`Db::snapshot_unuploaded`).
//!
//! At most `--storage.remote.read-concurrent-limit` requests are served at once; the rest wait
//! for a slot (Prometheus' gate). Errors are plain text, as Prometheus' handler writes them:
//! 400 for a request that cannot be decoded or answered as asked, 5xx for storage failures. An
//! error after the first streamed frame can no longer change the status: the stream is cut off,
//! which the client sees as a truncated body.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use remote::read::proto::{Query, QueryResult, ReadRequest, ReadResponse};
use remote::read::{ResponseType, STREAMED_CONTENT_TYPE};
use storage::{Db, MatchOp, Matcher, Querier, Sample, SeriesRef, Snapshot};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::api;
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenant::Scope;
use crate::tenant::scoped::Scoped;

/// Prometheus' default `--storage.remote.read-sample-limit`.
pub const DEFAULT_SAMPLE_LIMIT: usize = 50_000_000;
/// Prometheus' default `--storage.remote.read-concurrent-limit`.
pub const DEFAULT_CONCURRENCY: usize = 10;

/// Frames buffered between the reading task and the connection: enough to keep both busy,
/// small enough that a slow client holds back the reader instead of filling memory.
const STREAM_BUFFER_FRAMES: usize = 4;

/// The `--storage.remote.read-*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteReadConfig {
    /// Most samples one query of a `SAMPLES` answer may return; 0 means no limit.
    pub sample_limit: usize,
    /// Most requests served at once (the rest wait); 0 means no limit.
    pub concurrency: usize,
    /// Chunk bytes after which a streamed frame is closed.
    pub frame_bytes_max: usize,
}

impl Default for RemoteReadConfig {
    fn default() -> Self {
        RemoteReadConfig {
            sample_limit: DEFAULT_SAMPLE_LIMIT,
            concurrency: DEFAULT_CONCURRENCY,
            frame_bytes_max: remote::read::DEFAULT_FRAME_BYTES_MAX,
        }
    }
}

/// The remote-read settings and the gate that bounds concurrent requests; lives in
/// [`AppState`].
#[derive(Debug)]
pub struct RemoteReadService {
    config: RemoteReadConfig,
    /// `None` when the concurrency is unlimited.
    gate: Option<Arc<Semaphore>>,
}

impl Default for RemoteReadService {
    fn default() -> Self {
        RemoteReadService::new(RemoteReadConfig::default())
    }
}

impl RemoteReadService {
    /// A service with `config`'s limits.
    pub fn new(config: RemoteReadConfig) -> Self {
        let gate = (config.concurrency > 0).then(|| Arc::new(Semaphore::new(config.concurrency)));
        RemoteReadService { config, gate }
    }

    /// The settings.
    pub fn config(&self) -> &RemoteReadConfig {
        &self.config
    }

    /// Waits for a request slot. The permit is moved into the task that does the reading, so a
    /// streamed answer holds its slot until its last frame is sent.
    async fn enter(&self) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        match &self.gate {
            None => Ok(None),
            Some(gate) => Arc::clone(gate)
                .acquire_owned()
                .await
                .map(Some)
                .map_err(|_| ApiError::Unavailable("strata is shutting down".into())),
        }
    }
}

/// The remote-read route.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/v1/read", post(read))
}

/// `POST /api/v1/read`.
async fn read(
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(state, &headers, body).await.unwrap_or_else(ApiError::into_plain_response)
}

/// What a remote read reads: the database as the request's tenant scope sees it.
type View = Scoped<Snapshot>;

async fn answer(
    state: Arc<AppState>,
    headers: &axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let scope = Scope::from_headers(headers, state.tenant_federation())?;
    // A query node asking a writer for what it cannot read from the bucket yet.
    let unuploaded = headers
        .get(remote::read::client::RECORDS_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(remote::read::client::parse_records_header);
    let view = move |db: &Db| {
        let snapshot = match &unuploaded {
            Some(records) => db.snapshot_unuploaded(records),
            None => db.snapshot(),
        };
        Scoped::new(snapshot, scope)
    };
    let permit = state.remote_read().enter().await?;
    let body = body.map_err(|e| body_error(e, state.limits()))?;
    let db = api::db(&state)?;
    let limits = state.limits().clone();
    let config = state.remote_read().config().clone();
    let request =
        api::blocking(move || remote::read::decode_request(&body, &limits).map_err(decode_error)).await?;
    let Some(kind) = remote::read::negotiate(&request.accepted_response_types) else {
        return Err(ApiError::BadData(format!(
            "server does not support any of the requested response types: {:?}; supported: [SAMPLES \
             STREAMED_XOR_CHUNKS]",
            request.accepted_response_types
        )));
    };
    tracing::debug!(queries = request.queries.len(), response_type = ?kind, "remote read");
    match kind {
        ResponseType::Samples => {
            let body = api::blocking(move || {
                let _permit = permit;
                samples_response(&view(&db), &request, config.sample_limit)
            })
            .await?;
            Ok(([(CONTENT_TYPE, "application/x-protobuf"), (CONTENT_ENCODING, "snappy")], body)
                .into_response())
        }
        ResponseType::StreamedXorChunks => {
            let snapshot = view(&db);
            stream_response(snapshot, request, config.frame_bytes_max, permit).await
        }
    }
}

/// The series of one query: matchers converted, Prometheus' TSDB semantics for the corner
/// cases (no matchers selects nothing; matchers that all match the empty string select every
/// series they match, which storage only allows with a non-empty matcher, hence the added
/// `__name__=~".+"` that every stored series satisfies).
fn select(snapshot: &View, query: &Query) -> Result<Vec<SeriesRef>, ApiError> {
    let mut matchers = remote::read::matchers(&query.matchers).map_err(decode_error)?;
    if matchers.is_empty() || query.start_timestamp_ms > query.end_timestamp_ms {
        return Ok(Vec::new());
    }
    if matchers.iter().all(Matcher::matches_empty) {
        let named = Matcher::new(MatchOp::Regex, storage::METRIC_NAME, ".+").map_err(ApiError::from)?;
        matchers.push(named);
    }
    Ok(snapshot.select(&matchers, query.start_timestamp_ms, query.end_timestamp_ms)?)
}

/// Whether the query only wants series, not samples (Prometheus' `series` hint).
fn series_only(query: &Query) -> bool {
    query.hints.as_ref().is_some_and(|h| h.func == "series")
}

/// The `SAMPLES` answer body.
fn samples_response(
    snapshot: &View,
    request: &ReadRequest,
    sample_limit: usize,
) -> Result<Vec<u8>, ApiError> {
    let mut response = ReadResponse { results: Vec::with_capacity(request.queries.len()) };
    let mut samples: Vec<Sample> = Vec::new();
    let mut histograms = Vec::new();
    for query in &request.queries {
        let mut result = QueryResult::default();
        let mut count = 0usize;
        for series in select(snapshot, query)? {
            samples.clear();
            histograms.clear();
            if !series_only(query) {
                let (start, end) = (query.start_timestamp_ms, query.end_timestamp_ms);
                snapshot.samples(&series, start, end, &mut samples)?;
                snapshot.histograms(&series, start, end, &mut histograms)?;
            }
            count += samples.len() + histograms.len();
            if sample_limit > 0 && count > sample_limit {
                return Err(ApiError::BadData(format!("exceeded sample limit ({sample_limit})")));
            }
            result.timeseries.push(remote::read::time_series_with_histograms(
                &series.labels,
                &samples,
                &histograms,
            ));
        }
        response.results.push(result);
    }
    remote::read::encode_samples_response(&response).map_err(|e| ApiError::Internal(e.to_string()))
}

/// Streams the `STREAMED_XOR_CHUNKS` answer. The first message decides the status: an error
/// before any frame is answered as an error; after that, frames flow as they are produced.
async fn stream_response(
    snapshot: View,
    request: ReadRequest,
    frame_bytes_max: usize,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Response, ApiError> {
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, ApiError>>(STREAM_BUFFER_FRAMES);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        if let Err(err) = produce_frames(&snapshot, &request, frame_bytes_max, &tx) {
            // Fails only if the client is gone, and then nobody is left to tell.
            let _ = tx.blocking_send(Err(err));
        }
    });
    let first = match rx.recv().await {
        None => None,
        Some(Err(err)) => return Err(err),
        Some(Ok(frame)) => Some(frame),
    };
    let rest =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    let frames = futures_util::stream::iter(first.map(Ok::<Bytes, ApiError>)).chain(rest).map(|item| {
        item.map_err(|err| {
            tracing::warn!(error = %err, "remote read stream failed after it started; cutting it off");
            std::io::Error::other(err.to_string())
        })
    });
    Ok(([(CONTENT_TYPE, STREAMED_CONTENT_TYPE)], Body::from_stream(frames)).into_response())
}

/// The client went away: stop reading.
struct Disconnected;

/// Reads every query's series in label order and sends their frames. Returns early, without
/// error, when the receiver is gone.
fn produce_frames(
    snapshot: &View,
    request: &ReadRequest,
    frame_bytes_max: usize,
    tx: &mpsc::Sender<Result<Bytes, ApiError>>,
) -> Result<(), ApiError> {
    let mut samples = Vec::new();
    let mut histograms = Vec::new();
    for (index, query) in request.queries.iter().enumerate() {
        for series in select(snapshot, query)? {
            samples.clear();
            histograms.clear();
            let (start, end) = (query.start_timestamp_ms, query.end_timestamp_ms);
            snapshot.samples(&series, start, end, &mut samples)?;
            snapshot.histograms(&series, start, end, &mut histograms)?;
            let chunks = remote::read::series_chunks(&samples, &histograms);
            let labels = remote::read::labels_to_proto(&series.labels);
            let sent = remote::read::series_frames(index as i64, labels, chunks, frame_bytes_max, |frame| {
                tx.blocking_send(Ok(Bytes::from(frame))).map_err(|_| Disconnected)
            });
            if sent.is_err() {
                tracing::debug!("remote read client disconnected; stopping");
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The body, or why it could not be read (413 past the body limit, as for writes).
fn body_error(err: BytesRejection, limits: &remote::Limits) -> ApiError {
    use axum::extract::rejection::FailedToBufferBody;
    match err {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
            ApiError::PayloadTooLarge(format!(
                "request body larger than {} bytes; raise {} if such requests are legitimate",
                limits.body_bytes_max,
                crate::ingest::BODY_LIMIT_FLAG
            ))
        }
        other => ApiError::BadData(format!("cannot read the request body: {other}")),
    }
}

/// A `remote` decoding error, by the status the `remote` crate assigns it.
fn decode_error(err: remote::Error) -> ApiError {
    let message = err.to_string();
    match err.status_hint() {
        413 => ApiError::PayloadTooLarge(message),
        _ => ApiError::BadData(message),
    }
}

#[cfg(test)]
mod tests;
