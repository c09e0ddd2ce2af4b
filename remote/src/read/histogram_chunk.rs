//! Prometheus' native histogram chunk encodings, the `data` of a remote-read
//! [`Chunk`](super::proto::Chunk) of type `HISTOGRAM` (2, integer histograms) or
//! `FLOAT_HISTOGRAM` (3, float histograms): `tsdb/chunkenc/histogram.go`,
//! `float_histogram.go`, `histogram_meta.go` and `varbit.go`. A wire format that remote-read
//! clients decode; strata's own partition files store histograms their own way.
//!
//! Bits are written most significant first through the same writer as XOR chunks
//! ([`super::bits`], Prometheus' `bstream`). The full byte layout, with a worked example, is in
//! `docs/formats.md` ("Remote read: histogram chunks"):
//!
//! ```text
//! header   num samples <u16 BE> │ flags <u8>: counter-reset header in bits 7-6
//!          (00 unknown, 01 not a reset, 10 reset, 11 gauge), the rest 0
//! layout   zero threshold <byte 0 = 0 | byte e+243 = 2^(e-1) for e in -242..=11 | 255 + f64>
//!          schema <varbit int> │ positive spans, negative spans: count <varbit uint>, then
//!          per span length <varbit uint> offset <varbit int> │ schema -53 only: custom bounds:
//!          count <varbit uint>, per bound (v·1000 + 1) <varbit uint> or '0' + f64
//! sample 0 (integer) t <varbit int> │ count, zero count <varbit uint> │ sum <f64> │ each
//!          bucket (positive, then negative), delta to the previous bucket <varbit int>
//! sample 0 (float)   t <varbit int> │ count, zero count, sum, each bucket <f64>
//! sample n (integer) delta of delta of t, count, zero count <varbit int> │ sum XOR │
//!          each bucket's delta of delta (over time) of its delta to the previous bucket
//! sample n (float)   delta of delta of t <varbit int> │ count, zero count, sum, each
//!          bucket: XOR with its own previous value and leading/trailing window
//! varbit int: 0 → '0'; else the first width of 3, 6, 9, 12, 18, 25, 56 bits whose range
//!          -(2^(w-1) - 1) ..= 2^(w-1) holds it, after the prefix 10, 110, 1110, 11110, 111110,
//!          1111110, 11111110; else 11111111 + 64 bits (varbit uint: the same widths, 0..2^w)
//! ```
//!
//! All samples of a chunk share its layout (the first sample "dictates" it in Prometheus). We
//! give each chunk the union of its samples' buckets, writing 0 for a bucket a sample lacks:
//! what Prometheus' appender produces by recoding when new buckets appear. A chunk ends, as in
//! Prometheus' head, after [`SAMPLES_PER_CHUNK`] samples, and before a sample that cannot
//! continue it: another kind (integer/float), a gauge after a counter or the other way round,
//! another schema, zero threshold or custom bounds, or a counter reset (the sample's hint, or a
//! decrease of the count, the zero count or any bucket). A reader takes every sample after a
//! counter chunk's first as "not a reset", so a reset must start a chunk. The chunk's
//! counter-reset header is chosen as Prometheus' `AppendHistogram`/`AppendFloatHistogram` chooses
//! it (see [`header`]).

use storage::{CounterResetHint, FloatHistogram, HistogramSample};

use super::bits::BitWriter;
use super::proto::{CHUNK_FLOAT_HISTOGRAM, CHUNK_HISTOGRAM, Chunk};
use super::xor::{NO_WINDOW, SAMPLES_PER_CHUNK, fits, write_xor_value};
use crate::prw::is_integer;

/// The counter-reset header: the top two bits of a histogram chunk's third byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetHeader {
    /// `00`: a reader must detect resets against the previous chunk itself.
    Unknown,
    /// `01`: the chunk was cut without a counter reset.
    NotReset,
    /// `10`: the chunk starts with a counter reset.
    Reset,
    /// `11`: a gauge histogram chunk.
    Gauge,
}

impl ResetHeader {
    /// The header byte (Prometheus' `CounterResetHeader` constants).
    pub fn byte(self) -> u8 {
        match self {
            ResetHeader::Unknown => 0b0000_0000,
            ResetHeader::NotReset => 0b0100_0000,
            ResetHeader::Reset => 0b1000_0000,
            ResetHeader::Gauge => 0b1100_0000,
        }
    }
}

