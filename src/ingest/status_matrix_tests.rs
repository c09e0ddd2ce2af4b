//! The write endpoints' answers for every class of input (the table in docs/operations.md, "Write
//! endpoints and their answers"), through the
//! real router without sockets, with a real database in a temporary directory. Each test also
//! checks what storage holds afterwards: the status is only half of the contract.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use remote::prw::{self, Version};
use storage::{Batch, Db, Labels, MatchOp, Matcher, Querier, Sample};
use tower::ServiceExt;

use super::remote_write::{EXEMPLARS_WRITTEN, HISTOGRAMS_WRITTEN, SAMPLES_WRITTEN};
use crate::server::router;
use crate::state::AppState;

const V1_CONTENT_TYPE: &str = "application/x-protobuf";
const V2_CONTENT_TYPE: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";

/// A router over a fresh database.
struct Server {
    _dir: tempfile::TempDir,
    state: Arc<AppState>,
    db: Arc<Db>,
}

impl Server {
    fn new() -> Server {
        Server::with_limits(remote::Limits::default())
    }

    fn with_limits(limits: remote::Limits) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(storage::Options::new(dir.path())).unwrap());
        let state = Arc::new(AppState::with_limits(limits));
        state.set_db(Arc::clone(&db));
        Server { _dir: dir, state, db }
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        send(&self.state, request).await
    }

    /// Every stored series with its samples, through storage's query interface.
    fn stored(&self) -> Vec<(Labels, Vec<Sample>)> {
        let snapshot = self.db.snapshot();
        let all = [Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()];
        let series = snapshot.select(&all, i64::MIN, i64::MAX).unwrap();
        series
            .into_iter()
            .map(|s| {
                let mut samples = Vec::new();
                snapshot.samples(&s, i64::MIN, i64::MAX, &mut samples).unwrap();
                (s.labels, samples)
            })
            .collect()
    }
}

