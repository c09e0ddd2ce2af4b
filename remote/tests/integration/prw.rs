//! Remote write decoding: error cases, round trips through our sender, a differential check
//! against prost-decoded messages, and robustness on arbitrary and mutated bytes.

use std::collections::BTreeMap;

use proptest::prelude::*;
use prost::Message;
use remote::metadata::{MetricMetadata, MetricType};
use remote::prw::{self, Version, proto_v1 as v1, proto_v2 as v2};
use remote::{Error, Limits};
use storage::{Batch, Label, Labels, Sample};

fn snappy(raw: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(raw).unwrap()
}

fn lbl(n: &str, v: &str) -> v1::Label {
    v1::Label { name: n.into(), value: v.into() }
}

fn sample_v1(t: i64, v: f64) -> v1::Sample {
    v1::Sample { value_bits: v.to_bits(), timestamp: t }
}

fn series_v1(labels: Vec<v1::Label>) -> v1::TimeSeries {
    v1::TimeSeries { labels, samples: vec![sample_v1(1, 1.0)], exemplars: vec![], histograms: vec![] }
}

fn req_v1(series: Vec<v1::TimeSeries>) -> Vec<u8> {
    v1::WriteRequest { timeseries: series, metadata: vec![] }.encode_to_vec()
}

fn sample_v2(t: i64, v: f64) -> v2::Sample {
    v2::Sample { value_bits: v.to_bits(), timestamp: t, start_timestamp: 0 }
}

fn series_v2(refs: Vec<u32>) -> v2::TimeSeries {
    v2::TimeSeries {
        labels_refs: refs,
        samples: vec![sample_v2(1, 1.0)],
        histograms: vec![],
        exemplars: vec![],
        metadata: None,
        created_timestamp: 0,
    }
}

fn req_v2(symbols: &[&str], series: Vec<v2::TimeSeries>) -> Vec<u8> {
    v2::Request { symbols: symbols.iter().map(|s| s.to_string()).collect(), timeseries: series }
        .encode_to_vec()
}

const SYMS: &[&str] = &["", "__name__", "up", "job", "a"];

/// Decodes an uncompressed body; the error message is the observable behaviour.
fn err(version: Version, raw: &[u8], limits: &Limits) -> Error {
    match prw::decode(version, &snappy(raw), limits) {
        Ok(d) => panic!("expected an error, decoded {:?}", d.batch),
        Err(e) => e,
    }
}

