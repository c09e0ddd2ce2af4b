//! Remote read and the admin API of the real `strata` binary, end to end:
//!
//! * Debian's `prometheus` 2.42, configured with strata as `remote_read` storage and holding no
//!   data of its own, answers PromQL over data that only strata holds.
//! * Both remote-read answer types over real HTTP, decoded by the `remote` crate's client half,
//!   bit-exact (stale markers and NaN payloads included).
//! * Our XOR chunk encoder against Prometheus' own: chunks Prometheus wrote to its TSDB decode
//!   to the samples we sent, and re-encoding those samples gives the same bytes.
//! * Native histograms against Prometheus' own: the query API's JSON, and the histogram chunk
//!   encodings, byte for byte.
//! * Admin: delete_series hides data, a snapshot starts as a second strata with the same data.
//!
//! The Prometheus tests are skipped, with a message, when `prometheus` is not installed and
//! `CI` is not set; under CI its absence is a failure (`.ci/run` installs it).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::common::process::{Prometheus, free_port, peer};
use crate::common::{FlatSeries, Strata, matrix_series};
use remote::prw::{self, Version};
use remote::read::proto::{
    LabelMatcher, MATCH_RE, Query, RESPONSE_SAMPLES, RESPONSE_STREAMED_XOR_CHUNKS, ReadRequest,
};
use storage::{Batch, CounterResetHint, FloatHistogram, HistogramSample, Labels, STALE_NAN_BITS, Sample};

/// Series with their samples as (ms, value bits), labels as sorted pairs.
type Flat = Vec<FlatSeries>;

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

#[test]
fn prometheus_queries_data_only_strata_holds() {
    let Some(prometheus) = peer("prometheus", "prometheus", "prometheus_queries_data_only_strata_holds")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Debug logging of the remote-read handler records which answer type Prometheus chose.
    let mut strata =
        Strata::start_with(&dir.path().join("strata"), &["--log-level", "info,strata::api::read=debug"]);
    strata.wait_ready();

    // Whole seconds, 15 s apart, ending 30 s ago: Prometheus' JSON shows them exactly.
    let end = now_ms() / 1000 * 1000 - 30_000;
    let written = fixture(end);
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch(&written), &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);

    // Direct remote reads first: both answer types, all of time, bit-exact.
    let all = vec![query(i64::MIN, i64::MAX, vec![matcher(MATCH_RE, "__name__", "strata_only_.+")])];
    let sampled = remote_read(&strata, &all, &[RESPONSE_SAMPLES]);
    let streamed = remote_read(&strata, &all, &[RESPONSE_STREAMED_XOR_CHUNKS, RESPONSE_SAMPLES]);
    assert_eq!(sampled, vec![flat(&written)]);
    assert_eq!(streamed, sampled);

    let prom = start_prometheus(
        &prometheus,
        dir.path(),
        &format!("remote_read:\n  - url: {}\n    read_recent: true\n", strata.url("/api/v1/read")),
        &[],
    );

    // An instant query: the series whose last sample is a stale marker is gone, as in Prometheus.
    let instant = prom.query(&[("query", "strata_only_metric"), ("time", &secs(end))]);
    let result = instant["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "{instant}");
    assert_eq!(result[0]["metric"]["series"], "plain");
    assert_eq!(result[0]["value"][1], "58.5");

    // A range selector returns the raw samples, NaN included and stale markers hidden.
    let range = prom.query(&[("query", "strata_only_metric[1h]"), ("time", &secs(end))]);
    let mut got = matrix_series(&range);
    got.sort();
    let mut expected = flat(&written);
    for (_, samples) in &mut expected {
        samples.retain(|(_, bits)| *bits != STALE_NAN_BITS);
        // The JSON API writes every NaN as "NaN".
        for (_, bits) in samples.iter_mut() {
            if f64::from_bits(*bits).is_nan() {
                *bits = f64::NAN.to_bits();
            }
        }
    }
    assert_eq!(got, expected);

    // PromQL over the remote data: evaluated by Prometheus on what strata sent.
    let sum = prom.query(&[
        ("query", "sum(count_over_time(strata_only_metric{series=\"plain\"}[1h]))"),
        ("time", &secs(end)),
    ]);
    assert_eq!(sum["data"]["result"][0]["value"][1], "40");

    // The first two are the direct reads above; the rest came from Prometheus. 2.42's client
    // sends no accepted_response_types, which means SAMPLES (streamed chunks reached
    // Prometheus' client only later); the streamed answer is checked above and against
    // Prometheus' own chunk encoding in `xor_chunks_are_byte_identical_to_prometheus_own`.
    // strata logs before it answers, but the test's reader thread may not have drained the
    // pipe yet when Prometheus' answer arrives, so wait for the lines rather than snapshot.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let types = loop {
        let types = remote_read_types(&strata.log());
        if types.len() > 2 || Instant::now() > deadline {
            break types;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let from_prometheus = types.get(2..).unwrap_or_default();
    assert!(!from_prometheus.is_empty(), "Prometheus never called strata; log:\n{}", strata.log());
    let _ =
        writeln!(std::io::stderr(), "Prometheus' remote-read requests were answered as {from_prometheus:?}");
}

/// The answer type of each remote read strata logged, in order.
fn remote_read_types(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("remote read") && l.contains("response_type"))
        .filter_map(|l| {
            l.split("response_type=").nth(1).map(|t| t.split_whitespace().next().unwrap_or("").to_owned())
        })
        .collect()
}

