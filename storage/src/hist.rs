//! Native histogram samples in storage: how they ride along the float path, and their encodings.
//!
//! A histogram sample at `t` is stored as two things:
//!
//! - a float sample at `t` whose value is the *histogram marker* ([`HISTOGRAM_MARKER_BITS`], a
//!   NaN payload nothing else writes), in the series' ordinary float samples; and
//! - the histogram itself, beside the samples of the same source (a head, a partition file, a
//!   WAL record), keyed by `t`.
//!
//! So everything the float path already does decides for histograms too, with no second copy of
//! the rules: which write wins at a timestamp (newest, float or histogram alike), out-of-order
//! merging, tombstones, retention, the accepted time window, "does this series have data in a
//! range". A histogram counts only where its source's float at `t` is the marker
//! ([`resolve`]); one replaced by a later float write is left behind and ignored, and sources
//! are merged by the float rule ([`merge`]). Float reads leave the markers out
//! ([`strip_markers`]). Stale markers stay plain floats: Prometheus ends a histogram series
//! with the float stale NaN.
//!
//! A client that sends a float with exactly the marker's bits has it read back as missing (it
//! is a signalling NaN with a payload no Prometheus client produces); documented in
//! `docs/format/histograms.md`.

use std::collections::BTreeMap;

use crate::encoding::bits::{BitReader, BitWriter};
use crate::encoding::varint::{get_u8, get_u64_le, get_uvarint, get_varint, put_uvarint, put_varint};
use crate::encoding::xor::XorState;
use crate::error::{Error, Result};
use crate::types::{CounterResetHint, FloatHistogram, HistogramSample, Sample};

/// The float bits standing for "a histogram sample is stored at this timestamp".
pub const HISTOGRAM_MARKER_BITS: u64 = 0x7ff0_0000_0000_0003;

/// True if `v` is the histogram marker (by bits).
#[inline]
pub fn is_marker(v: f64) -> bool {
    v.to_bits() == HISTOGRAM_MARKER_BITS
}

/// The histogram marker as an `f64`.
#[inline]
pub fn marker() -> f64 {
    f64::from_bits(HISTOGRAM_MARKER_BITS)
}

/// Removes the histogram markers from `out[from..]` (float reads never show them).
pub fn strip_markers(out: &mut Vec<Sample>, from: usize) {
    // Counting (no early exit) vectorises; `any` tested one sample per branch, a pass over
    // every sample read that cost 3-4 % of a decoding query.
    let markers = out.get(from..).map_or(0, |s| s.iter().fold(0, |n, s| n + usize::from(is_marker(s.v))));
    if markers > 0 {
        let mut i = 0;
        out.retain(|s| {
            i += 1;
            i <= from || !is_marker(s.v)
        });
    }
}

/// The histograms of one source resolved against that source's own float samples (sorted,
/// one per timestamp): for every marker sample, the histogram stored at its time. `lookup`
/// finds a stored histogram by time.
pub fn resolve<'h>(
    samples: &[Sample],
    mut lookup: impl FnMut(i64) -> Option<&'h FloatHistogram>,
    out: &mut Vec<HistogramSample>,
) {
    for s in samples.iter().filter(|s| is_marker(s.v)) {
        if let Some(h) = lookup(s.t) {
            out.push(HistogramSample { t: s.t, h: h.clone() });
        }
    }
}

/// Merges the histograms of several sources of one series, given in priority order (newest
/// last) as (the source's float samples, its resolved histograms): a timestamp holds what the
/// newest source holding it wrote, so a histogram shows only where that is a marker.
pub fn merge(sources: Vec<(Vec<Sample>, Vec<HistogramSample>)>, out: &mut Vec<HistogramSample>) {
    let mut by_t: BTreeMap<i64, Option<FloatHistogram>> = BTreeMap::new();
    for (samples, hists) in sources {
        let mut hists = hists.into_iter().peekable();
        for s in samples {
            while hists.next_if(|h| h.t < s.t).is_some() {}
            let h = if is_marker(s.v) { hists.next_if(|h| h.t == s.t).map(|h| h.h) } else { None };
            by_t.insert(s.t, h);
        }
    }
    out.extend(by_t.into_iter().filter_map(|(t, h)| h.map(|h| HistogramSample { t, h })));
}

fn hint_code(h: CounterResetHint) -> u8 {
    match h {
        CounterResetHint::Unknown => 0,
        CounterResetHint::Reset => 1,
        CounterResetHint::NotReset => 2,
        CounterResetHint::Gauge => 3,
    }
}

