//! Decoding a native histogram sample (`prometheus.Histogram` in remote write 1.0,
//! `io.prometheus.write.v2.Histogram` in 2.0: the same fields) into a [`FloatHistogram`].
//!
//! On the wire, buckets are spans (first offset absolute, later ones gaps after the previous
//! span) over either deltas (integer histograms: each bucket's count as the change from the
//! bucket before it, across spans) or absolute counts (float histograms). Storage keeps buckets
//! sparse as `(index, count)` with empty buckets left out (see [`FloatHistogram`]), so this
//! walks the spans once and drops zero counts.
//!
//! A histogram whose sum is the stale NaN is Prometheus' stale marker for a histogram series;
//! it becomes the float stale marker, which is how strata (and PromQL) ends any series.
//!
//! Validation follows Prometheus' own (`model/histogram`): the schema is `-4..=8` or `-53`
//! (custom buckets, with ascending finite bounds, no zero bucket and no negative buckets), the
//! spans cover exactly as many buckets as there are counts, later spans do not go backwards, no
//! bucket count is negative, and an integer histogram's count is the sum of its buckets (at
//! least that when the sum is NaN).

use std::fmt;

use storage::{CounterResetHint, FloatHistogram, STALE_NAN_BITS};

use super::wire::{FieldError, Reader, Value, WireType, wrong_type};

/// A decoded histogram sample.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HistogramSample {
    /// A histogram at its timestamp.
    Histogram(i64, FloatHistogram),
    /// A stale marker at its timestamp.
    Stale(i64),
}

/// Why a histogram was refused (the wire bytes were fine, the histogram is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HistogramError {
    /// The bytes are not a `Histogram` message.
    Field(FieldError),
    /// The histogram is not valid; the text says why.
    Invalid(String),
}

impl From<FieldError> for HistogramError {
    fn from(e: FieldError) -> Self {
        HistogramError::Field(e)
    }
}

impl From<super::wire::WireError> for HistogramError {
    fn from(e: super::wire::WireError) -> Self {
        HistogramError::Field(FieldError::Wire(e))
    }
}

impl fmt::Display for HistogramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistogramError::Field(e) => e.fmt(f),
            HistogramError::Invalid(e) => write!(f, "invalid native histogram: {e}"),
        }
    }
}

fn invalid(msg: impl Into<String>) -> HistogramError {
    HistogramError::Invalid(msg.into())
}

