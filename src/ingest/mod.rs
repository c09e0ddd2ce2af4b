//! The write endpoints: Prometheus remote write ([`remote_write`]) and Influx line protocol
//! ([`line_protocol`]), and what they share.
//!
//! Every write goes the same way: check the headers, take the body (at most
//! `--write-body-bytes-max`), then on one blocking thread (decoding is CPU work that must not
//! stall the async workers, and runs in parallel across requests) decode it with the `remote`
//! crate into a `storage::BatchRef`, whose label strings borrow the request's bytes, and append
//! that (`Db::append_ref_deferred` writes the WAL record; the request's memory and decode slot are
//! freed; `PendingAppend::finish` returns once the record is durable); then answer. Decoding and
//! appending share the thread because the batch borrows the decoded body: no label string is
//! copied on the way from the request to the series index. The status rules follow the
//! remote-write specification (senders retry 5xx forever and drop 4xx; docs/operations.md,
//! "Write endpoints and their answers", has the whole table):
//!
//! - 2xx only once everything in the request is durable;
//! - 4xx for what can never succeed (undecodable bodies, invalid labels, samples outside the
//!   accepted time window) — the rest of the request is stored first, and the message says
//!   what was refused and why;
//! - 503 with `Retry-After` for what a retry can fix (storage I/O failure, shutdown, the
//!   database still opening); never 429, which Prometheus drops by default.

pub mod admission;
pub mod line_protocol;
pub mod remote_write;

use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::http::HeaderMap;
use std::sync::Arc;
use storage::cardinality::SeriesLimit;

use storage::{AppendOutcome, BatchRef, PendingAppend};

use crate::log::distributor::{Distributor, Prepared};

use crate::error::ApiError;
use crate::metrics::{Protocol, RequestRejection};
use crate::state::AppState;

/// The flag that sets the compressed body limit, named in 413 answers.
pub const BODY_LIMIT_FLAG: &str = "--write-body-bytes-max";

/// A header's value as text, if present and valid.
fn header(headers: &HeaderMap, name: axum::http::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The body, or the error that explains why it could not be read. axum has already applied
/// the body limit (`DefaultBodyLimit` on the write routes); its rejection becomes a 413 that
/// names our flag instead of axum's generic text.
fn body_or_error(body: Result<Bytes, BytesRejection>, limits: &remote::Limits) -> Result<Bytes, ApiError> {
    match body {
        Ok(bytes) => Ok(bytes),
        Err(BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_))) => {
            Err(ApiError::PayloadTooLarge(format!(
                "request body larger than {} bytes; raise {BODY_LIMIT_FLAG} if such batches are legitimate",
                limits.body_bytes_max
            )))
        }
        Err(other) => Err(ApiError::BadData(format!("cannot read the request body: {other}"))),
    }
}

/// Maps a `remote` error to the API error with the status the `remote` crate assigns it.
fn decode_error(err: remote::Error) -> ApiError {
    let message = err.to_string();
    match err.status_hint() {
        413 => ApiError::PayloadTooLarge(message),
        415 => ApiError::UnsupportedMediaType(message),
        _ => ApiError::BadData(message),
    }
}

/// The rejection reason a failed write counts as in `/metrics`.
fn rejection_reason(err: &ApiError) -> RequestRejection {
    match err {
        ApiError::PayloadTooLarge(_) => RequestRejection::TooLarge,
        ApiError::UnsupportedMediaType(_) => RequestRejection::UnsupportedMediaType,
        ApiError::Unavailable(_) | ApiError::Timeout(_) | ApiError::Internal(_) => {
            RequestRejection::Unavailable
        }
        _ => RequestRejection::Invalid,
    }
}

/// Counts `err` as a refused request of `protocol` and passes it on.
fn count_rejection(state: &AppState, protocol: Protocol, err: ApiError) -> ApiError {
    state.metrics().count_rejected_request(protocol, rejection_reason(&err));
    err
}

/// Runs the decoding and storing of one request on a blocking thread. A panic there (a bug
/// outside the decoder, which [`guard_decoder`] covers) is a 500.
async fn blocking<T, F>(work: F) -> Result<T, ApiError>
where
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        Err(join) => Err(ApiError::Internal(format!("storing a batch failed: {join}"))),
    }
}

