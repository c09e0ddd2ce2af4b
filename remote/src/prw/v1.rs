//! Decoding `prometheus.WriteRequest` (remote write 1.0) straight into a [`storage::BatchRef`].
//!
//! One pass over the decompressed bytes, no allocation per series: the batch borrows label
//! strings where they lie. Unknown fields are skipped, as protobuf requires; a known field with
//! the wrong wire type is an error.
//!
//! UTF-8: a series in the usual encoding ([`series_fast`]) goes into the batch as unchecked
//! bytes, and storage checks them only if the series is new (a known series' bytes equal its
//! stored, valid strings; see `storage::RawLabels`). Checking them here cost about 100
//! instructions a series, a tenth of decoding. Every other series is checked here.

use storage::{BatchRef, METRIC_NAME, Sample, stale_nan};

use super::DecodedRef;
use super::histogram::{self, HistogramError, HistogramSample};
use super::labels::{SeriesLabels, Str, Utf8Span};
use super::wire::{FieldError, Reader, Value, WireType, at, wrong_type};
use crate::metadata::{MetricMetadata, MetricType};
use crate::{Limits, Result};

/// Decodes an uncompressed `WriteRequest`.
pub(super) fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Result<DecodedRef<'a>> {
    let mut out = DecodedRef { batch: batch_for(buf), ..DecodedRef::default() };
    let mut scratch = Scratch {
        labels: SeriesLabels::default(),
        samples: Vec::new(),
        hists: Vec::new(),
        strings: Utf8Span::new(),
    };
    let mut r = Reader::new(buf);
    let (mut n_series, mut n_metadata) = (0usize, 0usize);
    loop {
        // `timeseries` entries as senders write them (`0a`, a length below 16 KiB) are taken
        // without the general field reader.
        let (field, value) = match r.len_field_short(0x0a) {
            Some(b) => (1, Value::Len(b)),
            None => match r.next_field().map_err(|e| at("WriteRequest", e))? {
                Some(f) => f,
                None => break,
            },
        };
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

/// An empty batch with room for the request's series, so that filling it does not copy it
/// as it grows. The room is estimated from the request's size: series and label pairs from the
/// size of node-exporter data (a series of five labels and one sample takes about 130 bytes, a
/// label about 24); samples from their own size, 18 bytes as senders write them (`12 10 09
/// <8-byte value> 10 <timestamp>`, a millisecond timestamp of today taking 6 bytes), so that a
/// request of many samples per series (40 per series at 1,000 TSBS hosts grew the vector
/// twice, copying it and faulting in fresh pages, a tenth of the request path) fits too. What
/// is reserved is about the request's own size; pages never written cost no memory.
fn batch_for(buf: &[u8]) -> BatchRef<'_> {
    BatchRef::with_capacity(buf.len() / 96, buf.len() / 24, buf.len() / 16)
}

/// Buffers reused from one series to the next.
struct Scratch<'a> {
    labels: SeriesLabels<'a>,
    samples: Vec<Sample>,
    /// Native histograms (and their stale markers) of the series.
    hists: Vec<HistogramSample>,
    strings: Utf8Span<'a>,
}

/// Decodes `timeseries[i]` and appends it to `out`.
fn series<'a>(
    buf: &'a [u8],
    i: usize,
    s: &mut Scratch<'a>,
    limits: &Limits,
    out: &mut DecodedRef<'a>,
) -> Result<()> {
    if series_fast(buf, limits, out) {
        return Ok(());
    }
    series_in_full(buf, i, s, limits, out)
}

