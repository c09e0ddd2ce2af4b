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

fn request_v1(batch: &storage::Batch, metadata: &[MetricMetadata]) -> v1::WriteRequest {
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
    for (labels, samples) in &batch.series {
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
            histograms: Vec::new(),
            exemplars: Vec::new(),
            metadata,
            created_timestamp: 0,
        });
    }
    v2::Request { symbols: symbols.table, timeseries }
}