#[test]
fn error_cases() {
    let d = Limits::default();
    let up = || vec![lbl("__name__", "up")];
    let truncated = {
        let mut r = req_v1(vec![series_v1(up())]);
        r.truncate(r.len() - 3);
        r
    };
    // (version, uncompressed body, limits, expected message)
    let cases: Vec<(Version, Vec<u8>, Limits, &str)> = vec![
        (Version::V1, truncated, d.clone(), "invalid protobuf: WriteRequest: message truncated"),
        (
            Version::V1,
            vec![0x08, 0x01],
            d.clone(),
            "invalid protobuf: WriteRequest: field 1 has wire type varint, expected length-delimited",
        ),
        (
            Version::V1,
            // timeseries { samples { value as varint } }
            vec![0x0a, 0x04, 0x12, 0x02, 0x08, 0x01],
            d.clone(),
            "invalid protobuf: timeseries[0].samples[0]: field 1 has wire type varint, expected 64-bit",
        ),
        (
            Version::V1,
            // timeseries { labels { name as fixed32 } }
            vec![0x0a, 0x07, 0x0a, 0x05, 0x0d, 0, 0, 0, 0],
            d.clone(),
            "invalid protobuf: timeseries[0].labels[0]: field 1 has wire type 32-bit, expected length-delimited",
        ),
        (
            Version::V1,
            vec![0x0a, 0x01, 0x0f],
            d.clone(),
            "invalid protobuf: timeseries[0]: unsupported wire type 7",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("job", "a")])]),
            d.clone(),
            "invalid labels in series {job=\"a\"}: no __name__ label",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("__name__", ""), lbl("job", "a")])]),
            d.clone(),
            "invalid labels in series {job=\"a\"}: empty __name__ label",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("__name__", "up"), lbl("", "a")])]),
            d.clone(),
            "invalid labels in series up{=\"a\"}: empty label name",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("job", "a"), lbl("__name__", "up"), lbl("job", "b")])]),
            d.clone(),
            "invalid labels in series up{job=\"a\", job=\"b\"}: duplicate label name \"job\"",
        ),
        (
            Version::V1,
            // A second series with invalid UTF-8 in a value: the whole request is rejected.
            {
                let mut r = req_v1(vec![series_v1(up())]);
                r.extend([0x0a, 0x12, 0x0a, 0x0e, 0x0a, 0x08]);
                r.extend(b"__name__");
                r.extend([0x12, 0x02, 0xc3, 0x28, 0x12, 0x00]);
                r
            },
            d.clone(),
            "invalid labels in series \u{fffd}({}: label name or value is not valid UTF-8",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("__name__", "up"), lbl("a", "1"), lbl("b", "2")])]),
            Limits { labels_per_series_max: 2, ..d.clone() },
            "labels_per_series_max exceeded: 3 > 2 (raise the `labels_per_series_max` limit if this request is \
             legitimate)",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("__name__", "up"), lbl("instance1", "1")])]),
            Limits { label_name_bytes_max: 8, ..d.clone() },
            "label_name_bytes_max exceeded: 9 > 8 (raise the `label_name_bytes_max` limit if this request is \
             legitimate)",
        ),
        (
            Version::V1,
            req_v1(vec![series_v1(vec![lbl("__name__", "up"), lbl("a", "12345")])]),
            Limits { label_value_bytes_max: 4, ..d.clone() },
            "label_value_bytes_max exceeded: 5 > 4 (raise the `label_value_bytes_max` limit if this request is \
             legitimate)",
        ),
        (
            Version::V2,
            req_v2(SYMS, vec![series_v2(vec![1, 2, 3, 5])]),
            d.clone(),
            "invalid labels in series timeseries[0]: labels_refs[3] = 5 is out of range (5 symbols)",
        ),
        (
            Version::V2,
            req_v2(SYMS, vec![series_v2(vec![1, 2, 3])]),
            d.clone(),
            "invalid labels in series timeseries[0]: labels_refs has an odd number of elements (3)",
        ),
        (
            Version::V2,
            req_v2(&["x", "__name__", "up"], vec![series_v2(vec![1, 2])]),
            d.clone(),
            "invalid protobuf: symbols[0] must be the empty string, found \"x\"",
        ),
        (
            Version::V2,
            req_v2(SYMS, vec![series_v2(vec![3, 4])]),
            d.clone(),
            "invalid labels in series {job=\"a\"}: no __name__ label",
        ),
        (
            Version::V2,
            req_v2(SYMS, vec![series_v2(vec![1, 2, 0, 4])]),
            d.clone(),
            "invalid labels in series up{=\"a\"}: empty label name",
        ),
        (
            Version::V2,
            req_v2(SYMS, vec![series_v2(vec![1, 2, 3, 4, 3, 2])]),
            d.clone(),
            "invalid labels in series up{job=\"a\", job=\"up\"}: duplicate label name \"job\"",
        ),
        (
            Version::V2,
            req_v2(
                SYMS,
                vec![v2::TimeSeries {
                    metadata: Some(v2::Metadata { r#type: 1, help_ref: 9, unit_ref: 0 }),
                    ..series_v2(vec![1, 2])
                }],
            ),
            d.clone(),
            "invalid protobuf: timeseries[0].metadata.help_ref = 9 is out of range (5 symbols)",
        ),
        (
            Version::V2,
            req_v2(
                SYMS,
                vec![v2::TimeSeries {
                    exemplars: vec![v2::Exemplar { labels_refs: vec![3, 7], value: 1.0, timestamp: 1 }],
                    ..series_v2(vec![1, 2])
                }],
            ),
            d.clone(),
            "invalid protobuf: timeseries[0].exemplars[0]: labels_refs[1] = 7 is out of range (5 symbols)",
        ),
        (
            Version::V2,
            // labels_refs = [1, 2^32 + 2] (unpacked): a reference no u32 symbol index can be.
            {
                let mut ts = vec![0x08, 0x01, 0x08, 0x82, 0x80, 0x80, 0x80, 0x10];
                ts.extend(
                    v2::Sample { value_bits: 0, timestamp: 1, start_timestamp: 0 }
                        .encode_length_delimited_to_vec(),
                );
                ts.insert(8, 0x12);
                let mut r = req_v2(SYMS, vec![]);
                r.push(0x2a);
                r.push(ts.len() as u8);
                r.extend(ts);
                r
            },
            d.clone(),
            "invalid labels in series timeseries[0]: labels_refs[1] = 4294967298 is out of range (5 symbols)",
        ),
    ];
    for (version, raw, limits, want) in cases {
        let e = err(version, &raw, &limits);
        assert_eq!(e.to_string(), want, "{raw:x?}");
        assert_eq!(e.status_hint(), 400, "{e}");
    }
}