#[test]
fn xor_chunks_are_byte_identical_to_prometheus_own() {
    let Some(prometheus) =
        peer("prometheus", "prometheus", "xor_chunks_are_byte_identical_to_prometheus_own")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prom = start_prometheus(
        &prometheus,
        dir.path(),
        "",
        &["--web.enable-remote-write-receiver", "--web.enable-admin-api"],
    );
    // Irregular timestamps (every delta-of-delta width) and special values, 300 samples per
    // series so Prometheus cuts several chunks. Prometheus cuts a chunk at each 2 h boundary, and
    // a chunk's leading/trailing-zero window depends on where it starts, so 24 series start at
    // different distances before one boundary: a fixed set of chunk starts, whatever the clock.
    let boundary = (now_ms() - 3_600_000).div_euclid(7_200_000) * 7_200_000;
    let specials =
        [f64::from_bits(STALE_NAN_BITS), f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1e-300];
    let gaps = [15_000, 15_000, 15_001, 23_192, 15_000, 80_000, 1, 600_000, 7, 300_000, 14_999];
    let series: Vec<(Labels, Vec<Sample>)> = (0..24)
        .map(|k| {
            let mut t = boundary - 1_800_000 + k as i64 * 73_000;
            let samples = (0..300)
                .map(|i| {
                    // Full gaps once (deltas of deltas up to 64 bits), then denser (more per chunk).
                    let divisor = match i {
                        0..=10 => 1,
                        11..=99 => 10,
                        _ => 100,
                    };
                    t += (gaps[i % gaps.len()] / divisor).max(1);
                    let v = if i % 13 == 5 {
                        specials[i / 13 % specials.len()]
                    } else {
                        ((i + k) as f64 * 0.37).sin() * 1e3
                    };
                    Sample::new(t, v)
                })
                .collect();
            let start = format!("{k:02}");
            (Labels::from_pairs(&[("__name__", "xor_check"), ("job", "golden"), ("start", &start)]), samples)
        })
        .collect();
    let mut batch = Batch::new();
    for (labels, samples) in &series {
        batch.push(labels.clone(), samples.clone());
    }
    let agent = agent();
    let mut response = agent
        .post(format!("{}/api/v1/write", prom.url))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .send(&prw::encode(Version::V1, &batch, &[])[..])
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        204,
        "{}",
        response.body_mut().read_to_string().unwrap_or_default()
    );

    // A snapshot with the head writes it as a block whose chunks file we can read.
    let snapshot = prom.post_json("/api/v1/admin/tsdb/snapshot");
    let name = snapshot["data"]["name"].as_str().unwrap();
    let snapshot_dir = prom.data.join("snapshots").join(name);
    let chunk_files: Vec<PathBuf> = walk(&snapshot_dir)
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("chunks")))
        .collect();
    assert_eq!(chunk_files.len(), 1, "{chunk_files:?}");
    let chunks = prometheus_chunks(&std::fs::read(&chunk_files[0]).unwrap());
    // Prometheus 2.42 cuts head chunks by predicted time, at 240 samples at the latest.
    assert!(chunks.len() >= 2 * series.len(), "300 samples make at least 2 chunks, got {}", chunks.len());

    let mut decoded = Vec::new();
    for data in &chunks {
        let part = remote::read::xor::decode(data).unwrap();
        let mut encoder = remote::read::xor::XorEncoder::new();
        for s in &part {
            encoder.append(s.t, s.v);
        }
        let ours = encoder.finish();
        assert_eq!(
            &ours,
            data,
            "our encoding of {} samples from {} differs from Prometheus'",
            part.len(),
            part[0].t
        );
        decoded.extend(part);
    }
    // The chunks file holds the series in label order, each series' chunks in time order.
    let samples: Vec<Sample> = series.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    let bits = |v: &[Sample]| v.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>();
    assert_eq!(bits(&decoded), bits(&samples));
}