/// Decodes a series written the way senders write them, in one pass, and returns true; or
/// returns false, having added nothing, for anything else, which [`series_in_full`] then
/// decodes. The way: labels first, each `0a <len> 0a <n> name [12 <m> value]` with one-byte
/// lengths, sorted by name, within the limits, with a non-empty `__name__`; then samples, each
/// `12 <len> 09 <value> 10 <timestamp>`; nothing else. Every series this accepts is one
/// `series_in_full` accepts with the same result if its strings are UTF-8; it only skips work
/// it would do. The strings are not checked as UTF-8: storage checks those of new series.
fn series_fast<'a>(buf: &'a [u8], limits: &Limits, out: &mut DecodedRef<'a>) -> bool {
    // Where the labels end: each is `0a <len> <Label>`.
    let mut rest = buf;
    while let [0x0a, len, tail @ ..] = rest
        && *len < 0x80
        && let Some((_, after)) = tail.split_at_checked(usize::from(*len))
    {
        rest = after;
    }
    let Some(bytes) = buf.get(..buf.len() - rest.len()) else { return false };
    // The series goes straight into the batch; returning early drops `series`, which takes it
    // out again.
    let mut series = out.batch.series();
    let (mut at, mut count) = (0usize, 0usize);
    let mut prev: &[u8] = &[];
    let mut has_name = false;
    let (name_max, value_max) = (limits.label_name_bytes_max, limits.label_value_bytes_max);
    while let Some([0x0a, len, label @ ..]) = bytes.get(at..) {
        // Offsets in the stretch: the label message starts at `at + 2`, the name at `at + 4`.
        let end = at + 2 + usize::from(*len);
        // `0a <n> name 12 <m> value` (the usual case: the label's length says where the value
        // ends, so only the tag and `m` need checking), or `0a <n> name` (empty value).
        let Some([0x0a, n, tail @ ..]) = label.get(..usize::from(*len)) else { return false };
        let name_len = usize::from(*n);
        let value_len = match tail.get(name_len..) {
            Some([0x12, m, value @ ..]) if *n < 0x80 && usize::from(*m) == value.len() && *m < 0x80 => {
                value.len()
            }
            Some([]) if *n < 0x80 => 0,
            _ => return false,
        };
        let name = bytes.get(at + 4..at + 4 + name_len).unwrap_or_default();
        let in_order = match (prev.first(), name.first()) {
            (Some(p), Some(n)) if p != n => p < n,
            (_, Some(_)) => prev < name,
            (_, None) => false,
        };
        if !in_order || name_len > name_max || value_len > value_max {
            return false;
        }
        if value_len > 0 {
            let value_at = at + 6 + name_len;
            let Some(value) = bytes.get(value_at..value_at + value_len) else { return false };
            has_name |= name == METRIC_NAME.as_bytes();
            series.label_bytes_checked(name, value);
        }
        prev = name;
        count += 1;
        at = end;
    }
    if !has_name || count > limits.labels_per_series_max {
        return false;
    }
    let mut samples = 0u64;
    while let [0x12, len, tail @ ..] = rest
        && *len < 0x80
        && let Some((b, after)) = tail.split_at_checked(usize::from(*len))
    {
        let Some(sample) = usual_sample(b).or_else(|| sample(b).ok()) else { return false };
        series.sample(sample);
        samples += 1;
        rest = after;
    }
    if !rest.is_empty() {
        return false;
    }
    if samples > 0 {
        series.finish();
    }
    out.samples += samples;
    true
}

