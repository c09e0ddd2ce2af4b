//! A remote write 1.0 request (`prometheus.WriteRequest`) written series by series from
//! borrowed labels and samples, without building messages first: what the ingest log's
//! distributor re-encodes every float series of every request with. Going through the prost
//! messages ([`super::encode`]) copied every label string into an owned message and cost
//! several times the decoding of the request.
//!
//! Every field is written, zeros included (a sample's value keeps its exact bits: -0.0 too);
//! the decoder reads both forms.

use storage::{RawLabels, Sample};

/// The fields of `prometheus.WriteRequest`, `TimeSeries`, `Label` and `Sample` written here
/// (`docs/specs/prw/remote_write_spec.md`), as (field number << 3) | wire type.
const TIMESERIES: u8 = 1 << 3 | 2;
const TS_LABEL: u8 = 1 << 3 | 2;
const TS_SAMPLE: u8 = 2 << 3 | 2;
const LABEL_NAME: u8 = 1 << 3 | 2;
const LABEL_VALUE: u8 = 2 << 3 | 2;
const SAMPLE_VALUE: u8 = 1 << 3 | 1;
const SAMPLE_TIMESTAMP: u8 = 2 << 3;

/// An uncompressed remote write 1.0 request being written.
#[derive(Debug, Default)]
pub struct V1Writer {
    buf: Vec<u8>,
}

fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A length-delimited field's size: tag, length, bytes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn label_len(name: &[u8], value: &[u8]) -> usize {
    field_len(name.len()) + field_len(value.len())
}

fn sample_len(s: &Sample) -> usize {
    1 + 8 + 1 + varint_len(s.t as u64)
}

impl V1Writer {
    /// An empty request.
    pub fn new() -> V1Writer {
        V1Writer::default()
    }

    /// An empty request with room for `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> V1Writer {
        V1Writer { buf: Vec::with_capacity(bytes) }
    }

    /// Appends one series (a `TimeSeries`) with its float samples.
    pub fn series(&mut self, labels: RawLabels<'_>, samples: &[Sample]) {
        let body: usize = labels.iter().map(|(n, v)| field_len(label_len(n, v))).sum::<usize>()
            + samples.iter().map(|s| field_len(sample_len(s))).sum::<usize>();
        let out = &mut self.buf;
        out.reserve(field_len(body));
        out.push(TIMESERIES);
        put_varint(out, body as u64);
        for (name, value) in labels.iter() {
            out.push(TS_LABEL);
            put_varint(out, label_len(name, value) as u64);
            out.push(LABEL_NAME);
            put_varint(out, name.len() as u64);
            out.extend_from_slice(name);
            out.push(LABEL_VALUE);
            put_varint(out, value.len() as u64);
            out.extend_from_slice(value);
        }
        for s in samples {
            out.push(TS_SAMPLE);
            put_varint(out, sample_len(s) as u64);
            out.push(SAMPLE_VALUE);
            out.extend_from_slice(&s.v.to_bits().to_le_bytes());
            out.push(SAMPLE_TIMESTAMP);
            put_varint(out, s.t as u64);
        }
    }

    /// Whether no series was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The request's bytes (uncompressed protobuf).
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use storage::BatchRef;

    use super::*;
    use crate::Limits;

    /// A series as written: label pairs, (timestamp, value bits).
    type Written = (Vec<(String, String)>, Vec<(i64, u64)>);
    use crate::prw::{Version, decode_uncompressed};

    proptest! {
        /// What the writer writes decodes to the series written, bits of every value and
        /// timestamps at the extremes included.
        #[test]
        fn written_series_decode_to_themselves(
            series in proptest::collection::vec(
                (proptest::collection::btree_map("[a-z_]{1,6}", "[a-zA-Z0-9 é]{1,8}", 0..4),
                 proptest::collection::vec((any::<i64>(), any::<u64>()), 0..5)),
                0..6),
        ) {
            let names: Vec<String> = (0..series.len()).map(|i| format!("m{i}")).collect();
            let mut batch = BatchRef::new();
            let mut want = Vec::new();
            for ((labels, samples), name) in series.iter().zip(&names) {
                let mut pairs: Vec<(&str, &str)> = vec![("__name__", name.as_str())];
                pairs.extend(labels.iter().map(|(n, v)| (n.as_str(), v.as_str())));
                pairs.sort();
                let samples: Vec<Sample> = samples.iter().map(|&(t, bits)| Sample::new(t, f64::from_bits(bits))).collect();
                let owned: Vec<(String, String)> = pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
                // A series without samples carries nothing: the decoder leaves it out.
                if !samples.is_empty() {
                    want.push((owned, samples.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>()));
                }
                batch.push(pairs, samples);
            }
            let mut w = V1Writer::new();
            for (labels, samples) in batch.iter() {
                w.series(labels, samples);
            }
            let decoded = decode_uncompressed(Version::V1, &w.finish(), &Limits::default()).unwrap();
            let got: Vec<Written> = decoded
                .batch
                .series
                .iter()
                .map(|(l, s)| {
                    (l.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect(),
                     s.iter().map(|s| (s.t, s.v.to_bits())).collect())
                })
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
