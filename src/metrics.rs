//! `GET /metrics`: strata's own counters in the Prometheus text exposition format (0.0.4).
//!
//! Two sources feed it. Counters that only the HTTP layer can see (requests by route and status,
//! why a request or sample was refused before storage saw it) live in [`Metrics`], one struct of
//! atomics shared through `AppState`. Counters that storage already keeps (samples appended and
//! rejected by its time windows, series created, WAL fsyncs) are read from `Db::counters` and
//! `Db::wal_stats` at scrape time, so there is one source of truth for each number.
//!
//! The format is written by hand: strata exposes a fixed, small set of counters whose label
//! values it chooses itself, and a registry crate would need a custom collector to bridge
//! storage's atomics anyway. [`Exposition`] escapes label values and writes `# HELP`/`# TYPE`
//! once per family, which is all the format asks of counters and gauges.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

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

/// The counters only the HTTP layer sees. Shared by all handlers; every method is a relaxed
/// atomic add (or, for requests, a short map update), cheap enough for the write path.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests answered, by matched route and status code. A map because routes and codes are
    /// only known as requests arrive; both are bounded (routes are fixed, unmatched paths share
    /// one key), so the map stays small.
    requests: Mutex<BTreeMap<String, BTreeMap<u16, u64>>>,
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

/// The route label of requests no route matched, so unknown paths cannot grow the map.
const UNMATCHED_ROUTE: &str = "other";

impl Metrics {
    /// Counts one answered request.
    pub fn count_request(&self, route: &str, code: u16) {
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        match requests.get_mut(route) {
            Some(codes) => *codes.entry(code).or_default() += 1,
            None => {
                requests.insert(route.to_owned(), BTreeMap::from([(code, 1)]));
            }
        }
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

    /// The request count for one route and code (for tests and diagnostics).
    pub fn requests(&self, route: &str, code: u16) -> u64 {
        let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests.get(route).and_then(|codes| codes.get(&code)).copied().unwrap_or(0)
    }

    fn write_to(&self, out: &mut Exposition) {
        out.family(
            "strata_http_requests_total",
            "counter",
            "HTTP requests answered, by route and status code.",
        );
        {
            let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            for (route, codes) in requests.iter() {
                for (code, n) in codes {
                    out.sample(
                        "strata_http_requests_total",
                        &[("handler", route), ("code", &code.to_string())],
                        *n,
                    );
                }
            }
        }

        out.family(
            "strata_ingest_samples_received_total",
            "counter",
            "Float samples decoded from write requests, by protocol, before storage's checks.",
        );
        for protocol in Protocol::ALL {
            let n = load(&self.samples_received[protocol.index()]);
            out.sample("strata_ingest_samples_received_total", &[("protocol", protocol.label())], n);
        }

        out.family(
            "strata_ingest_requests_rejected_total",
            "counter",
            "Write requests refused as a whole (nothing of them stored), by protocol and reason.",
        );
        for protocol in Protocol::ALL {
            for why in RequestRejection::ALL {
                let n = load(&self.requests_rejected[protocol.index()][why.index()]);
                let labels = [("protocol", protocol.label()), ("reason", why.label())];
                out.sample("strata_ingest_requests_rejected_total", &labels, n);
            }
        }

        out.family(
            "strata_ingest_exemplars_dropped_total",
            "counter",
            "Exemplars received in remote-write requests and not stored (strata does not store exemplars yet).",
        );
        out.sample("strata_ingest_exemplars_dropped_total", &[], load(&self.exemplars_dropped));

        out.family(
            "strata_ingest_influx_lines_rejected_total",
            "counter",
            "Line-protocol lines that could not be parsed; the other lines of their request were stored.",
        );
        out.sample("strata_ingest_influx_lines_rejected_total", &[], load(&self.lines_rejected));

        out.family(
            "strata_ingest_influx_string_fields_skipped_total",
            "counter",
            "Line-protocol string fields skipped because a sample holds only numbers.",
        );
        out.sample(
            "strata_ingest_influx_string_fields_skipped_total",
            &[],
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

/// Writes storage's own counters. Only called once the database is open.
fn write_storage(db: &storage::Db, histograms_rejected: u64, out: &mut Exposition) {
    let counters = db.counters();
    out.family(
        "strata_ingest_samples_appended_total",
        "counter",
        "Samples stored (durable per --wal-sync), including idempotent repeats of stored samples.",
    );
    out.sample("strata_ingest_samples_appended_total", &[], load(&counters.samples_appended));

    out.family(
        "strata_ingest_samples_rejected_total",
        "counter",
        "Samples received and not stored, by reason; the rest of their request was stored.",
    );
    let rejected = [
        ("too_old", load(&counters.rejected_too_old)),
        ("too_far_future", load(&counters.rejected_too_far_future)),
        ("native_histogram_unsupported", histograms_rejected),
    ];
    for (reason, n) in rejected {
        out.sample("strata_ingest_samples_rejected_total", &[("reason", reason)], n);
    }

    out.family("strata_storage_series_created_total", "counter", "Series seen for the first time.");
    out.sample("strata_storage_series_created_total", &[], load(&counters.series_created));
    out.family("strata_storage_series", "gauge", "Series in the series index.");
    out.sample("strata_storage_series", &[], db.series_count() as u64);
    out.family(
        "strata_storage_flushes_total",
        "counter",
        "Flushes of the in-memory head to partition files.",
    );
    out.sample("strata_storage_flushes_total", &[], load(&counters.flushes));

    let wal = db.wal_stats();
    out.family("strata_wal_records_total", "counter", "WAL records appended (one per stored write request).");
    out.sample("strata_wal_records_total", &[], wal.records);
    out.family(
        "strata_wal_bytes_written_total",
        "counter",
        "Bytes of WAL records written, frame headers included.",
    );
    out.sample("strata_wal_bytes_written_total", &[], wal.bytes_written);
    out.family("strata_wal_fsyncs_total", "counter", "fdatasync calls on WAL segment files.");
    out.sample("strata_wal_fsyncs_total", &[], wal.fsyncs);
    out.family("strata_wal_fsync_seconds_total", "counter", "Time spent in WAL fdatasync calls.");
    out.sample_f64("strata_wal_fsync_seconds_total", &[], nanos_to_seconds(wal.fsync_nanos_total));
    out.family("strata_wal_fsync_seconds_max", "gauge", "The slowest WAL fdatasync call since start.");
    out.sample_f64("strata_wal_fsync_seconds_max", &[], nanos_to_seconds(wal.fsync_nanos_max));
}

fn nanos_to_seconds(nanos: u64) -> f64 {
    // Exact below 2^53 ns (104 days of fsync time); beyond that the rounding is invisible.
    nanos as f64 / 1e9
}

/// The content type of the text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`.
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let mut out = Exposition::default();
    state.metrics().write_to(&mut out);
    out.family(
        "strata_ingest_metadata_entries",
        "gauge",
        "Metric names with remote-write metadata held in memory.",
    );
    out.sample("strata_ingest_metadata_entries", &[], state.metadata().len() as u64);
    if let Some(db) = state.db() {
        write_storage(db, load(&state.metrics().histograms_rejected), &mut out);
    }
    ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], out.text).into_response()
}

/// Middleware counting every answered request by its matched route and status code.
pub async fn count_requests(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned());
    let response = next.run(request).await;
    state.metrics().count_request(route.as_deref().unwrap_or(UNMATCHED_ROUTE), response.status().as_u16());
    response
}