#[test]
fn body_limits_are_413() {
    let raw = req_v1(vec![series_v1(vec![lbl("__name__", "up")])]);
    let body = snappy(&raw);
    let tight = Limits { body_bytes_max: body.len() - 1, ..Limits::default() };
    let e = prw::decode(Version::V1, &body, &tight).unwrap_err();
    assert!(matches!(e, Error::LimitExceeded { limit: "body_bytes_max", .. }), "{e}");
    assert_eq!(e.status_hint(), 413);
    let tight = Limits { decoded_bytes_max: raw.len() - 1, ..Limits::default() };
    let e = prw::decode(Version::V1, &body, &tight).unwrap_err();
    assert!(matches!(e, Error::LimitExceeded { limit: "decoded_bytes_max", .. }), "{e}");
    assert_eq!(e.status_hint(), 413);
}

#[test]
fn bad_snappy_is_400() {
    for body in [&b""[..], b"not snappy at all", &[0x05, 0x00], &[0x0a, 0x08, 1, 2]] {
        let e = prw::decode(Version::V1, body, &Limits::default()).unwrap_err();
        assert!(matches!(e, Error::Snappy(_)), "{body:x?}: {e}");
        assert_eq!(e.status_hint(), 400);
    }
}

#[test]
fn unsorted_labels_are_sorted_and_empty_values_dropped() {
    let raw =
        req_v1(vec![series_v1(vec![lbl("zone", "z"), lbl("job", "j"), lbl("__name__", "up"), lbl("e", "")])]);
    let d = prw::decode(Version::V1, &snappy(&raw), &Limits::default()).unwrap();
    assert_eq!(d.batch.series[0].0, Labels::from_pairs(&[("__name__", "up"), ("job", "j"), ("zone", "z")]));
}

#[test]
fn v2_created_timestamps_are_counted_in_both_places() {
    let raw = req_v2(
        SYMS,
        vec![
            v2::TimeSeries { created_timestamp: 1, ..series_v2(vec![1, 2]) },
            v2::TimeSeries {
                samples: vec![v2::Sample { value_bits: 0, timestamp: 9, start_timestamp: 3 }],
                ..series_v2(vec![1, 2, 3, 4])
            },
            series_v2(vec![1, 2]),
            // A start timestamp after its sample is dropped, the sample kept.
            v2::TimeSeries { created_timestamp: 5, ..series_v2(vec![1, 2, 3, 2]) },
        ],
    );
    let d = prw::decode(Version::V2, &snappy(&raw), &Limits::default()).unwrap();
    assert_eq!((d.samples, d.created_timestamps), (4, 2));
}

#[test]
fn v2_start_timestamps_reach_the_batch_per_sample() {
    let samples = vec![
        v2::Sample { value_bits: 1f64.to_bits(), timestamp: 10, start_timestamp: 0 },
        v2::Sample { value_bits: 2f64.to_bits(), timestamp: 20, start_timestamp: 15 },
        v2::Sample { value_bits: 3f64.to_bits(), timestamp: 30, start_timestamp: 31 },
    ];
    let raw = req_v2(
        SYMS,
        vec![
            // The series-level created timestamp fills in for samples without their own.
            v2::TimeSeries { samples: samples.clone(), created_timestamp: 7, ..series_v2(vec![1, 2]) },
            v2::TimeSeries { samples, ..series_v2(vec![1, 2, 3, 4]) },
            series_v2(vec![1, 2, 3, 2]),
        ],
    );
    let d = prw::decode_ref(Version::V2, &raw, &Limits::default()).unwrap();
    let starts: Vec<(String, Vec<(u32, i64)>)> =
        d.batch.iter_with_starts().map(|(l, _, st)| (l.to_string(), st.to_vec())).collect();
    assert_eq!(
        starts,
        vec![
            ("up{}".to_string(), vec![(0, 7), (1, 15)]),
            ("up{job=\"a\"}".to_string(), vec![(1, 15)]),
            ("up{job=\"up\"}".to_string(), vec![]),
        ]
    );
}