/// Encodes a series' histogram samples (timestamps increasing) as histogram chunks: `HISTOGRAM`
/// where every count is a whole number (as [`is_integer`] decides for remote write),
/// `FLOAT_HISTOGRAM` otherwise, at most [`SAMPLES_PER_CHUNK`] samples each.
pub fn histogram_chunks(samples: &[HistogramSample]) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut previous: Option<Previous<'_>> = None;
    let mut rest = samples;
    while let Some(first) = rest.first() {
        let integer = is_integer(&first.h);
        let gauge = is_gauge(&first.h);
        let mut len = 1;
        let mut ended = Cut::Incompatible;
        // Window `len - 1` pairs the chunk's last sample with the next one.
        for pair in rest.windows(2) {
            if len == SAMPLES_PER_CHUNK {
                ended = Cut::Full;
                break;
            }
            let [last, next] = pair else { break };
            let fits_layout = if gauge {
                same_layout_params(&last.h, &next.h)
            } else {
                detect(&last.h, &next.h) == ResetHeader::NotReset
            };
            if is_integer(&next.h) != integer || is_gauge(&next.h) != gauge || !fits_layout {
                break;
            }
            len += 1;
        }
        let (group, tail) = rest.split_at(len.min(rest.len()));
        let header = header(previous.as_ref(), &first.h, integer);
        let Some((chunk, last)) = encode(group, integer, header).zip(group.last()) else { break };
        chunks.push(chunk);
        previous = Some(Previous { h: &last.h, integer, gauge, ended });
        rest = tail;
    }
    chunks
}

/// Why a chunk ended: full, or the next sample could not continue it. For float histograms
/// Prometheus chooses the next chunk's header differently in the two cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Full,
    Incompatible,
}

/// The last sample of the previous chunk, and how that chunk was written and ended.
struct Previous<'a> {
    h: &'a FloatHistogram,
    integer: bool,
    gauge: bool,
    ended: Cut,
}

fn is_gauge(h: &FloatHistogram) -> bool {
    h.counter_reset_hint == CounterResetHint::Gauge
}

/// Same schema, zero threshold and (for custom buckets) bounds: what a gauge chunk needs.
fn same_layout_params(a: &FloatHistogram, b: &FloatHistogram) -> bool {
    a.schema == b.schema
        && a.zero_threshold == b.zero_threshold
        && (!b.uses_custom_buckets() || a.custom_values == b.custom_values)
}

/// Whether counter histogram `h` can follow `prev` in one chunk (`NotReset`), follows a counter
/// reset (`Reset`), or has another schema or zero threshold (`Unknown`), checked in the order of
/// Prometheus' `appendable`: the reset hint, the count, the schema and zero threshold, the
/// custom bounds, the zero count, then every bucket (one that decreased, or vanished while it
/// held observations, is a reset).
fn detect(prev: &FloatHistogram, h: &FloatHistogram) -> ResetHeader {
    if h.counter_reset_hint == CounterResetHint::Reset || h.count < prev.count {
        return ResetHeader::Reset;
    }
    if h.schema != prev.schema || h.zero_threshold != prev.zero_threshold {
        return ResetHeader::Unknown;
    }
    if h.uses_custom_buckets() && h.custom_values != prev.custom_values {
        return ResetHeader::Reset;
    }
    if h.zero_count < prev.zero_count
        || decreased(&prev.positive, &h.positive)
        || decreased(&prev.negative, &h.negative)
    {
        return ResetHeader::Reset;
    }
    ResetHeader::NotReset
}

/// Whether any bucket of `old` holds more than the same bucket of `new` (absent counts as 0).
/// Both are sorted by index.
fn decreased(old: &[(i32, f64)], new: &[(i32, f64)]) -> bool {
    let mut j = 0;
    for &(idx, count) in old {
        while new.get(j).is_some_and(|b| b.0 < idx) {
            j += 1;
        }
        let now = new.get(j).filter(|b| b.0 == idx).map_or(0.0, |b| b.1);
        if now < count {
            return true;
        }
    }
    false
}

