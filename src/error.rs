//! The one error type of the HTTP API and its single mapping to responses.
//!
//! Every API handler returns `Result<_, ApiError>`; this module alone decides status codes and
//! writes Prometheus' error envelope, `{"status":"error","errorType":"bad_data","error":"..."}`,
//! so clients that parse Prometheus errors (Grafana, promtool) understand ours. The status codes
//! follow Prometheus' `respondError` (web/api/v1/api.go) with one deliberate difference:
//! `unavailable` is 503, not 500, because it always means "retry later" in strata and senders
//! treat 503 that way; it carries `Retry-After` so senders that honour it (Prometheus' remote
//! write queue does) pace their retries.
//!
//! The write endpoints speak their senders' dialects: remote write answers plain text as
//! Prometheus' own receiver does ([`ApiError::into_plain_response`]), the Influx endpoints answer
//! InfluxDB's `{"error":"..."}` ([`ApiError::into_influx_response`]). The status code and the
//! message are the same in every dialect.

use axum::Json;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// An API failure, by the kind of the Prometheus `errorType` it is answered with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The request is malformed: a parameter does not parse, a matcher is invalid. Retrying the
    /// same request never helps. 400 `bad_data`.
    #[error("{0}")]
    BadData(String),
    /// A valid query failed while evaluating, e.g. it exceeded a limit. 422 `execution`.
    #[error("{0}")]
    Execution(String),
    /// The query ran out of time. 503 `timeout`.
    #[error("{0}")]
    Timeout(String),
    /// The client went away before the answer was ready. 499 `canceled`, as Prometheus.
    #[error("{0}")]
    Canceled(String),
    /// strata cannot do this right now but may soon: the database is still opening, storage
    /// refuses writes, shutdown has begun. 503 `unavailable`.
    #[error("{0}")]
    Unavailable(String),
    /// The named thing does not exist. 404 `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// The request body is larger than strata accepts. 413 `bad_data`. The message names the
    /// flag that sets the limit, since a sender cannot split a batch it was refused.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The Content-Type or Content-Encoding is not one strata decodes. 415 `bad_data`; a
    /// remote-write 2.0 sender may retry with the other protocol version.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// strata itself failed. The detail is logged and not sent, since it may name files and
    /// internals the client has no use for. 500 `internal`.
    #[error("{0}")]
    Internal(String),
}

/// nginx's "client closed request", which Prometheus uses for canceled queries.
const STATUS_CLIENT_CLOSED_REQUEST: u16 = 499;

/// What a client sees instead of an internal error's detail.
const INTERNAL_MESSAGE: &str = "internal error; the details are in strata's log";

/// Seconds a client is asked to wait before retrying a 503: Prometheus' default maximum
/// remote-write backoff, long enough for a restart to get going, short enough not to build up
/// a large backlog in the sender.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// InfluxDB 1.x repeats the error message of a failed write or query in this header.
const INFLUX_ERROR_HEADER: HeaderName = HeaderName::from_static("x-influxdb-error");