#[test]
fn admin_delete_and_snapshot_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("strata");
    let mut strata = Strata::start_with(&data, &["--web.enable-admin-api"]);
    strata.wait_ready();
    let end = now_ms() / 1000 * 1000 - 30_000;
    let written = fixture(end);
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch(&written), &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);
    let all = vec![query(i64::MIN, i64::MAX, vec![matcher(MATCH_RE, "__name__", ".+")])];

    // Delete one series entirely; a form POST as Prometheus' docs show it.
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let reply = strata.post(
        "/api/v1/admin/tsdb/delete_series",
        &form,
        b"match%5B%5D=strata_only_metric%7Bseries%3D%22stale%22%7D",
    );
    assert_eq!(reply.status, 204, "{}", reply.body);
    let remaining: Flat =
        flat(&written).into_iter().filter(|(l, _)| !l.contains(&("series".into(), "stale".into()))).collect();
    assert_eq!(remote_read(&strata, &all, &[RESPONSE_SAMPLES]), vec![remaining.clone()]);

    let reply = strata.post("/api/v1/admin/tsdb/snapshot", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    let snapshot_dir = data.join("snapshots").join(json["data"]["name"].as_str().unwrap());
    let reply = strata.post("/api/v1/admin/tsdb/clean_tombstones", &[], b"");
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(remote_read(&strata, &all, &[RESPONSE_STREAMED_XOR_CHUNKS]), vec![remaining.clone()]);

    // A second strata on the snapshot serves the same series and samples.
    let mut second = Strata::start(&snapshot_dir);
    second.wait_ready();
    assert_eq!(remote_read(&second, &all, &[RESPONSE_SAMPLES]), vec![remaining.clone()]);
    assert_eq!(remote_read(&second, &all, &[RESPONSE_STREAMED_XOR_CHUNKS]), vec![remaining]);
    assert_eq!(second.terminate().code(), Some(0), "{}", second.log());
    assert_eq!(strata.terminate().code(), Some(0), "{}", strata.log());

    // Without --web.enable-admin-api the endpoints answer as Prometheus' do.
    let mut plain = Strata::start(&dir.path().join("plain"));
    plain.wait_ready();
    let reply = plain.post("/api/v1/admin/tsdb/snapshot", &[], b"");
    assert_eq!(reply.status, 503);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"status": "error", "errorType": "unavailable", "error": "admin APIs disabled"})
    );
}

