use std::sync::Arc;

use axum::body::Body;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use remote::read::proto::{
    LabelMatcher, MATCH_EQ, MATCH_NEQ, MATCH_RE, Query, RESPONSE_SAMPLES, RESPONSE_STREAMED_XOR_CHUNKS,
    ReadHints, ReadRequest,
};
use storage::{Batch, Db, Labels, STALE_NAN_BITS, Sample};
use tower::ServiceExt;

use super::*;
use crate::server::router;

/// A router over a fresh database holding [`fixture`].
struct Server {
    _dir: tempfile::TempDir,
    state: Arc<AppState>,
}

/// Two series of `up`, one of `other`; values include a stale marker, NaN and -0.0.
fn fixture() -> Vec<(Labels, Vec<Sample>)> {
    let t0 = T0;
    let up = |job: &str| Labels::from_pairs(&[("__name__", "up"), ("job", job)]);
    let values = |n: i64| -> Vec<Sample> { (0..n).map(|i| Sample::new(t0 + i * 1000, i as f64)).collect() };
    let mut special = values(300);
    special[10].v = f64::from_bits(STALE_NAN_BITS);
    special[11].v = f64::NAN;
    special[12].v = -0.0;
    vec![
        (up("a"), special),
        (up("b"), values(5)),
        (Labels::from_pairs(&[("__name__", "other"), ("job", "a")]), values(3)),
    ]
}

impl Server {
    fn new(config: RemoteReadConfig) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(storage::Options::new(dir.path())).unwrap());
        let mut batch = Batch::new();
        for (labels, samples) in fixture() {
            batch.push(labels, samples);
        }
        db.append(&batch).unwrap();
        let state = Arc::new(AppState::new().with_remote_read(RemoteReadService::new(config)));
        state.set_db(db);
        Server { _dir: dir, state }
    }

    async fn post(&self, body: Vec<u8>) -> (StatusCode, HeaderMap, Vec<u8>) {
        let request = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/read")
            .header(CONTENT_TYPE, "application/x-protobuf")
            .header(CONTENT_ENCODING, "snappy")
            .header("X-Prometheus-Remote-Read-Version", "0.1.0")
            .body(Body::from(body))
            .unwrap();
        let response = router(Arc::clone(&self.state)).oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 1 << 26).await.unwrap();
        (status, headers, body.to_vec())
    }

    async fn read(&self, request: &ReadRequest) -> (StatusCode, HeaderMap, Vec<u8>) {
        self.post(remote::read::encode_request(request).unwrap()).await
    }
}

/// The fixture's first timestamp (fixed, so every call builds the same data).
const T0: i64 = 1_700_000_000_000;

