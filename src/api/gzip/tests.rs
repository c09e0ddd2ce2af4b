//! The gzip middleware: who gets gzip, what is left alone, and that the bytes decode.

use std::io::Read;

use axum::Router;
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, VARY};
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode};
use axum::routing::get;
use tower::ServiceExt;

use super::*;

fn headers(accept: &[&str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for v in accept {
        h.append(ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
    }
    h
}

#[test]
fn accept_encoding_is_read_with_weights() {
    for (accept, want) in [
        (&[][..], false),
        (&["gzip"][..], true),
        (&["GZip"][..], true),
        (&["x-gzip"][..], true),
        (&["gzip, deflate, br"][..], true),
        (&["deflate, br"][..], false),
        (&["identity"][..], false),
        (&["gzip;q=0"][..], false),
        (&["gzip; q=0.000"][..], false),
        (&["gzip;q=0.5"][..], true),
        (&["br;q=1.0, gzip;q=0.8, *;q=0.1"][..], true),
        (&["*"][..], true),
        (&["*;q=0"][..], false),
        (&["gzip;q=0, *"][..], false),
        (&["deflate", "gzip"][..], true),
        (&["gzip;q=nonsense"][..], false),
        (&[""][..], false),
    ] {
        assert_eq!(accepts_gzip(&headers(accept)), want, "{accept:?}");
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

/// JSON like a range query's answer: repetitive, as real answers are.
fn answer(len: usize) -> Vec<u8> {
    let mut s = String::from(
        r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":["#,
    );
    let mut t = 1_700_000_000u64;
    while s.len() < len {
        s.push_str(&format!("[{t},\"{}\"],", t % 97));
        t += 60;
    }
    s.truncate(len);
    s.into_bytes()
}

#[test]
fn compress_gives_one_gzip_member_at_the_fastest_level() {
    for len in [0, 1, MIN_BYTES, 100_000] {
        let data = answer(len);
        let gz = compress(&data).unwrap();
        assert_eq!(gunzip(&gz), data);
        // RFC 1952: XFL 4 = compressed with the fastest algorithm.
        assert_eq!(&gz[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(gz[8], 4);
        if len >= MIN_BYTES {
            assert!(gz.len() < data.len() / 2, "{len}: {} bytes", gz.len());
        }
    }
}

#[test]
fn compressed_answers_keep_no_spare_buffer() {
    // The body holds its buffer until a (possibly slow) client has read it: not the input-sized
    // worst case libdeflate writes into.
    let data = answer(4 << 20);
    let gz = compress(&data).unwrap();
    assert!(gz.len() < data.len() / 4, "{} bytes", gz.len());
    assert!(gz.capacity() < gz.len() + gz.len() / 8, "capacity {} for {} bytes", gz.capacity(), gz.len());
}

/// A router whose `/n/<len>` answers `len` bytes of JSON, `/query/<len>` the same as a query's
/// answer carrying its phases (as the query handlers do when debug logging is on), and
/// `/encoded` an answer that is brotli already, behind the middleware.
fn router() -> Router {
    Router::new()
        .route(
            "/n/{len}",
            get(|axum::extract::Path(len): axum::extract::Path<usize>| async move { answer(len) }),
        )
        .route(
            "/query/{len}",
            get(|axum::extract::Path(len): axum::extract::Path<usize>| async move {
                let mut response = answer(len).into_response();
                response.extensions_mut().insert(QueryPhases {
                    query: "up".into(),
                    queued: std::time::Duration::ZERO,
                    stats: promql::QueryStats::default(),
                    encode: std::time::Duration::from_micros(7),
                    bytes: len,
                });
                response
            }),
        )
        .route("/encoded", get(|| async { ([(CONTENT_ENCODING, "br")], answer(10_000)) }))
        .layer(axum::middleware::from_fn(layer))
}

async fn send(uri: &str, accept: Option<&str>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut request = Request::get(uri);
    if let Some(a) = accept {
        request = request.header(ACCEPT_ENCODING, a);
    }
    let response = router().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap().to_vec();
    (parts.status, parts.headers, bytes)
}

#[tokio::test]
async fn answers_are_gzipped_when_accepted_and_long_enough() {
    // From one packet on, including answers large enough to be compressed on the blocking pool.
    for len in [MIN_BYTES, 20_000, BLOCKING_FROM_BYTES + 1] {
        let (status, headers, body) = send(&format!("/n/{len}"), Some("gzip, deflate")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_ENCODING], "gzip", "{len}");
        assert_eq!(headers[VARY], "accept-encoding");
        assert!(headers.get(CONTENT_LENGTH).is_none_or(|v| v == body.len().to_string().as_str()));
        assert_eq!(gunzip(&body), answer(len));
    }
    // Below a packet: as it is, but it still varies by Accept-Encoding.
    let (_, headers, body) = send(&format!("/n/{}", MIN_BYTES - 1), Some("gzip")).await;
    assert!(headers.get(CONTENT_ENCODING).is_none());
    assert_eq!(headers[VARY], "accept-encoding");
    assert_eq!(body, answer(MIN_BYTES - 1));
}

#[tokio::test]
async fn answers_are_left_alone_when_gzip_is_not_accepted_or_they_are_encoded() {
    for accept in [None, Some("identity"), Some("gzip;q=0"), Some("br")] {
        let (_, headers, body) = send("/n/20000", accept).await;
        assert!(headers.get(CONTENT_ENCODING).is_none(), "{accept:?}");
        assert_eq!(headers[VARY], "accept-encoding");
        assert_eq!(body, answer(20_000));
    }
    let (_, headers, body) = send("/encoded", Some("gzip")).await;
    assert_eq!(headers[CONTENT_ENCODING], "br");
    assert!(headers.get(VARY).is_none());
    assert_eq!(body, answer(10_000));
}

/// Log output, shared with the subscriber that writes it.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// What was written since the last call.
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

#[tokio::test]
async fn a_query_s_phases_are_logged_with_the_compression_time() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // This thread's subscriber (the test runtime and the layer run on it). Only this test
    // reaches the log's call site, so its cached interest is this subscriber's.
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();

    for len in [20_000, BLOCKING_FROM_BYTES + 1] {
        send(&format!("/query/{len}"), Some("gzip")).await;
        let log = captured.take();
        assert!(log.contains("query phases"), "{len}: {log}");
        assert!(log.contains("query=up") && log.contains("encode_us=7"), "{len}: {log}");
        assert!(log.contains(&format!("bytes={len}")), "{len}: {log}");
        assert!(log.contains("compress_us="), "{len}: {log}");
    }
    // Sent as it was: logged, without a compression time.
    for (len, accept) in [(20_000, None), (MIN_BYTES - 1, Some("gzip"))] {
        send(&format!("/query/{len}"), accept).await;
        let log = captured.take();
        assert!(log.contains("query phases") && !log.contains("compress_us"), "{len}: {log}");
    }
    // Other answers carry no phases.
    send("/n/20000", Some("gzip")).await;
    assert!(!captured.take().contains("query phases"));
}
