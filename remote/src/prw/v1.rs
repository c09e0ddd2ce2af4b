//! Decoding `prometheus.WriteRequest` (remote write 1.0) straight into a [`storage::Batch`].
//!
//! One pass over the decompressed bytes: label strings stay borrowed until the series is
//! validated, then each distinct string is allocated once per request ([`Interner`]). Unknown
//! fields are skipped, as protobuf requires; a known field with the wrong wire type is an error.

use storage::Sample;

use super::Decoded;
use super::labels::{Interner, SeriesLabels, Str};
use super::wire::{FieldError, Reader, Value, WireType, at, wrong_type};
use crate::metadata::{MetricMetadata, MetricType};
use crate::{Limits, Result};

/// Decodes an uncompressed `WriteRequest`.
pub(super) fn decode(buf: &[u8], limits: &Limits) -> Result<Decoded> {
    let mut out = Decoded::default();
    let mut scratch = Scratch::default();
    let mut r = Reader::new(buf);
    let (mut n_series, mut n_metadata) = (0usize, 0usize);
    while let Some((field, value)) = r.next_field().map_err(|e| at("WriteRequest", e))? {
        match (field, value) {
            (1, Value::Len(b)) => {
                series(b, n_series, &mut scratch, limits, &mut out)?;
                n_series += 1;
            }
            (3, Value::Len(b)) => {
                out.metadata.push(metadata(b).map_err(|e| at(format_args!("metadata[{n_metadata}]"), e))?);
                n_metadata += 1;
            }
            (1 | 3, v) => return Err(at("WriteRequest", wrong_type(field, &v, WireType::Len))),
            _ => {}
        }
    }
    Ok(out)
}

/// Buffers reused from one series to the next.
#[derive(Default)]
struct Scratch<'a> {
    labels: SeriesLabels<'a>,
    samples: Vec<Sample>,
    strings: Interner<'a>,
}

/// Decodes `timeseries[i]` and appends it to `out`.
fn series<'a>(
    buf: &'a [u8],
    i: usize,
    s: &mut Scratch<'a>,
    limits: &Limits,
    out: &mut Decoded,
) -> Result<()> {
    s.labels.clear();
    s.samples.clear();
    let mut r = Reader::new(buf);
    loop {
        let next = r.next_field().map_err(|e| at(format_args!("timeseries[{i}]"), e))?;
        let Some((field, value)) = next else { break };
        match (field, value) {
            (1, Value::Len(b)) => {
                let (name, value) = label(b)
                    .map_err(|e| at(format_args!("timeseries[{i}].labels[{}]", s.labels.len()), e))?;
                s.labels.push(Str::bytes(name), Str::bytes(value));
                s.labels.check_count(limits)?;
            }
            (2, Value::Len(b)) => {
                let sample = sample(b)
                    .map_err(|e| at(format_args!("timeseries[{i}].samples[{}]", s.samples.len()), e))?;
                s.samples.push(sample);
            }
            (3, Value::Len(_)) => out.exemplars += 1,
            (4, Value::Len(_)) => out.histograms += 1,
            (1..=4, v) => {
                return Err(at(format_args!("timeseries[{i}]"), wrong_type(field, &v, WireType::Len)));
            }
            _ => {}
        }
    }
    let labels = s.labels.build(&mut s.strings, limits)?;
    out.samples += s.samples.len() as u64;
    if !s.samples.is_empty() {
        out.batch.push(labels, s.samples.clone());
    }
    Ok(())
}

/// Decodes a `Label`: `(name, value)`, both possibly empty, still unvalidated bytes.
#[inline]
fn label(buf: &[u8]) -> Result<(&[u8], &[u8]), FieldError> {
    // Fast path for the encoding every sender produces: `0a <n> name 12 <m> value` with both
    // lengths below 128 (one-byte varints).
    if let [0x0a, n, rest @ ..] = buf
        && *n < 0x80
        && let Some((name, rest)) = rest.split_at_checked(usize::from(*n))
    {
        match rest {
            [] => return Ok((name, &[])),
            [0x12, m, value @ ..] if *m < 0x80 && value.len() == usize::from(*m) => return Ok((name, value)),
            _ => {}
        }
    }
    let (mut name, mut value): (&[u8], &[u8]) = (&[], &[]);
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, Value::Len(b)) => name = b,
            (2, Value::Len(b)) => value = b,
            (1 | 2, v) => return Err(wrong_type(field, &v, WireType::Len)),
            _ => {}
        }
    }
    Ok((name, value))
}

/// Decodes a `Sample`; absent fields are zero, as in proto3.
#[inline]
pub(super) fn sample(buf: &[u8]) -> Result<Sample, FieldError> {
    // Fast path for the usual encoding: `09 <8-byte value> 10 <timestamp varint>`.
    if let [0x09, b0, b1, b2, b3, b4, b5, b6, b7, 0x10, ts @ ..] = buf {
        let mut r = Reader::new(ts);
        if let Ok(t) = r.varint()
            && r.is_empty()
        {
            let v = f64::from_bits(u64::from_le_bytes([*b0, *b1, *b2, *b3, *b4, *b5, *b6, *b7]));
            return Ok(Sample::new(t as i64, v));
        }
    }
    let mut s = Sample::new(0, 0.0);
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, Value::Fixed64(bits)) => s.v = f64::from_bits(bits),
            (2, Value::Varint(t)) => s.t = t as i64,
            (1, v) => return Err(wrong_type(field, &v, WireType::Fixed64)),
            (2, v) => return Err(wrong_type(field, &v, WireType::Varint)),
            _ => {}
        }
    }
    Ok(s)
}

/// Decodes a `MetricMetadata`.
fn metadata(buf: &[u8]) -> Result<MetricMetadata, FieldError> {
    let mut md = MetricMetadata::default();
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            // An int32 enum: the varint's low 32 bits, as protobuf decoders read it.
            (1, Value::Varint(t)) => md.metric_type = MetricType::from_wire(t as i32),
            (2, Value::Len(b)) => md.metric_family_name = utf8(2, b)?,
            (4, Value::Len(b)) => md.help = utf8(4, b)?,
            (5, Value::Len(b)) => md.unit = utf8(5, b)?,
            (1, v) => return Err(wrong_type(field, &v, WireType::Varint)),
            (2 | 4 | 5, v) => return Err(wrong_type(field, &v, WireType::Len)),
            _ => {}
        }
    }
    Ok(md)
}

/// A string field's bytes as an owned `String`.
pub(super) fn utf8(field: u32, b: &[u8]) -> Result<String, FieldError> {
    std::str::from_utf8(b).map(str::to_owned).map_err(|_| FieldError::Utf8 { field })
}