fn matcher(r#type: i32, name: &str, value: &str) -> LabelMatcher {
    LabelMatcher { r#type, name: name.into(), value: value.into() }
}

fn query(matchers: Vec<LabelMatcher>) -> Query {
    Query { start_timestamp_ms: i64::MIN, end_timestamp_ms: i64::MAX, matchers, hints: None }
}

fn request(queries: Vec<Query>, types: &[i32]) -> ReadRequest {
    ReadRequest { queries, accepted_response_types: types.to_vec() }
}

/// (labels as pairs, samples as (t, value bits)) for comparing answers with the fixture.
type Flat = Vec<(Vec<(String, String)>, Vec<(i64, u64)>)>;

fn flat_fixture(filter: impl Fn(&Labels) -> bool, range: (i64, i64)) -> Flat {
    fixture()
        .into_iter()
        .filter(|(l, _)| filter(l))
        .map(|(l, s)| {
            let pairs = l.iter().map(|x| (x.name.to_string(), x.value.to_string())).collect();
            let samples =
                s.iter().filter(|x| x.t >= range.0 && x.t <= range.1).map(|x| (x.t, x.v.to_bits())).collect();
            (pairs, samples)
        })
        .collect()
}

fn flat_proto_labels(labels: &[remote::read::proto::Label]) -> Vec<(String, String)> {
    labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect()
}

fn samples_answer(body: &[u8]) -> Vec<Flat> {
    let response = remote::read::decode_samples_response(body).unwrap();
    response
        .results
        .iter()
        .map(|r| {
            r.timeseries
                .iter()
                .map(|ts| {
                    let samples = ts.samples.iter().map(|s| (s.timestamp, s.value_bits)).collect();
                    (flat_proto_labels(&ts.labels), samples)
                })
                .collect()
        })
        .collect()
}

/// Each query's series from a streamed answer, chunks decoded and concatenated per series.
fn streamed_answer(body: &[u8], queries: usize) -> Vec<Flat> {
    let mut out: Vec<Flat> = vec![Vec::new(); queries];
    for frame in remote::read::decode_chunked_body(body, 1 << 22).unwrap() {
        assert_eq!(frame.chunked_series.len(), 1, "one series per frame");
        let series = &frame.chunked_series[0];
        let labels = flat_proto_labels(&series.labels);
        let mut samples = Vec::new();
        for chunk in &series.chunks {
            let decoded = remote::read::xor::decode(&chunk.data).unwrap();
            assert!(decoded.len() <= 120);
            assert_eq!((chunk.min_time_ms, chunk.max_time_ms), (decoded[0].t, decoded[decoded.len() - 1].t));
            samples.extend(decoded.iter().map(|s| (s.t, s.v.to_bits())));
        }
        let result = &mut out[frame.query_index as usize];
        // A series split over frames arrives in consecutive frames.
        match result.last_mut() {
            Some((last, so_far)) if *last == labels => so_far.extend(samples),
            _ => result.push((labels, samples)),
        }
    }
    out
}

#[tokio::test]
async fn samples_answer_is_snappy_protobuf_with_exact_values() {
    let server = Server::new(RemoteReadConfig::default());
    let (status, headers, body) =
        server.read(&request(vec![query(vec![matcher(MATCH_EQ, "__name__", "up")])], &[])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[CONTENT_TYPE], "application/x-protobuf");
    assert_eq!(headers[CONTENT_ENCODING], "snappy");
    let got = samples_answer(&body);
    assert_eq!(got, vec![flat_fixture(|l| l.metric_name() == Some("up"), (i64::MIN, i64::MAX))]);
    assert_eq!(got[0][0].1[10].1, STALE_NAN_BITS);
    assert_eq!(got[0][0].1[12].1, (-0.0f64).to_bits());
}

#[tokio::test]
async fn streamed_answer_matches_the_samples_answer() {
    let server = Server::new(RemoteReadConfig::default());
    let t0 = T0;
    let range = (t0 + 1_000, t0 + 250_000);
    let queries = vec![
        Query {
            start_timestamp_ms: range.0,
            end_timestamp_ms: range.1,
            matchers: vec![matcher(MATCH_RE, "__name__", "up|other"), matcher(MATCH_NEQ, "job", "b")],
            hints: Some(ReadHints {
                step_ms: 15_000,
                func: "rate".into(),
                range_ms: 60_000,
                ..Default::default()
            }),
        },
        query(vec![matcher(MATCH_EQ, "job", "b")]),
    ];
    let (status, headers, body) =
        server.read(&request(queries.clone(), &[RESPONSE_STREAMED_XOR_CHUNKS, RESPONSE_SAMPLES])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers[CONTENT_TYPE],
        "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"
    );
    assert!(headers.get(CONTENT_ENCODING).is_none());
    let streamed = streamed_answer(&body, 2);

    let (_, _, sampled) = server.read(&request(queries, &[RESPONSE_SAMPLES])).await;
    let sampled = samples_answer(&sampled);
    assert_eq!(streamed, sampled);
    // Hints do not change the answer: raw samples in the query's range, series sorted.
    let first = flat_fixture(|l| l.get("job") != Some("b"), range);
    let first: Flat = first.into_iter().filter(|(_, s)| !s.is_empty()).collect();
    assert_eq!(streamed[0], vec![first[1].clone(), first[0].clone()]);
    assert_eq!(streamed[0][1].1.len(), 250);
    assert_eq!(streamed[1], flat_fixture(|l| l.get("job") == Some("b"), (i64::MIN, i64::MAX)));
}

#[tokio::test]
async fn small_frames_split_a_series() {
    let server = Server::new(RemoteReadConfig { frame_bytes_max: 200, ..RemoteReadConfig::default() });
    let queries = vec![query(vec![matcher(MATCH_EQ, "job", "a"), matcher(MATCH_EQ, "__name__", "up")])];
    let (status, _, body) = server.read(&request(queries, &[RESPONSE_STREAMED_XOR_CHUNKS])).await;
    assert_eq!(status, StatusCode::OK);
    let frames = remote::read::decode_chunked_body(&body, 1 << 20).unwrap();
    // 300 samples make 3 chunks, each larger than the frame bound: one chunk per frame.
    assert_eq!(frames.iter().map(|f| f.chunked_series[0].chunks.len()).collect::<Vec<_>>(), [1, 1, 1]);
    assert_eq!(
        streamed_answer(&body, 1)[0],
        flat_fixture(|l| l.get("job") == Some("a") && l.metric_name() == Some("up"), (i64::MIN, i64::MAX))
    );
}

#[tokio::test]
async fn series_hint_returns_series_without_samples() {
    let server = Server::new(RemoteReadConfig::default());
    let mut q = query(vec![matcher(MATCH_EQ, "__name__", "up")]);
    q.hints = Some(ReadHints { func: "series".into(), ..Default::default() });
    let (status, _, body) = server.read(&request(vec![q], &[RESPONSE_SAMPLES])).await;
    assert_eq!(status, StatusCode::OK);
    let got = samples_answer(&body);
    assert_eq!(got[0].len(), 2);
    assert!(got[0].iter().all(|(_, s)| s.is_empty()));
}

#[tokio::test]
async fn matcher_corner_cases_follow_prometheus_tsdb() {
    let server = Server::new(RemoteReadConfig::default());
    let queries = vec![
        // No matchers: nothing.
        query(Vec::new()),
        // Only empty-matching matchers: every series they match.
        query(vec![matcher(MATCH_NEQ, "job", "a")]),
        // An inverted range: nothing.
        Query { start_timestamp_ms: 10, end_timestamp_ms: 5, ..query(vec![matcher(MATCH_EQ, "job", "a")]) },
    ];
    let (status, _, body) = server.read(&request(queries, &[])).await;
    assert_eq!(status, StatusCode::OK);
    let got = samples_answer(&body);
    assert!(got[0].is_empty());
    assert_eq!(got[1], flat_fixture(|l| l.get("job") == Some("b"), (i64::MIN, i64::MAX)));
    assert!(got[2].is_empty());
}

#[tokio::test]
async fn sample_limit_is_a_400_for_samples_only() {
    let server = Server::new(RemoteReadConfig { sample_limit: 304, ..RemoteReadConfig::default() });
    let all = || vec![query(vec![matcher(MATCH_RE, "__name__", ".+")])];
    let (status, headers, body) = server.read(&request(all(), &[RESPONSE_SAMPLES])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers[CONTENT_TYPE], "text/plain; charset=utf-8");
    assert_eq!(String::from_utf8(body).unwrap(), "exceeded sample limit (304)\n");
    // Exactly at the limit is fine; the limit counts per query.
    let up = || query(vec![matcher(MATCH_EQ, "__name__", "up")]);
    let (status, _, _) = server.read(&request(vec![up(), up()], &[RESPONSE_SAMPLES])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "305 samples per query");
    let (status, _, _) = server.read(&request(vec![up()], &[RESPONSE_STREAMED_XOR_CHUNKS])).await;
    assert_eq!(status, StatusCode::OK, "streaming ignores the sample limit");
    let (status, _, _) = server
        .read(&request(
            vec![query(vec![matcher(MATCH_EQ, "job", "a"), matcher(MATCH_EQ, "__name__", "up")])],
            &[],
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "300 samples");
}

#[tokio::test]
async fn bad_requests_are_plain_text_400s() {
    let server = Server::new(RemoteReadConfig::default());
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"definitely not snappy".to_vec(), "invalid snappy block"),
        (snap::raw::Encoder::new().compress_vec(&[0xff, 0xff]).unwrap(), "invalid protobuf"),
        (
            remote::read::encode_request(&request(vec![query(vec![matcher(MATCH_EQ, "a", "b")])], &[5]))
                .unwrap(),
            "server does not support any of the requested response types",
        ),
        (
            remote::read::encode_request(&request(vec![query(vec![matcher(MATCH_RE, "a", "(")])], &[]))
                .unwrap(),
            "invalid matcher",
        ),
        (
            remote::read::encode_request(&request(vec![query(vec![matcher(7, "a", "b")])], &[1])).unwrap(),
            "invalid matcher",
        ),
    ];
    for (body, message) in cases {
        let (status, headers, answer) = server.post(body).await;
        let answer = String::from_utf8(answer).unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(headers[CONTENT_TYPE], "text/plain; charset=utf-8");
        assert!(answer.contains(message), "{answer:?} should contain {message:?}");
    }
}