/// Throughput of both answer types on a larger read (1,000 series × 7,200 samples: a day at 12 s).
/// Prints what it measured; behind `STRATA_SLOW_TESTS=1`, meaningful with `--release`.
#[test]
fn remote_read_throughput() {
    if std::env::var("STRATA_SLOW_TESTS").map_or(true, |v| v != "1") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(&dir.path().join("strata"));
    strata.wait_ready();
    let (series, per_series) = (1_000, 7_200);
    let end = now_ms() / 1000 * 1000 - 60_000;
    for chunk in 0..10 {
        let mut batch = Batch::new();
        for s in chunk * series / 10..(chunk + 1) * series / 10 {
            let labels = Labels::from_pairs(&[("__name__", "load"), ("instance", &format!("host-{s:04}"))]);
            let samples = (0..per_series)
                .map(|i| Sample::new(end - (per_series - 1 - i) * 12_000, (i % 100) as f64 + s as f64 * 0.25))
                .collect();
            batch.push(labels, samples);
        }
        let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch, &[]));
        assert_eq!(reply.status, 204, "{}", reply.body);
    }
    let queries = vec![query(i64::MIN, i64::MAX, vec![matcher(MATCH_RE, "__name__", "load")])];
    for types in [&[RESPONSE_SAMPLES][..], &[RESPONSE_STREAMED_XOR_CHUNKS][..]] {
        let started = Instant::now();
        let body = remote::read::encode_request(&ReadRequest {
            queries: queries.clone(),
            accepted_response_types: types.to_vec(),
        })
        .unwrap();
        let mut response = agent().post(strata.url("/api/v1/read")).send(&body[..]).unwrap();
        let bytes = response.body_mut().with_config().limit(1 << 32).read_to_vec().unwrap();
        let elapsed = started.elapsed();
        let decoded: usize = remote_read(&strata, &queries, types)[0].iter().map(|(_, s)| s.len()).sum();
        assert_eq!(decoded, (series * per_series) as usize);
        let _ = writeln!(
            std::io::stderr(),
            "{types:?}: {decoded} samples, {} bytes on the wire ({:.2} B/sample), {elapsed:?} ({:.1} M samples/s)",
            bytes.len(),
            bytes.len() as f64 / decoded as f64,
            decoded as f64 / elapsed.as_secs_f64() / 1e6
        );
    }
}

/// `strata_only_metric` in two series over the 10 minutes before `end`: one plain (40 samples,
/// the last 58.5, one NaN), one ending in a stale marker.
fn fixture(end: i64) -> Vec<(Labels, Vec<Sample>)> {
    let series = |name: &str| {
        Labels::from_pairs(&[("__name__", "strata_only_metric"), ("job", "e2e"), ("series", name)])
    };
    let mut plain: Vec<Sample> =
        (0..40).map(|i| Sample::new(end - (39 - i) * 15_000, i as f64 * 1.5)).collect();
    plain[7].v = f64::NAN;
    let mut stale: Vec<Sample> = (0..10).map(|i| Sample::new(end - (9 - i) * 15_000, -(i as f64))).collect();
    stale[9].v = f64::from_bits(STALE_NAN_BITS);
    vec![(series("plain"), plain), (series("stale"), stale)]
}

fn batch(series: &[(Labels, Vec<Sample>)]) -> Batch {
    let mut batch = Batch::new();
    for (labels, samples) in series {
        batch.push(labels.clone(), samples.clone());
    }
    batch
}

fn flat(series: &[(Labels, Vec<Sample>)]) -> Flat {
    let mut out: Flat = series
        .iter()
        .map(|(l, s)| {
            let labels = l.iter().map(|x| (x.name.to_string(), x.value.to_string())).collect();
            (labels, s.iter().map(|x| (x.t, x.v.to_bits())).collect())
        })
        .collect();
    out.sort();
    out
}

