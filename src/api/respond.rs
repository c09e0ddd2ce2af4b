//! The success envelope every Prometheus API endpoint answers with:
//! `{"status":"success","data":...,"warnings":[...],"infos":[...]}`.
//!
//! `warnings` and `infos` are left out when empty, as Prometheus does. Errors are not built here:
//! they are [`ApiError`](crate::error::ApiError) values, whose `IntoResponse` writes the error
//! envelope.

use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// A successful API answer.
#[derive(Debug, Clone)]
pub struct Success {
    /// The `data` member.
    pub data: Value,
    /// Query warnings (PromQL annotations, truncation by `limit`).
    pub warnings: Vec<String>,
    /// Query infos (PromQL info-level annotations).
    pub infos: Vec<String>,
}

impl Success {
    /// An answer with `data` and no warnings.
    pub fn new(data: Value) -> Self {
        Success { data, warnings: Vec::new(), infos: Vec::new() }
    }

    /// Adds a warning.
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// The envelope as JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(b"{\"status\":\"success\",\"data\":");
        // Writing a `Value` to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &self.data);
        if !self.warnings.is_empty() {
            out.extend_from_slice(b",\"warnings\":");
            let _ = serde_json::to_writer(&mut out, &self.warnings);
        }
        if !self.infos.is_empty() {
            out.extend_from_slice(b",\"infos\":");
            let _ = serde_json::to_writer(&mut out, &self.infos);
        }
        out.push(b'}');
        out
    }
}

impl IntoResponse for Success {
    fn into_response(self) -> Response {
        json_bytes(self.to_bytes())
    }
}

/// A 200 response carrying already-encoded JSON (handlers that stream large results encode
/// them without building a `Value` first).
pub fn json_bytes(body: Vec<u8>) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_leaves_out_empty_annotations() {
        let s = Success::new(serde_json::json!(["a"]));
        assert_eq!(String::from_utf8(s.to_bytes()).unwrap(), r#"{"status":"success","data":["a"]}"#);
        let s = Success::new(serde_json::json!([])).warn("w");
        assert_eq!(
            String::from_utf8(s.to_bytes()).unwrap(),
            r#"{"status":"success","data":[],"warnings":["w"]}"#
        );
    }
}
