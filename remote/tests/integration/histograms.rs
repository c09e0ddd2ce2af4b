//! Native histograms in remote write 1.0 and 2.0: round trips through our encoder (integer and
//! float histograms, every schema including custom buckets, reset hints, zero buckets), stale
//! markers, and the validation that refuses what Prometheus refuses (400 naming the problem).

use proptest::prelude::*;
use prost::Message;
use remote::prw::{self, Version, proto_v1 as v1};
use remote::{Error, Limits};
use storage::{Batch, CounterResetHint, FloatHistogram, HistogramSample, Labels, stale_nan};

fn hint(k: u8) -> CounterResetHint {
    [CounterResetHint::Unknown, CounterResetHint::Reset, CounterResetHint::NotReset, CounterResetHint::Gauge]
        [usize::from(k % 4)]
}

/// Valid histograms: integer ones (count = total of the buckets) or float ones, exponential or
/// custom-bucket, sparse buckets without empty ones.
fn arb_histogram() -> impl Strategy<Value = FloatHistogram> {
    let buckets = || proptest::collection::btree_map(-30i32..30, 1u32..1000, 0..8);
    (any::<bool>(), 0u8..4, prop_oneof![-4i32..=8, Just(-53)], buckets(), buckets(), 0u32..50, -1e9f64..1e9)
        .prop_map(|(float, k, schema, pos, neg, zero, sum)| {
            let nhcb = schema == -53;
            let scale = if float { 0.5 } else { 1.0 };
            let mut positive: Vec<(i32, f64)> =
                pos.into_iter().map(|(i, c)| (i, f64::from(c) * scale)).collect();
            if nhcb {
                positive.retain(|(i, _)| (0..=4).contains(i));
            }
            let negative: Vec<(i32, f64)> = if nhcb {
                Vec::new()
            } else {
                neg.into_iter().map(|(i, c)| (i, f64::from(c) * scale)).collect()
            };
            let zero_count = if nhcb { 0.0 } else { f64::from(zero) * scale };
            let count = zero_count
                + positive.iter().chain(&negative).map(|b| b.1).sum::<f64>()
                + if float { 0.25 } else { 0.0 };
            FloatHistogram {
                counter_reset_hint: hint(k),
                schema,
                zero_threshold: if nhcb { 0.0 } else { 0.001 },
                zero_count,
                count,
                sum,
                positive,
                negative,
                custom_values: if nhcb { vec![0.1, 0.5, 1.0, 5.0] } else { Vec::new() },
            }
        })
}

fn decode(version: Version, batch: &Batch) -> Result<prw::Decoded, Error> {
    let body = prw::encode(version, batch, &[]);
    prw::decode(version, &body, &Limits::default())
}

proptest! {
    #[test]
    fn histograms_round_trip_through_our_encoder(
        series in proptest::collection::vec(
            (0u8..4, proptest::collection::vec((any::<i64>(), arb_histogram()), 1..4)), 1..5),
        v2 in any::<bool>(),
    ) {
        let mut batch = Batch::new();
        for (k, hs) in series {
            let labels = Labels::from_pairs(&[("__name__", "h"), ("k", &k.to_string())]);
            batch.push_histograms(labels, hs.into_iter().map(|(t, h)| HistogramSample { t, h }).collect());
        }
        let version = if v2 { Version::V2 } else { Version::V1 };
        let decoded = decode(version, &batch).unwrap();
        let n: usize = batch.histograms.iter().map(|(_, h)| h.len()).sum();
        prop_assert_eq!(decoded.histograms, n as u64);
        prop_assert_eq!(decoded.samples, 0);
        prop_assert_eq!(&decoded.batch.histograms, &batch.histograms);
    }
}

/// A count of -0.0 is a whole number but no integer: such a histogram travels as a float
/// histogram and keeps the sign (found by the prw_v2_decode fuzz target: an integer histogram
/// would bring it back as 0.0).
#[test]
fn a_negative_zero_count_keeps_its_sign() {
    let h = FloatHistogram {
        counter_reset_hint: CounterResetHint::Unknown,
        schema: 0,
        zero_threshold: 0.001,
        zero_count: -0.0,
        count: 2.0,
        sum: 3.0,
        positive: vec![(1, 2.0)],
        negative: Vec::new(),
        custom_values: Vec::new(),
    };
    assert!(!prw::is_integer(&h));
    for version in [Version::V1, Version::V2] {
        let mut batch = Batch::new();
        batch.push_histograms(
            Labels::from_pairs(&[("__name__", "h")]),
            vec![HistogramSample { t: 1, h: h.clone() }],
        );
        let got = decode(version, &batch).unwrap();
        assert_eq!(got.batch.histograms[0].1[0].h.zero_count.to_bits(), (-0.0f64).to_bits(), "{version:?}");
    }
}