fn hint_of(code: u8) -> CounterResetHint {
    match code & 3 {
        1 => CounterResetHint::Reset,
        2 => CounterResetHint::NotReset,
        3 => CounterResetHint::Gauge,
        _ => CounterResetHint::Unknown,
    }
}

fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_bits().to_le_bytes());
}

fn get_f64(buf: &[u8], pos: &mut usize) -> Result<f64> {
    get_u64_le(buf, pos).map(f64::from_bits)
}

/// A count read from the input, checked against the bytes left (each item at least
/// `min_bytes`), so corrupt input cannot make us allocate much.
fn bounded(buf: &[u8], pos: &mut usize, min_bytes: usize) -> Result<usize> {
    let n = get_uvarint(buf, pos)?;
    if n.saturating_mul(min_bytes as u64) > buf.len().saturating_sub(*pos) as u64 {
        return Err(Error::Decode(format!("histogram count {n} exceeds the bytes left")));
    }
    Ok(n as usize)
}

fn put_indices(out: &mut Vec<u8>, buckets: &[(i32, f64)]) {
    put_uvarint(out, buckets.len() as u64);
    let mut prev = 0i64;
    for (i, _) in buckets {
        put_varint(out, i64::from(*i) - prev);
        prev = i64::from(*i);
    }
}

fn get_indices(buf: &[u8], pos: &mut usize) -> Result<Vec<i32>> {
    let n = bounded(buf, pos, 1)?;
    let mut out = Vec::with_capacity(n);
    let mut prev = 0i64;
    for k in 0..n {
        let i = prev.wrapping_add(get_varint(buf, pos)?);
        let i = i32::try_from(i).map_err(|_| Error::Decode(format!("bucket index {i} out of range")))?;
        if k > 0 && i64::from(i) <= prev {
            return Err(Error::Decode("bucket indices not ascending".into()));
        }
        out.push(i);
        prev = i64::from(i);
    }
    Ok(out)
}

/// Encodes one histogram, self-delimiting, every float bit-exact (the WAL's form; layout in
/// `docs/format/histograms.md`).
pub fn encode_one(h: &FloatHistogram, out: &mut Vec<u8>) {
    out.push(hint_code(h.counter_reset_hint));
    put_varint(out, i64::from(h.schema));
    for v in [h.zero_threshold, h.zero_count, h.count, h.sum] {
        put_f64(out, v);
    }
    for buckets in [&h.positive, &h.negative] {
        put_indices(out, buckets);
        for (_, c) in buckets.iter() {
            put_f64(out, *c);
        }
    }
    put_uvarint(out, h.custom_values.len() as u64);
    for v in &h.custom_values {
        put_f64(out, *v);
    }
}

/// Decodes what [`encode_one`] wrote at `*pos`. Total: never panics on any input.
pub fn decode_one(buf: &[u8], pos: &mut usize) -> Result<FloatHistogram> {
    let hint = get_u8(buf, pos)?;
    if hint > 3 {
        return Err(Error::Decode(format!("unknown counter reset hint {hint}")));
    }
    let schema = get_varint(buf, pos)?;
    let schema = i32::try_from(schema).map_err(|_| Error::Decode(format!("schema {schema} out of range")))?;
    let mut h = FloatHistogram { counter_reset_hint: hint_of(hint), schema, ..FloatHistogram::default() };
    h.zero_threshold = get_f64(buf, pos)?;
    h.zero_count = get_f64(buf, pos)?;
    h.count = get_f64(buf, pos)?;
    h.sum = get_f64(buf, pos)?;
    for k in 0..2 {
        let idx = get_indices(buf, pos)?;
        let mut buckets = Vec::with_capacity(idx.len());
        for i in idx {
            buckets.push((i, get_f64(buf, pos)?));
        }
        if k == 0 {
            h.positive = buckets;
        } else {
            h.negative = buckets;
        }
    }
    let n = bounded(buf, pos, 8)?;
    h.custom_values = (0..n).map(|_| get_f64(buf, pos)).collect::<Result<_>>()?;
    Ok(h)
}