/// A text exposition being written.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a metric family with its help text and type.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        // Writing into a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.labels(name, labels);
        let _ = writeln!(self.text, " {value}");
    }

    fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.labels(name, labels);
        // Rust's shortest round-trip float formatting is valid exposition syntax for finite values.
        let _ = writeln!(self.text, " {value}");
    }

    fn labels(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.text.push_str(name);
        if labels.is_empty() {
            return;
        }
        self.text.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            let _ = write!(self.text, "{label}=\"{}\"", escape_label_value(value));
        }
        self.text.push('}');
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape_label_value(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// Help text escapes backslash and line feed.
fn escape_help(help: &str) -> String {
    help.replace('\\', r"\\").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(metrics: &Metrics) -> String {
        let mut out = Exposition::default();
        metrics.write_to(&mut out);
        out.text
    }

    #[test]
    fn counts_requests_by_route_and_code() {
        let metrics = Metrics::default();
        metrics.count_request("/api/v1/write", 204);
        metrics.count_request("/api/v1/write", 204);
        metrics.count_request("/api/v1/write", 400);
        assert_eq!(metrics.requests("/api/v1/write", 204), 2);
        assert_eq!(metrics.requests("/api/v1/write", 400), 1);
        assert_eq!(metrics.requests("/write", 204), 0);
        let text = render(&metrics);
        assert!(
            text.contains("strata_http_requests_total{handler=\"/api/v1/write\",code=\"204\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("strata_http_requests_total{handler=\"/api/v1/write\",code=\"400\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn every_family_has_help_and_type_once() {
        let metrics = Metrics::default();
        metrics.count_rejected_request(Protocol::Influx, RequestRejection::TooLarge);
        let text = render(&metrics);
        let mut families = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split_whitespace().nth(2).unwrap().to_owned();
            assert!(!families.contains(&name), "{name} twice");
            assert!(text.contains(&format!("# HELP {name} ")), "{name} has no HELP");
            families.push(name);
        }
        assert!(
            text.contains(
                "strata_ingest_requests_rejected_total{protocol=\"influx\",reason=\"too_large\"} 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::default();
        out.sample("m", &[("l", "a\"b\\c\nd")], 1);
        assert_eq!(out.text, "m{l=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
