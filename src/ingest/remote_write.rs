//! `POST /api/v1/write`: Prometheus remote write 1.0 and 2.0 on one endpoint, told apart by
//! Content-Type as the 2.0 specification prescribes.
//!
//! Answers (see the module docs of [`crate::ingest`] for the reasoning):
//!
//! | outcome | status |
//! |---|---|
//! | everything durable | 204 |
//! | unknown Content-Type (`proto=`) or Content-Encoding | 415 |
//! | body over `--write-body-bytes-max` or decoding past `--write-decoded-bytes-max` | 413 |
//! | bad snappy, bad protobuf, invalid labels, a label limit exceeded, an invalid native histogram | 400, nothing stored |
//! | an invalid `X-Scope-OrgID` (tenant) header, or one naming several tenants | 400, nothing stored |
//! | samples too old or too far in the future | 400 naming the reason and the first rejected series; the rest stored |
//! | new series over a cardinality limit (`--series-max`, ...) | 400 naming the limit, its value, the metric and the first refused series; the rest stored |
//! | database opening, storage I/O failure, shutdown | 503 with `Retry-After` |
//!
//! Version 2.0 answers carry `X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written`
//! with what was actually stored, on every answer after the version is known (a 2.0 sender
//! takes a missing header as a failed write). Native histograms (1.0 and 2.0, integer and
//! float, every schema) are stored; a histogram stale marker is stored as the float stale
//! marker and reported among the histograms written. Exemplars are not stored (0). Metadata is
//! kept in memory for `/api/v1/metadata`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use remote::prw::{self, Version};

use super::{
    blocking, body_or_error, count_rejection, decode_error, finish_store, guard_decoder, header,
    store_deferred,
};
use crate::error::ApiError;
use crate::metrics::Protocol;
use crate::state::AppState;
use crate::tenant::Scope;

/// Float samples stored from a 2.0 request.
pub const SAMPLES_WRITTEN: HeaderName = HeaderName::from_static("x-prometheus-remote-write-samples-written");
/// Native histogram samples stored from a 2.0 request.
pub const HISTOGRAMS_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-histograms-written");
/// Exemplars stored from a 2.0 request.
pub const EXEMPLARS_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-exemplars-written");

/// What a request got stored, for the 2.0 response headers.
#[derive(Debug, Default, Clone, Copy)]
struct Written {
    samples: u64,
    histograms: u64,
    exemplars: u64,
}

/// `POST /api/v1/write`.
pub async fn write(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // Until the version is known, a refused request counts as 1.0, the version a request
    // without a proto parameter is.
    let version = match prw::negotiate(header(&headers, CONTENT_TYPE)) {
        Ok(version) => version,
        Err(err) => {
            return count_rejection(&state, Protocol::RemoteWriteV1, decode_error(err)).into_plain_response();
        }
    };
    let protocol = match version {
        Version::V1 => Protocol::RemoteWriteV1,
        Version::V2 => Protocol::RemoteWriteV2,
    };
    let (written, answer) = match accept(&state, version, &headers, body).await {
        Ok((written, problem)) => (written, problem),
        Err(err) => (Written::default(), Some(count_rejection(&state, protocol, err))),
    };
    let mut response = match answer {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(err) => err.into_plain_response(),
    };
    if matches!(version, Version::V2) {
        let headers = response.headers_mut();
        headers.insert(SAMPLES_WRITTEN, HeaderValue::from(written.samples));
        headers.insert(HISTOGRAMS_WRITTEN, HeaderValue::from(written.histograms));
        headers.insert(EXEMPLARS_WRITTEN, HeaderValue::from(written.exemplars));
    }
    response
}

/// Decodes and stores one request. `Err` means nothing was stored; `Ok` carries what was
/// stored and, if part of the request was refused, the 400 that says so.
async fn accept(
    state: &Arc<AppState>,
    version: Version,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Written, Option<ApiError>), ApiError> {
    prw::check_encoding(header(headers, CONTENT_ENCODING)).map_err(decode_error)?;
    let tenant = Scope::for_write(headers)?;
    let limits = state.limits().clone();
    let body = body_or_error(body, &limits)?;
    let state = Arc::clone(state);
    let slot = state.write_admission().decode_slot().await;
    // Decoded and stored on one thread: the batch borrows the decompressed body.
    let (outcome, stale_histograms) = blocking(move || {
        let mut buf = DecompressBuffer::take();
        let raw = guard_decoder(|| prw::decompress_into(&body, &limits, &mut buf.0).map_err(decode_error))?;
        let mut decoded = guard_decoder(|| prw::decode_ref(version, raw, &limits).map_err(decode_error))?;

        let metrics = state.metrics();
        let protocol =
            if matches!(version, Version::V2) { Protocol::RemoteWriteV2 } else { Protocol::RemoteWriteV1 };
        metrics.count_samples_received(protocol, decoded.samples);
        metrics.count_exemplars_dropped(decoded.exemplars);
        // Metadata is kept only once storage has taken the batch: storage may still refuse the
        // whole request (a new series whose labels are not UTF-8), and then nothing is kept.
        let pending =
            store_deferred(&state, &mut decoded.batch, tenant.as_deref(), &body, &decoded.metadata)?;
        let (metadata, stale_histograms) = (std::mem::take(&mut decoded.metadata), decoded.stale_histograms);
        // The request's memory goes before the wait for the fsync, the batch first (it borrows
        // the buffer).
        drop(decoded);
        drop(buf);
        drop(body);
        drop(slot);
        let outcome = finish_store(pending)?;
        state.metadata().update(tenant.as_deref(), metadata);
        Ok((outcome, stale_histograms))
    })
    .await?;
    // Histogram stale markers are stored as float samples; a sender counts them as histograms.
    // (Rejected ones cannot be told apart here: the header may then overstate them.)
    let floats = outcome.appended - outcome.histograms_appended;
    let stale = stale_histograms.min(floats);
    let written =
        Written { samples: floats - stale, histograms: outcome.histograms_appended + stale, exemplars: 0 };

    let mut problems = Vec::new();
    if let Some(rejected) = super::rejected_samples_message(&outcome) {
        problems.push(rejected);
    }
    let problem = (!problems.is_empty()).then(|| ApiError::BadData(problems.join("; ")));
    Ok((written, problem))
}

/// The buffer a blocking thread decompresses remote-write bodies into, kept for the thread's
/// next request: decompressing into a fresh buffer zero-fills it first, about a tenth of the
/// cost of decoding a typical request. Taken out of the thread-local slot for one request and
/// put back on drop; a buffer grown past [`DecompressBuffer::KEEP_MAX`] is freed instead, so
/// an odd huge request does not pin memory on every thread of the blocking pool.
struct DecompressBuffer(Vec<u8>);

thread_local! {
    static DECOMPRESS_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl DecompressBuffer {
    /// Larger buffers are not kept (Prometheus' default batches decompress to well under 1 MiB).
    const KEEP_MAX: usize = 4 << 20;

    fn take() -> DecompressBuffer {
        DecompressBuffer(DECOMPRESS_BUFFER.with(std::cell::Cell::take))
    }
}

impl Drop for DecompressBuffer {
    fn drop(&mut self) {
        if self.0.capacity() <= Self::KEEP_MAX {
            let buf = std::mem::take(&mut self.0);
            DECOMPRESS_BUFFER.with(|slot| slot.set(buf));
        }
    }
}