/// True if two histograms share a bucket layout: what a chunk stores once.
fn same_layout(a: &FloatHistogram, b: &FloatHistogram) -> bool {
    a.schema == b.schema
        && a.zero_threshold.to_bits() == b.zero_threshold.to_bits()
        && a.positive.len() == b.positive.len()
        && a.negative.len() == b.negative.len()
        && a.positive.iter().zip(&b.positive).all(|(x, y)| x.0 == y.0)
        && a.negative.iter().zip(&b.negative).all(|(x, y)| x.0 == y.0)
        && a.custom_values.len() == b.custom_values.len()
        && a.custom_values.iter().zip(&b.custom_values).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The largest magnitude stored as an integer delta: every integer below it is exact in f64.
const MAX_INT: f64 = 9_007_199_254_740_992.0; // 2^53

fn is_int(v: f64) -> bool {
    v.fract() == 0.0 && v.abs() < MAX_INT && !(v == 0.0 && v.is_sign_negative())
}

/// The counts of a histogram in chunk column order: count, zero count, positive buckets,
/// negative buckets.
fn counts(h: &FloatHistogram) -> impl Iterator<Item = f64> + '_ {
    [h.count, h.zero_count]
        .into_iter()
        .chain(h.positive.iter().map(|b| b.1))
        .chain(h.negative.iter().map(|b| b.1))
}

/// Encodes histogram samples (ascending by time, unique) as chunks: a new chunk starts where
/// the bucket layout changes. Layout in `docs/format/histograms.md`: a chunk count, then per
/// chunk its byte length and bytes.
pub fn encode_chunks(samples: &[HistogramSample], out: &mut Vec<u8>) {
    let mut runs: Vec<&[HistogramSample]> = Vec::new();
    let mut start = 0;
    for i in 1..=samples.len() {
        if i == samples.len() || !same_layout(&samples[i].h, &samples[start].h) {
            runs.push(&samples[start..i]);
            start = i;
        }
    }
    put_uvarint(out, runs.len() as u64);
    let mut chunk = Vec::new();
    for run in runs {
        chunk.clear();
        encode_chunk(run, &mut chunk);
        put_uvarint(out, chunk.len() as u64);
        out.extend_from_slice(&chunk);
    }
}

/// One chunk: samples sharing a layout (non-empty).
fn encode_chunk(run: &[HistogramSample], out: &mut Vec<u8>) {
    let Some(first) = run.first() else { return };
    let ints = run.iter().all(|s| counts(&s.h).all(is_int));
    put_uvarint(out, run.len() as u64);
    out.push(u8::from(ints));
    let l = &first.h;
    put_varint(out, i64::from(l.schema));
    put_f64(out, l.zero_threshold);
    put_indices(out, &l.positive);
    put_indices(out, &l.negative);
    put_uvarint(out, l.custom_values.len() as u64);
    for v in &l.custom_values {
        put_f64(out, *v);
    }
    // Timestamps: the first, then deltas of deltas.
    let (mut prev_t, mut prev_d) = (0i64, 0i64);
    for (k, s) in run.iter().enumerate() {
        if k == 0 {
            put_varint(out, s.t);
        } else {
            let d = s.t.wrapping_sub(prev_t);
            put_varint(out, d.wrapping_sub(prev_d));
            prev_d = d;
        }
        prev_t = s.t;
    }
    // Hints, four per byte.
    for group in run.chunks(4) {
        out.push(
            group.iter().enumerate().fold(0u8, |b, (i, s)| b | hint_code(s.h.counter_reset_hint) << (2 * i)),
        );
    }
    let columns = 2 + l.positive.len() + l.negative.len();
    if ints {
        // Integer counts: per sample, each column's change since the previous sample.
        let mut prev = vec![0i64; columns];
        for s in run {
            for (c, v) in counts(&s.h).enumerate() {
                let v = v as i64;
                put_varint(out, v.wrapping_sub(prev[c]));
                prev[c] = v;
            }
        }
    }
    // Gorilla XOR bit stream: the sum, and in float mode every count column, per sample.
    let xor_columns = if ints { 1 } else { 1 + columns };
    let mut w = BitWriter::new(out);
    let mut states: Vec<XorState> = Vec::with_capacity(xor_columns);
    for (k, s) in run.iter().enumerate() {
        let values = std::iter::once(s.h.sum).chain(counts(&s.h).take(xor_columns - 1));
        for (c, v) in values.enumerate() {
            if k == 0 {
                w.write(v.to_bits(), 64);
                states.push(XorState::start(v.to_bits()));
            } else if let Some(st) = states.get_mut(c) {
                st.push(&mut w, v.to_bits());
            }
        }
    }
    drop(w);
}