/// Runs a decoder. Decoders are total functions (fuzzed, returning errors), but should one
/// panic, the request is answered 400 rather than 500: the same bytes would panic again, and a
/// sender retries a 5xx forever and its queue would stall behind the request.
fn guard_decoder<T>(decode: impl FnOnce() -> Result<T, ApiError>) -> Result<T, ApiError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)) {
        Ok(decoded) => decoded,
        Err(_) => {
            tracing::error!("a request decoder panicked; answering 400 (this is a bug)");
            Err(ApiError::BadData(
                "the request body could not be decoded (the decoder failed on it; this is a strata bug, please \
                 report it)"
                    .into(),
            ))
        }
    }
}

/// Where a decoded request is being stored: written and waiting for its fsync, or split for
/// the ingest log and waiting to be published.
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, on its blocking thread's stack; boxing would allocate per request"
)]
pub(crate) enum Deferred<'s> {
    /// Nothing to store (a request with metadata only).
    Nothing,
    /// In this process's database.
    Db(PendingAppend<'s>),
    /// Through the ingest log (`--log.url`).
    Log(Arc<Distributor>, Prepared),
}

impl Deferred<'_> {
    /// What storage did with the batch, as far as known before the wait: only a database
    /// append knows (the log's consumers decide later).
    fn outcome(&self) -> Option<&AppendOutcome> {
        match self {
            Deferred::Db(p) => Some(p.outcome()),
            Deferred::Nothing | Deferred::Log(..) => None,
        }
    }
}

/// Stamps `tenant` (`None`: the default tenant) on every series of `batch` (decoded from
/// `body`; a label of that name the client sent is replaced, see [`crate::tenant`]) and
/// writes it to the WAL (on the calling blocking thread) without
/// waiting for its fsync, or, with `--log.url`, splits and encodes it for the log; or returns
/// the error to answer with: 503 while the database opens, the log is not connected or storage
/// cannot write right now, 400 for input storage never accepts, 500 otherwise. The caller frees
/// the request (body, decoded batch) and its decode slot, then calls [`finish_store`], so that
/// requests waiting for a shared fsync hold no more than what storage keeps of them. An empty
/// batch is not sent to storage at all (a metadata-only remote-write request must not fail
/// because of storage).
fn store_deferred<'s, 'b>(
    state: &'s AppState,
    batch: &mut BatchRef<'b>,
    tenant: Option<&'b str>,
    body: &[u8],
    metadata: &[remote::metadata::MetricMetadata],
) -> Result<Deferred<'s>, ApiError> {
    if batch.sample_count() == 0 {
        return Ok(Deferred::Nothing);
    }
    batch.set_label(storage::TENANT_LABEL, tenant);
    if state.log_mode() {
        let Some(distributor) = state.distributor() else {
            return Err(ApiError::Unavailable(
                "the ingest log (--log.url) is not connected yet; retry later".into(),
            ));
        };
        let replica = distributor.ha().and_then(|ha| {
            crate::log::ha::replica_of(batch.iter().map(|(labels, _)| labels), ha.config()).map(|r| (ha, r))
        });
        let prepared = match replica {
            None => distributor.prepare(batch, tenant, body, metadata),
            Some((ha, (cluster, replica))) => {
                let now = chrono::Utc::now().timestamp_millis();
                let verdict = tokio::runtime::Handle::current()
                    .block_on(ha.check(tenant, &cluster, &replica, now))
                    .map_err(|e| ApiError::Unavailable(format!("{e}; retry later")))?;
                if verdict == crate::log::ha::Verdict::Drop {
                    // Another replica of the pair is elected: answered as stored, as Mimir does.
                    crate::log::metrics::LOG_METRICS.ha_dropped(batch.sample_count() as u64);
                    return Ok(Deferred::Nothing);
                }
                // Kept without the replica label, so both replicas' series are one.
                batch.remove_label(&ha.config().replica_label);
                distributor.prepare(batch, tenant, body, metadata)
            }
        };
        return Ok(Deferred::Log(Arc::clone(distributor), prepared.map_err(ApiError::from)?));
    }
    let Some(db) = state.db() else {
        return Err(ApiError::Unavailable(
            "the database is still opening (replaying the WAL); retry later".into(),
        ));
    };
    db.append_ref_deferred(batch).map(Deferred::Db).map_err(ApiError::from)
}