fn matcher(r#type: i32, name: &str, value: &str) -> LabelMatcher {
    LabelMatcher { r#type, name: name.into(), value: value.into() }
}

fn query(start: i64, end: i64, matchers: Vec<LabelMatcher>) -> Query {
    Query { start_timestamp_ms: start, end_timestamp_ms: end, matchers, hints: None }
}

/// A remote read over HTTP, answer decoded per its Content-Type; one `Flat` per query.
fn remote_read(strata: &Strata, queries: &[Query], types: &[i32]) -> Vec<Flat> {
    let request = ReadRequest { queries: queries.to_vec(), accepted_response_types: types.to_vec() };
    let body = remote::read::encode_request(&request).unwrap();
    let mut response = agent()
        .post(strata.url("/api/v1/read"))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Read-Version", "0.1.0")
        .send(&body[..])
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers().get("content-type").unwrap().to_str().unwrap().to_owned();
    let bytes = response.body_mut().with_config().limit(1 << 30).read_to_vec().unwrap();
    let labels = |ls: &[remote::read::proto::Label]| -> Vec<(String, String)> {
        ls.iter().map(|l| (l.name.clone(), l.value.clone())).collect()
    };
    let mut out: Vec<Flat> = vec![Vec::new(); queries.len()];
    if content_type == remote::read::STREAMED_CONTENT_TYPE {
        for frame in remote::read::decode_chunked_body(&bytes, 1 << 22).unwrap() {
            for series in frame.chunked_series {
                let mut samples = Vec::new();
                for chunk in &series.chunks {
                    let decoded = remote::read::xor::decode(&chunk.data).unwrap();
                    samples.extend(decoded.iter().map(|s| (s.t, s.v.to_bits())));
                }
                out[frame.query_index as usize].push((labels(&series.labels), samples));
            }
        }
    } else {
        assert_eq!(content_type, "application/x-protobuf");
        let response = remote::read::decode_samples_response(&bytes).unwrap();
        for (i, result) in response.results.iter().enumerate() {
            for ts in &result.timeseries {
                out[i].push((
                    labels(&ts.labels),
                    ts.samples.iter().map(|s| (s.timestamp, s.value_bits)).collect(),
                ));
            }
        }
    }
    for result in &mut out {
        result.sort();
    }
    out
}

/// The `data` of every chunk in a Prometheus block chunks file (tsdb/docs/format/chunks.md):
/// an 8-byte header (magic 0x85BD40DD, version, padding), then per chunk
/// `len <uvarint> | encoding <1 byte> | data <len bytes> | CRC32C <4 bytes>`.
fn prometheus_chunks(file: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(&file[..4], &[0x85, 0xBD, 0x40, 0xDD], "chunks file magic");
    let mut rest = &file[8..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = read_uvarint(&mut rest) as usize;
        let (encoding, body) = rest.split_first().unwrap();
        assert_eq!(*encoding, 1, "XOR");
        let (data, tail) = body.split_at(len);
        let crc = u32::from_be_bytes(tail[..4].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&[&[*encoding][..], data].concat()), "chunk CRC");
        out.push(data.to_vec());
        rest = &tail[4..];
    }
    out
}

