//! Our own sender side: a batch and metadata to a snappy-compressed request body.
//!
//! Used by tests, by benchmark loaders and by the remote write 2.0 end-to-end test (Prometheus
//! 2.42 cannot send 2.0). It goes through the prost messages, so it doubles as an independent
//! check of the hand-written decoder.

use std::collections::HashMap;

use prost::Message;

use super::{Version, proto_v1 as v1, proto_v2 as v2};
use crate::metadata::MetricMetadata;

/// Encodes `batch` (and `metadata`) as a snappy-compressed request of `version`.
///
/// In 2.0, metadata travels with series: an entry is attached to every series whose `__name__`
/// equals its `metric_family_name`, and entries without such a series are not sent.
///
/// # Panics
/// If the encoded request exceeds snappy's block limit of 4 GiB - 1; senders split batches far
/// below that.
pub fn encode(version: Version, batch: &storage::Batch, metadata: &[MetricMetadata]) -> Vec<u8> {
    let raw = encode_uncompressed(version, batch, metadata);
    match snap::raw::Encoder::new().compress_vec(&raw) {
        Ok(body) => body,
        Err(e) => panic!("remote write request of {} bytes cannot be snappy-compressed: {e}", raw.len()),
    }
}

/// Encodes the protobuf message of [`encode`] without compressing it.
pub fn encode_uncompressed(version: Version, batch: &storage::Batch, metadata: &[MetricMetadata]) -> Vec<u8> {
    match version {
        Version::V1 => request_v1(batch, metadata).encode_to_vec(),
        Version::V2 => request_v2(batch, metadata).encode_to_vec(),
    }
}

/// Whether `h` can travel as an integer histogram: every count a whole number (below 2^53, so
/// exact; not -0.0, which an integer would turn into 0.0) and the count the buckets' total (or
/// at least it, when NaN observations make the sum NaN), as Prometheus' integer histograms
/// always are.
pub fn is_integer(h: &storage::FloatHistogram) -> bool {
    let whole = |v: f64| v.is_sign_positive() && v.fract() == 0.0 && v < 9.0e15;
    let total: f64 = h.zero_count + h.positive.iter().chain(&h.negative).map(|b| b.1).sum::<f64>();
    whole(h.count)
        && whole(h.zero_count)
        && h.positive.iter().chain(&h.negative).all(|b| whole(b.1))
        && (total == h.count || (h.sum.is_nan() && total <= h.count))
}

/// A native histogram sample as the wire message: an integer histogram (bucket deltas) when
/// every count is a whole number and the count is the buckets' total, as Prometheus' integer
/// histograms always are; a float histogram (absolute counts) otherwise.
pub fn histogram_message(s: &storage::HistogramSample) -> v1::Histogram {
    use v1::histogram::{Count, ZeroCount};
    let h = &s.h;
    let integer = is_integer(h);
    let spans = |buckets: &[(i32, f64)]| {
        let mut spans: Vec<v1::BucketSpan> = Vec::new();
        let mut next = 0i64;
        for (k, (i, _)) in buckets.iter().enumerate() {
            let i = i64::from(*i);
            match spans.last_mut() {
                Some(span) if k > 0 && i == next => span.length += 1,
                _ => spans.push(v1::BucketSpan { offset: (i - next) as i32, length: 1 }),
            }
            next = i + 1;
        }
        spans
    };
    let deltas = |buckets: &[(i32, f64)]| {
        let mut prev = 0i64;
        buckets
            .iter()
            .map(|b| {
                let c = b.1 as i64;
                let d = c - prev;
                prev = c;
                d
            })
            .collect::<Vec<_>>()
    };
    let counts = |buckets: &[(i32, f64)]| buckets.iter().map(|b| b.1).collect::<Vec<_>>();
    v1::Histogram {
        count: Some(if integer { Count::CountInt(h.count as u64) } else { Count::CountFloat(h.count) }),
        sum_bits: h.sum.to_bits(),
        schema: h.schema,
        zero_threshold_bits: h.zero_threshold.to_bits(),
        zero_count: Some(if integer {
            ZeroCount::ZeroCountInt(h.zero_count as u64)
        } else {
            ZeroCount::ZeroCountFloat(h.zero_count)
        }),
        negative_spans: spans(&h.negative),
        negative_deltas: if integer { deltas(&h.negative) } else { Vec::new() },
        negative_counts: if integer { Vec::new() } else { counts(&h.negative) },
        positive_spans: spans(&h.positive),
        positive_deltas: if integer { deltas(&h.positive) } else { Vec::new() },
        positive_counts: if integer { Vec::new() } else { counts(&h.positive) },
        reset_hint: match h.counter_reset_hint {
            storage::CounterResetHint::Unknown => 0,
            storage::CounterResetHint::Reset => 1,
            storage::CounterResetHint::NotReset => 2,
            storage::CounterResetHint::Gauge => 3,
        },
        timestamp: s.t,
        custom_values: h.custom_values.clone(),
    }
}