/// The counter-reset header of a chunk starting with `h`, as Prometheus sets it: gauge for a
/// gauge histogram; reset for an explicit reset hint; unknown without a previous chunk of the
/// same kind; otherwise what comparing with the previous chunk's last sample finds (a previous
/// gauge chunk counts as "not a reset"). Integer chunks take that finding as it is
/// (`HistogramAppender.appendable`); float chunks only know "reset or not", and a float chunk
/// cut because its sample did not fit (rather than because the previous one was full) keeps the
/// unknown header unless it is a reset (`FloatHistogramAppender.AppendFloatHistogram`).
fn header(previous: Option<&Previous<'_>>, h: &FloatHistogram, integer: bool) -> ResetHeader {
    if is_gauge(h) {
        return ResetHeader::Gauge;
    }
    if h.counter_reset_hint == CounterResetHint::Reset {
        return ResetHeader::Reset;
    }
    let Some(prev) = previous.filter(|p| p.integer == integer) else {
        return ResetHeader::Unknown;
    };
    let found = if prev.gauge { ResetHeader::NotReset } else { detect(prev.h, h) };
    match (integer, found, prev.ended) {
        (true, found, _) => found,
        (false, ResetHeader::Reset, _) => ResetHeader::Reset,
        (false, _, Cut::Full) => ResetHeader::NotReset,
        (false, _, Cut::Incompatible) => ResetHeader::Unknown,
    }
}

/// One chunk of `samples` (all of one kind) with the union of their buckets as its layout;
/// `None` for no samples.
fn encode(samples: &[HistogramSample], integer: bool, header: ResetHeader) -> Option<Chunk> {
    let (first, last) = (samples.first()?, samples.last()?);
    let positive = union(samples.iter().map(|s| s.h.positive.as_slice()));
    let negative = union(samples.iter().map(|s| s.h.negative.as_slice()));
    let mut w = BitWriter::with_prefix(&[0, 0, header.byte()]);
    write_layout(&mut w, &first.h, &positive, &negative);
    let num = if integer {
        IntegerFields::write(&mut w, samples, &positive, &negative)
    } else {
        FloatFields::write(&mut w, samples, &positive, &negative)
    };
    let mut data = w.into_bytes();
    if let Some(count) = data.get_mut(..2) {
        count.copy_from_slice(&num.to_be_bytes());
    }
    Some(Chunk {
        min_time_ms: first.t,
        max_time_ms: last.t,
        r#type: if integer { CHUNK_HISTOGRAM } else { CHUNK_FLOAT_HISTOGRAM },
        data,
    })
}