/// Go's `binary.Uvarint` over the front of `bytes`, advancing past it.
fn read_uvarint(bytes: &mut &[u8]) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (byte, rest) = bytes.split_first().unwrap();
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Prometheus on a free port, scraping nothing, with `extra_config` appended to its config.
fn start_prometheus(binary: &Path, dir: &Path, extra_config: &str, flags: &[&str]) -> Prometheus {
    let addr = format!("127.0.0.1:{}", free_port());
    Prometheus::start(binary, dir, &addr, &format!("global:\n  scrape_interval: 1m\n{extra_config}"), flags)
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Unix seconds as Prometheus' API takes them.
fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Native histograms against Prometheus' own code (2.42, `--enable-feature=native-histograms`):
/// the same histograms remote-written to Prometheus and to strata come back from both query APIs
/// as the same bytes (instant, range selector, rate, sum, range query), and the `HISTOGRAM` and
/// `FLOAT_HISTOGRAM` chunks Prometheus wrote to its TSDB (a layout that grows, a counter reset,
/// a schema change, a long series, integer then float histograms) are the bytes our chunk
/// encoder writes for the same samples, counter-reset headers included.
#[test]
fn native_histograms_match_prometheus_own() {
    let Some(prometheus) = peer("prometheus", "prometheus", "native_histograms_match_prometheus_own") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prom = start_prometheus(
        &prometheus,
        dir.path(),
        "",
        &[
            "--web.enable-remote-write-receiver",
            "--web.enable-admin-api",
            "--enable-feature=native-histograms",
        ],
    );
    let mut strata = Strata::start(&dir.path().join("strata"));
    strata.wait_ready();

    // Whole seconds, 15 s apart, within one 2 h block; a bucket appears on the way (Prometheus
    // recodes its chunk), a negative bucket and a zero bucket away from the others.
    let boundary = (now_ms() - 3_600_000).div_euclid(7_200_000) * 7_200_000;
    let start = boundary + 60_000;
    let histograms: Vec<HistogramSample> = (0..20)
        .map(|i| {
            let k = i as f64;
            let mut positive = vec![(-3, 1.0 + k), (0, 2.0 * k), (5, 3.0 + 7.0 * k)];
            if i >= 8 {
                positive.insert(2, (2, k - 7.0));
            }
            positive.retain(|b| b.1 != 0.0);
            let negative = vec![(2, 4.0 + k * k)];
            let zero_count = 1.0 + k;
            let count = zero_count + positive.iter().chain(&negative).map(|b| b.1).sum::<f64>();
            HistogramSample {
                t: start + i * 15_000,
                h: FloatHistogram {
                    counter_reset_hint: CounterResetHint::Unknown,
                    schema: 1,
                    zero_threshold: 2f64.powi(-128),
                    zero_count,
                    count,
                    sum: 0.1 * k - 3.75,
                    positive,
                    negative,
                    custom_values: Vec::new(),
                },
            }
        })
        .collect();
    let labels = Labels::from_pairs(&[("__name__", "hist_check"), ("job", "golden")]);
    let mut batch = Batch::new();
    batch.push_histograms(labels, histograms.clone());
    // For the chunks only: a series with a counter reset and a schema change, and a long one.
    let counter = |t: i64, schema: i32, k: f64| HistogramSample {
        t,
        h: FloatHistogram {
            counter_reset_hint: CounterResetHint::Unknown,
            schema,
            zero_threshold: 0.001,
            zero_count: k,
            count: 4.0 * k,
            sum: 1.25 * k,
            positive: vec![(1, k), (3, 2.0 * k)],
            negative: Vec::new(),
            custom_values: Vec::new(),
        },
    };
    let resets: Vec<HistogramSample> = (0..30)
        .map(|i| {
            let k = match i {
                0..12 => 5.0 + i as f64,
                _ => (i - 11) as f64,
            };
            counter(start + i * 15_000, if i < 20 { 1 } else { 0 }, k)
        })
        .collect();
    let long: Vec<HistogramSample> =
        (0..150).map(|i| counter(start + i * 10_000 + (i % 3) * 7, 2, 1.0 + (i * i) as f64)).collect();
    batch.push_histograms(Labels::from_pairs(&[("__name__", "hist_chunks"), ("case", "b")]), resets.clone());
    batch.push_histograms(Labels::from_pairs(&[("__name__", "hist_chunks"), ("case", "c")]), long.clone());
    let floats: Vec<HistogramSample> = (0..12)
        .map(|i| {
            let mut h = counter(0, 3, 1.0 + i as f64).h;
            h.count += 0.375 * i as f64;
            h.positive[0].1 += 0.375 * i as f64;
            h.negative = vec![(-2, 0.1 * i as f64)];
            h.negative.retain(|b| b.1 != 0.0);
            h.count += h.negative.iter().map(|b| b.1).sum::<f64>();
            HistogramSample { t: start + i * 15_000, h }
        })
        .collect();
    batch.push_histograms(Labels::from_pairs(&[("__name__", "hist_chunks"), ("case", "d")]), floats.clone());
    let body = prw::encode(Version::V1, &batch, &[]);
    let agent = agent();
    let mut response = agent
        .post(format!("{}/api/v1/write", prom.url))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .send(&body[..])
        .unwrap();
    let status = response.status().as_u16();
    assert_eq!(status, 204, "{}", response.body_mut().read_to_string().unwrap_or_default());
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &body);
    assert_eq!(reply.status, 204, "{}", reply.body);

    // The query APIs: the same bytes for raw histograms, a range selector and a rate (not
    // starting on a sample: 2.42's windows include their start, Prometheus 3's do not), a sum
    // and a range query. (histogram_quantile is left out: Prometheus 3 interpolates inside
    // exponential buckets exponentially, 2.42 linearly.)
    let last = start + 19 * 15_000;
    let raw = |url: String| agent.get(url).call().unwrap().body_mut().read_to_string().unwrap();
    let range = format!("query_range?query=hist_check&start={}&end={}&step=30", secs(start), secs(last));
    let paths = [
        format!("query?query=hist_check&time={}", secs(last)),
        format!("query?query=hist_check&time={}", secs(start + 7 * 15_000)),
        format!("query?query={}&time={}", encode_query("hist_check[2m]"), secs(last + 5_000)),
        format!("query?query={}&time={}", encode_query("rate(hist_check[1m])"), secs(last + 5_000)),
        format!("query?query={}&time={}", encode_query("sum by (job) (hist_check)"), secs(last)),
        range,
    ];
    for path in paths {
        let ours = strata.get(&format!("/api/v1/{path}")).body;
        let theirs = raw(format!("{}/api/v1/{path}", prom.url));
        assert_eq!(ours, theirs, "{path}");
    }

    // Prometheus' chunks of the series, from a snapshot with the head.
    let snapshot = prom.post_json("/api/v1/admin/tsdb/snapshot");
    let name = snapshot["data"]["name"].as_str().unwrap();
    let snapshot_dir = prom.data.join("snapshots").join(name);
    let chunk_files: Vec<PathBuf> = walk(&snapshot_dir)
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("chunks")))
        .collect();
    assert_eq!(chunk_files.len(), 1, "{chunk_files:?}");
    let theirs = prometheus_typed_chunks(&std::fs::read(&chunk_files[0]).unwrap());
    // The chunks file holds the series in label order, each series' chunks in time order. Where
    // a chunk is full is policy, not format: 2.42 cuts by predicted time (the long series after
    // 119 samples; strata after 120, Prometheus 3 by size), and gives a chunk after a full one
    // the unknown header (Prometheus 3 and strata say "not a reset" there, checked in
    // remote/tests/integration/histogram_chunks.rs). So the long series is encoded at 2.42's
    // cut, each part on its own.
    // Chunks 0-3 are the first two series'; chunk 4 is the long series' first.
    let first_long = theirs.get(4).map_or(0, |(_, d)| usize::from(u16::from_be_bytes([d[0], d[1]])));
    let (long_a, long_b) = long.split_at(first_long.min(long.len()));
    let ours: Vec<_> = [&histograms[..], &resets, long_a, long_b, &floats]
        .into_iter()
        .flat_map(remote::read::histogram_chunk::histogram_chunks)
        .collect();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let summary =
        |encoding: i32, data: &[u8]| (encoding, u16::from_be_bytes([data[0], data[1]]), data[2] >> 6);
    assert_eq!(
        theirs.iter().map(|(e, d)| summary(i32::from(*e), d)).collect::<Vec<_>>(),
        ours.iter().map(|c| summary(c.r#type, &c.data)).collect::<Vec<_>>(),
        "chunks as (type, samples, counter-reset header)"
    );
    for ((_, data), chunk) in theirs.iter().zip(&ours) {
        assert_eq!(hex(data), hex(&chunk.data), "chunk from {}", chunk.min_time_ms);
    }
}

/// A query for a URL.
fn encode_query(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Every chunk of a Prometheus block chunks file with its encoding byte.
fn prometheus_typed_chunks(file: &[u8]) -> Vec<(u8, Vec<u8>)> {
    assert_eq!(&file[..4], &[0x85, 0xBD, 0x40, 0xDD], "chunks file magic");
    let mut rest = &file[8..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = read_uvarint(&mut rest) as usize;
        let (encoding, body) = rest.split_first().unwrap();
        let (data, tail) = body.split_at(len);
        out.push((*encoding, data.to_vec()));
        rest = &tail[4..];
    }
    out
}