fn request_v1(batch: &storage::Batch, metadata: &[MetricMetadata]) -> v1::WriteRequest {
    let label_pairs = |labels: &storage::Labels| {
        labels.iter().map(|l| v1::Label { name: l.name.to_string(), value: l.value.to_string() }).collect()
    };
    let histogram_series = batch.histograms.iter().map(|(labels, hists)| v1::TimeSeries {
        labels: label_pairs(labels),
        samples: Vec::new(),
        exemplars: Vec::new(),
        histograms: hists.iter().map(histogram_message).collect(),
    });
    v1::WriteRequest {
        timeseries: batch
            .series
            .iter()
            .map(|(labels, samples)| v1::TimeSeries {
                labels: labels
                    .iter()
                    .map(|l| v1::Label { name: l.name.to_string(), value: l.value.to_string() })
                    .collect(),
                samples: samples
                    .iter()
                    .map(|s| v1::Sample { value_bits: s.v.to_bits(), timestamp: s.t })
                    .collect(),
                exemplars: Vec::new(),
                histograms: Vec::new(),
            })
            .chain(histogram_series)
            .collect(),
        metadata: metadata
            .iter()
            .map(|m| v1::MetricMetadata {
                r#type: m.metric_type.to_wire(),
                metric_family_name: m.metric_family_name.clone(),
                help: m.help.clone(),
                unit: m.unit.clone(),
            })
            .collect(),
    }
}

/// Builds the symbol table: `""` first, as the spec requires, then each string once.
#[derive(Default)]
struct Symbols<'a> {
    index: HashMap<&'a str, u32>,
    table: Vec<String>,
}

impl<'a> Symbols<'a> {
    fn new() -> Self {
        let mut s = Symbols::default();
        s.add("");
        s
    }

    fn add(&mut self, s: &'a str) -> u32 {
        let next = self.table.len() as u32;
        *self.index.entry(s).or_insert_with(|| {
            self.table.push(s.to_owned());
            next
        })
    }
}

fn request_v2(batch: &storage::Batch, metadata: &[MetricMetadata]) -> v2::Request {
    let by_family: HashMap<&str, &MetricMetadata> =
        metadata.iter().map(|m| (m.metric_family_name.as_str(), m)).collect();
    let mut symbols = Symbols::new();
    let mut timeseries = Vec::with_capacity(batch.series.len());
    let no_samples: Vec<storage::Sample> = Vec::new();
    let no_hists: Vec<storage::HistogramSample> = Vec::new();
    let all = batch
        .series
        .iter()
        .map(|(l, s)| (l, s, &no_hists))
        .chain(batch.histograms.iter().map(|(l, h)| (l, &no_samples, h)));
    for (labels, samples, hists) in all {
        let mut labels_refs = Vec::with_capacity(2 * labels.len());
        for l in labels {
            labels_refs.push(symbols.add(&l.name));
            labels_refs.push(symbols.add(&l.value));
        }
        let metadata = labels.metric_name().and_then(|n| by_family.get(n)).map(|m| v2::Metadata {
            r#type: m.metric_type.to_wire(),
            help_ref: symbols.add(&m.help),
            unit_ref: symbols.add(&m.unit),
        });
        timeseries.push(v2::TimeSeries {
            labels_refs,
            samples: samples
                .iter()
                .map(|s| v2::Sample { value_bits: s.v.to_bits(), timestamp: s.t, start_timestamp: 0 })
                .collect(),
            histograms: hists.iter().map(histogram_message).collect(),
            exemplars: Vec::new(),
            metadata,
            created_timestamp: 0,
        });
    }
    v2::Request { symbols: symbols.table, timeseries }
}