#[test]
fn v2_unpacked_refs_and_repeated_metadata_are_merged() {
    // labels_refs sent unpacked (one varint per field) and metadata split over two fields.
    let mut ts = vec![0x08, 0x01, 0x08, 0x02];
    ts.extend([0x2a, 0x02, 0x08, 0x01]); // metadata { type: COUNTER }
    ts.extend([0x2a, 0x02, 0x18, 0x03]); // metadata { help_ref: 3 }
    ts.push(0x12);
    ts.extend(sample_v2(7, 2.5).encode_length_delimited_to_vec());
    let mut raw = req_v2(SYMS, vec![]);
    raw.push(0x2a);
    raw.push(ts.len() as u8);
    raw.extend(ts);
    let d = prw::decode(Version::V2, &snappy(&raw), &Limits::default()).unwrap();
    assert_eq!(d.batch.series[0].1, vec![Sample::new(7, 2.5)]);
    assert_eq!(
        d.metadata,
        vec![MetricMetadata {
            metric_family_name: "up".into(),
            metric_type: MetricType::Counter,
            help: "job".into(),
            unit: String::new()
        }]
    );
}

// ---- property tests ----

/// Strings with the characters that need care: unicode, escapable and quote characters.
fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9_:é日本 ,=\"\\\\\n\t{{}}]{{1,{max}}}")).unwrap()
}

fn arb_batch() -> impl Strategy<Value = Batch> {
    let series = (
        text(10),
        proptest::collection::btree_map(
            text(8).prop_filter("not __name__", |n| n != "__name__"),
            text(12),
            0..6,
        ),
        proptest::collection::vec((any::<i64>(), any::<u64>()), 1..5),
    )
        .prop_map(|(name, labels, samples): (String, BTreeMap<String, String>, Vec<(i64, u64)>)| {
            let mut pairs = vec![Label::new("__name__", name)];
            pairs.extend(labels.into_iter().map(|(n, v)| Label::new(n, v)));
            let samples = samples.into_iter().map(|(t, bits)| Sample::new(t, f64::from_bits(bits))).collect();
            (Labels::new(pairs), samples)
        });
    proptest::collection::vec(series, 0..12).prop_map(|series| Batch { series, ..Batch::default() })
}

fn arb_type() -> impl Strategy<Value = MetricType> {
    (0i32..9).prop_map(MetricType::from_wire)
}

fn arb_metadata() -> impl Strategy<Value = Vec<MetricMetadata>> {
    proptest::collection::vec(
        (text(10), arb_type(), proptest::option::of(text(20)), proptest::option::of(text(5))).prop_map(
            |(name, ty, help, unit)| MetricMetadata {
                metric_family_name: name,
                metric_type: ty,
                help: help.unwrap_or_default(),
                unit: unit.unwrap_or_default(),
            },
        ),
        0..4,
    )
}

fn same_batch(a: &Batch, b: &Batch) -> bool {
    // `Sample`'s PartialEq compares value bits.
    a.series == b.series
}

/// What a 2.0 round trip yields for metadata: the first entry per family that names a series in
/// the batch, in series order, and only if it says anything.
fn expected_v2_metadata(batch: &Batch, md: &[MetricMetadata]) -> Vec<MetricMetadata> {
    let mut by_family: BTreeMap<&str, &MetricMetadata> = BTreeMap::new();
    for m in md {
        by_family.insert(&m.metric_family_name, m); // the encoder's map keeps the last entry
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (labels, _) in &batch.series {
        let name = labels.metric_name().unwrap();
        if let Some(m) = by_family.get(name) {
            let says_something =
                m.metric_type != MetricType::Unknown || !m.help.is_empty() || !m.unit.is_empty();
            if says_something && seen.insert(name.to_string()) {
                out.push((*m).clone());
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 20_000 } else { 300 }))]

    #[test]
    fn v1_round_trip(batch in arb_batch(), md in arb_metadata()) {
        let d = prw::decode(Version::V1, &prw::encode(Version::V1, &batch, &md), &Limits::default()).unwrap();
        prop_assert!(same_batch(&d.batch, &batch), "{:?} != {:?}", d.batch, batch);
        prop_assert_eq!(d.metadata, md);
        prop_assert_eq!(d.samples as usize, batch.sample_count());
    }

    #[test]
    fn v2_round_trip(batch in arb_batch(), md in arb_metadata()) {
        // Give some series a family with metadata.
        let mut md = md;
        for (m, (labels, _)) in md.iter_mut().zip(&batch.series) {
            m.metric_family_name = labels.metric_name().unwrap().to_string();
        }
        let d = prw::decode(Version::V2, &prw::encode(Version::V2, &batch, &md), &Limits::default()).unwrap();
        prop_assert!(same_batch(&d.batch, &batch), "{:?} != {:?}", d.batch, batch);
        prop_assert_eq!(d.metadata, expected_v2_metadata(&batch, &md));
        prop_assert_eq!(d.samples as usize, batch.sample_count());
    }
}