/// A response, read whole.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: impl axum::http::header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn send(state: &Arc<AppState>, request: Request<Body>) -> Answer {
    let response = router(Arc::clone(state)).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
    Answer { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn series(pairs: &[(&str, &str)]) -> Labels {
    Labels::from_pairs(pairs)
}

fn batch(entries: &[(Labels, Vec<Sample>)]) -> Batch {
    let mut batch = Batch::new();
    for (labels, samples) in entries {
        batch.push(labels.clone(), samples.clone());
    }
    batch
}

fn prw_request(content_type: &str, body: Vec<u8>) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri("/api/v1/write")
        .header(CONTENT_TYPE, content_type)
        .header(CONTENT_ENCODING, "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(Body::from(body))
        .unwrap()
}

fn v1(batch: &Batch) -> Request<Body> {
    prw_request(V1_CONTENT_TYPE, prw::encode(Version::V1, batch, &[]))
}

fn v2(batch: &Batch) -> Request<Body> {
    prw_request(V2_CONTENT_TYPE, prw::encode(Version::V2, batch, &[]))
}

fn snappy(bytes: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(bytes).unwrap()
}

fn post(uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder().method(Method::POST).uri(uri).body(body.into()).unwrap()
}

/// A protobuf writer for requests our encoder would never produce (duplicate labels, native
/// histograms), so the decoder is also tested on bytes it did not make itself.
#[derive(Default, Clone)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn uint(mut self, field: u64, v: u64) -> Pb {
        self.varint(field << 3);
        self.varint(v);
        self
    }
    fn double(mut self, field: u64, v: f64) -> Pb {
        self.varint((field << 3) | 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, field: u64, bytes: &[u8]) -> Pb {
        self.varint((field << 3) | 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }
    fn msg(self, field: u64, inner: Pb) -> Pb {
        self.bytes(field, &inner.0)
    }
    /// A packed repeated varint field (how proto3 encodes `repeated uint32`).
    fn packed(self, field: u64, values: &[u64]) -> Pb {
        let mut inner = Pb::default();
        for v in values {
            inner.varint(*v);
        }
        self.bytes(field, &inner.0)
    }
}

/// A 1.0 `TimeSeries` with labels given in wire order (unsorted or repeated as the test needs).
fn v1_series(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> Pb {
    let mut ts = Pb::default();
    for (name, value) in labels {
        ts = ts.msg(1, Pb::default().bytes(1, name.as_bytes()).bytes(2, value.as_bytes()));
    }
    for (t, v) in samples {
        ts = ts.msg(2, Pb::default().double(1, *v).uint(2, *t as u64));
    }
    ts
}

// ---- remote write: accepted ----

#[tokio::test]
async fn v1_batch_is_204_and_stored_bit_exact() {
    let server = Server::new();
    let t = now_ms();
    let stale = f64::from_bits(storage::STALE_NAN_BITS);
    let written = [
        (
            series(&[("__name__", "up"), ("job", "a")]),
            vec![Sample::new(t - 1000, 1.0), Sample::new(t, stale)],
        ),
        (
            series(&[("__name__", "temp"), ("room", "b")]),
            vec![Sample::new(t, -0.0), Sample::new(t + 1, f64::NAN)],
        ),
    ];
    let answer = server.send(v1(&batch(&written))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(answer.header(SAMPLES_WRITTEN), None, "1.0 answers carry no written-count headers");
    let mut expected = written.to_vec();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(server.stored(), expected);
}

#[tokio::test]
async fn v2_batch_is_204_with_written_counts() {
    let server = Server::new();
    let t = now_ms();
    let written = [
        (series(&[("__name__", "up"), ("job", "a")]), vec![Sample::new(t - 1000, 1.0), Sample::new(t, 1.0)]),
        (series(&[("__name__", "up"), ("job", "b")]), vec![Sample::new(t, 0.0)]),
    ];
    let answer = server.send(v2(&batch(&written))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(answer.header(SAMPLES_WRITTEN), Some("3"));
    assert_eq!(answer.header(HISTOGRAMS_WRITTEN), Some("0"));
    assert_eq!(answer.header(EXEMPLARS_WRITTEN), Some("0"));
    assert_eq!(server.stored(), written.to_vec());
}

#[tokio::test]
async fn an_exact_retry_is_an_idempotent_204() {
    let server = Server::new();
    let t = now_ms();
    let written =
        batch(&[(series(&[("__name__", "up")]), vec![Sample::new(t - 1, 1.0), Sample::new(t, 2.0)])]);
    for attempt in 0..3 {
        let answer = server.send(v1(&written)).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "attempt {attempt}: {}", answer.body);
    }
    assert_eq!(server.stored(), written.series);
}

#[tokio::test]
async fn a_conflicting_duplicate_is_accepted_and_the_later_value_wins() {
    // Prometheus answers 400 here ("duplicate sample for timestamp"); strata's storage keeps the
    // last write per timestamp instead (Querier::samples), so the later write is the one kept.
    let server = Server::new();
    let t = now_ms();
    let up = series(&[("__name__", "up")]);
    assert_eq!(
        server.send(v1(&batch(&[(up.clone(), vec![Sample::new(t, 1.0)])]))).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        server.send(v1(&batch(&[(up.clone(), vec![Sample::new(t, 2.0)])]))).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(server.stored(), vec![(up, vec![Sample::new(t, 2.0)])]);
}

#[tokio::test]
async fn metadata_is_kept_per_metric_name() {
    use remote::metadata::{MetricMetadata, MetricType};
    let server = Server::new();
    let meta = MetricMetadata {
        metric_family_name: "http_requests_total".into(),
        metric_type: MetricType::Counter,
        help: "Requests.".into(),
        unit: String::new(),
    };
    // A metadata-only request, as Prometheus 1.0 senders send every minute.
    let body = prw::encode(Version::V1, &Batch::new(), std::slice::from_ref(&meta));
    let answer = server.send(prw_request(V1_CONTENT_TYPE, body)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(server.state.metadata().get(None, "http_requests_total"), Some(meta));
}

#[tokio::test]
async fn a_body_above_axums_default_limit_is_accepted() {
    // axum refuses bodies over 2 MB by default; a large remote-write batch must still pass.
    let server = Server::new();
    let t = now_ms();
    // Label values of pseudo-random hex, which snappy cannot shrink much.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random_hex = |len: usize| {
        let mut text = String::with_capacity(len);
        while text.len() < len {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            text.push_str(&format!("{:016x}", seed));
        }
        text
    };
    let entries: Vec<(Labels, Vec<Sample>)> = (0..30_000)
        .map(|i| {
            (series(&[("__name__", "big"), ("id", &random_hex(96))]), vec![Sample::new(t, f64::from(i))])
        })
        .collect();
    let body = prw::encode(Version::V1, &batch(&entries), &[]);
    assert!(body.len() > 2 << 20, "the body ({} bytes) must exceed axum's default limit", body.len());
    let answer = server.send(prw_request(V1_CONTENT_TYPE, body)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(server.stored().len(), 30_000);
}

// ---- remote write: refused as a whole (400/413/415), nothing stored ----

#[tokio::test]
async fn bad_snappy_is_400() {
    let server = Server::new();
    let answer = server.send(prw_request(V1_CONTENT_TYPE, b"\xff\xff\xff\xff not snappy".to_vec())).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("snappy"), "{}", answer.body);
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn bad_protobuf_is_400() {
    let server = Server::new();
    // Field 1, length-delimited, claiming 100 bytes that are not there.
    let answer = server.send(prw_request(V1_CONTENT_TYPE, snappy(&[0x0a, 100, 1, 2, 3]))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("protobuf"), "{}", answer.body);
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn a_series_without_a_metric_name_is_400() {
    let server = Server::new();
    let t = now_ms();
    let written = batch(&[
        (series(&[("__name__", "ok")]), vec![Sample::new(t, 1.0)]),
        (series(&[("job", "nameless")]), vec![Sample::new(t, 1.0)]),
    ]);
    for request in [v1(&written), v2(&written)] {
        let answer = server.send(request).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert!(answer.body.contains("__name__"), "{}", answer.body);
    }
    assert!(server.stored().is_empty(), "an invalid request stores nothing");
}

/// Invalid UTF-8 in the labels of a new series: 1.0 series in the usual encoding reach storage
/// unchecked, and storage refuses them with the decoder's own words. The whole request is
/// refused, the known series' sample and the metadata with it.
#[tokio::test]
async fn invalid_utf8_labels_are_400_and_nothing_is_stored() {
    use remote::metadata::MetricMetadata;
    let server = Server::new();
    let t = now_ms();
    let known = series(&[("__name__", "up"), ("job", "\u{e9}")]);
    let answer = server.send(v1(&batch(&[(known.clone(), vec![Sample::new(t - 1000, 1.0)])]))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);

    let label = |name: &[u8], value: &[u8]| Pb::default().bytes(1, name).bytes(2, value);
    let sample = Pb::default().double(1, 2.0).uint(2, t as u64);
    let meta = Pb::default().uint(1, 1).bytes(2, b"up").bytes(4, b"Up.");
    // The known series; then `up{job="\xc3"}`, the known value cut inside its character, in
    // the usual encoding and in an unusual one (a label after the samples).
    let usual =
        Pb::default().msg(1, label(b"__name__", b"up")).msg(1, label(b"job", b"\xc3")).msg(2, sample.clone());
    let unusual =
        Pb::default().msg(1, label(b"__name__", b"up")).msg(2, sample.clone()).msg(1, label(b"job", b"\xc3"));
    for bad in [usual, unusual] {
        let request = Pb::default()
            .msg(1, v1_series(&[("__name__", "up"), ("job", "\u{e9}")], &[(t, 2.0)]))
            .msg(1, bad)
            .msg(3, meta.clone());
        let answer = server.send(prw_request(V1_CONTENT_TYPE, snappy(&request.0))).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
        assert!(
            answer.body.contains(
                "invalid labels in series up{job=\"\u{fffd}\"}: label name or value is not valid UTF-8"
            ),
            "{}",
            answer.body
        );
    }
    assert_eq!(server.stored(), vec![(known, vec![Sample::new(t - 1000, 1.0)])]);
    assert_eq!(server.state.metadata().get(None, "up"), None::<MetricMetadata>);
}

#[tokio::test]
async fn duplicate_label_names_are_400() {
    let server = Server::new();
    let t = now_ms();
    let request =
        Pb::default().msg(1, v1_series(&[("__name__", "up"), ("job", "a"), ("job", "b")], &[(t, 1.0)]));
    let answer = server.send(prw_request(V1_CONTENT_TYPE, snappy(&request.0))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("job"), "{}", answer.body);
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn unsorted_labels_are_sorted_and_stored() {
    // The 1.0 spec asks senders to sort labels; not every sender does, and sorting is cheap.
    let server = Server::new();
    let t = now_ms();
    let request =
        Pb::default().msg(1, v1_series(&[("job", "a"), ("__name__", "up"), ("env", "p")], &[(t, 1.0)]));
    let answer = server.send(prw_request(V1_CONTENT_TYPE, snappy(&request.0))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    let up = series(&[("__name__", "up"), ("env", "p"), ("job", "a")]);
    assert_eq!(server.stored(), vec![(up, vec![Sample::new(t, 1.0)])]);
}

#[tokio::test]
async fn an_empty_metric_name_is_400() {
    let server = Server::new();
    let t = now_ms();
    let request = Pb::default()
        .msg(1, v1_series(&[("__name__", "ok")], &[(t, 1.0)]))
        .msg(1, v1_series(&[("__name__", ""), ("job", "a")], &[(t, 1.0)]));
    let answer = server.send(prw_request(V1_CONTENT_TYPE, snappy(&request.0))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("__name__"), "{}", answer.body);
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn too_many_labels_is_400_naming_the_limit() {
    let server =
        Server::with_limits(remote::Limits { labels_per_series_max: 3, ..remote::Limits::default() });
    let t = now_ms();
    let written = batch(&[(
        series(&[("__name__", "up"), ("a", "1"), ("b", "2"), ("c", "3")]),
        vec![Sample::new(t, 1.0)],
    )]);
    let answer = server.send(v1(&written)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("labels_per_series_max"), "{}", answer.body);
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_naming_the_flag() {
    let server = Server::with_limits(remote::Limits { body_bytes_max: 1024, ..remote::Limits::default() });
    let answer = server.send(prw_request(V1_CONTENT_TYPE, vec![0; 4096])).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(answer.body.contains("--write-body-bytes-max"), "{}", answer.body);
}

#[tokio::test]
async fn a_body_decoding_past_the_limit_is_413() {
    let server = Server::with_limits(remote::Limits { decoded_bytes_max: 1024, ..remote::Limits::default() });
    let answer = server.send(prw_request(V1_CONTENT_TYPE, snappy(&[0; 4096]))).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(answer.body.contains("decoded_bytes_max"), "{}", answer.body);
}

#[tokio::test]
async fn an_unknown_proto_is_415() {
    let server = Server::new();
    let body = prw::encode(Version::V1, &Batch::new(), &[]);
    let answer =
        server.send(prw_request("application/x-protobuf;proto=io.prometheus.write.v3.Request", body)).await;
    assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let json = prw_request("application/json", Vec::new());
    assert_eq!(server.send(json).await.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn an_unknown_content_encoding_is_415() {
    let server = Server::new();
    let mut request = v1(&batch(&[(series(&[("__name__", "up")]), vec![Sample::new(now_ms(), 1.0)])]));
    request.headers_mut().insert(CONTENT_ENCODING, "gzip".parse().unwrap());
    assert_eq!(server.send(request).await.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn v2_refusals_still_carry_written_counts() {
    let server = Server::new();
    let answer = server.send(prw_request(V2_CONTENT_TYPE, b"not snappy".to_vec())).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.header(SAMPLES_WRITTEN), Some("0"));
    assert_eq!(answer.header(HISTOGRAMS_WRITTEN), Some("0"));
    assert_eq!(answer.header(EXEMPLARS_WRITTEN), Some("0"));
}

// ---- remote write: partly stored (400 naming what was not) ----

const DAY_MS: i64 = 86_400_000;

#[tokio::test]
async fn a_sample_older_than_retention_is_400_and_the_rest_is_stored() {
    let server = Server::new();
    let t = now_ms();
    let up = series(&[("__name__", "up"), ("job", "a")]);
    let other = series(&[("__name__", "other")]);
    assert_eq!(
        server.send(v1(&batch(&[(up.clone(), vec![Sample::new(t, 1.0)])]))).await.status,
        StatusCode::NO_CONTENT
    );
    // Twenty days behind the newest sample: the default 15 d retention would delete it.
    let old = t - 20 * DAY_MS;
    let mixed =
        batch(&[(up.clone(), vec![Sample::new(old, 5.0)]), (other.clone(), vec![Sample::new(t, 7.0)])]);
    let answer = server.send(v2(&mixed)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "never 5xx: a sender would retry forever");
    assert!(answer.body.contains("1 older than --retention keeps (before "), "{}", answer.body);
    assert!(answer.body.contains("up{job=\"a\"}"), "names the first rejected series: {}", answer.body);
    assert_eq!(answer.header(SAMPLES_WRITTEN), Some("1"));
    assert_eq!(
        server.stored(),
        vec![(other, vec![Sample::new(t, 7.0)]), (up.clone(), vec![Sample::new(t, 1.0)])]
    );
    // Out of order by minutes or by days, inside retention: stored, in any order.
    let late = t - 10 * DAY_MS;
    for s in [Sample::new(t - 60_000, 3.0), Sample::new(late, 4.0), Sample::new(late - 60_000, 5.0)] {
        let late = batch(&[(series(&[("__name__", "up"), ("job", "a")]), vec![s])]);
        assert_eq!(server.send(v1(&late)).await.status, StatusCode::NO_CONTENT);
    }
    let stored_up = server.stored().into_iter().find(|(l, _)| *l == up).map(|(_, s)| s.len());
    assert_eq!(stored_up, Some(4));
}

#[tokio::test]
async fn a_sample_too_far_in_the_future_is_400_and_the_rest_is_stored() {
    let server = Server::new();
    let t = now_ms();
    let up = series(&[("__name__", "up")]);
    let written = batch(&[(up.clone(), vec![Sample::new(t, 1.0), Sample::new(t + 3_600_000, 2.0)])]);
    let answer = server.send(v1(&written)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("too far in the future"), "{}", answer.body);
    assert!(answer.body.contains("up{}"), "{}", answer.body);
    assert_eq!(server.stored(), vec![(up, vec![Sample::new(t, 1.0)])]);
}

#[tokio::test]
async fn native_histograms_are_stored_and_counted_in_the_headers() {
    let server = Server::new();
    let t = now_ms();
    // symbols: "", "__name__", "up", "hist"
    let symbols = ["", "__name__", "up", "hist"];
    let mut request = Pb::default();
    for s in symbols {
        request = request.bytes(4, s.as_bytes());
    }
    let float_series =
        Pb::default().packed(1, &[1, 2]).msg(2, Pb::default().double(1, 1.5).uint(2, t as u64));
    // Histogram: count_int = 1 (field 1), sum = 2.0 (field 3), zero_count_int = 1 (field 6),
    // timestamp (field 15).
    let histogram = Pb::default().uint(1, 1).double(3, 2.0).uint(6, 1).uint(15, t as u64);
    let histogram_series = Pb::default().packed(1, &[1, 3]).msg(3, histogram);
    request = request.msg(5, float_series.clone()).msg(5, histogram_series);
    let answer = server.send(prw_request(V2_CONTENT_TYPE, snappy(&request.0))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(answer.header(SAMPLES_WRITTEN), Some("1"));
    assert_eq!(answer.header(HISTOGRAMS_WRITTEN), Some("1"));
    let hist = series(&[("__name__", "hist")]);
    assert_eq!(
        server.stored(),
        vec![(hist.clone(), vec![]), (series(&[("__name__", "up")]), vec![Sample::new(t, 1.5)])]
    );
    let snapshot = server.db.snapshot();
    let selected = snapshot.select(&[Matcher::equal("__name__", "hist")], i64::MIN, i64::MAX).unwrap();
    let mut hs = Vec::new();
    snapshot.histograms(&selected[0], i64::MIN, i64::MAX, &mut hs).unwrap();
    assert_eq!(hs.len(), 1);
    assert_eq!((hs[0].t, hs[0].h.count, hs[0].h.zero_count, hs[0].h.sum), (t, 1.0, 1.0, 2.0));

    // An invalid one (count 1, no observation in any bucket) is a 400 naming the problem, and
    // nothing of the request is stored.
    let bad = Pb::default().uint(1, 1).double(3, 2.0).uint(15, (t + 1) as u64);
    let mut request = Pb::default();
    for s in symbols {
        request = request.bytes(4, s.as_bytes());
    }
    request = request.msg(5, Pb::default().packed(1, &[1, 3]).msg(3, bad));
    let answer = server.send(prw_request(V2_CONTENT_TYPE, snappy(&request.0))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("timeseries[0].histograms[0]"), "{}", answer.body);
    assert!(answer.body.contains("count 1 disagrees"), "{}", answer.body);
}

// ---- remote write: transient (503 + Retry-After) ----

#[tokio::test]
async fn a_closed_database_is_503_with_retry_after() {
    let server = Server::new();
    server.db.close().unwrap();
    let answer =
        server.send(v1(&batch(&[(series(&[("__name__", "up")]), vec![Sample::new(now_ms(), 1.0)])]))).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.body);
    assert!(answer.header(RETRY_AFTER).is_some());
}

#[tokio::test]
async fn a_database_still_opening_is_503_with_retry_after() {
    let state = Arc::new(AppState::new());
    let written = batch(&[(series(&[("__name__", "up")]), vec![Sample::new(now_ms(), 1.0)])]);
    let answer = send(&state, v2(&written)).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.header(RETRY_AFTER).is_some());
    assert_eq!(answer.header(SAMPLES_WRITTEN), Some("0"));
    let answer = send(&state, post("/write?db=x", "cpu value=1")).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.header(RETRY_AFTER).is_some());
}

#[test]
fn transient_storage_errors_are_503_and_permanent_ones_are_not() {
    // A poisoned WAL or a failed write cannot be produced through the router on demand; the
    // handler maps storage errors with this conversion, tested here for each kind.
    use crate::error::ApiError;
    let io = std::io::Error::from_raw_os_error(28); // ENOSPC
    for (err, status) in [
        (storage::Error::Poisoned("fsync failed".into()), 503),
        (storage::Error::io("write WAL segment", io), 503),
        (storage::Error::Closed, 503),
        (storage::Error::InvalidInput("series with no labels".into()), 400),
    ] {
        assert_eq!(ApiError::from(err).status().as_u16(), status);
    }
}

// ---- Influx line protocol ----

#[tokio::test]
async fn line_protocol_is_204_and_stored() {
    let server = Server::new();
    let t = now_ms();
    let body = format!("cpu,host=a usage=1.5,idle=2i {t}\nmem,host=a used=3u {t}\n");
    let answer = server.send(post("/write?db=telegraf&precision=ms", body)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert!(answer.header("x-influxdb-version").is_some());
    let names: Vec<String> =
        server.stored().into_iter().map(|(l, _)| l.metric_name().unwrap_or_default().to_owned()).collect();
    assert_eq!(names, ["cpu_idle", "cpu_usage", "mem_used"]);
    assert_eq!(server.state.databases().list(&[None]), ["telegraf"]);
}

#[tokio::test]
async fn a_gzip_line_protocol_body_is_accepted() {
    use std::io::Write as _;
    let server = Server::new();
    let t = now_ms();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(format!("cpu,host=a usage=1 {t}\n").as_bytes()).unwrap();
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v2/write?bucket=b&org=o&precision=ms")
        .header(CONTENT_ENCODING, "gzip")
        .body(Body::from(gz.finish().unwrap()))
        .unwrap();
    let answer = server.send(request).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(
        server.stored(),
        vec![(series(&[("__name__", "cpu_usage"), ("host", "a")]), vec![Sample::new(t, 1.0)])]
    );
}

#[tokio::test]
async fn a_partial_line_protocol_write_is_400_and_stores_the_good_lines() {
    let server = Server::new();
    let t = now_ms();
    let body = format!("cpu,host=a usage=1 {t}\nthis is not line protocol\ncpu,host=b usage=2 {t}\n");
    let answer = server.send(post("/write?db=x&precision=ms", body)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let json: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    let message = json["error"].as_str().unwrap();
    assert!(message.starts_with("partial write: unable to parse line 2: "), "{message}");
    assert!(message.ends_with(" dropped=1"), "{message}");
    assert_eq!(server.stored().len(), 2);
}

#[tokio::test]
async fn line_protocol_with_no_good_line_is_400_without_partial_write() {
    let server = Server::new();
    let answer = server.send(post("/write?db=x", "garbage\n")).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let json: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert!(json["error"].as_str().unwrap().starts_with("unable to parse line 1: "), "{}", answer.body);
    assert!(server.stored().is_empty());
}

/// As InfluxDB answers: a write naming no database (1.x `db`) or bucket (2.x `bucket`), or an
/// empty one, is 400 `database is required` / `bucket is required`, and nothing is stored.
#[tokio::test]
async fn a_write_without_a_database_is_400_as_influxdb_answers_it() {
    let server = Server::new();
    for (uri, message) in [
        ("/write", "database is required"),
        ("/write?db=", "database is required"),
        ("/write?precision=s", "database is required"),
        ("/api/v2/write", "bucket is required"),
        ("/api/v2/write?org=o&bucket=", "bucket is required"),
    ] {
        let answer = server.send(post(uri, "cpu value=1")).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(answer.body, format!("{{\"error\":\"{message}\"}}"), "{uri}");
        assert_eq!(answer.header("x-influxdb-error"), Some(message), "{uri}");
    }
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn a_bad_precision_is_400() {
    let server = Server::new();
    for uri in [
        "/write?db=x&precision=fortnight",
        "/api/v2/write?bucket=x&precision=u",
        "/api/v2/write?bucket=x&precision=h",
    ] {
        let answer = server.send(post(uri, "cpu value=1")).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(answer.body.contains("precision"), "{uri}: {}", answer.body);
    }
    assert!(server.stored().is_empty());
}

#[tokio::test]
async fn line_protocol_older_than_retention_is_a_partial_write_with_a_precision_hint() {
    let server = Server::new();
    let t = now_ms();
    assert_eq!(
        server.send(post("/write?db=x&precision=ms", format!("cpu value=1 {t}"))).await.status,
        StatusCode::NO_CONTENT
    );
    // Unix seconds under the default nanosecond precision: January 1970.
    let body = format!("cpu value=2 {}\nmem value=3 {}", t / 1000, t * 1_000_000);
    let answer = server.send(post("/write?db=x", body)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer.body.contains("partial write: 1 samples rejected: 1 older than --retention keeps"),
        "{}",
        answer.body
    );
    assert!(answer.body.contains("reads as 1970-01-01T00:"), "{}", answer.body);
    assert!(answer.body.contains("precision=s in the URL"), "{}", answer.body);
    assert_eq!(server.stored().len(), 2);
    // Unix seconds under microsecond precision on the 2.x API: the hint names `s` too.
    let answer =
        server.send(post("/api/v2/write?bucket=b&precision=us", format!("cpu value=4 {}", t / 1000))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("precision=s in the URL"), "{}", answer.body);
}

// ---- InfluxDB side endpoints ----

#[tokio::test]
async fn ping_is_204_with_the_version_header() {
    let server = Server::new();
    for method in [Method::GET, Method::HEAD] {
        let request = Request::builder().method(method.clone()).uri("/ping").body(Body::empty()).unwrap();
        let answer = server.send(request).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{method}");
        assert_eq!(answer.header("x-influxdb-version"), Some(crate::influx::INFLUX_VERSION));
        assert!(answer.header("x-influxdb-build").is_some());
    }
    let verbose = server.send(Request::get("/ping?verbose=true").body(Body::empty()).unwrap()).await;
    assert_eq!(verbose.status, StatusCode::OK);
    assert!(verbose.body.contains("\"version\""), "{}", verbose.body);
}

#[tokio::test]
async fn query_answers_create_and_show_databases_like_influxdb() {
    let server = Server::new();
    let empty = server.send(Request::get("/query?q=SHOW+DATABASES").body(Body::empty()).unwrap()).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(
        empty.body,
        r#"{"results":[{"series":[{"columns":["name"],"name":"databases"}],"statement_id":0}]}"#
    );

    // The TSBS loader's request: POST with q in the URL.
    let create = server.send(post("/query?q=CREATE%20DATABASE%20%22benchmark%22", Body::empty())).await;
    assert_eq!(create.status, StatusCode::OK);
    assert_eq!(create.body, r#"{"results":[{"statement_id":0}]}"#);

    // The client libraries' request: q in a form body.
    let form = Request::builder()
        .method(Method::POST)
        .uri("/query")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("q=CREATE+DATABASE+telegraf%3B+SHOW+DATABASES"))
        .unwrap();
    let answer = server.send(form).await;
    assert_eq!(answer.status, StatusCode::OK);
    let json: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"results": [
            {"statement_id": 0},
            {"statement_id": 1, "series": [{"name": "databases", "columns": ["name"], "values": [["benchmark"], ["telegraf"]]}]}
        ]})
    );
}

#[tokio::test]
async fn query_refuses_other_influxql_with_400() {
    let server = Server::new();
    let answer = server.send(Request::get("/query?q=SELECT+*+FROM+cpu").body(Body::empty()).unwrap()).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let json: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert!(json["error"].as_str().unwrap().contains("PromQL"), "{}", answer.body);
    let missing = server.send(Request::get("/query").body(Body::empty()).unwrap()).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(missing.body.contains("missing required parameter"), "{}", missing.body);
}

// ---- /metrics ----

#[tokio::test]
async fn metrics_count_requests_samples_and_rejections() {
    let server = Server::new();
    let t = now_ms();
    let up = series(&[("__name__", "up")]);
    server.send(v1(&batch(&[(up.clone(), vec![Sample::new(t, 1.0)])]))).await;
    server
        .send(v1(&batch(&[(up, vec![Sample::new(t - 20 * DAY_MS, 1.0), Sample::new(t + 3_600_000, 1.0)])])))
        .await;
    server.send(prw_request(V1_CONTENT_TYPE, b"junk".to_vec())).await;
    server.send(post("/write?db=x", "cpu value=1\nbad line")).await;

    let answer = server.send(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.header(CONTENT_TYPE), Some(crate::metrics::CONTENT_TYPE_TEXT));
    let text = answer.body;
    for line in [
        "strata_http_requests_total{handler=\"/api/v1/write\",code=\"204\"} 1",
        "strata_http_requests_total{handler=\"/api/v1/write\",code=\"400\"} 2",
        "strata_http_requests_total{handler=\"/write\",code=\"400\"} 1",
        "strata_ingest_samples_received_total{protocol=\"remote_write_v1\"} 3",
        "strata_ingest_samples_received_total{protocol=\"influx\"} 1",
        "strata_ingest_samples_appended_total 2",
        "strata_ingest_samples_rejected_total{reason=\"too_old\"} 0",
        "strata_ingest_samples_rejected_total{reason=\"outside_retention\"} 1",
        "strata_ingest_samples_rejected_total{reason=\"too_far_future\"} 1",
        "strata_ingest_requests_rejected_total{protocol=\"remote_write_v1\",reason=\"invalid\"} 1",
        "strata_ingest_influx_lines_rejected_total 1",
        "strata_storage_series_created_total 2",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(text.contains("strata_wal_fsyncs_total "), "{text}");
    assert!(text.contains("strata_wal_fsync_seconds_total "), "{text}");
}

/// Label pairs as written in a test table.
type LabelPairs = [(&'static str, &'static str)];

#[tokio::test]
async fn the_readme_line_protocol_mapping_holds() {
    // Each row of README.md's mapping table: a line and the series and value it becomes.
    let t = now_ms();
    let ns = t * 1_000_000 + 999_999;
    let rows: [(String, &LabelPairs, f64); 9] = [
        (format!("cpu,host=a usage_user=1.5 {ns}"), &[("__name__", "cpu_usage_user"), ("host", "a")], 1.5),
        (format!("temp,room=k value=21 {ns}"), &[("__name__", "temp"), ("room", "k")], 21.0),
        (
            format!("disk.io,dev=sda1 read-bytes=3i {ns}"),
            &[("__name__", "disk_io_read_bytes"), ("dev", "sda1")],
            3.0,
        ),
        (format!("up ok=true {ns}"), &[("__name__", "up_ok")], 1.0),
        (format!("down ok=F {ns}"), &[("__name__", "down_ok")], 0.0),
        (format!("n a=12i {ns}"), &[("__name__", "n_a")], 12.0),
        (format!("n b=7u {ns}"), &[("__name__", "n_b")], 7.0),
        (format!("log msg=\"text\",level=3i {ns}"), &[("__name__", "log_level")], 3.0),
        (format!("9lives,a\\ b=c\\,d x=1 {ns}"), &[("__name__", "_9lives_x"), ("a_b", "c,d")], 1.0),
    ];
    for (line, labels, value) in rows {
        let server = Server::new();
        let answer = server.send(post("/write?db=x", line.clone())).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{line}: {}", answer.body);
        // Nanoseconds are rounded down to the millisecond.
        assert_eq!(server.stored(), vec![(series(labels), vec![Sample::new(t, value)])], "{line}");
    }
}
