//! `GET /metrics`: strata's own metrics in the Prometheus text exposition format (0.0.4), so a
//! Prometheus can scrape strata (and remote-write the result back into it).
//!
//! Three sources feed it:
//! - what only the HTTP layer sees — requests by route and status, their latency, requests in
//!   flight (`http`), and why a write or its samples were refused before storage saw them —
//!   lives in [`Metrics`], shared through `AppState`;
//! - storage's own counters and sizes (WAL, heads, flushes, compactions, disk), read from the
//!   database at scrape time (`database`), so each number has one source of truth;
//! - the process' memory, CPU, file descriptors and threads from `/proc/self` (`process`).
//!
//! The exposition is written by hand (`exposition`). A registry crate (`prometheus-client`)
//! was considered: nearly every value here is read at scrape time from storage's atomics, which
//! would need a custom collector per family anyway, the storage crate would have to depend on it
//! for its histograms, and its text encoder writes OpenMetrics rather than the 0.0.4 format asked
//! for. Hot paths only do relaxed atomic adds (and, once per request, a read lock to find the
//! route's counters); histograms have fixed buckets ([`storage::buckets::BucketHistogram`]).

mod database;
pub(crate) mod exposition;
mod http;
mod process;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;
pub use exposition::CONTENT_TYPE_TEXT;
use exposition::{Exposition, Kind};
pub use http::HttpMetrics;

/// The wire protocol a write came in with; a label value of several ingest counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Prometheus remote write 1.0 (`prometheus.WriteRequest`).
    RemoteWriteV1,
    /// Prometheus remote write 2.0 (`io.prometheus.write.v2.Request`).
    RemoteWriteV2,
    /// Influx line protocol, through `/write` or `/api/v2/write`.
    Influx,
}

impl Protocol {
    const ALL: [Protocol; 3] = [Protocol::RemoteWriteV1, Protocol::RemoteWriteV2, Protocol::Influx];

    /// The `protocol` label value.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::RemoteWriteV1 => "remote_write_v1",
            Protocol::RemoteWriteV2 => "remote_write_v2",
            Protocol::Influx => "influx",
        }
    }

    fn index(self) -> usize {
        match self {
            Protocol::RemoteWriteV1 => 0,
            Protocol::RemoteWriteV2 => 1,
            Protocol::Influx => 2,
        }
    }
}

/// Why a whole write request was refused before anything of it was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestRejection {
    /// The body could not be decoded or broke a label limit (400).
    Invalid,
    /// The body was larger than `--write-body-bytes-max` (413).
    TooLarge,
    /// Unknown Content-Type or Content-Encoding (415).
    UnsupportedMediaType,
    /// Storage could not take the write right now (503).
    Unavailable,
}

impl RequestRejection {
    const ALL: [RequestRejection; 4] = [
        RequestRejection::Invalid,
        RequestRejection::TooLarge,
        RequestRejection::UnsupportedMediaType,
        RequestRejection::Unavailable,
    ];

    /// The `reason` label value.
    pub fn label(self) -> &'static str {
        match self {
            RequestRejection::Invalid => "invalid",
            RequestRejection::TooLarge => "too_large",
            RequestRejection::UnsupportedMediaType => "unsupported_media_type",
            RequestRejection::Unavailable => "unavailable",
        }
    }

    fn index(self) -> usize {
        match self {
            RequestRejection::Invalid => 0,
            RequestRejection::TooLarge => 1,
            RequestRejection::UnsupportedMediaType => 2,
            RequestRejection::Unavailable => 3,
        }
    }
}

/// One counter per (protocol, reason) pair.
type RejectionCounters = [[AtomicU64; RequestRejection::ALL.len()]; Protocol::ALL.len()];

/// The counters only the HTTP layer sees. Shared by all handlers; every method is a few relaxed
/// atomic adds, cheap enough for the write path.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests by route and status code, their latency, and requests in flight.
    http: HttpMetrics,
    /// Float samples decoded from write requests, by protocol.
    samples_received: [AtomicU64; Protocol::ALL.len()],
    /// Whole requests refused, by protocol and reason.
    requests_rejected: RejectionCounters,
    /// Native histogram samples received and not stored (storage has no histograms yet).
    histograms_rejected: AtomicU64,
    /// Exemplars received and not stored.
    exemplars_dropped: AtomicU64,
    /// Line-protocol lines that could not be parsed (the rest of their request was stored).
    lines_rejected: AtomicU64,
    /// Line-protocol string fields, which have no sample representation and are skipped.
    string_fields_skipped: AtomicU64,
}

impl Metrics {
    /// The request counters, for the middleware and for tests.
    pub fn http(&self) -> &HttpMetrics {
        &self.http
    }

    /// Counts float samples decoded from a request of `protocol`.
    pub fn count_samples_received(&self, protocol: Protocol, samples: u64) {
        add(&self.samples_received[protocol.index()], samples);
    }