/// Waits until what [`store_deferred`] wrote is durable and stored (or published to the log,
/// on this blocking thread), and returns what storage did (for the log: every sample, which
/// the log's consumers store).
fn finish_store(pending: Deferred<'_>) -> Result<AppendOutcome, ApiError> {
    match pending {
        Deferred::Nothing => Ok(AppendOutcome::default()),
        Deferred::Db(p) => p.finish().map_err(ApiError::from),
        Deferred::Log(distributor, prepared) => {
            let outcome = AppendOutcome {
                appended: prepared.samples,
                histograms_appended: prepared.histograms,
                too_far_future: prepared.too_far_future,
                first_rejected: prepared.first_rejected.clone(),
                ..AppendOutcome::default()
            };
            if !prepared.is_empty() {
                tokio::runtime::Handle::current()
                    .block_on(distributor.publish(prepared))
                    .map_err(|e| ApiError::Unavailable(format!("{e}; retry later")))?;
            }
            Ok(outcome)
        }
    }
}

/// The explanation of samples storage refused, for the 400 that reports them, or `None` if
/// it stored everything. Series refused by a cardinality limit are explained by
/// [`refused_series_message`], appended here.
fn rejected_samples_message(outcome: &AppendOutcome) -> Option<String> {
    if outcome.rejected() == 0 && outcome.series_rejected.total() == 0 {
        return None;
    }
    let mut reasons = Vec::new();
    if outcome.outside_retention > 0 {
        let kept_from =
            outcome.retention_first_kept.map_or_else(String::new, |t| format!(" (before {})", rfc3339(t)));
        reasons.push(format!(
            "{} older than --retention keeps{kept_from}, measured back from the newest sample stored",
            outcome.outside_retention
        ));
    }
    if outcome.too_old > 0 {
        reasons.push(format!(
            "{} too old (further behind their series' newest sample than --ooo-window)",
            outcome.too_old
        ));
    }
    if outcome.too_far_future > 0 {
        reasons.push(format!(
            "{} too far in the future (more than --future-window ahead of strata's clock)",
            outcome.too_far_future
        ));
    }
    if outcome.series_limited > 0 {
        reasons.push(format!("{} of new series refused by a cardinality limit", outcome.series_limited));
    }
    let mut message = format!(
        "{} samples rejected: {}; the other {} samples were stored",
        outcome.rejected(),
        reasons.join(", "),
        outcome.appended
    );
    if let Some((labels, sample)) = &outcome.first_rejected {
        let _ = write!(message, "; first rejected: {} @ {}", crate::tenant::hidden(labels.clone()), sample.t);
    }
    if let Some(refused) = refused_series_message(outcome) {
        let _ = write!(message, "; {refused}");
    }
    Some(message)
}

