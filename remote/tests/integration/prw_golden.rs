//! Golden tests for remote write: byte-exact payloads as Prometheus builds them.
//!
//! * Hand-assembled requests (annotated bytes below, literal-only snappy blocks) pin the wire
//!   format independently of prost.
//! * `testdata/prw/*.bin` hold Prometheus' own test fixtures (`writeRequestFixture` and
//!   `writeV2RequestFixture` of prometheus/prometheus `storage/remote/codec_test.go`, with
//!   exemplars, native histograms, metadata and a created timestamp) as snappy bodies; their
//!   decoded form is in the matching `.expected` file. Prometheus' gogo encoder and prost both
//!   write fields in ascending order and omit proto3 zero scalars, so the bytes are what
//!   Prometheus sends. `STRATA_BLESS=1` regenerates the files.

use prost::Message;
use remote::metadata::{MetricMetadata, MetricType};
use remote::prw::{self, Version, proto_v1 as v1, proto_v2 as v2};
use remote::{Error, Limits};
use storage::{Batch, Labels, Sample};

use crate::common;

/// A snappy block holding `data` as one literal (valid for up to 256 bytes).
fn snappy_literal(data: &[u8]) -> Vec<u8> {
    assert!(!data.is_empty() && data.len() <= 256);
    let mut out = Vec::new();
    // Preamble: the uncompressed length as a varint.
    let mut n = data.len();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    // Literal tag: lengths up to 60 in the tag byte, else tag 60 plus one length byte.
    if data.len() <= 60 {
        out.push(((data.len() - 1) as u8) << 2);
    } else {
        out.push(60 << 2);
        out.push((data.len() - 1) as u8);
    }
    out.extend_from_slice(data);
    out
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn v1_hand_built_request() {
    // WriteRequest { timeseries: [ { labels: [__name__="up", job="a"], samples: [{1.0, 1000}] } ] }
    let proto = hex(concat!(
        "0a 28",                      // field 1 (timeseries), 40 bytes
        "  0a 0e",                    //   field 1 (labels), 14 bytes
        "    0a 08 5f5f6e616d655f5f", //     name "__name__"
        "    12 02 7570",             //     value "up"
        "  0a 08",                    //   field 1 (labels), 8 bytes
        "    0a 03 6a6f62 12 01 61",  //     name "job", value "a"
        "  12 0c",                    //   field 2 (samples), 12 bytes
        "    09 000000000000f03f",    //     value 1.0 (fixed64, little-endian)
        "    10 e807",                //     timestamp 1000 (varint)
    ));
    let body = snappy_literal(&proto);
    let d = prw::decode(Version::V1, &body, &Limits::default()).unwrap();
    let mut want = Batch::new();
    want.push(Labels::from_pairs(&[("__name__", "up"), ("job", "a")]), vec![Sample::new(1000, 1.0)]);
    assert_eq!(d.batch.series, want.series);
    assert_eq!((d.samples, d.histograms, d.exemplars), (1, 0, 0));
    // Our sender writes exactly these bytes.
    assert_eq!(prw::encode_uncompressed(Version::V1, &want, &[]), proto);
}

#[test]
fn v2_hand_built_request() {
    // Request { symbols: ["", "__name__", "up", "job", "a"],
    //           timeseries: [ { labels_refs: [1,2,3,4], samples: [{1.0, 1000}],
    //                           metadata: { type: GAUGE } } ] }
    let proto = hex(concat!(
        "22 00",                   // field 4 (symbols) ""
        "22 08 5f5f6e616d655f5f",  // "__name__"
        "22 02 7570",              // "up"
        "22 03 6a6f62",            // "job"
        "22 01 61",                // "a"
        "2a 18",                   // field 5 (timeseries), 24 bytes
        "  0a 04 01 02 03 04",     //   field 1 (labels_refs), packed
        "  12 0c",                 //   field 2 (samples), 12 bytes
        "    09 000000000000f03f", //     value 1.0
        "    10 e807",             //     timestamp 1000
        "  2a 02 08 02",           //   field 5 (metadata) { type: 2 (GAUGE) }
    ));
    let d = prw::decode(Version::V2, &snappy_literal(&proto), &Limits::default()).unwrap();
    let mut want = Batch::new();
    want.push(Labels::from_pairs(&[("__name__", "up"), ("job", "a")]), vec![Sample::new(1000, 1.0)]);
    assert_eq!(d.batch.series, want.series);
    assert_eq!(
        d.metadata,
        vec![MetricMetadata {
            metric_family_name: "up".into(),
            metric_type: MetricType::Gauge,
            help: String::new(),
            unit: String::new()
        }]
    );
    // The same request through our sender (which only attaches non-empty help/unit refs to
    // symbols it interns) decodes to the same thing.
    let body = prw::encode(Version::V2, &want, &d.metadata);
    let again = prw::decode(Version::V2, &body, &Limits::default()).unwrap();
    assert_eq!(again.batch.series, want.series);
    assert_eq!(again.metadata, d.metadata);
}

#[test]
fn v1_request_decoded_as_v2_is_empty_and_vice_versa() {
    // The spec reserves 2.0 fields 1..3 so a wrong Content-Type gives an empty request, which a
    // sender detects by the missing -Written headers.
    let body = std::fs::read(common::testdata("prw/v1_prometheus_fixture.bin")).unwrap();
    let d = prw::decode(Version::V2, &body, &Limits::default()).unwrap();
    assert_eq!((d.batch.series.len(), d.samples), (0, 0));
    let body = std::fs::read(common::testdata("prw/v2_prometheus_fixture.bin")).unwrap();
    let d = prw::decode(Version::V1, &body, &Limits::default()).unwrap();
    assert_eq!((d.batch.series.len(), d.samples, d.metadata.len()), (0, 0, 0));
}

fn labels_v1(pairs: &[(&str, &str)]) -> Vec<v1::Label> {
    pairs.iter().map(|(n, v)| v1::Label { name: n.to_string(), value: v.to_string() }).collect()
}

/// Prometheus' `testHistogram` through `FromIntHistogram`/`FromFloatHistogram`.
fn test_histogram(t: i64, float: bool) -> v1::Histogram {
    use v1::histogram::{Count, ZeroCount};
    v1::Histogram {
        count: Some(if float { Count::CountFloat(3.0) } else { Count::CountInt(3) }),
        sum_bits: 20f64.to_bits(),
        schema: 2,
        zero_threshold_bits: 1e-128f64.to_bits(),
        zero_count: Some(if float { ZeroCount::ZeroCountFloat(0.0) } else { ZeroCount::ZeroCountInt(0) }),
        negative_spans: vec![v1::BucketSpan { offset: 0, length: 1 }],
        negative_deltas: if float { vec![] } else { vec![2] },
        negative_counts: if float { vec![2.0] } else { vec![] },
        positive_spans: vec![v1::BucketSpan { offset: 0, length: 1 }],
        positive_deltas: if float { vec![] } else { vec![1] },
        positive_counts: if float { vec![1.0] } else { vec![] },
        reset_hint: 0,
        timestamp: t,
        custom_values: vec![],
    }
}

/// Prometheus' `testHistogramCustomBuckets` (schema -53).
fn custom_buckets_histogram(t: i64, float: bool) -> v1::Histogram {
    use v1::histogram::{Count, ZeroCount};
    v1::Histogram {
        count: Some(if float { Count::CountFloat(16.0) } else { Count::CountInt(16) }),
        sum_bits: 20f64.to_bits(),
        schema: -53,
        zero_threshold_bits: 0,
        zero_count: Some(if float { ZeroCount::ZeroCountFloat(0.0) } else { ZeroCount::ZeroCountInt(0) }),
        positive_spans: vec![v1::BucketSpan { offset: 1, length: 2 }],
        positive_deltas: if float { vec![] } else { vec![10, -4] },
        positive_counts: if float { vec![10.0, 6.0] } else { vec![] },
        custom_values: vec![0.1, 1.0],
        timestamp: t,
        ..Default::default()
    }
}

/// `writeRequestFixture`, plus a node-exporter style series with a stale marker and metadata.
fn v1_fixture() -> v1::WriteRequest {
    let name = [("__name__", "test_metric1"), ("b", "c"), ("baz", "qux"), ("d", "e"), ("foo", "bar")];
    v1::WriteRequest {
        timeseries: vec![
            v1::TimeSeries {
                labels: labels_v1(&name),
                samples: vec![v1::Sample { value_bits: f64::to_bits(1.0), timestamp: 1 }],
                exemplars: vec![v1::Exemplar { labels: labels_v1(&[("f", "g")]), value: 1.0, timestamp: 1 }],
                histograms: vec![test_histogram(1, false), test_histogram(2, true)],
            },
            v1::TimeSeries {
                labels: labels_v1(&name),
                samples: vec![v1::Sample { value_bits: f64::to_bits(2.0), timestamp: 2 }],
                exemplars: vec![v1::Exemplar { labels: labels_v1(&[("h", "i")]), value: 2.0, timestamp: 2 }],
                histograms: vec![test_histogram(3, false), test_histogram(4, true)],
            },
            v1::TimeSeries {
                labels: labels_v1(&[
                    ("__name__", "node_cpu_seconds_total"),
                    ("cpu", "0"),
                    ("instance", "localhost:9100"),
                    ("job", "node"),
                    ("mode", "idle"),
                ]),
                samples: vec![
                    v1::Sample { value_bits: f64::to_bits(12345.67), timestamp: 1_700_000_000_000 },
                    v1::Sample { value_bits: storage::STALE_NAN_BITS, timestamp: 1_700_000_015_000 },
                ],
                exemplars: vec![],
                histograms: vec![],
            },
        ],
        metadata: vec![v1::MetricMetadata {
            r#type: 1,
            metric_family_name: "node_cpu_seconds_total".into(),
            help: "Seconds the CPUs spent in each mode.".into(),
            unit: String::new(),
        }],
    }
}

/// `writeV2RequestFixture`.
fn v2_fixture() -> v2::Request {
    let symbols = [
        "",
        "__name__",
        "test_metric1",
        "b",
        "c",
        "baz",
        "qux",
        "d",
        "e",
        "foo",
        "bar",
        "f",
        "g",
        "h",
        "i",
        "Test gauge for test purposes",
        "Maybe op/sec who knows (:",
        "Test counter for test purposes",
    ];
    v2::Request {
        symbols: symbols.iter().map(|s| s.to_string()).collect(),
        timeseries: vec![
            v2::TimeSeries {
                labels_refs: vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
                metadata: Some(v2::Metadata { r#type: 2, help_ref: 15, unit_ref: 16 }),
                samples: vec![v2::Sample {
                    value_bits: f64::to_bits(1.0),
                    timestamp: 10,
                    start_timestamp: 0,
                }],
                exemplars: vec![v2::Exemplar { labels_refs: vec![11, 12], value: 1.0, timestamp: 10 }],
                histograms: vec![
                    test_histogram(10, false),
                    test_histogram(20, true),
                    custom_buckets_histogram(30, false),
                    custom_buckets_histogram(40, true),
                ],
                created_timestamp: 1,
            },
            v2::TimeSeries {
                labels_refs: vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
                metadata: Some(v2::Metadata { r#type: 1, help_ref: 17, unit_ref: 0 }),
                samples: vec![v2::Sample {
                    value_bits: f64::to_bits(2.0),
                    timestamp: 20,
                    start_timestamp: 0,
                }],
                exemplars: vec![v2::Exemplar { labels_refs: vec![13, 14], value: 2.0, timestamp: 20 }],
                histograms: vec![
                    test_histogram(50, false),
                    test_histogram(60, true),
                    custom_buckets_histogram(70, false),
                    custom_buckets_histogram(80, true),
                ],
                created_timestamp: 0,
            },
        ],
    }
}

fn render(d: &prw::Decoded) -> String {
    let mut out = common::render_batch(&d.batch);
    out += &format!(
        "samples={} histograms={} exemplars={} created_timestamps={}\n",
        d.samples, d.histograms, d.exemplars, d.created_timestamps
    );
    for m in &d.metadata {
        out += &format!(
            "metadata {} {} help={:?} unit={:?}\n",
            m.metric_family_name,
            m.metric_type.as_str(),
            m.help,
            m.unit
        );
    }
    out
}

fn check_fixture(version: Version, name: &str, proto: Vec<u8>) {
    let bin = format!("prw/{name}.bin");
    if std::env::var_os("STRATA_BLESS").is_some() {
        common::golden(&bin, &snap::raw::Encoder::new().compress_vec(&proto).unwrap());
    }
    let body = common::read(&bin);
    assert_eq!(snap::raw::Decoder::new().decompress_vec(&body).unwrap(), proto, "{bin} holds other bytes");
    let decoded = prw::decode(version, &body, &Limits::default()).unwrap();
    common::golden(&format!("prw/{name}.expected"), render(&decoded).as_bytes());
}

#[test]
fn v1_prometheus_fixture() {
    check_fixture(Version::V1, "v1_prometheus_fixture", v1_fixture().encode_to_vec());
}

#[test]
fn v2_prometheus_fixture() {
    check_fixture(Version::V2, "v2_prometheus_fixture", v2_fixture().encode_to_vec());
}

#[test]
fn stale_marker_bits_survive_both_versions() {
    let d =
        prw::decode(Version::V1, &common::read("prw/v1_prometheus_fixture.bin"), &Limits::default()).unwrap();
    let (_, samples) = d.batch.series.last().unwrap();
    assert_eq!(samples[1].v.to_bits(), storage::STALE_NAN_BITS);
    // Through our own sender: the stale marker, another NaN and -0.0 keep their bits.
    let mut b = Batch::new();
    b.push(
        Labels::from_pairs(&[("__name__", "x")]),
        vec![Sample::new(1, storage::stale_nan()), Sample::new(2, f64::NAN), Sample::new(3, -0.0)],
    );
    for version in [Version::V1, Version::V2] {
        let d = prw::decode(version, &prw::encode(version, &b, &[]), &Limits::default()).unwrap();
        let got: Vec<u64> = d.batch.series[0].1.iter().map(|s| s.v.to_bits()).collect();
        assert_eq!(got, vec![storage::STALE_NAN_BITS, f64::NAN.to_bits(), (-0.0f64).to_bits()]);
    }
}

#[test]
fn oversized_declared_length_is_rejected_before_allocating() {
    // A 6-byte body declaring 2^32-1 decoded bytes.
    let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
    match prw::decode(Version::V1, &body, &Limits::default()) {
        Err(Error::LimitExceeded { limit: "decoded_bytes_max", value, .. }) => {
            assert_eq!(value, u32::MAX as u64)
        }
        other => panic!("{other:?}"),
    }
}
