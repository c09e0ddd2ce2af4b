//! The one error type of the `remote` crate, and the HTTP status each kind deserves.
//!
//! The status table lives here, next to the variants, so the server maps errors with
//! [`Error::status_hint`] instead of keeping a second copy that can drift.

/// Result alias for decoding and encoding request bodies.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can be wrong with a request body. None of these can succeed on retry, so
/// none of them is a 5xx: a remote-write sender retries 5xx forever and its shard stalls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body is not a valid snappy block (or its declared length disagrees with its content).
    #[error("invalid snappy block: {0}")]
    Snappy(String),
    /// The decompressed body is not a valid protobuf message of the negotiated type. The message
    /// names the field path, e.g. `timeseries[3].labels[0]`.
    #[error("invalid protobuf: {0}")]
    Protobuf(String),
    /// A series' label set can never be stored: missing or empty `__name__`, an empty or
    /// duplicate label name, invalid UTF-8, or a remote-write 2.0 symbol reference out of range.
    #[error("invalid labels in series {series}: {reason}")]
    InvalidLabels {
        /// The series as far as it could be decoded, in Prometheus notation.
        series: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A native histogram that cannot be stored: an unknown schema, spans that disagree with
    /// the bucket counts, negative counts, unordered custom bounds. The message names the
    /// series' position and the problem.
    #[error("invalid native histogram in {at}: {reason}")]
    InvalidHistogram {
        /// Where: e.g. `timeseries[3].histograms[0]`.
        at: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A configured bound was exceeded. `limit` is the name of the [`crate::Limits`] field, so
    /// the message tells an operator which knob to raise.
    #[error("{limit} exceeded: {value} > {max} (raise the `{limit}` limit if this request is legitimate)")]
    LimitExceeded {
        /// The [`crate::Limits`] field that was exceeded, e.g. `"body_bytes_max"`.
        limit: &'static str,
        /// The value found in the request.
        value: u64,
        /// The configured maximum.
        max: u64,
    },
    /// A Content-Type or Content-Encoding strata does not speak. Remote write 2.0 requires a
    /// 415 here so the sender can fall back to another protocol version.
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    /// An Influx `precision` parameter that is not one the API version allows.
    #[error("invalid precision {0:?}")]
    BadPrecision(String),
    /// Our encoder was asked to write what the wire format cannot express (e.g. a newline in an
    /// Influx tag value). Never produced while decoding.
    #[error("cannot encode: {0}")]
    Unencodable(String),
    /// A gzip-encoded body that does not decompress.
    #[error("invalid gzip body: {0}")]
    Gzip(String),
    /// A remote-read label matcher of an unknown type or with a regex that does not compile.
    #[error("invalid matcher: {0}")]
    InvalidMatcher(String),
    /// A remote-read response that does not decode: a bad frame length or checksum, a
    /// truncated or malformed XOR chunk. Produced only by the client-side decoders.
    #[error("invalid remote-read response: {0}")]
    CorruptResponse(String),
}

impl Error {
    /// The HTTP status the server should answer with: 413 for the body-size limits, 415 for an
    /// unsupported Content-Type/Encoding, 400 for everything else (the request can never
    /// succeed, so the sender must drop it rather than retry).
    pub fn status_hint(&self) -> u16 {
        match self {
            Error::UnsupportedMediaType(_) => 415,
            Error::LimitExceeded { limit, .. } if is_body_limit(limit) => 413,
            _ => 400,
        }
    }

    /// Shorthand for a [`Error::LimitExceeded`] from `usize` quantities.
    pub(crate) fn limit(limit: &'static str, value: usize, max: usize) -> Self {
        Error::LimitExceeded { limit, value: value as u64, max: max as u64 }
    }
}

/// True for the limits on the size of the whole body (413 Payload Too Large), as opposed to
/// limits on what a series may contain (400).
fn is_body_limit(limit: &str) -> bool {
    limit == crate::limits::BODY_BYTES_MAX || limit == crate::limits::DECODED_BYTES_MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_hints_follow_the_contract() {
        let cases = [
            (Error::Snappy("x".into()), 400),
            (Error::Protobuf("x".into()), 400),
            (Error::InvalidLabels { series: "{}".into(), reason: "x".into() }, 400),
            (Error::limit(crate::limits::BODY_BYTES_MAX, 2, 1), 413),
            (Error::limit(crate::limits::DECODED_BYTES_MAX, 2, 1), 413),
            (Error::limit(crate::limits::LABELS_PER_SERIES_MAX, 2, 1), 400),
            (Error::limit(crate::limits::LABEL_NAME_BYTES_MAX, 2, 1), 400),
            (Error::limit(crate::limits::LABEL_VALUE_BYTES_MAX, 2, 1), 400),
            (Error::UnsupportedMediaType("x".into()), 415),
            (Error::BadPrecision("x".into()), 400),
            (Error::Gzip("x".into()), 400),
            (Error::InvalidMatcher("x".into()), 400),
        ];
        for (err, status) in cases {
            assert_eq!(err.status_hint(), status, "{err}");
        }
    }

    #[test]
    fn limit_message_names_the_knob() {
        let msg = Error::limit(crate::limits::LABELS_PER_SERIES_MAX, 70, 64).to_string();
        assert_eq!(
            msg,
            "labels_per_series_max exceeded: 70 > 64 (raise the `labels_per_series_max` limit if this \
             request is legitimate)"
        );
    }
}
