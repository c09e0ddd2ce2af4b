//! gzip for API answers, when the client asks for it.
//!
//! Go's HTTP client asks for gzip on every request unless told not to, so Grafana's data source,
//! Prometheus' API client and TSBS's query runner all take this path: compression speed is query
//! speed. Every API answer except remote read (snappy already, and streamed) is built whole in
//! memory before it is sent, so it is compressed in one call with libdeflate, which does a whole
//! buffer at once, instead of a streaming deflater: at its fastest level it compressed query JSON
//! at about 410 MB/s to 18 % of its size, where tower-http's streaming gzip (miniz_oxide) managed
//! 290 MB/s to 21 % at its fastest level and 19 MB/s at its default one
//! (docs/benchmarks/http-api.md#compressed-answers). Each thread keeps its compressor, so an
//! answer does not pay for setting one up (miniz_oxide zeroed some 200 KB of tables per answer).

use std::cell::RefCell;
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, VARY};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use libdeflater::{CompressionLvl, Compressor};

use crate::api::query::QueryPhases;
use crate::error::ApiError;

/// Smallest answer compressed: below one packet gzip saves nothing on the wire and costs tens of
/// microseconds, a good part of a small query's time (Prometheus' gzip handler starts at 1,400
/// bytes too).
pub const MIN_BYTES: usize = 1400;

/// Answers from this size on are compressed on the blocking pool instead of the async worker
/// (about 0.6 ms of compression), so that a large answer does not hold up the requests that
/// worker serves; smaller ones are not worth the hand-off.
const BLOCKING_FROM_BYTES: usize = 256 << 10;

thread_local! {
    /// This thread's compressor at libdeflate's fastest level (level 1: its XFL header byte
    /// says "fastest"), made on first use and freed with the thread (idle blocking-pool threads
    /// end after a few seconds).
    static COMPRESSOR: RefCell<Option<Compressor>> = const { RefCell::new(None) };
}

/// Middleware: gzips the answer when the request accepts gzip, the answer is not encoded
/// already, is not a partial one, and is at least [`MIN_BYTES`] long; says `Vary:
/// accept-encoding` on every answer it could have compressed. A query's answer carries its
/// phase timings when debug logging is on ([`QueryPhases`]): they are logged here, with the
/// time compression took (from the answer in hand to the gzipped body, the hand-off to the
/// blocking pool of a large answer included).
pub async fn layer(request: Request, next: Next) -> Response {
    let accepts = accepts_gzip(request.headers());
    let mut response = next.run(request).await;
    let phases = response.extensions_mut().remove::<QueryPhases>();
    let began = Instant::now();
    let (response, compressed) = gzip(response, accepts).await;
    if let Some(phases) = phases {
        phases.log(compressed.then(|| began.elapsed()));
    }
    response
}

/// The work of [`layer`]: the response to send, and whether it is compressed.
async fn gzip(mut response: Response, accepts: bool) -> (Response, bool) {
    if response.headers().contains_key(CONTENT_ENCODING) || response.headers().contains_key(CONTENT_RANGE) {
        return (response, false);
    }
    add_vary(response.headers_mut());
    if !accepts {
        return (response, false);
    }
    let (mut parts, body) = response.into_parts();
    // The API's answers are in memory already (see the module comment): this takes their one
    // frame. A body that fails to read would have failed the client the same way.
    let plain = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(err) => {
            let error = ApiError::Internal(format!("reading an answer to compress it: {err}"));
            return (error.into_response(), false);
        }
    };
    if plain.len() < MIN_BYTES {
        return (Response::from_parts(parts, Body::from(plain)), false);
    }
    let compressed = if plain.len() >= BLOCKING_FROM_BYTES {
        let input = plain.clone();
        tokio::task::spawn_blocking(move || compress(&input)).await.ok().flatten()
    } else {
        compress(&plain)
    };
    match compressed {
        Some(gz) => {
            parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            parts.headers.remove(CONTENT_LENGTH);
            (Response::from_parts(parts, Body::from(gz)), true)
        }
        // Compression cannot fail with the bound libdeflate gives; if it did, the answer goes
        // out as it is.
        None => (Response::from_parts(parts, Body::from(plain)), false),
    }
}

/// libdeflate's fastest level that compresses: 1 (its `CompressionLvl::fastest()` is 0, which
/// stores). Level 1 is always valid; the fallback only keeps this free of a panic path.
fn level() -> CompressionLvl {
    CompressionLvl::new(1).unwrap_or_default()
}

/// `data` as one gzip member at the fastest level, with this thread's compressor.
///
/// libdeflate writes into a buffer of its worst-case bound, a little more than the input; the
/// result is cut down to its own size, since the body keeps its buffer until the client has
/// read it all: query JSON compresses to about a fifth, so a large answer to a slow client would
/// otherwise hold five times the memory it needs.
pub fn compress(data: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = slot.get_or_insert_with(|| Compressor::new(level()));
        let mut out = vec![0; compressor.gzip_compress_bound(data.len())];
        let len = compressor.gzip_compress(data, &mut out).ok()?;
        out.truncate(len);
        out.shrink_to_fit();
        Some(out)
    })
}

/// Whether an `Accept-Encoding` header accepts gzip (RFC 9110 §12.5.3): `gzip` or `x-gzip`
/// with a non-zero weight, or `*` with a non-zero weight when gzip is not named.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut named = None;
    let mut any = None;
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut fields = item.split(';');
            let coding = fields.next().unwrap_or("").trim();
            let weight = fields
                .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
                .map(|q| q.trim().parse::<f32>().unwrap_or(0.0))
                .next()
                .unwrap_or(1.0);
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                named = Some(named.unwrap_or(false) || weight > 0.0);
            } else if coding == "*" {
                any = Some(weight > 0.0);
            }
        }
    }
    named.or(any).unwrap_or(false)
}

/// Caches must keep the gzipped and the plain answer apart.
fn add_vary(headers: &mut HeaderMap) {
    let varies = headers.get_all(VARY).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',').any(|t| t.trim() == "*" || t.trim().eq_ignore_ascii_case("accept-encoding"))
        })
    });
    if !varies {
        headers.append(VARY, HeaderValue::from_static("accept-encoding"));
    }
}

#[cfg(test)]
mod tests;