/// Decodes what [`encode_chunks`] wrote at `*pos`, appending the samples in `[mint, maxt]` to
/// `out`. Total: never panics, allocation bounded by the input.
pub fn decode_chunks(
    buf: &[u8],
    pos: &mut usize,
    mint: i64,
    maxt: i64,
    out: &mut Vec<HistogramSample>,
) -> Result<()> {
    let n = bounded(buf, pos, 1)?;
    for _ in 0..n {
        let len = get_uvarint(buf, pos)? as usize;
        let chunk = buf
            .get(*pos..pos.saturating_add(len))
            .ok_or_else(|| Error::Decode("histogram chunk truncated".into()))?;
        *pos += len;
        decode_chunk(chunk, mint, maxt, out)?;
    }
    Ok(())
}

fn decode_chunk(buf: &[u8], mint: i64, maxt: i64, out: &mut Vec<HistogramSample>) -> Result<()> {
    let mut pos = 0;
    let n = bounded(buf, &mut pos, 1)?;
    let ints = match get_u8(buf, &mut pos)? {
        0 => false,
        1 => true,
        f => return Err(Error::Decode(format!("unknown histogram chunk flags {f}"))),
    };
    let schema = get_varint(buf, &mut pos)?;
    let schema = i32::try_from(schema).map_err(|_| Error::Decode(format!("schema {schema} out of range")))?;
    let zero_threshold = get_f64(buf, &mut pos)?;
    let positive = get_indices(buf, &mut pos)?;
    let negative = get_indices(buf, &mut pos)?;
    let ncustom = bounded(buf, &mut pos, 8)?;
    let custom_values: Vec<f64> = (0..ncustom).map(|_| get_f64(buf, &mut pos)).collect::<Result<_>>()?;
    let mut ts = Vec::with_capacity(n);
    let (mut t, mut d) = (0i64, 0i64);
    for k in 0..n {
        if k == 0 {
            t = get_varint(buf, &mut pos)?;
        } else {
            d = d.wrapping_add(get_varint(buf, &mut pos)?);
            t = t.wrapping_add(d);
        }
        ts.push(t);
    }
    let mut hints = Vec::with_capacity(n);
    for k in 0..n.div_ceil(4) {
        let b = get_u8(buf, &mut pos)?;
        for i in 0..4.min(n - 4 * k) {
            hints.push(hint_of(b >> (2 * i)));
        }
    }
    let columns = 2 + positive.len() + negative.len();
    if (columns as u64).saturating_mul(n as u64) > (buf.len() as u64).saturating_mul(8) + 64 {
        return Err(Error::Decode("histogram chunk too small for its columns".into()));
    }
    let mut values = vec![0f64; columns * n];
    if ints {
        let mut prev = vec![0i64; columns];
        for k in 0..n {
            for (c, p) in prev.iter_mut().enumerate() {
                *p = p.wrapping_add(get_varint(buf, &mut pos)?);
                values[k * columns + c] = *p as f64;
            }
        }
    }
    let xor_columns = if ints { 1 } else { 1 + columns };
    let mut sums = Vec::with_capacity(n);
    let mut r = BitReader::new(buf.get(pos..).unwrap_or_default());
    let mut states: Vec<XorState> = Vec::with_capacity(xor_columns);
    for k in 0..n {
        for c in 0..xor_columns {
            let bits = if k == 0 {
                let b = r.read(64)?;
                states.push(XorState::start(b));
                b
            } else {
                match states.get_mut(c) {
                    Some(st) => st.next(&mut r)?,
                    None => return Err(Error::Decode("histogram chunk column missing".into())),
                }
            };
            if c == 0 {
                sums.push(f64::from_bits(bits));
            } else {
                values[k * columns + c - 1] = f64::from_bits(bits);
            }
        }
    }
    for k in 0..n {
        if ts[k] < mint || ts[k] > maxt {
            continue;
        }
        let row = &values[k * columns..(k + 1) * columns];
        let (np, _) = (positive.len(), negative.len());
        out.push(HistogramSample {
            t: ts[k],
            h: FloatHistogram {
                counter_reset_hint: hints[k],
                schema,
                zero_threshold,
                zero_count: row[1],
                count: row[0],
                sum: sums[k],
                positive: positive.iter().copied().zip(row[2..2 + np].iter().copied()).collect(),
                negative: negative.iter().copied().zip(row[2 + np..].iter().copied()).collect(),
                custom_values: custom_values.clone(),
            },
        });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Histograms as remote write produces them: small sorted sparse buckets, integer or float
    /// counts, all schemas including custom buckets.
    pub(crate) fn histogram() -> impl Strategy<Value = FloatHistogram> {
        let count = prop_oneof![(0u32..1000).prop_map(f64::from), (0.0f64..1e6), Just(f64::NAN)];
        let buckets = proptest::collection::btree_map(-20i32..20, count.clone(), 0..6)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>());
        (
            0u8..4,
            prop_oneof![-4i32..=8, Just(FloatHistogram::CUSTOM_BUCKETS_SCHEMA)],
            buckets.clone(),
            buckets,
            count.clone(),
            count,
            any::<f64>(),
            proptest::collection::vec(-100.0f64..100.0, 0..4),
        )
            .prop_map(|(hint, schema, positive, negative, zc, c, sum, mut custom)| {
                custom.sort_by(f64::total_cmp);
                let nhcb = schema == FloatHistogram::CUSTOM_BUCKETS_SCHEMA;
                FloatHistogram {
                    counter_reset_hint: hint_of(hint),
                    schema,
                    zero_threshold: if nhcb { 0.0 } else { 1e-128 },
                    zero_count: if nhcb { 0.0 } else { zc },
                    count: c,
                    sum,
                    positive,
                    negative: if nhcb { Vec::new() } else { negative },
                    custom_values: if nhcb { custom } else { Vec::new() },
                }
            })
    }

    /// Bit-exact equality (NaN counts compare equal to themselves).
    pub(crate) fn same(a: &FloatHistogram, b: &FloatHistogram) -> bool {
        let mut x = Vec::new();
        let mut y = Vec::new();
        encode_one(a, &mut x);
        encode_one(b, &mut y);
        x == y
    }

    #[test]
    fn a_counter_with_a_stable_layout_is_one_small_chunk() {
        let samples: Vec<HistogramSample> = (0..120)
            .map(|k| HistogramSample {
                t: 1_000 + 15_000 * k,
                h: FloatHistogram {
                    schema: 3,
                    zero_threshold: 1e-128,
                    zero_count: k as f64,
                    count: (10 * k) as f64,
                    sum: 0.5 * k as f64,
                    positive: (0..10).map(|i| (i, (k + i as i64) as f64)).collect(),
                    ..FloatHistogram::default()
                },
            })
            .collect();
        let mut buf = Vec::new();
        encode_chunks(&samples, &mut buf);
        // About 15 bytes per histogram of 12 counters, against 8 bytes per counter raw.
        assert!(buf.len() < 20 * samples.len(), "{} bytes", buf.len());
        let mut out = Vec::new();
        decode_chunks(&buf, &mut 0, i64::MIN, i64::MAX, &mut out).unwrap();
        assert_eq!(out, samples);
    }

    #[test]
    fn strip_keeps_the_prefix() {
        let mut v = vec![Sample::new(1, marker()), Sample::new(2, 1.0), Sample::new(3, marker())];
        strip_markers(&mut v, 1);
        assert_eq!(v, vec![Sample::new(1, marker()), Sample::new(2, 1.0)]);
    }

    proptest! {
        #[test]
        fn one_round_trips(h in histogram()) {
            let mut buf = Vec::new();
            encode_one(&h, &mut buf);
            let mut pos = 0;
            let back = decode_one(&buf, &mut pos).unwrap();
            prop_assert_eq!(pos, buf.len());
            prop_assert!(same(&back, &h));
        }

        #[test]
        fn chunks_round_trip(
            hs in proptest::collection::vec(histogram(), 0..20),
            gaps in proptest::collection::vec(1i64..100_000, 20),
            mint in 0i64..2_000_000,
        ) {
            let mut t = 0;
            let samples: Vec<HistogramSample> = hs.into_iter().zip(gaps).map(|(h, g)| { t += g; HistogramSample { t, h } }).collect();
            let mut buf = Vec::new();
            encode_chunks(&samples, &mut buf);
            let mut out = Vec::new();
            let mut pos = 0;
            decode_chunks(&buf, &mut pos, mint, i64::MAX, &mut out).unwrap();
            prop_assert_eq!(pos, buf.len());
            let want: Vec<&HistogramSample> = samples.iter().filter(|s| s.t >= mint).collect();
            prop_assert_eq!(out.len(), want.len());
            for (a, b) in out.iter().zip(want) {
                prop_assert_eq!(a.t, b.t);
                prop_assert!(same(&a.h, &b.h), "{:?} != {:?}", a.h, b.h);
            }
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_one(&bytes, &mut 0);
            let _ = decode_chunks(&bytes, &mut 0, i64::MIN, i64::MAX, &mut Vec::new());
        }
    }
}