/// The repeated fields as they lie on the wire, read after the whole message.
#[derive(Default)]
struct Raw<'a> {
    count_int: Option<u64>,
    count_float: Option<f64>,
    sum: f64,
    schema: i32,
    zero_threshold: f64,
    zero_count_int: Option<u64>,
    zero_count_float: Option<f64>,
    negative_spans: Vec<(i32, u32)>,
    positive_spans: Vec<(i32, u32)>,
    negative_deltas: Vec<Value<'a>>,
    positive_deltas: Vec<Value<'a>>,
    negative_counts: Vec<Value<'a>>,
    positive_counts: Vec<Value<'a>>,
    custom_values: Vec<Value<'a>>,
    reset_hint: u64,
    timestamp: i64,
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// Decodes and validates one `Histogram` message.
pub(crate) fn decode(buf: &[u8]) -> Result<HistogramSample, HistogramError> {
    let mut raw = Raw::default();
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, Value::Varint(x)) => (raw.count_int, raw.count_float) = (Some(x), None),
            (2, Value::Fixed64(x)) => (raw.count_float, raw.count_int) = (Some(f64::from_bits(x)), None),
            (3, Value::Fixed64(x)) => raw.sum = f64::from_bits(x),
            (4, Value::Varint(x)) => raw.schema = unzigzag(x) as i32,
            (5, Value::Fixed64(x)) => raw.zero_threshold = f64::from_bits(x),
            (6, Value::Varint(x)) => (raw.zero_count_int, raw.zero_count_float) = (Some(x), None),
            (7, Value::Fixed64(x)) => {
                (raw.zero_count_float, raw.zero_count_int) = (Some(f64::from_bits(x)), None)
            }
            (8, Value::Len(b)) => raw.negative_spans.push(span(b)?),
            (11, Value::Len(b)) => raw.positive_spans.push(span(b)?),
            (9, v @ (Value::Len(_) | Value::Varint(_))) => raw.negative_deltas.push(v),
            (12, v @ (Value::Len(_) | Value::Varint(_))) => raw.positive_deltas.push(v),
            (10, v @ (Value::Len(_) | Value::Fixed64(_))) => raw.negative_counts.push(v),
            (13, v @ (Value::Len(_) | Value::Fixed64(_))) => raw.positive_counts.push(v),
            (16, v @ (Value::Len(_) | Value::Fixed64(_))) => raw.custom_values.push(v),
            (14, Value::Varint(x)) => raw.reset_hint = x,
            (15, Value::Varint(x)) => raw.timestamp = x as i64,
            (1 | 4 | 6 | 14 | 15, v) => return Err(wrong_type(field, &v, WireType::Varint).into()),
            (2 | 3 | 5 | 7 | 10 | 13 | 16, v) => return Err(wrong_type(field, &v, WireType::Fixed64).into()),
            (8 | 9 | 11 | 12, v) => return Err(wrong_type(field, &v, WireType::Len).into()),
            _ => {}
        }
    }
    let t = raw.timestamp;
    if raw.sum.to_bits() == STALE_NAN_BITS {
        return Ok(HistogramSample::Stale(t));
    }
    let float = raw.count_float.is_some();
    let schema = raw.schema;
    let custom = schema == FloatHistogram::CUSTOM_BUCKETS_SCHEMA;
    if !custom && !(-4..=8).contains(&schema) {
        return Err(invalid(format!("schema {schema} is neither -4..8 nor -53 (custom buckets)")));
    }
    let custom_values = doubles(&raw.custom_values)?;
    let mut h = FloatHistogram {
        counter_reset_hint: match raw.reset_hint {
            1 => CounterResetHint::Reset,
            2 => CounterResetHint::NotReset,
            3 => CounterResetHint::Gauge,
            _ => CounterResetHint::Unknown,
        },
        schema,
        zero_threshold: raw.zero_threshold,
        sum: raw.sum,
        ..FloatHistogram::default()
    };
    let (positive, positive_total) =
        buckets("positive", &raw.positive_spans, &raw.positive_deltas, &raw.positive_counts, float)?;
    let (negative, negative_total) =
        buckets("negative", &raw.negative_spans, &raw.negative_deltas, &raw.negative_counts, float)?;
    if custom {
        let ascending = custom_values.iter().zip(custom_values.iter().skip(1)).all(|(a, b)| a < b);
        if !ascending || custom_values.iter().any(|v| !v.is_finite()) {
            return Err(invalid(
                "custom bucket bounds (custom_values) must be finite and strictly ascending",
            ));
        }
        if let Some((i, _)) = positive.iter().find(|(i, _)| *i < 0 || *i as usize > custom_values.len()) {
            return Err(invalid(format!(
                "bucket index {i} outside the {} custom bounds (plus +Inf)",
                custom_values.len()
            )));
        }
        if !raw.negative_spans.is_empty() || negative_total > 0 {
            return Err(invalid("custom-bucket histograms have no negative buckets"));
        }
        let zc = raw.zero_count_float.unwrap_or(raw.zero_count_int.unwrap_or(0) as f64);
        if zc != 0.0 || raw.zero_threshold != 0.0 {
            return Err(invalid("custom-bucket histograms have no zero bucket"));
        }
    } else if !custom_values.is_empty() {
        return Err(invalid(format!("custom_values given for exponential schema {schema}")));
    }
    if float {
        h.count = raw.count_float.unwrap_or(0.0);
        h.zero_count = raw.zero_count_float.unwrap_or(raw.zero_count_int.unwrap_or(0) as f64);
    } else {
        let count = raw.count_int.unwrap_or(0);
        let zero = raw.zero_count_int.unwrap_or(0);
        let total = (positive_total as u128) + (negative_total as u128) + u128::from(zero);
        let mismatch = if raw.sum.is_nan() { total > u128::from(count) } else { total != u128::from(count) };
        if mismatch {
            return Err(invalid(format!("count {count} disagrees with the buckets' total {total}")));
        }
        h.count = count as f64;
        h.zero_count = zero as f64;
    }
    h.positive = positive;
    h.negative = negative;
    h.custom_values = custom_values;
    Ok(HistogramSample::Histogram(t, h))
}