#[tokio::test]
async fn unavailable_while_the_database_opens() {
    let state = Arc::new(AppState::new());
    let body =
        remote::read::encode_request(&request(vec![query(vec![matcher(MATCH_EQ, "a", "b")])], &[])).unwrap();
    let request = Request::builder().method(Method::POST).uri("/api/v1/read").body(Body::from(body)).unwrap();
    let response = router(state).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn only_post_is_routed() {
    let server = Server::new(RemoteReadConfig::default());
    let request = Request::builder().uri("/api/v1/read").body(Body::empty()).unwrap();
    let response = router(Arc::clone(&server.state)).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn requests_wait_for_a_free_slot() {
    let service = RemoteReadService::new(RemoteReadConfig { concurrency: 1, ..RemoteReadConfig::default() });
    let first = service.enter().await.unwrap();
    let mut second = Box::pin(service.enter());
    // The second request waits while the first holds the only slot...
    assert!(futures_util::FutureExt::now_or_never(second.as_mut()).is_none());
    drop(first);
    // ...and gets it once the first is done.
    assert!(second.await.unwrap().is_some());
    let unlimited =
        RemoteReadService::new(RemoteReadConfig { concurrency: 0, ..RemoteReadConfig::default() });
    assert!(unlimited.enter().await.unwrap().is_none());
}

#[tokio::test]
async fn a_stream_stops_when_the_client_goes_away() {
    let server =
        Server::new(RemoteReadConfig { frame_bytes_max: 1, concurrency: 1, ..RemoteReadConfig::default() });
    let body = remote::read::encode_request(&request(
        vec![query(vec![matcher(MATCH_RE, "__name__", ".+")])],
        &[RESPONSE_STREAMED_XOR_CHUNKS],
    ))
    .unwrap();
    let request =
        Request::builder().method(Method::POST).uri("/api/v1/read").body(Body::from(body.clone())).unwrap();
    let response = router(Arc::clone(&server.state)).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // Dropping the unread body disconnects; the reading task must give its slot back.
    drop(response);
    let (status, _, answer) = server.post(body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(streamed_answer(&answer, 1)[0].len(), 3);
}

/// The `k`-th histogram of the native-histogram tests: integer counts (for `k` whole), two
/// positive buckets and a zero bucket.
fn latency_histogram(k: f64) -> storage::FloatHistogram {
    storage::FloatHistogram {
        schema: 2,
        zero_threshold: 1e-128,
        zero_count: 1.0,
        count: 1.0 + 2.0 * k,
        sum: k * 0.5,
        positive: vec![(1, k), (3, k)],
        ..storage::FloatHistogram::default()
    }
}

/// A server holding `latency{job="a"}`: five native histograms at `T0`, `T0 + 1s`, ... (which
/// are returned), then a stale marker at `T0 + 5s`.
fn server_with_latency_histograms() -> (Server, Vec<storage::HistogramSample>) {
    let server = Server::new(RemoteReadConfig::default());
    let db = server.state.db().unwrap();
    let labels = Labels::from_pairs(&[("__name__", "latency"), ("job", "a")]);
    let histograms: Vec<_> = (0..5)
        .map(|i| storage::HistogramSample { t: T0 + i * 1000, h: latency_histogram(i as f64 + 1.0) })
        .collect();
    let mut batch = Batch::new();
    batch.push_histograms(labels.clone(), histograms.clone());
    batch.push(labels, vec![Sample::new(T0 + 5000, f64::from_bits(STALE_NAN_BITS))]);
    db.append(&batch).unwrap();
    (server, histograms)
}

/// Native histograms come back in the `SAMPLES` answer's `histograms`, beside the floats of the
/// same series (here a stale marker after them), within the query's range.
#[tokio::test]
async fn samples_answer_carries_native_histograms() {
    let (server, _) = server_with_latency_histograms();
    let h = latency_histogram;
    let mut q = query(vec![matcher(MATCH_EQ, "__name__", "latency")]);
    q.start_timestamp_ms = T0 + 1000;
    q.end_timestamp_ms = T0 + 10_000;
    let (status, _, body) = server.read(&request(vec![q], &[RESPONSE_SAMPLES])).await;
    assert_eq!(status, StatusCode::OK);
    let response = remote::read::decode_samples_response(&body).unwrap();
    let series = &response.results[0].timeseries;
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].samples.len(), 1, "the stale marker");
    let want: Vec<_> = (1..5)
        .map(|i| {
            remote::prw::histogram_message(&storage::HistogramSample {
                t: T0 + i * 1000,
                h: h(i as f64 + 1.0),
            })
        })
        .collect();
    assert_eq!(series[0].histograms, want);
    assert!(matches!(
        series[0].histograms[0].count,
        Some(remote::prw::proto_v1::histogram::Count::CountInt(5))
    ));
}

/// In a streamed answer, native histograms come as `HISTOGRAM` chunks (integer counts here) in
/// time order with the series' float chunks: the histograms, then the stale marker's XOR chunk.
#[tokio::test]
async fn streamed_answer_carries_native_histograms_as_histogram_chunks() {
    let (server, histograms) = server_with_latency_histograms();
    let mut q = query(vec![matcher(MATCH_EQ, "__name__", "latency")]);
    q.start_timestamp_ms = T0 + 1000;
    q.end_timestamp_ms = T0 + 10_000;
    let (status, _, body) = server.read(&request(vec![q], &[RESPONSE_STREAMED_XOR_CHUNKS])).await;
    assert_eq!(status, StatusCode::OK);
    let frames = remote::read::decode_chunked_body(&body, 1 << 22).unwrap();
    assert_eq!(frames.len(), 1);
    let chunks = &frames[0].chunked_series[0].chunks;
    let kinds: Vec<_> = chunks.iter().map(|c| (c.r#type, c.min_time_ms, c.max_time_ms)).collect();
    assert_eq!(
        kinds,
        vec![
            (remote::read::proto::CHUNK_HISTOGRAM, T0 + 1000, T0 + 4000),
            (remote::read::proto::CHUNK_XOR, T0 + 5000, T0 + 5000),
        ]
    );
    assert_eq!(chunks[0].data, remote::read::histogram_chunk::histogram_chunks(&histograms[1..])[0].data);
    let stale = remote::read::xor::decode(&chunks[1].data).unwrap();
    assert_eq!(stale[0].v.to_bits(), STALE_NAN_BITS);
}