    /// Counts a request refused as a whole.
    pub fn count_rejected_request(&self, protocol: Protocol, why: RequestRejection) {
        add(&self.requests_rejected[protocol.index()][why.index()], 1);
    }

    /// Counts native histogram samples that were not stored.
    pub fn count_histograms_rejected(&self, n: u64) {
        add(&self.histograms_rejected, n);
    }

    /// Counts exemplars that were not stored.
    pub fn count_exemplars_dropped(&self, n: u64) {
        add(&self.exemplars_dropped, n);
    }

    /// Counts line-protocol lines that could not be parsed.
    pub fn count_lines_rejected(&self, n: u64) {
        add(&self.lines_rejected, n);
    }

    /// Counts line-protocol string fields that were skipped.
    pub fn count_string_fields_skipped(&self, n: u64) {
        add(&self.string_fields_skipped, n);
    }

    /// Writes the ingest families only the HTTP layer counts.
    fn write_ingest(&self, out: &mut Exposition) {
        out.family(
            "strata_ingest_samples_received_total",
            Kind::Counter,
            "Float samples decoded from write requests, by protocol, before storage's checks.",
        );
        for protocol in Protocol::ALL {
            let n = load(&self.samples_received[protocol.index()]);
            out.sample("strata_ingest_samples_received_total", &[("protocol", protocol.label())], n);
        }

        out.family(
            "strata_ingest_requests_rejected_total",
            Kind::Counter,
            "Write requests refused as a whole (nothing of them stored), by protocol and reason.",
        );
        for protocol in Protocol::ALL {
            for why in RequestRejection::ALL {
                let n = load(&self.requests_rejected[protocol.index()][why.index()]);
                let labels = [("protocol", protocol.label()), ("reason", why.label())];
                out.sample("strata_ingest_requests_rejected_total", &labels, n);
            }
        }

        out.single(
            "strata_ingest_exemplars_dropped_total",
            Kind::Counter,
            "Exemplars received in remote-write requests and not stored (strata does not store exemplars yet).",
            load(&self.exemplars_dropped),
        );
        out.single(
            "strata_ingest_influx_lines_rejected_total",
            Kind::Counter,
            "Line-protocol lines that could not be parsed; the other lines of their request were stored.",
            load(&self.lines_rejected),
        );
        out.single(
            "strata_ingest_influx_string_fields_skipped_total",
            Kind::Counter,
            "Line-protocol string fields skipped because a sample holds only numbers.",
            load(&self.string_fields_skipped),
        );
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// The whole exposition: build information, HTTP, ingest, storage (once the database is open)
/// and process families, in that order. Blocking: storage's statistics take locks and list files.
fn render(state: &AppState) -> String {
    let mut out = Exposition::default();
    out.family("strata_build_info", Kind::Gauge, "Always 1; the labels say which strata version is running.");
    out.sample("strata_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1);
    let metrics = state.metrics();
    metrics.http.write_to(&mut out);
    metrics.write_ingest(&mut out);
    out.single(
        "strata_ingest_metadata_entries",
        Kind::Gauge,
        "Metric names with remote-write metadata held in memory.",
        state.metadata().len() as u64,
    );
    if let Some(cache) = &state.query().options().parse_cache {
        let (hits, misses, entries) = cache.counts();
        out.single(
            "strata_query_parse_cache_hits_total",
            Kind::Counter,
            "Queries whose parsed form came from the parse cache.",
            hits,
        );
        out.single(
            "strata_query_parse_cache_misses_total",
            Kind::Counter,
            "Queries parsed because the parse cache did not hold them.",
            misses,
        );
        out.single(
            "strata_query_parse_cache_entries",
            Kind::Gauge,
            "Parsed queries held in the parse cache.",
            entries as u64,
        );
    }
    if state.log_mode() {
        crate::log::metrics::LOG_METRICS.write_to(&mut out, state.log_offsets().map(|o| &**o));
    }
    if let Some(db) = state.db() {
        database::write_to(db, load(&metrics.histograms_rejected), &mut out);
    }
    process::write_to(&mut out);
    out.into_text()
}

/// `GET /metrics`.
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    match tokio::task::spawn_blocking(move || render(&state)).await {
        Ok(text) => ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], text).into_response(),
        // Only a panic (a bug) gets here; the task's message is in the log.
        Err(e) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("rendering metrics failed: {e}\n")).into_response()
        }
    }
}

/// Middleware around every route: counts the request as in flight while it runs, then counts
/// it by route template and status code and records how long it took.
pub async fn count_requests(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    // `MatchedPath` is an `Arc<str>` inside: cloning it allocates nothing.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let http = state.metrics().http();
    let _in_flight = http.start();
    let started = Instant::now();
    let response = next.run(request).await;
    let route = route.as_ref().map_or(http::UNMATCHED_ROUTE, MatchedPath::as_str);
    http.finish(route, response.status().as_u16(), started.elapsed());
    response
}