/// Decodes `timeseries[i]` field by field, whatever its encoding, and appends it to `out`.
fn series_in_full<'a>(
    buf: &'a [u8],
    i: usize,
    s: &mut Scratch<'a>,
    limits: &Limits,
    out: &mut DecodedRef<'a>,
) -> Result<()> {
    s.labels.clear();
    s.samples.clear();
    s.hists.clear();
    // Senders write the labels first, each `0a <length> <Label>` with a one-byte length: read
    // them without the general field loop below (which would give the same result), and note
    // where they end, for validating their strings in one go.
    let mut rest = buf;
    while let [0x0a, len, tail @ ..] = rest
        && *len < 0x80
        && let Some((b, after)) = tail.split_at_checked(usize::from(*len))
    {
        let (name, value) =
            label(b).map_err(|e| at(format_args!("timeseries[{i}].labels[{}]", s.labels.len()), e))?;
        s.labels.push(Str::bytes(name), Str::bytes(value));
        s.labels.check_count(limits)?;
        rest = after;
    }
    s.strings.set(buf.get(..buf.len() - rest.len()).unwrap_or_default());
    let mut r = Reader::new(rest);
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
            (4, Value::Len(b)) => {
                let path = || format!("timeseries[{i}].histograms[{}]", s.hists.len());
                s.hists.push(histogram::decode(b).map_err(|e| histogram_error(path(), e))?);
            }
            (1..=4, v) => {
                return Err(at(format_args!("timeseries[{i}]"), wrong_type(field, &v, WireType::Len)));
            }
            _ => {}
        }
    }
    let labels = s.labels.validate(&mut s.strings, limits)?;
    out.samples += s.samples.len() as u64;
    if s.hists.is_empty() {
        if !s.samples.is_empty() {
            out.batch.push(labels.iter().copied(), s.samples.iter().copied());
        }
        return Ok(());
    }
    push_with_histograms(labels, &s.samples, &s.hists, out);
    Ok(())
}

/// Adds a series with histograms: its floats, then its histograms in request order (as
/// Prometheus appends them), a histogram stale marker as the float stale marker.
pub(super) fn push_with_histograms<'a>(
    labels: &[(&'a str, &'a str)],
    samples: &[Sample],
    hists: &[HistogramSample],
    out: &mut DecodedRef<'a>,
) {
    let mut series = out.batch.series();
    for &(name, value) in labels {
        series.label(name, value);
    }
    for &x in samples {
        series.sample(x);
    }
    for h in hists {
        match h {
            HistogramSample::Histogram(t, h) => series.histogram(*t, h.clone()),
            HistogramSample::Stale(t) => {
                series.sample(Sample::new(*t, stale_nan()));
                out.stale_histograms += 1;
            }
        }
    }
    series.finish();
    out.histograms += hists.len() as u64;
}