/// Every bucket index any of `sides` uses, ascending.
fn union<'a>(sides: impl Iterator<Item = &'a [(i32, f64)]>) -> Vec<i32> {
    let mut all: Vec<i32> = sides.flat_map(|b| b.iter().map(|(i, _)| *i)).collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// `h`'s counts laid out on `layout` (0 where it has no bucket).
fn counts_on(layout: &[i32], buckets: &[(i32, f64)]) -> Vec<f64> {
    let mut j = 0;
    layout
        .iter()
        .map(|&idx| {
            while buckets.get(j).is_some_and(|b| b.0 < idx) {
                j += 1;
            }
            buckets.get(j).filter(|b| b.0 == idx).map_or(0.0, |b| b.1)
        })
        .collect()
}

/// Prometheus' `writeHistogramChunkLayout`.
fn write_layout(w: &mut BitWriter, h: &FloatHistogram, positive: &[i32], negative: &[i32]) {
    write_zero_threshold(w, h.zero_threshold);
    put_varbit_int(w, i64::from(h.schema));
    write_spans(w, positive);
    write_spans(w, negative);
    if h.uses_custom_buckets() {
        put_varbit_uint(w, h.custom_values.len() as u64);
        for &bound in &h.custom_values {
            write_custom_bound(w, bound);
        }
    }
}

/// Spans of consecutive indexes: the first span's offset is its first index, the others' the
/// gap since the previous span's end (`putHistogramChunkLayoutSpans`: length, then offset).
fn write_spans(w: &mut BitWriter, indexes: &[i32]) {
    let mut spans: Vec<(i64, u64)> = Vec::new();
    let mut next = 0i64;
    for (k, &idx) in indexes.iter().enumerate() {
        let idx = i64::from(idx);
        match spans.last_mut() {
            Some(span) if k > 0 && idx == next => span.1 += 1,
            _ => spans.push((idx - next, 1)),
        }
        next = idx + 1;
    }
    put_varbit_uint(w, spans.len() as u64);
    for (offset, length) in spans {
        put_varbit_uint(w, length);
        put_varbit_int(w, offset);
    }
}

/// `putZeroThreshold`: 0 as byte 0; a power of two `2^(e-1)` with `e` in `-242..=11` (Go's
/// `Frexp` gives fraction 0.5 and exponent `e`) as the byte `e + 243`; anything else as 255 and
/// the float's 64 bits.
fn write_zero_threshold(w: &mut BitWriter, threshold: f64) {
    if threshold == 0.0 {
        w.write_bits(0, 8);
        return;
    }
    let bits = threshold.to_bits();
    let mantissa = bits & ((1 << 52) - 1);
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let exp = biased - 1022;
    if threshold > 0.0 && threshold.is_normal() && mantissa == 0 && (-242..=11).contains(&exp) {
        w.write_bits((exp + 243) as u64, 8);
    } else {
        w.write_bits(255, 8);
        w.write_bits(bits, 64);
    }
}

/// `putCustomBound`: a bound in `0..=33554.43` that is a whole number of thousandths as
/// `round(v·1000) + 1` in varbit uint (never 0, so its first bit is 1); anything else as a `0`
/// bit and the float's 64 bits.
fn write_custom_bound(w: &mut BitWriter, bound: f64) {
    let scaled = bound * 1000.0;
    let whole_thousandths = {
        // Go: uint(math.Round(in*1000)) / 1000 == in.
        let i = scaled.round() as u64;
        i as f64 / 1000.0 == bound
    };
    if !(0.0..=33_554_430.0).contains(&scaled) || !whole_thousandths {
        w.write_bit(false);
        w.write_bits(bound.to_bits(), 64);
        return;
    }
    put_varbit_uint(w, scaled.round() as u64 + 1);
}

/// The varbit widths and their prefixes (`varbit.go`): a prefix of `k` ones and a zero for the
/// `k`-th width, eight ones for the full 64 bits.
const VARBIT_WIDTHS: [u32; 7] = [3, 6, 9, 12, 18, 25, 56];

/// `putVarbitInt`.
pub(crate) fn put_varbit_int(w: &mut BitWriter, v: i64) {
    if v == 0 {
        w.write_bit(false);
        return;
    }
    for (k, &width) in VARBIT_WIDTHS.iter().enumerate() {
        if fits(v, width) {
            write_prefix(w, k + 1);
            w.write_bits(v as u64, width);
            return;
        }
    }
    w.write_bits(0xff, 8);
    w.write_bits(v as u64, 64);
}

/// `putVarbitUint`.
pub(crate) fn put_varbit_uint(w: &mut BitWriter, v: u64) {
    if v == 0 {
        w.write_bit(false);
        return;
    }
    for (k, &width) in VARBIT_WIDTHS.iter().enumerate() {
        if v.leading_zeros() >= 64 - width {
            write_prefix(w, k + 1);
            w.write_bits(v, width);
            return;
        }
    }
    w.write_bits(0xff, 8);
    w.write_bits(v, 64);
}

/// `ones` one bits and a zero: `10`, `110`, ... (written as one call, as Go's `writeBits`).
fn write_prefix(w: &mut BitWriter, ones: usize) {
    let n = ones as u32 + 1;
    w.write_bits(((1u64 << ones) - 1) << 1, n);
}

/// The appender state of an integer histogram chunk (`HistogramAppender`).
struct IntegerFields {
    t: i64,
    t_delta: i64,
    count: u64,
    count_delta: i64,
    zero: u64,
    zero_delta: i64,
    sum_bits: u64,
    leading: u8,
    trailing: u8,
    /// Per bucket of the layout: its delta to the previous bucket, and how that changed.
    buckets: Vec<i64>,
    buckets_delta: Vec<i64>,
}

impl IntegerFields {
    /// Writes every sample; returns how many were written.
    fn write(w: &mut BitWriter, samples: &[HistogramSample], positive: &[i32], negative: &[i32]) -> u16 {
        let mut state = IntegerFields {
            t: 0,
            t_delta: 0,
            count: 0,
            count_delta: 0,
            zero: 0,
            zero_delta: 0,
            sum_bits: 0,
            leading: NO_WINDOW,
            trailing: 0,
            buckets: vec![0; positive.len() + negative.len()],
            buckets_delta: vec![0; positive.len() + negative.len()],
        };
        for (n, s) in samples.iter().enumerate() {
            let mut buckets = bucket_deltas(&counts_on(positive, &s.h.positive));
            buckets.extend(bucket_deltas(&counts_on(negative, &s.h.negative)));
            let count = s.h.count as u64;
            let zero = s.h.zero_count as u64;
            let sum_bits = s.h.sum.to_bits();
            if n == 0 {
                put_varbit_int(w, s.t);
                put_varbit_uint(w, count);
                put_varbit_uint(w, zero);
                w.write_bits(sum_bits, 64);
                for &b in &buckets {
                    put_varbit_int(w, b);
                }
            } else {
                let t_delta = s.t.wrapping_sub(state.t);
                let count_delta = (count as i64).wrapping_sub(state.count as i64);
                let zero_delta = (zero as i64).wrapping_sub(state.zero as i64);
                put_varbit_int(w, t_delta.wrapping_sub(state.t_delta));
                put_varbit_int(w, count_delta.wrapping_sub(state.count_delta));
                put_varbit_int(w, zero_delta.wrapping_sub(state.zero_delta));
                write_xor_value(w, sum_bits, state.sum_bits, &mut state.leading, &mut state.trailing);
                let previous = state.buckets.iter().zip(state.buckets_delta.iter_mut());
                for (&b, (&prev, prev_delta)) in buckets.iter().zip(previous) {
                    let delta = b.wrapping_sub(prev);
                    put_varbit_int(w, delta.wrapping_sub(*prev_delta));
                    *prev_delta = delta;
                }
                state.t_delta = t_delta;
                state.count_delta = count_delta;
                state.zero_delta = zero_delta;
            }
            state.t = s.t;
            state.count = count;
            state.zero = zero;
            state.sum_bits = sum_bits;
            state.buckets = buckets;
        }
        samples.len() as u16
    }
}

/// Integer bucket counts as Prometheus' `Histogram` holds them: the first absolute, each other
/// as its difference to the one before.
fn bucket_deltas(counts: &[f64]) -> Vec<i64> {
    let mut prev = 0i64;
    counts
        .iter()
        .map(|&c| {
            let c = c as i64;
            let d = c.wrapping_sub(prev);
            prev = c;
            d
        })
        .collect()
}

/// One float field's XOR state (`xorValue`).
#[derive(Clone, Copy)]
struct XorField {
    bits: u64,
    leading: u8,
    trailing: u8,
}

impl XorField {
    fn new(v: f64) -> Self {
        XorField { bits: v.to_bits(), leading: NO_WINDOW, trailing: 0 }
    }

    fn write(&mut self, w: &mut BitWriter, v: f64) {
        let bits = v.to_bits();
        write_xor_value(w, bits, self.bits, &mut self.leading, &mut self.trailing);
        self.bits = bits;
    }
}

/// The appender state of a float histogram chunk (`FloatHistogramAppender`).
struct FloatFields;

impl FloatFields {
    /// Writes every sample; returns how many were written.
    fn write(w: &mut BitWriter, samples: &[HistogramSample], positive: &[i32], negative: &[i32]) -> u16 {
        let mut t = 0i64;
        let mut t_delta = 0i64;
        let mut fields: Vec<XorField> = Vec::new();
        for (n, s) in samples.iter().enumerate() {
            let mut values = vec![s.h.count, s.h.zero_count, s.h.sum];
            values.extend(counts_on(positive, &s.h.positive));
            values.extend(counts_on(negative, &s.h.negative));
            if n == 0 {
                put_varbit_int(w, s.t);
                for &v in &values {
                    w.write_bits(v.to_bits(), 64);
                }
                fields = values.iter().map(|&v| XorField::new(v)).collect();
            } else {
                let delta = s.t.wrapping_sub(t);
                put_varbit_int(w, delta.wrapping_sub(t_delta));
                t_delta = delta;
                for (field, &v) in fields.iter_mut().zip(&values) {
                    field.write(w, v);
                }
            }
            t = s.t;
        }
        samples.len() as u16
    }
}

#[cfg(test)]
mod tests;