/// A timestamp in milliseconds as RFC 3339 (UTC, to the millisecond where it has any); the
/// number itself where chrono cannot represent it.
pub(crate) fn rfc3339(t_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(t_ms)
        .map_or_else(|| t_ms.to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// Names the cardinality limits that refused new series of an append, with the limit's value,
/// the metric and the first refused series, or `None` if no series was refused. Refused series
/// are counted in `/metrics` by storage (`strata_series_rejected_total`).
fn refused_series_message(outcome: &AppendOutcome) -> Option<String> {
    let first = outcome.first_rejected_series.as_ref()?;
    let refused = &outcome.series_rejected;
    let mut message = format!("{} new series refused by cardinality limits: ", refused.total());
    let limit = first.limit;
    let _ = write!(message, "{} ({}) reached", limit.name(), first.max);
    if limit == SeriesLimit::MaxSeriesPerMetric
        && let Some(metric) = first.labels.get(storage::METRIC_NAME)
    {
        let _ = write!(message, " for metric {metric:?}");
    }
    let others: Vec<String> = SeriesLimit::ALL
        .into_iter()
        .filter(|l| *l != limit && refused.get(*l) > 0)
        .map(|l| format!("{} by {}", refused.get(l), l.name()))
        .collect();
    if !others.is_empty() {
        let _ = write!(message, " (also {})", others.join(", "));
    }
    let _ = write!(message, ", first refused: {}", crate::tenant::hidden(first.labels.clone()));
    Some(message)
}

#[cfg(test)]
mod status_matrix_tests;

#[cfg(test)]
mod tests {
    use storage::{Labels, Sample};

    use super::*;

    #[test]
    fn rejected_samples_are_explained_with_reason_counts_and_first_series() {
        let outcome = AppendOutcome {
            appended: 8,
            series_created: 0,
            too_old: 2,
            too_far_future: 1,
            first_rejected: Some((
                Labels::from_pairs(&[("__name__", "up"), ("job", "a")]),
                Sample::new(1000, 1.0),
            )),
            ..AppendOutcome::default()
        };
        let message = rejected_samples_message(&outcome).unwrap();
        assert_eq!(
            message,
            "3 samples rejected: 2 too old (further behind their series' newest sample than --ooo-window), \
             1 too far in the future (more than --future-window ahead of strata's clock); the other 8 samples \
             were stored; first rejected: up{job=\"a\"} @ 1000"
        );
        assert_eq!(rejected_samples_message(&AppendOutcome::default()), None);
    }

    #[test]
    fn samples_outside_retention_name_the_flag_and_the_first_time_kept() {
        let outcome = AppendOutcome {
            appended: 1,
            outside_retention: 2,
            retention_first_kept: Some(1_700_006_400_000),
            first_rejected: Some((Labels::from_pairs(&[("__name__", "up")]), Sample::new(1000, 1.0))),
            ..AppendOutcome::default()
        };
        assert_eq!(
            rejected_samples_message(&outcome).unwrap(),
            "2 samples rejected: 2 older than --retention keeps (before 2023-11-15T00:00:00Z), measured back from \
             the newest sample stored; the other 1 samples were stored; first rejected: up{} @ 1000"
        );
    }

    #[test]
    fn refused_series_name_the_limit_its_value_the_metric_and_the_series() {
        let labels = Labels::from_pairs(&[("__name__", "req"), ("id", "42")]);
        let outcome = AppendOutcome {
            appended: 5,
            series_rejected: storage::cardinality::SeriesRejections {
                max_series_per_metric: 2,
                max_new_series_per_day: 1,
                ..Default::default()
            },
            series_limited: 3,
            first_rejected_series: Some(storage::cardinality::RejectedSeries {
                labels,
                limit: SeriesLimit::MaxSeriesPerMetric,
                max: 100,
            }),
            ..AppendOutcome::default()
        };
        assert_eq!(
            rejected_samples_message(&outcome).unwrap(),
            "3 samples rejected: 3 of new series refused by a cardinality limit; the other 5 samples were \
             stored; 3 new series refused by cardinality limits: max_series_per_metric (100) reached for metric \
             \"req\" (also 1 by max_new_series_per_day), first refused: req{id=\"42\"}"
        );
    }

    #[test]
    fn decode_errors_keep_the_status_the_remote_crate_assigns() {
        let too_big =
            remote::Error::LimitExceeded { limit: remote::limits::BODY_BYTES_MAX, value: 2, max: 1 };
        assert_eq!(decode_error(too_big).status().as_u16(), 413);
        assert_eq!(decode_error(remote::Error::UnsupportedMediaType("x".into())).status().as_u16(), 415);
        assert_eq!(decode_error(remote::Error::Snappy("x".into())).status().as_u16(), 400);
    }

    #[test]
    fn a_panicking_decoder_is_a_400_not_a_500() {
        let answer: Result<(), ApiError> = guard_decoder(|| panic!("decoder bug"));
        assert_eq!(answer.unwrap_err().status().as_u16(), 400);
    }

    #[tokio::test]
    async fn a_panic_while_storing_is_a_500() {
        let answer: Result<(), ApiError> = blocking(|| panic!("storage bug")).await;
        assert_eq!(answer.unwrap_err().status().as_u16(), 500);
    }

    #[test]
    fn writes_while_the_database_opens_are_503() {
        let state = AppState::new();
        let mut batch = BatchRef::new();
        batch.push([("__name__", "up")], [Sample::new(1, 1.0)]);
        let err = store_deferred(&state, &mut batch, None, b"", &[]).err().unwrap();
        assert_eq!(err.status().as_u16(), 503);
        // An empty batch never needs storage.
        let empty = store_deferred(&state, &mut BatchRef::new(), None, b"", &[]).unwrap();
        assert!(matches!(empty, Deferred::Nothing));
        assert_eq!(finish_store(empty).unwrap(), AppendOutcome::default());
    }

    /// With `--log.url`, a write before the log is connected is a 503 (retried), never a
    /// write to the database beside the log.
    #[test]
    fn writes_before_the_log_connects_are_503() {
        let state = AppState::new().with_log_mode(true);
        let mut batch = BatchRef::new();
        batch.push([("__name__", "up")], [Sample::new(1, 1.0)]);
        let err = store_deferred(&state, &mut batch, None, b"", &[]).err().unwrap();
        assert_eq!(err.status().as_u16(), 503);
        assert!(err.to_string().contains("--log.url"), "{err}");
    }
}