/// The crate error for a histogram that does not decode or validate at `path`.
pub(super) fn histogram_error(path: String, e: HistogramError) -> crate::Error {
    match e {
        HistogramError::Field(e) => at(path, e),
        HistogramError::Invalid(reason) => crate::Error::InvalidHistogram { at: path, reason },
    }
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
    if let Some(s) = usual_sample(buf) {
        return Ok(s);
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

/// A `Sample` in the usual encoding, `09 <8-byte value> 10 <timestamp varint>`, or `None`.
#[inline(always)]
fn usual_sample(buf: &[u8]) -> Option<Sample> {
    let [0x09, b0, b1, b2, b3, b4, b5, b6, b7, 0x10, ts @ ..] = buf else { return None };
    let t = match ts.len() {
        1..=8 => varint_ending(buf, ts.len())?,
        _ => varint_filling(ts)?,
    };
    Some(Sample::new(t as i64, f64::from_bits(u64::from_le_bytes([*b0, *b1, *b2, *b3, *b4, *b5, *b6, *b7]))))
}

/// The varint that is exactly the last `k` bytes of `buf` (`k` from 1 to 8, `buf` at least 8
/// bytes long), or `None`: [`varint_filling`] without a loop. A timestamp in milliseconds takes
/// six bytes; one load of the last eight bytes, a check of every continuation bit at once, and
/// three steps that close the gaps between the 7-bit groups decode it.
#[inline(always)]
fn varint_ending(buf: &[u8], k: usize) -> Option<u64> {
    const MSB: u64 = 0x8080_8080_8080_8080;
    if !(1..=8).contains(&k) {
        return None;
    }
    let word = u64::from_le_bytes(*buf.last_chunk::<8>()?) >> (8 * (8 - k));
    // Every byte but the last has its continuation bit set; the last (and the zeros shifted in
    // above it) do not.
    if word & MSB != MSB & ((1u64 << (8 * (k - 1))) - 1) {
        return None;
    }
    let x = word & !MSB;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    Some((x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4))
}

/// The varint that is exactly `b` (1 to 10 bytes, the last one ending it, no overflow), or
/// `None`. A timestamp in milliseconds takes six bytes: this decodes them without a loop that
/// checks for the end at every byte.
#[inline]
fn varint_filling(b: &[u8]) -> Option<u64> {
    let (&last, init) = b.split_last()?;
    if last >= 0x80 || init.len() > 9 || (init.len() == 9 && last > 1) {
        return None;
    }
    let mut v = 0u64;
    for (i, &x) in init.iter().enumerate() {
        if x < 0x80 {
            return None;
        }
        v |= u64::from(x & 0x7f) << (7 * i);
    }
    Some(v | u64::from(last) << (7 * init.len()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A `TimeSeries` as senders encode it (one-byte lengths when they fit).
    fn encode(labels: &[(String, String)], samples: &[(i64, f64)]) -> Vec<u8> {
        let labels: Vec<(&[u8], &[u8])> = labels.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect();
        encode_bytes(&labels, samples)
    }

    /// [`encode`] for label strings of any bytes.
    fn encode_bytes(labels: &[(&[u8], &[u8])], samples: &[(i64, f64)]) -> Vec<u8> {
        fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
            out.push(tag);
            let mut n = bytes.len();
            while n >= 0x80 {
                out.push((n as u8) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend_from_slice(bytes);
        }
        let mut out = Vec::new();
        for (n, v) in labels {
            let mut label = Vec::new();
            field(&mut label, 0x0a, n);
            if !v.is_empty() {
                field(&mut label, 0x12, v);
            }
            field(&mut out, 0x0a, &label);
        }
        for &(t, v) in samples {
            let mut sample = vec![0x09];
            sample.extend_from_slice(&v.to_bits().to_le_bytes());
            sample.push(0x10);
            let mut t = t as u64;
            while t >= 0x80 {
                sample.push((t as u8) | 0x80);
                t >>= 7;
            }
            sample.push(t as u8);
            field(&mut out, 0x12, &sample);
        }
        out
    }

    fn scratch() -> Scratch<'static> {
        Scratch {
            labels: SeriesLabels::default(),
            samples: Vec::new(),
            hists: Vec::new(),
            strings: Utf8Span::new(),
        }
    }

    #[test]
    fn varint_filling_agrees_with_the_reader() {
        let mut values: Vec<u64> = (0..64).map(|b| 1u64 << b).collect();
        values.extend([0, 127, 128, 1_700_000_000_000, u64::MAX, u64::MAX - 1, (-1i64) as u64]);
        for v in values {
            let mut b = Vec::new();
            let mut x = v;
            while x >= 0x80 {
                b.push((x as u8) | 0x80);
                x >>= 7;
            }
            b.push(x as u8);
            assert_eq!(varint_filling(&b), Some(v), "{b:x?}");
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(varint_filling(&longer), None, "a varint that ends early does not fill {longer:x?}");
        }
        // Overflow, too long, unterminated, empty.
        assert_eq!(varint_filling(&[0xff; 9].iter().copied().chain([2]).collect::<Vec<_>>()), None);
        assert_eq!(varint_filling(&[0x80; 10].iter().copied().chain([0]).collect::<Vec<_>>()), None);
        assert_eq!(varint_filling(&[0x80]), None);
        assert_eq!(varint_filling(&[]), None);
    }

    proptest::proptest! {
        /// The loop-free decoder gives what the loop gives, for every tail of up to 8 bytes
        /// after any prefix, valid varint or not.
        #[test]
        fn varint_ending_agrees_with_varint_filling(
            prefix in proptest::collection::vec(proptest::num::u8::ANY, 8),
            tail in proptest::collection::vec(
                proptest::prop_oneof![proptest::num::u8::ANY, 0x80u8..=0xff, 0u8..0x80], 1..=8),
        ) {
            let mut buf = prefix;
            buf.extend_from_slice(&tail);
            proptest::prop_assert_eq!(varint_ending(&buf, tail.len()), varint_filling(&tail));
        }
    }

    #[test]
    fn varint_ending_decodes_timestamps() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, 1_700_000_000_000, (1 << 56) - 1] {
            let mut b = vec![0x09; 10];
            let mut x = v;
            let start = b.len();
            while x >= 0x80 {
                b.push((x as u8) | 0x80);
                x >>= 7;
            }
            b.push(x as u8);
            assert_eq!(varint_ending(&b, b.len() - start), Some(v));
        }
    }

    proptest! {
        /// Whatever the one-pass decoder accepts, the field-by-field decoder accepts with the
        /// same result (and it accepts the usual encoding).
        #[test]
        fn the_fast_path_agrees_with_the_full_decoder(
            labels in proptest::collection::vec(("(__name__|[a-c]{0,2}|é)", "([xy]{0,2}|\u{e9})"), 0..6),
            samples in proptest::collection::vec((any::<i64>(), any::<f64>()), 0..3),
            tight in any::<bool>(),
        ) {
            let limits = if tight {
                Limits { labels_per_series_max: 3, label_name_bytes_max: 2, label_value_bytes_max: 1, ..Limits::default() }
            } else {
                Limits::default()
            };
            let buf = encode(&labels, &samples);
            let (mut fast, mut full) = (DecodedRef::default(), DecodedRef::default());
            let accepted = series_fast(&buf, &limits, &mut fast);
            let in_full = series_in_full(&buf, 0, &mut scratch(), &limits, &mut full);
            if accepted {
                prop_assert!(in_full.is_ok(), "{:?}", in_full);
                prop_assert_eq!(fast.batch.to_batch().unwrap().series, full.batch.to_batch().unwrap().series);
                prop_assert_eq!(fast.samples, full.samples);
            }
            let sorted = labels.windows(2).all(|w| w[0].0 < w[1].0);
            let usual = sorted
                && !tight
                && labels.iter().all(|(n, _)| !n.is_empty())
                && labels.iter().any(|(n, v)| n == "__name__" && !v.is_empty());
            prop_assert_eq!(accepted, usual, "{:?}", labels);
        }
    }

    proptest! {
        /// A series the one-pass decoder takes with label strings that are not UTF-8 is
        /// refused once it is checked (here by `into_owned`, which checks as storage does for a
        /// new series), with the error the field-by-field decoder gives; valid strings give
        /// both decoders' result.
        #[test]
        fn strings_the_fast_path_leaves_unchecked_are_refused_as_the_full_decoder_refuses_them(
            name in proptest::collection::vec(prop_oneof![0x61u8..0x63, 0xc3u8..0xc4, 0xa9u8..0xaa, 0xffu8..=0xff], 1..3),
            value in proptest::collection::vec(prop_oneof![0x61u8..0x63, 0xc3u8..0xc4, 0xa9u8..0xaa, 0xffu8..=0xff], 1..4),
        ) {
            let limits = Limits::default();
            let labels: [(&[u8], &[u8]); 2] = [(b"__name__", b"up"), (&name, &value)];
            let buf = encode_bytes(&labels, &[(1, 1.0)]);
            let mut fast = DecodedRef::default();
            prop_assert!(series_fast(&buf, &limits, &mut fast), "the usual encoding takes the fast path");
            let mut full = DecodedRef::default();
            let in_full = series_in_full(&buf, 0, &mut scratch(), &limits, &mut full);
            let owned = fast.into_owned();
            match in_full {
                Ok(()) => prop_assert_eq!(owned.map(|d| d.batch.series), full.into_owned().map(|d| d.batch.series)),
                Err(e) => prop_assert_eq!(owned.map(|_| ()), Err(e)),
            }
        }
    }
}