/// A `BucketSpan`: (offset, length).
fn span(buf: &[u8]) -> Result<(i32, u32), FieldError> {
    let (mut offset, mut length) = (0i32, 0u32);
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, Value::Varint(x)) => offset = unzigzag(x) as i32,
            (2, Value::Varint(x)) => length = x as u32,
            (1 | 2, v) => return Err(wrong_type(field, &v, WireType::Varint)),
            _ => {}
        }
    }
    Ok((offset, length))
}

/// The values of a repeated `double` field, packed or not.
fn doubles(parts: &[Value<'_>]) -> Result<Vec<f64>, HistogramError> {
    let mut out = Vec::new();
    for v in parts {
        match v {
            Value::Fixed64(x) => out.push(f64::from_bits(*x)),
            Value::Len(b) => {
                if b.len() % 8 != 0 {
                    return Err(invalid("packed doubles not a multiple of 8 bytes"));
                }
                out.extend(b.chunks_exact(8).map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    f64::from_bits(u64::from_le_bytes(a))
                }));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The values of a repeated `sint64` field, packed or not.
fn sint64s(parts: &[Value<'_>]) -> Result<Vec<i64>, HistogramError> {
    let mut out = Vec::new();
    for v in parts {
        match v {
            Value::Varint(x) => out.push(unzigzag(*x)),
            Value::Len(b) => {
                let mut r = Reader::new(b);
                while !r.is_empty() {
                    out.push(unzigzag(r.varint()?));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Walks spans over deltas (integer) or counts (float) into sparse `(index, count)` buckets
/// without the empty ones, and their integer total (0 for float histograms).
fn buckets(
    side: &str,
    spans: &[(i32, u32)],
    deltas: &[Value<'_>],
    counts: &[Value<'_>],
    float: bool,
) -> Result<(Vec<(i32, f64)>, u64), HistogramError> {
    let values: Vec<f64>;
    let mut total = 0u64;
    if float {
        if !deltas.is_empty() {
            return Err(invalid(format!("float histogram with {side} deltas (integer histograms only)")));
        }
        values = doubles(counts)?;
        if let Some(c) = values.iter().find(|c| c.is_nan() || **c < 0.0) {
            return Err(invalid(format!("{side} bucket count {c} is negative or NaN")));
        }
    } else {
        if !counts.is_empty() {
            return Err(invalid(format!("integer histogram with {side} counts (float histograms only)")));
        }
        let mut running = 0i64;
        let mut v = Vec::new();
        for d in sint64s(deltas)? {
            running =
                running.checked_add(d).ok_or_else(|| invalid(format!("{side} bucket count overflows")))?;
            if running < 0 {
                return Err(invalid(format!("{side} bucket count {running} is negative")));
            }
            total = total.saturating_add(running as u64);
            v.push(running as f64);
        }
        values = v;
    }
    let covered: u64 = spans.iter().map(|(_, l)| u64::from(*l)).sum();
    if covered != values.len() as u64 {
        return Err(invalid(format!(
            "{side} spans cover {covered} buckets but {} bucket {} given",
            values.len(),
            if float { "counts" } else { "deltas" }
        )));
    }
    let mut out = Vec::with_capacity(values.len());
    let mut values = values.into_iter();
    let mut idx = 0i64;
    for (k, (offset, len)) in spans.iter().enumerate() {
        if k > 0 && *offset < 0 {
            return Err(invalid(format!("{side} span {k} has negative offset {offset}")));
        }
        idx += i64::from(*offset);
        for _ in 0..*len {
            let i =
                i32::try_from(idx).map_err(|_| invalid(format!("{side} bucket index {idx} out of range")))?;
            if let Some(c) = values.next()
                && c != 0.0
            {
                out.push((i, c));
            }
            idx += 1;
        }
    }
    Ok((out, total))
}