// ---- differential check against prost ----

/// The reference: the label rules of `remote::prw` written plainly over prost-decoded strings.
fn reference_labels(pairs: &[(String, String)], limits: &Limits) -> Option<Labels> {
    if pairs.len() > limits.labels_per_series_max {
        return None;
    }
    if pairs.iter().any(|(n, v)| {
        n.is_empty() || n.len() > limits.label_name_bytes_max || v.len() > limits.label_value_bytes_max
    }) {
        return None;
    }
    let mut names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    match pairs.iter().find(|(n, _)| n == "__name__") {
        Some((_, v)) if !v.is_empty() => {}
        _ => return None,
    }
    let kept: Vec<Label> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| Label::new(n.as_str(), v.as_str()))
        .collect();
    Some(Labels::new(kept))
}

/// `(batch, metadata, samples, histograms, exemplars, created)` or `None` for a rejected request.
type Summary = (Vec<(Labels, Vec<Sample>)>, Vec<MetricMetadata>, u64, u64, u64, u64);

fn summary(d: prw::Decoded) -> Summary {
    (d.batch.series, d.metadata, d.samples, d.histograms, d.exemplars, d.created_timestamps)
}

fn reference_v1(req: &v1::WriteRequest, limits: &Limits) -> Option<Summary> {
    let mut out: Summary = Default::default();
    for ts in &req.timeseries {
        let pairs: Vec<(String, String)> =
            ts.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
        let labels = reference_labels(&pairs, limits)?;
        let samples: Vec<Sample> =
            ts.samples.iter().map(|s| Sample::new(s.timestamp, f64::from_bits(s.value_bits))).collect();
        out.2 += samples.len() as u64;
        out.3 += ts.histograms.len() as u64;
        out.4 += ts.exemplars.len() as u64;
        if !samples.is_empty() {
            out.0.push((labels, samples));
        }
    }
    out.1 = req
        .metadata
        .iter()
        .map(|m| MetricMetadata {
            metric_family_name: m.metric_family_name.clone(),
            metric_type: MetricType::from_wire(m.r#type),
            help: m.help.clone(),
            unit: m.unit.clone(),
        })
        .collect();
    Some(out)
}

fn reference_v2(req: &v2::Request, limits: &Limits) -> Option<Summary> {
    let sym = |r: u32| req.symbols.get(r as usize).cloned();
    if req.symbols.first().is_some_and(|s| !s.is_empty()) {
        return None;
    }
    let mut out: Summary = Default::default();
    let mut seen = std::collections::HashSet::new();
    for ts in &req.timeseries {
        if ts.labels_refs.len() % 2 != 0 {
            return None;
        }
        let mut pairs = Vec::new();
        for p in ts.labels_refs.chunks(2) {
            pairs.push((sym(p[0])?, sym(p[1])?));
        }
        let labels = reference_labels(&pairs, limits)?;
        for e in &ts.exemplars {
            if e.labels_refs.len() % 2 != 0 || e.labels_refs.iter().any(|&r| sym(r).is_none()) {
                return None;
            }
        }
        if let Some(m) = &ts.metadata {
            let (help, unit) = (sym(m.help_ref)?, sym(m.unit_ref)?);
            let name = labels.metric_name().unwrap().to_string();
            if (m.r#type != 0 || !help.is_empty() || !unit.is_empty()) && seen.insert(name.clone()) {
                out.1.push(MetricMetadata {
                    metric_family_name: name,
                    metric_type: MetricType::from_wire(m.r#type),
                    help,
                    unit,
                });
            }
        }
        let samples: Vec<Sample> =
            ts.samples.iter().map(|s| Sample::new(s.timestamp, f64::from_bits(s.value_bits))).collect();
        out.2 += samples.len() as u64;
        out.3 += ts.histograms.len() as u64;
        out.4 += ts.exemplars.len() as u64;
        // A sample's start timestamp is its own or else the series' created timestamp, and
        // counts only if it is not after the sample.
        out.5 += u64::from(ts.samples.iter().any(|s| {
            let st = if s.start_timestamp != 0 { s.start_timestamp } else { ts.created_timestamp };
            st != 0 && st <= s.timestamp
        }));
        if !samples.is_empty() {
            out.0.push((labels, samples));
        }
    }
    Some(out)
}

/// Decodes `raw` with strata and, independently, with prost plus the reference rules. Where
/// prost accepts the bytes, both must agree exactly (including on rejecting the request).
fn differential(version: Version, raw: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
    let ours = prw::decode_uncompressed(version, raw, limits).map(summary);
    let reference = match version {
        Version::V1 => v1::WriteRequest::decode(raw).ok().map(|r| reference_v1(&r, limits)),
        Version::V2 => v2::Request::decode(raw).ok().map(|r| reference_v2(&r, limits)),
    };
    match (reference, ours) {
        // prost rejects the bytes: ours must not panic, either answer is acceptable (strata
        // skips the inside of exemplars and histograms and validates only referenced symbols).
        (None, _) => {}
        (Some(Some(want)), Ok(got)) => prop_assert_eq!(got, want),
        (Some(None), Err(_)) => {}
        (Some(want), got) => {
            prop_assert!(false, "reference {:?} but strata {:?}", want.is_some(), got.map(|_| ()))
        }
    }
    Ok(())
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-c_]{0,3}", 1 => Just("__name__".to_string()), 1 => text(4)]
}

fn arb_v1_request() -> impl Strategy<Value = v1::WriteRequest> {
    let label = || (arb_string(), arb_string()).prop_map(|(name, value)| v1::Label { name, value });
    let series = (
        proptest::collection::vec(label(), 0..5),
        proptest::collection::vec((any::<i64>(), any::<u64>()), 0..3),
        proptest::collection::vec(label(), 0..2),
        0usize..2,
    )
        .prop_map(|(labels, samples, ex_labels, n_hist)| v1::TimeSeries {
            labels,
            samples: samples.into_iter().map(|(t, b)| v1::Sample { value_bits: b, timestamp: t }).collect(),
            exemplars: if ex_labels.is_empty() {
                vec![]
            } else {
                vec![v1::Exemplar { labels: ex_labels, value: 1.0, timestamp: 2 }]
            },
            histograms: (0..n_hist)
                .map(|i| v1::Histogram {
                    timestamp: i as i64,
                    sum_bits: 1f64.to_bits(),
                    ..Default::default()
                })
                .collect(),
        });
    let md = (0i32..9, arb_string(), arb_string(), arb_string())
        .prop_map(|(t, n, h, u)| v1::MetricMetadata { r#type: t, metric_family_name: n, help: h, unit: u });
    (proptest::collection::vec(series, 0..6), proptest::collection::vec(md, 0..2))
        .prop_map(|(timeseries, metadata)| v1::WriteRequest { timeseries, metadata })
}

fn arb_v2_request() -> impl Strategy<Value = v2::Request> {
    let series = (
        proptest::collection::vec(0u32..8, 0..7),
        proptest::collection::vec(
            (any::<i64>(), any::<u64>(), prop_oneof![3 => Just(0i64), 1 => any::<i64>()]),
            0..3,
        ),
        proptest::option::of((0i32..9, 0u32..7, 0u32..7)),
        proptest::collection::vec(0u32..8, 0..3),
        prop_oneof![3 => Just(0i64), 1 => any::<i64>()],
        0usize..2,
    )
        .prop_map(|(labels_refs, samples, md, ex_refs, created, n_hist)| v2::TimeSeries {
            labels_refs,
            samples: samples
                .into_iter()
                .map(|(t, b, st)| v2::Sample { value_bits: b, timestamp: t, start_timestamp: st })
                .collect(),
            histograms: (0..n_hist)
                .map(|i| v1::Histogram { timestamp: i as i64, ..Default::default() })
                .collect(),
            exemplars: if ex_refs.is_empty() {
                vec![]
            } else {
                vec![v2::Exemplar { labels_refs: ex_refs, value: 1.0, timestamp: 1 }]
            },
            metadata: md.map(|(t, h, u)| v2::Metadata { r#type: t, help_ref: h, unit_ref: u }),
            created_timestamp: created,
        });
    let symbols = prop_oneof![
        4 => proptest::collection::vec(arb_string(), 0..6).prop_map(|mut s| { s.insert(0, String::new()); s.insert(1, "__name__".into()); s }),
        1 => proptest::collection::vec(arb_string(), 0..6),
    ];
    (symbols, proptest::collection::vec(series, 0..6))
        .prop_map(|(symbols, timeseries)| v2::Request { symbols, timeseries })
}

/// Byte-level mutations: overwrite, insert, delete, truncate.
fn mutate(mut raw: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(pos, kind, byte) in edits {
        if raw.is_empty() {
            raw.push(byte);
            continue;
        }
        let i = pos % raw.len();
        match kind % 4 {
            0 => raw[i] = byte,
            1 => raw.insert(i, byte),
            2 => {
                raw.remove(i);
            }
            _ => raw.truncate(i),
        }
    }
    raw
}

fn small_limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        3 => Just(Limits::default()),
        1 => (1usize..6, 1usize..10, 0usize..10).prop_map(|(n, name, value)| Limits {
            labels_per_series_max: n,
            label_name_bytes_max: name,
            label_value_bytes_max: value,
            ..Limits::default()
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 50_000 } else { 500 }))]

    #[test]
    fn v1_agrees_with_prost(req in arb_v1_request(), limits in small_limits()) {
        differential(Version::V1, &req.encode_to_vec(), &limits)?;
    }

    #[test]
    fn v2_agrees_with_prost(req in arb_v2_request(), limits in small_limits()) {
        differential(Version::V2, &req.encode_to_vec(), &limits)?;
    }

    #[test]
    fn v1_mutated_never_panics_and_agrees(req in arb_v1_request(), edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..4)) {
        let raw = mutate(req.encode_to_vec(), &edits);
        differential(Version::V1, &raw, &Limits::default())?;
        let _ = prw::decode(Version::V1, &mutate(snappy(&req.encode_to_vec()), &edits), &Limits::default());
    }

    #[test]
    fn v2_mutated_never_panics_and_agrees(req in arb_v2_request(), edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..4)) {
        let raw = mutate(req.encode_to_vec(), &edits);
        differential(Version::V2, &raw, &Limits::default())?;
        let _ = prw::decode(Version::V2, &mutate(snappy(&req.encode_to_vec()), &edits), &Limits::default());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        for v in [Version::V1, Version::V2] {
            differential(v, &bytes, &Limits::default())?;
            let _ = prw::decode(v, &bytes, &Limits::default());
        }
    }
}