impl ApiError {
    /// The Prometheus `errorType` string.
    pub fn error_type(&self) -> &'static str {
        match self {
            ApiError::BadData(_) => "bad_data",
            ApiError::Execution(_) => "execution",
            ApiError::Timeout(_) => "timeout",
            ApiError::Canceled(_) => "canceled",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::NotFound(_) => "not_found",
            ApiError::Internal(_) => "internal",
            ApiError::PayloadTooLarge(_) | ApiError::UnsupportedMediaType(_) => "bad_data",
        }
    }

    /// The HTTP status the error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadData(_) => StatusCode::BAD_REQUEST,
            ApiError::Execution(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Timeout(_) | ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Canceled(_) => {
                StatusCode::from_u16(STATUS_CLIENT_CLOSED_REQUEST).unwrap_or(StatusCode::BAD_REQUEST)
            }
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    /// The message a client may see: the error's own text, except for internal errors, whose
    /// detail is logged here and replaced.
    fn public_message(&self) -> String {
        match self {
            ApiError::Internal(detail) => {
                tracing::error!(error = %detail, "internal error answering a request");
                INTERNAL_MESSAGE.to_owned()
            }
            // Client errors are the client's business: not logged above debug.
            other => {
                tracing::debug!(error_type = other.error_type(), error = %other, "request failed");
                other.to_string()
            }
        }
    }

    /// Wraps `body` in a response with this error's status and, for `unavailable`, `Retry-After`.
    fn respond(&self, body: impl IntoResponse) -> Response {
        let mut response = (self.status(), body).into_response();
        if matches!(self, ApiError::Unavailable(_)) {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }

    /// The answer in Prometheus' remote-write receiver dialect: the message as plain text.
    pub fn into_plain_response(self) -> Response {
        let message = self.public_message();
        self.respond(([(CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{message}\n")))
    }

    /// The answer in InfluxDB 1.x's dialect: `{"error":"<message>"}`, with the message also in
    /// the `X-Influxdb-Error` header.
    pub fn into_influx_response(self) -> Response {
        let message = self.public_message();
        let mut response = self.respond(Json(serde_json::json!({ "error": message })));
        // A header value cannot hold line breaks, which a multi-line partial-write message has.
        let one_line: String = message.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        if let Ok(value) = HeaderValue::from_str(&one_line) {
            response.headers_mut().insert(INFLUX_ERROR_HEADER, value);
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // Written by hand to keep Prometheus' member order (a `serde_json::Value` map sorts
        // its keys); the message is escaped by serde_json.
        let message = serde_json::Value::String(self.public_message());
        let body = format!(r#"{{"status":"error","errorType":"{}","error":{message}}}"#, self.error_type());
        self.respond(([(axum::http::header::CONTENT_TYPE, "application/json")], body))
    }
}

impl From<storage::Error> for ApiError {
    /// Storage errors a retry may fix become `unavailable` (503); input storage never accepts
    /// becomes `bad_data` (400); everything else, corruption included, is `internal` (500).
    fn from(err: storage::Error) -> Self {
        match err {
            storage::Error::InvalidInput(msg) => ApiError::BadData(msg),
            // Worded as the remote-write decoders word it: the 400 a decoder gave before storage
            // took over checking a new series' strings.
            err @ storage::Error::InvalidLabels { .. } => ApiError::BadData(err.to_string()),
            storage::Error::Closed => ApiError::Unavailable("storage is shutting down; retry later".into()),
            err @ storage::Error::FlushBacklog { .. } => {
                ApiError::Unavailable(format!("strata is behind: {err}; retry later"))
            }
            err @ storage::Error::Fenced { .. } => {
                ApiError::Unavailable(format!("{err}; send to the writer that now owns the prefix"))
            }
            // A 503, not a 400: a sender pointed at a query node by mistake keeps its samples
            // and retries until it is pointed at a writer.
            err @ storage::Error::ReadOnly(_) => ApiError::Unavailable(err.to_string()),
            storage::Error::Poisoned(_) => ApiError::Unavailable(
                "storage cannot make writes durable after an I/O failure (disk full?); it retries by itself, retry later".into(),
            ),
            err if err.is_transient() => {
                // The detail names paths and OS errors: log it, tell the client only to retry.
                tracing::warn!(error = %err, "storage temporarily unavailable");
                ApiError::Unavailable("storage I/O failed; retry later".into())
            }
            err => ApiError::Internal(err.to_string()),
        }
    }
}

impl From<promql::Error> for ApiError {
    /// Engine errors map by their Prometheus `errorType`: bad queries are `bad_data` (400),
    /// failed evaluations and exceeded limits `execution` (422), timeouts `timeout` (503);
    /// storage failures go through the storage mapping above.
    fn from(err: promql::Error) -> Self {
        if let promql::Error::Storage(err) = err {
            return ApiError::from(err);
        }
        let message = err.to_string();
        match err.error_type() {
            "bad_data" => ApiError::BadData(message),
            "timeout" => ApiError::Timeout(message),
            "canceled" => ApiError::Canceled(message),
            "internal" => ApiError::Internal(message),
            _ => ApiError::Execution(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(err: ApiError) -> (u16, serde_json::Value, Option<String>) {
        let response = err.into_response();
        let status = response.status().as_u16();
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap(), content_type)
    }

    #[tokio::test]
    async fn each_kind_maps_to_prometheus_status_and_error_type() {
        let cases = [
            (ApiError::BadData("x".into()), 400, "bad_data"),
            (ApiError::Execution("x".into()), 422, "execution"),
            (ApiError::Timeout("x".into()), 503, "timeout"),
            (ApiError::Canceled("x".into()), 499, "canceled"),
            (ApiError::Unavailable("x".into()), 503, "unavailable"),
            (ApiError::NotFound("x".into()), 404, "not_found"),
            (ApiError::Internal("x".into()), 500, "internal"),
            (ApiError::PayloadTooLarge("x".into()), 413, "bad_data"),
            (ApiError::UnsupportedMediaType("x".into()), 415, "bad_data"),
        ];
        for (err, status, error_type) in cases {
            let (got_status, body, content_type) = answer(err).await;
            assert_eq!(got_status, status, "{error_type}");
            assert_eq!(body["status"], "error");
            assert_eq!(body["errorType"], error_type);
            assert_eq!(content_type.as_deref(), Some("application/json"));
        }
    }

    #[tokio::test]
    async fn client_errors_carry_their_message() {
        let (_, body, _) = answer(ApiError::BadData("invalid parameter \"step\"".into())).await;
        assert_eq!(
            body,
            serde_json::json!({"status": "error", "errorType": "bad_data", "error": "invalid parameter \"step\""})
        );
        let response = ApiError::BadData("a \"quoted\" word".into()).into_response();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        assert_eq!(&bytes[..], br#"{"status":"error","errorType":"bad_data","error":"a \"quoted\" word"}"#);
    }

    #[tokio::test]
    async fn internal_errors_do_not_echo_their_detail() {
        let (_, body, _) = answer(ApiError::Internal("corruption in /secret/path at byte 12".into())).await;
        assert_eq!(body["error"], INTERNAL_MESSAGE);
    }

    #[tokio::test]
    async fn only_unavailable_carries_retry_after() {
        let unavailable = ApiError::Unavailable("x".into()).into_response();
        assert_eq!(unavailable.headers()[RETRY_AFTER], RETRY_AFTER_SECONDS.to_string().as_str());
        let timeout = ApiError::Timeout("x".into()).into_response();
        assert!(timeout.headers().get(RETRY_AFTER).is_none());
        let plain = ApiError::Unavailable("x".into()).into_plain_response();
        assert!(plain.headers().get(RETRY_AFTER).is_some());
        let influx = ApiError::Unavailable("x".into()).into_influx_response();
        assert!(influx.headers().get(RETRY_AFTER).is_some());
    }

    #[tokio::test]
    async fn plain_dialect_is_the_message_as_text() {
        let response = ApiError::BadData("bad snappy".into()).into_plain_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(response.headers()[CONTENT_TYPE], "text/plain; charset=utf-8");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        assert_eq!(&bytes[..], b"bad snappy\n");
    }

    #[tokio::test]
    async fn influx_dialect_is_an_error_object_and_header() {
        let response =
            ApiError::BadData("partial write: line 2: bad\nline 3: bad".into()).into_influx_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(response.headers()[INFLUX_ERROR_HEADER], "partial write: line 2: bad line 3: bad");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body, serde_json::json!({"error": "partial write: line 2: bad\nline 3: bad"}));
    }

    #[tokio::test]
    async fn internal_detail_is_hidden_in_every_dialect() {
        let response = ApiError::Internal("/secret/path".into()).into_plain_response();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("/secret"));
        let response = ApiError::Internal("/secret/path".into()).into_influx_response();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("/secret"));
    }

    #[test]
    fn storage_errors_map_by_whether_a_retry_can_help() {
        let io = std::io::Error::other("disk full");
        assert_eq!(ApiError::from(storage::Error::io("fsync /data/wal/1", io)).status().as_u16(), 503);
        assert_eq!(ApiError::from(storage::Error::Poisoned("fsync failed".into())).status().as_u16(), 503);
        assert_eq!(ApiError::from(storage::Error::Closed).status().as_u16(), 503);
        let invalid = ApiError::from(storage::Error::InvalidInput("series without labels".into()));
        assert_eq!(invalid.status().as_u16(), 400);
        assert_eq!(invalid.to_string(), "series without labels");
        let corrupt = storage::Error::corruption("/data/p/1", Some(7), "bad crc");
        assert_eq!(ApiError::from(corrupt).status().as_u16(), 500);
    }

    #[test]
    fn promql_errors_map_by_error_type() {
        let cases = [
            (promql::Error::BadData("1:5: parse error: x".into()), 400, "bad_data"),
            (promql::Error::Execution("duplicate labelset".into()), 422, "execution"),
            (promql::Error::TooManySamples("expression evaluation"), 422, "execution"),
            (promql::Error::TooManySeries(10), 422, "execution"),
            (promql::Error::Timeout("expression evaluation"), 503, "timeout"),
            (promql::Error::Storage(storage::Error::corruption("/p", None, "bad")), 500, "internal"),
            (promql::Error::Storage(storage::Error::Closed), 503, "unavailable"),
        ];
        for (err, status, error_type) in cases {
            let message = err.to_string();
            let api = ApiError::from(err);
            assert_eq!(api.status().as_u16(), status, "{message}");
            assert_eq!(api.error_type(), error_type, "{message}");
        }
        let timeout = ApiError::from(promql::Error::Timeout("expression evaluation"));
        assert_eq!(timeout.to_string(), "query timed out in expression evaluation");
    }

    #[test]
    fn transient_storage_errors_do_not_echo_paths() {
        let io = std::io::Error::other("No space left on device");
        let err = ApiError::from(storage::Error::io("write /data/wal/00000001", io));
        assert!(!err.to_string().contains("/data"), "{err}");
    }
}