/// A sum (and zero threshold) of `-0.0` is sent: proto3 omits a double equal to `0.0`, so our
/// sender writes both as bit patterns (found by the prw_v2_decode fuzzer, round trip of a
/// custom-bucket integer histogram whose sum was `-0.0`).
#[test]
fn a_negative_zero_sum_keeps_its_sign() {
    let h = FloatHistogram {
        counter_reset_hint: CounterResetHint::Unknown,
        schema: -53,
        zero_threshold: 0.0,
        zero_count: 0.0,
        count: 16.0,
        sum: -0.0,
        positive: vec![(1, 10.0), (2, 6.0)],
        negative: Vec::new(),
        custom_values: vec![0.1, 1.0],
    };
    assert!(prw::is_integer(&h));
    let mut float = h.clone();
    float.zero_threshold = -0.0;
    float.count = 16.5;
    float.positive = vec![(1, 10.5), (2, 6.0)];
    float.schema = 0;
    float.custom_values = Vec::new();
    for version in [Version::V1, Version::V2] {
        for h in [&h, &float] {
            let mut batch = Batch::new();
            batch.push_histograms(
                Labels::from_pairs(&[("__name__", "h")]),
                vec![HistogramSample { t: 1, h: h.clone() }],
            );
            let got = decode(version, &batch).unwrap();
            let g = &got.batch.histograms[0].1[0].h;
            assert_eq!(g.sum.to_bits(), (-0.0f64).to_bits(), "{version:?}");
            assert_eq!(g.zero_threshold.to_bits(), h.zero_threshold.to_bits(), "{version:?}");
        }
    }
}

#[test]
fn a_histogram_stale_marker_becomes_the_float_stale_marker() {
    let h = v1::Histogram { sum_bits: stale_nan().to_bits(), timestamp: 5, ..v1::Histogram::default() };
    let ts = v1::TimeSeries {
        labels: vec![v1::Label { name: "__name__".into(), value: "h".into() }],
        samples: vec![],
        exemplars: vec![],
        histograms: vec![h],
    };
    let raw = v1::WriteRequest { timeseries: vec![ts], metadata: vec![] }.encode_to_vec();
    let d = prw::decode_uncompressed(Version::V1, &raw, &Limits::default()).unwrap();
    assert_eq!((d.histograms, d.stale_histograms), (1, 1));
    assert!(d.batch.histograms.is_empty());
    assert_eq!(d.batch.series[0].1.len(), 1);
    assert!(storage::is_stale(d.batch.series[0].1[0].v));
}

/// A change that makes a valid histogram invalid.
type Breaks = Box<dyn FnOnce(&mut v1::Histogram)>;

/// A 1.0 request with one histogram, made by `f` from a valid integer histogram.
fn refused(f: impl FnOnce(&mut v1::Histogram)) -> String {
    let mut h = v1::Histogram {
        count: Some(v1::histogram::Count::CountInt(3)),
        sum_bits: 1f64.to_bits(),
        schema: 0,
        zero_count: Some(v1::histogram::ZeroCount::ZeroCountInt(1)),
        positive_spans: vec![v1::BucketSpan { offset: 0, length: 2 }],
        positive_deltas: vec![1, 0],
        timestamp: 1,
        ..v1::Histogram::default()
    };
    let ok = v1::WriteRequest {
        timeseries: vec![v1::TimeSeries {
            labels: vec![v1::Label { name: "__name__".into(), value: "h".into() }],
            samples: vec![],
            exemplars: vec![],
            histograms: vec![h.clone()],
        }],
        metadata: vec![],
    };
    prw::decode_uncompressed(Version::V1, &ok.encode_to_vec(), &Limits::default()).unwrap();
    f(&mut h);
    let mut bad = ok;
    bad.timeseries[0].histograms = vec![h];
    let err = prw::decode_uncompressed(Version::V1, &bad.encode_to_vec(), &Limits::default()).unwrap_err();
    assert_eq!(err.status_hint(), 400, "{err}");
    err.to_string()
}

#[test]
fn invalid_histograms_are_refused_naming_the_problem() {
    let cases: Vec<(Breaks, &str)> = vec![
        (Box::new(|h| h.schema = 9), "schema 9"),
        (Box::new(|h| h.positive_deltas = vec![1]), "positive spans cover 2 buckets but 1 bucket deltas"),
        (Box::new(|h| h.positive_deltas = vec![1, -2]), "negative"),
        (Box::new(|h| h.count = Some(v1::histogram::Count::CountInt(4))), "count 4 disagrees"),
        (
            Box::new(|h| {
                h.positive_spans.push(v1::BucketSpan { offset: -3, length: 1 });
                h.positive_deltas.push(0);
                h.count = Some(v1::histogram::Count::CountInt(4));
            }),
            "span 1 has negative offset",
        ),
        (
            Box::new(|h| {
                h.schema = -53;
                h.zero_count = None;
                h.count = Some(v1::histogram::Count::CountInt(2));
                h.custom_values = vec![2.0, 1.0];
            }),
            "strictly ascending",
        ),
        (Box::new(|h| h.custom_values = vec![1.0]), "custom_values given for exponential schema 0"),
    ];
    for (f, want) in cases {
        let msg = refused(f);
        assert!(msg.contains("timeseries[0].histograms[0]"), "{msg}");
        assert!(msg.contains(want), "{msg} does not say {want:?}");
    }
}