#[test]
fn label_floods_are_refused_while_collecting() {
    // One series with a million empty labels (`0a 00` each): refused at the limit, without
    // buffering a million pairs first.
    let mut ts = Vec::new();
    for _ in 0..1_000_000 {
        ts.extend([0x0a, 0x00]);
    }
    let mut raw = vec![0x0a];
    prost::encoding::encode_varint(ts.len() as u64, &mut raw);
    raw.extend(ts);
    let e = prw::decode_uncompressed(Version::V1, &raw, &Limits::default()).unwrap_err();
    assert!(matches!(e, Error::LimitExceeded { limit: "labels_per_series_max", value: 65, max: 64 }), "{e}");

    // The same in 2.0: a packed run of a million references.
    let mut refs = Vec::new();
    prost::encoding::encode_varint(1_000_000, &mut refs);
    refs.extend(std::iter::repeat_n(0x01, 1_000_000));
    let mut ts = vec![0x0a];
    ts.extend(refs);
    let mut raw = req_v2(SYMS, vec![]);
    raw.push(0x2a);
    prost::encoding::encode_varint(ts.len() as u64, &mut raw);
    raw.extend(ts);
    let e = prw::decode_uncompressed(Version::V2, &raw, &Limits::default()).unwrap_err();
    assert!(matches!(e, Error::LimitExceeded { limit: "labels_per_series_max", .. }), "{e}");
}
