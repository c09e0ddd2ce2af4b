//! The payload of a WAL record: one ingest batch.
//!
//! Series ids are runtime ids, valid only inside one process, so each WAL run (a sequence of
//! segments one process wrote between two flushes, see [`crate::wal`]) is self-describing:
//! the first record in a run that uses a series carries its definition (id and labels), and
//! replay maps ids run by run. That lets whole old runs be deleted after a flush without a
//! separate series log or checkpoint, while a series' labels are written once per flush
//! rather than once per segment. Layout in `docs/format/batch.md`.
//!
//! Every batch is written as record type 4: a series' first timestamp is a delta from a base
//! the record carries (a batch's series mostly share their timestamps) and the next ones are
//! deltas of deltas (samples mostly come at a steady interval), series ids are deltas
//! from the previous series' (a batch mostly lists series in the order they were created), and
//! a series whose values in the batch are all integers (counters, most gauges) stores them as
//! varints instead of 8 raw bytes. Flags say whether each series carries start-timestamp runs
//! and histograms, so series without them cost nothing. The histogram samples themselves are
//! markers among the floats ([`crate::hist`]).
//!
//! Types 1 (floats), 2 (with start-timestamp runs) and 3 (with histograms) are still read:
//! segments written before type 4 replay unchanged.
//!
//! Decoding borrows the label strings from the record ([`DecodedBatch`]): replay looks each
//! defined series up in the index by those strings and allocates only for a series it creates.

use hashbrown::HashMap;

use crate::encoding::varint::{get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};
use crate::hist;
use crate::labels_ref::{LabelPair, LabelsRef, RawLabels, normalize_tail};
use crate::types::{HistogramSample, Sample, SeriesId};

/// Record type byte of a batch record.
const RECORD_BATCH: u8 = 1;
/// Record type byte of a batch record whose series carry start-timestamp runs.
const RECORD_BATCH_STARTS: u8 = 2;
/// Record type byte of a batch record whose series carry start-timestamp runs and histograms.
const RECORD_BATCH_HISTS: u8 = 3;
/// Record type byte of the batch record written now: timestamps from a base, id deltas,
/// integer values as varints, start-timestamp runs and histograms as its flags say.
const RECORD_BATCH_COMPACT: u8 = 4;
/// Flag of a type 4 record: each series' samples are followed by its start-timestamp runs.
const FLAG_STARTS: u8 = 1;
/// Flag of a type 4 record: each series' samples (and runs) are followed by its histograms.
const FLAG_HISTS: u8 = 2;

/// Integers up to this magnitude are exactly representable as `f64`: a type 4 record stores
/// such values as varints.
const EXACT_INTEGER_MAX: i64 = 1 << 53;

/// One series of a record: id, samples, start timestamps (empty: none has one; otherwise one
/// per sample, 0 for none) and histograms in write order.
pub type FullSeries<'a> = (SeriesId, &'a [Sample], &'a [i64], &'a [HistogramSample]);

/// Encodes a batch record (type 4): the definitions of `defs` (series not yet defined in this
/// run) followed by the samples of every series, with their start-timestamp runs and
/// histograms if any series has some.
pub fn encode(defs: &[(SeriesId, RawLabels<'_>)], series: &[FullSeries<'_>], out: &mut Vec<u8>) {
    let with_starts = series.iter().any(|(_, _, starts, _)| !starts.is_empty());
    let with_hists = series.iter().any(|(.., hists)| !hists.is_empty());
    out.push(RECORD_BATCH_COMPACT);
    out.push(if with_starts { FLAG_STARTS } else { 0 } | if with_hists { FLAG_HISTS } else { 0 });
    let base = series.iter().find_map(|(_, samples, ..)| samples.first()).map_or(0, |s| s.t);
    put_varint(out, base);
    put_defs(defs, out);
    put_uvarint(out, series.len() as u64);
    let mut prev_id = 0i64;
    for (id, samples, starts, hists) in series {
        put_varint(out, i64::from(*id) - prev_id);
        prev_id = i64::from(*id);
        let integral = samples.iter().all(|s| as_integer(s.v).is_some());
        put_uvarint(out, (samples.len() as u64) << 1 | u64::from(integral));
        let (mut prev, mut prev_delta) = (base, 0i64);
        for s in samples.iter() {
            let delta = s.t.wrapping_sub(prev);
            put_varint(out, delta.wrapping_sub(prev_delta));
            (prev, prev_delta) = (s.t, delta);
            match as_integer(s.v).filter(|_| integral) {
                Some(i) => put_varint(out, i),
                None => out.extend_from_slice(&s.v.to_bits().to_le_bytes()),
            }
        }
        if with_starts {
            put_start_runs(starts, out);
        }
        if with_hists {
            put_hists(hists, out);
        }
    }
}

/// The integer `v` holds, if converting it to `i64` and back gives the same bits: finite,
/// integral, at most 2^53 in magnitude (so exact) and not −0.0.
fn as_integer(v: f64) -> Option<i64> {
    // Up to 2^53 the conversion to i64 is exact for integers and truncates anything else: one
    // instruction, where `fract` calls libm's `trunc` on baseline x86-64.
    // NaN fails the range test.
    if v.is_nan() || v.abs() > EXACT_INTEGER_MAX as f64 {
        return None;
    }
    let i = v as i64;
    (i as f64 == v && v.to_bits() != (-0.0f64).to_bits()).then_some(i)
}

/// Encodes a record of type 1, as written before type 4, to test that such records replay.
#[cfg(test)]
pub fn encode_type1(defs: &[(SeriesId, RawLabels<'_>)], series: &[(SeriesId, &[Sample])], out: &mut Vec<u8>) {
    out.push(RECORD_BATCH);
    put_defs(defs, out);
    put_uvarint(out, series.len() as u64);
    for (id, samples) in series {
        put_samples(*id, samples, out);
    }
}

/// Encodes a record of type 2 (type 1 with each series' start-timestamp runs), as written
/// before type 4, to test that such records replay.
#[cfg(test)]
pub fn encode_type2(
    defs: &[(SeriesId, RawLabels<'_>)],
    series: &[(SeriesId, &[Sample], &[i64])],
    out: &mut Vec<u8>,
) {
    out.push(RECORD_BATCH_STARTS);
    put_defs(defs, out);
    put_uvarint(out, series.len() as u64);
    for (id, samples, starts) in series {
        put_samples(*id, samples, out);
        put_start_runs(starts, out);
    }
}

/// Encodes a record of type 3 (type 2 with each series' histograms), as written before type 4,
/// to test that such records replay.
#[cfg(test)]
pub fn encode_type3(defs: &[(SeriesId, RawLabels<'_>)], series: &[FullSeries<'_>], out: &mut Vec<u8>) {
    out.push(RECORD_BATCH_HISTS);
    put_defs(defs, out);
    put_uvarint(out, series.len() as u64);
    for (id, samples, starts, hists) in series {
        put_samples(*id, samples, out);
        put_start_runs(starts, out);
        put_hists(hists, out);
    }
}

/// A series' histograms: count, then each one's time (a delta from the previous one's, the
/// first from 0) and the histogram.
fn put_hists(hists: &[HistogramSample], out: &mut Vec<u8>) {
    put_uvarint(out, hists.len() as u64);
    let mut prev = 0i64;
    for h in hists {
        put_varint(out, h.t.wrapping_sub(prev));
        prev = h.t;
        hist::encode_one(&h.h, out);
    }
}

fn put_defs(defs: &[(SeriesId, RawLabels<'_>)], out: &mut Vec<u8>) {
    put_uvarint(out, defs.len() as u64);
    for (id, labels) in defs {
        put_uvarint(out, u64::from(*id));
        put_uvarint(out, labels.len() as u64);
        for (name, value) in labels.iter() {
            put_bytes(out, name);
            put_bytes(out, value);
        }
    }
}

#[cfg(test)]
fn put_samples(id: SeriesId, samples: &[Sample], out: &mut Vec<u8>) {
    put_uvarint(out, u64::from(id));
    put_uvarint(out, samples.len() as u64);
    let mut prev = 0i64;
    for s in samples.iter() {
        put_varint(out, s.t.wrapping_sub(prev));
        prev = s.t;
        out.extend_from_slice(&s.v.to_bits().to_le_bytes());
    }
}

/// Runs of consecutive samples with the same (non-zero) start timestamp: count, then per run
/// the index of its first sample as a delta from the previous run's end, its length, and the
/// start timestamp as a delta from the previous run's.
fn put_start_runs(starts: &[i64], out: &mut Vec<u8>) {
    let mut runs: Vec<(usize, usize, i64)> = Vec::new();
    for (i, &st) in starts.iter().enumerate() {
        if st == 0 {
            continue;
        }
        match runs.last_mut() {
            Some((first, len, s)) if *s == st && *first + *len == i => *len += 1,
            _ => runs.push((i, 1, st)),
        }
    }
    put_uvarint(out, runs.len() as u64);
    let (mut end, mut prev_st) = (0usize, 0i64);
    for (first, len, st) in runs {
        put_uvarint(out, (first - end) as u64);
        put_uvarint(out, len as u64);
        put_varint(out, st.wrapping_sub(prev_st));
        (end, prev_st) = (first + len, st);
    }
}

#[cfg(test)]
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A label string of a definition. Its bytes are valid UTF-8: a series is defined only once
/// storage has resolved it, so its bytes equal the stored (checked) strings.
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvarint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A decoded batch record, ids as written by the process that wrote the segment, label strings
/// borrowed from the record. Each list is flat (one vector for all definitions' labels, one for
/// all samples), so decoding allocates per record, not per series.
#[derive(Debug, Default, PartialEq)]
pub struct DecodedBatch<'a> {
    /// The labels of every definition, back to back.
    labels: Vec<LabelPair<'a>>,
    /// Series defined by this record: WAL id and where its labels end in `labels`.
    defs: Vec<(SeriesId, usize)>,
    /// The samples of every series, back to back.
    samples: Vec<Sample>,
    /// Series with samples: WAL id and where its samples end in `samples`.
    series: Vec<(SeriesId, usize)>,
    /// Start timestamps, one per sample (0: none), of the series that have any, back to back.
    starts: Vec<i64>,
    /// Per series with samples: where its start timestamps end in `starts` (equal to the
    /// previous series' end when it has none). Empty for a record of type 1.
    start_ends: Vec<usize>,
    /// Histograms of the series that have any, back to back, in write order.
    hists: Vec<HistogramSample>,
    /// Per series with samples: where its histograms end in `hists`. Empty unless type 3.
    hist_ends: Vec<usize>,
}

impl<'a> DecodedBatch<'a> {
    /// Series defined by this record, with their labels.
    pub fn defs(&self) -> impl ExactSizeIterator<Item = (SeriesId, LabelsRef<'_>)> + '_ {
        let mut start = 0;
        self.defs.iter().map(move |&(id, end)| {
            let labels = self.labels.get(start..end).unwrap_or_default();
            start = end;
            (id, LabelsRef::new_unchecked(labels))
        })
    }

    /// Empties the batch, keeping its vectors' memory for the next record, whose strings may
    /// live elsewhere (hence the new lifetime). Replay decodes thousands of megabyte-sized
    /// records; fresh vectors for each cost more in page faults than the decoding itself.
    pub fn recycle<'b>(self) -> DecodedBatch<'b> {
        DecodedBatch {
            labels: reuse(self.labels),
            defs: reuse(self.defs),
            samples: reuse(self.samples),
            series: reuse(self.series),
            starts: reuse(self.starts),
            start_ends: reuse(self.start_ends),
            hists: Vec::new(),
            hist_ends: reuse(self.hist_ends),
        }
    }

    fn clear(&mut self) {
        self.labels.clear();
        self.defs.clear();
        self.samples.clear();
        self.series.clear();
        self.starts.clear();
        self.start_ends.clear();
        self.hists.clear();
        self.hist_ends.clear();
    }

    /// The histograms of each series, in the order of [`DecodedBatch::series`]: empty for a
    /// series without any.
    pub fn histograms(&self) -> impl ExactSizeIterator<Item = &[HistogramSample]> + '_ {
        let mut from = 0;
        (0..self.series.len()).map(move |i| {
            let end = self.hist_ends.get(i).copied().unwrap_or(from);
            let h = self.hists.get(from..end).unwrap_or_default();
            from = end;
            h
        })
    }

    /// Samples per series id, in record order.
    pub fn series(&self) -> impl ExactSizeIterator<Item = (SeriesId, &[Sample])> + '_ {
        let mut start = 0;
        self.series.iter().map(move |&(id, end)| {
            let samples = self.samples.get(start..end).unwrap_or_default();
            start = end;
            (id, samples)
        })
    }

    /// Samples per series id, in record order, with their start timestamps: empty when the
    /// series has none, otherwise one per sample (0: none).
    pub fn series_with_starts(&self) -> impl ExactSizeIterator<Item = (SeriesId, &[Sample], &[i64])> + '_ {
        let mut from = 0;
        self.series().enumerate().map(move |(i, (id, samples))| {
            let end = self.start_ends.get(i).copied().unwrap_or(from);
            let starts = self.starts.get(from..end).unwrap_or_default();
            from = end;
            (id, samples, starts)
        })
    }
}

/// Decodes a batch record. Total: never panics, bounds every allocation by the input length.
/// Labels are made to follow the rules of [`crate::Labels`] as `Labels::new` would (a record
/// written by strata always does). Replay decodes with [`decode_where`]; this is for tests.
#[cfg(test)]
pub fn decode(buf: &[u8]) -> Result<DecodedBatch<'_>> {
    let mut out = DecodedBatch::default();
    decode_where(buf, |_| true, &mut out)?;
    Ok(out)
}

/// Decodes the definitions and samples of the series `keep` selects into `out` (emptied first),
/// checking the whole record as [`decode`] does except the label strings of the series left
/// out. WAL replay splits series between threads this way, each validating only its share's
/// strings, and reuses `out`'s vectors from record to record (see [`DecodedBatch::recycle`]).
pub fn decode_where<'a>(
    buf: &'a [u8],
    keep: impl Fn(SeriesId) -> bool,
    out: &mut DecodedBatch<'a>,
) -> Result<()> {
    out.clear();
    let mut pos = 0usize;
    let layout = Layout::read(buf, &mut pos)?;
    let ndefs = bounded_count(buf, &mut pos, 2)?;
    for _ in 0..ndefs {
        let id = get_id(buf, &mut pos)?;
        let n = bounded_count(buf, &mut pos, 2)?;
        if !keep(id) {
            for _ in 0..2 * n {
                get_bytes(buf, &mut pos)?;
            }
            continue;
        }
        let start = out.labels.len();
        out.labels.reserve(n);
        for _ in 0..n {
            let name = get_str(buf, &mut pos)?;
            let value = get_str(buf, &mut pos)?;
            out.labels.push((name, value));
        }
        normalize_tail(&mut out.labels, start);
        out.defs.push((id, out.labels.len()));
    }
    let nseries = bounded_count(buf, &mut pos, 2)?;
    let mut prev_id = 0i64;
    for _ in 0..nseries {
        let (id, n, integral) = match layout.base {
            Some(_) => {
                let id = prev_id.wrapping_add(get_varint(buf, &mut pos)?);
                let id = SeriesId::try_from(id)
                    .map_err(|_| Error::Decode(format!("series id {id} out of range")))?;
                prev_id = i64::from(id);
                let word = get_uvarint(buf, &mut pos)?;
                (id, check_count(buf, pos, word >> 1, 2)?, word & 1 == 1)
            }
            None => (get_id(buf, &mut pos)?, bounded_count(buf, &mut pos, 9)?, false),
        };
        let keep = keep(id);
        if keep {
            out.samples.reserve(n);
        }
        // Types 1 to 3: deltas from the previous timestamp (the first from 0); type 4: deltas of
        // those deltas (the first from the base), so a steady interval costs a byte.
        let (mut t, mut delta) = (layout.base.unwrap_or(0), 0i64);
        for _ in 0..n {
            let read = get_varint(buf, &mut pos)?;
            delta = if layout.base.is_some() { delta.wrapping_add(read) } else { read };
            t = t.wrapping_add(delta);
            let v = if integral {
                let i = get_varint(buf, &mut pos)?;
                if !(-EXACT_INTEGER_MAX..=EXACT_INTEGER_MAX).contains(&i) {
                    return Err(Error::Decode(format!("WAL integer value {i} out of range")));
                }
                i as f64
            } else {
                let bytes: [u8; 8] = buf
                    .get(pos..pos + 8)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| Error::Decode("WAL record truncated in a sample value".into()))?;
                pos += 8;
                f64::from_bits(u64::from_le_bytes(bytes))
            };
            if keep {
                out.samples.push(Sample::new(t, v));
            }
        }
        if keep {
            out.series.push((id, out.samples.len()));
        }
        if layout.starts {
            let target = keep.then_some(&mut out.starts);
            get_start_runs(buf, &mut pos, n, target)?;
            if keep {
                out.start_ends.push(out.starts.len());
            }
        }
        if layout.hists {
            let nh = bounded_count(buf, &mut pos, 38)?;
            let mut t = 0i64;
            for _ in 0..nh {
                t = t.wrapping_add(get_varint(buf, &mut pos)?);
                let h = hist::decode_one(buf, &mut pos)?;
                if keep {
                    out.hists.push(HistogramSample { t, h });
                }
            }
            if keep {
                out.hist_ends.push(out.hists.len());
            }
        }
    }
    if pos != buf.len() {
        return Err(Error::Decode(format!("{} trailing bytes after WAL batch record", buf.len() - pos)));
    }
    Ok(())
}

/// What a record's type (and, for type 4, its flags and base) says about its layout.
struct Layout {
    /// Type 4: the timestamp each series' first sample is a delta from; series ids are deltas
    /// and counts carry the integer flag. None for types 1 to 3.
    base: Option<i64>,
    /// Each series' samples are followed by start-timestamp runs.
    starts: bool,
    /// Each series' samples (and runs) are followed by histograms.
    hists: bool,
}

impl Layout {
    fn read(buf: &[u8], pos: &mut usize) -> Result<Layout> {
        let kind = *buf.first().ok_or_else(|| Error::Decode("empty WAL record".into()))?;
        *pos = 1;
        match kind {
            RECORD_BATCH => Ok(Layout { base: None, starts: false, hists: false }),
            RECORD_BATCH_STARTS => Ok(Layout { base: None, starts: true, hists: false }),
            RECORD_BATCH_HISTS => Ok(Layout { base: None, starts: true, hists: true }),
            RECORD_BATCH_COMPACT => {
                let flags =
                    *buf.get(1).ok_or_else(|| Error::Decode("WAL record truncated in its flags".into()))?;
                if flags & !(FLAG_STARTS | FLAG_HISTS) != 0 {
                    return Err(Error::Decode(format!("unknown WAL record flags {flags:#04x}")));
                }
                *pos = 2;
                let base = get_varint(buf, pos)?;
                Ok(Layout {
                    base: Some(base),
                    starts: flags & FLAG_STARTS != 0,
                    hists: flags & FLAG_HISTS != 0,
                })
            }
            _ => Err(Error::Decode(format!("unknown WAL record type {kind}"))),
        }
    }
}

/// Reads the start-timestamp runs of a series of `n` samples, expanding them to one entry per
/// sample into `out` if given (nothing when there is no run).
fn get_start_runs(buf: &[u8], pos: &mut usize, n: usize, mut out: Option<&mut Vec<i64>>) -> Result<()> {
    let nruns = bounded_count(buf, pos, 3)?;
    let base = out.as_ref().map_or(0, |o| o.len());
    if nruns > 0
        && let Some(o) = out.as_deref_mut()
    {
        o.resize(base + n, 0);
    }
    let (mut end, mut st) = (0usize, 0i64);
    for _ in 0..nruns {
        let first = end.checked_add(get_uvarint(buf, pos)? as usize);
        let len = get_uvarint(buf, pos)? as usize;
        st = st.wrapping_add(get_varint(buf, pos)?);
        let last = first.and_then(|f| f.checked_add(len)).filter(|&e| e <= n && len > 0 && st != 0);
        let (Some(first), Some(last)) = (first, last) else {
            return Err(Error::Decode("WAL start timestamp run out of its series' samples".into()));
        };
        if let Some(slot) = out.as_deref_mut().and_then(|o| o.get_mut(base + first..base + last)) {
            slot.fill(st);
        }
        end = last;
    }
    Ok(())
}

/// Reads a count and checks that the rest of the buffer could hold that many items of at least
/// `min_item_bytes` each, so a corrupt count cannot make us allocate gigabytes.
fn bounded_count(buf: &[u8], pos: &mut usize, min_item_bytes: usize) -> Result<usize> {
    let n = get_uvarint(buf, pos)?;
    check_count(buf, *pos, n, min_item_bytes)
}

/// Checks a count read before `pos` as [`bounded_count`] does.
fn check_count(buf: &[u8], pos: usize, n: u64, min_item_bytes: usize) -> Result<usize> {
    let rest = buf.len().saturating_sub(pos) as u64;
    if n.saturating_mul(min_item_bytes as u64) > rest {
        return Err(Error::Decode(format!("count {n} exceeds the {rest} bytes left in the WAL record")));
    }
    Ok(n as usize)
}

fn get_id(buf: &[u8], pos: &mut usize) -> Result<SeriesId> {
    let id = get_uvarint(buf, pos)?;
    SeriesId::try_from(id).map_err(|_| Error::Decode(format!("series id {id} out of range")))
}

/// A label string borrowed from the record.
fn get_str<'a>(buf: &'a [u8], pos: &mut usize) -> Result<&'a str> {
    std::str::from_utf8(get_bytes(buf, pos)?).map_err(|_| Error::Decode("label is not UTF-8".into()))
}

/// A length-prefixed label string's bytes, not yet validated.
fn get_bytes<'a>(buf: &'a [u8], pos: &mut usize) -> Result<&'a [u8]> {
    let n = get_uvarint(buf, pos)? as usize;
    let bytes = buf
        .get(*pos..pos.saturating_add(n))
        .ok_or_else(|| Error::Decode("WAL record truncated in a label".into()))?;
    *pos += n;
    Ok(bytes)
}

/// An empty vector of another element type of the same layout, in `v`'s allocation (the
/// standard library collects a `filter_map` over `into_iter` in place).
fn reuse<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// Maps the ids of one WAL run (as written by the process that wrote it) to this process's
/// ids. Reset at every run boundary, because each run defines the series it uses.
#[derive(Debug, Default)]
pub struct IdMap {
    run: Option<u64>,
    map: HashMap<SeriesId, SeriesId>,
}

impl IdMap {
    /// Starts mapping for `run`, forgetting the previous run's ids if it changed.
    pub fn enter_run(&mut self, run: u64) {
        if self.run != Some(run) {
            self.run = Some(run);
            self.map.clear();
        }
    }
    /// Records that `old` (in the WAL) is `new` (in this process).
    pub fn insert(&mut self, old: SeriesId, new: SeriesId) {
        self.map.insert(old, new);
    }
    /// This process's id for WAL id `old`, if the run defined it.
    pub fn get(&self, old: SeriesId) -> Option<SeriesId> {
        self.map.get(&old).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FloatHistogram, Labels, stale_nan};
    use proptest::prelude::*;

    /// String pairs as the byte pairs a batch carries.
    fn bytes<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<crate::labels_ref::RawPair<'a>> {
        pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect()
    }

    /// Series with samples only.
    fn plain<'a>(series: &[(SeriesId, &'a [Sample])]) -> Vec<FullSeries<'a>> {
        series.iter().map(|(id, s)| (*id, *s, &[][..], &[][..])).collect()
    }

    fn decoded_series(buf: &[u8]) -> Vec<(SeriesId, Vec<Sample>)> {
        decode(buf).unwrap().series().map(|(id, s)| (id, s.to_vec())).collect()
    }

    #[test]
    fn round_trip_with_defs() {
        let l = Labels::from_pairs(&[("__name__", "up"), ("job", "a")]);
        let pairs = [("__name__", "up"), ("job", "a")];
        let s = vec![Sample::new(-5, 1.0), Sample::new(i64::MAX, stale_nan()), Sample::new(i64::MIN, -0.0)];
        let raw = bytes(&pairs);
        let defs = [(7, RawLabels::new(&raw).unwrap())];
        let (mut new, mut old) = (Vec::new(), Vec::new());
        encode(&defs, &plain(&[(7, &s), (3, &[])]), &mut new);
        encode_type1(&defs, &[(7, &s), (3, &[])], &mut old);
        assert_eq!((new[0], old[0]), (RECORD_BATCH_COMPACT, RECORD_BATCH));
        for buf in [&new, &old] {
            let d = decode(buf).unwrap();
            let defs: Vec<(SeriesId, Labels)> = d.defs().map(|(id, l)| (id, l.to_labels())).collect();
            assert_eq!(defs, vec![(7, l.clone())]);
            assert_eq!(decoded_series(buf), vec![(7, s.clone()), (3, vec![])]);
            // The label strings are the record's own bytes.
            let (_, labels) = d.defs().next().unwrap();
            let name = labels.pairs()[0].0.as_ptr() as usize;
            assert!((buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len()).contains(&name));
        }
    }

    /// The bytes of docs/format/batch.md's type 4 example.
    #[test]
    fn type_4_golden_bytes() {
        let pairs = bytes(&[("__name__", "a")]);
        let defs = [(5, RawLabels::new(&pairs).unwrap())];
        let a = [Sample::new(1000, 3.0), Sample::new(1010, 4.0), Sample::new(1020, 4.0)];
        let b = [Sample::new(1000, 0.5)];
        let mut buf = Vec::new();
        encode(&defs, &plain(&[(5, &a), (6, &b)]), &mut buf);
        let hex: String = buf.iter().map(|b| format!("{b:02x}")).collect();
        let golden = [
            "04 00 d00f",                         // type 4, no flags, base 1000
            "01 05 01 08 5f5f6e616d655f5f 01 61", // one definition: id 5, __name__="a"
            "02",                                 // two series
            "0a 07 00 06 14 08 00 08",            // id +5, 3 integers: (+0, 3), (+10, 4), (+10+0, 4)
            "02 02 00 000000000000e03f",          // id +1, 1 raw value: (+0, 0.5)
        ];
        assert_eq!(hex, golden.concat().replace(' ', ""));
        assert_eq!(decoded_series(&buf), vec![(5, a.to_vec()), (6, b.to_vec())]);
    }

    /// What type 4 is for: a batch of many series with one sample each at one time, as a
    /// scrape or a remote-write request holds, costs a few bytes a sample with integer values
    /// and 8 more with others.
    #[test]
    fn a_sample_per_series_at_one_time_costs_a_few_bytes() {
        let t = 1_700_000_000_000;
        let ints: Vec<[Sample; 1]> = (0..1000).map(|i| [Sample::new(t, f64::from(i % 100))]).collect();
        let floats: Vec<[Sample; 1]> = (0..1000).map(|i| [Sample::new(t, f64::from(i) / 7.0)]).collect();
        for (values, most) in [(&ints, 5), (&floats, 12)] {
            let series: Vec<FullSeries<'_>> = values
                .iter()
                .enumerate()
                .map(|(i, s)| (1000 + i as SeriesId, &s[..], &[][..], &[][..]))
                .collect();
            let mut buf = Vec::new();
            encode(&[], &series, &mut buf);
            assert!(buf.len() <= 1000 * most, "{} bytes", buf.len());
            assert_eq!(decode(&buf).unwrap().series().count(), 1000);
        }
    }

    #[test]
    fn integer_values_are_exactly_those_that_round_trip() {
        let exact = (1i64 << 53) as f64;
        for v in [0.0, 1.0, -1.0, 57.0, exact, -exact, 1e15] {
            assert_eq!(as_integer(v).map(|i| i as f64), Some(v), "{v}");
        }
        for v in [-0.0, 0.5, exact * 2.0, 1e300, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, stale_nan()] {
            assert_eq!(as_integer(v), None, "{v}");
        }
        // One value that is not an integer sends the series' values raw; -0.0 keeps its sign.
        let s = [Sample::new(1, 1.0), Sample::new(2, -0.0), Sample::new(3, 2.0)];
        let mut buf = Vec::new();
        encode(&[], &plain(&[(1, &s)]), &mut buf);
        let got = decoded_series(&buf);
        assert_eq!(got[0].1[1].v.to_bits(), (-0.0f64).to_bits());
        assert_eq!(got, vec![(1, s.to_vec())]);
    }

    #[test]
    fn type_4_refuses_what_it_never_writes() {
        // Unknown flags; an id delta below 0 or above u32; an integer beyond 2^53.
        for bad in [
            vec![RECORD_BATCH_COMPACT, 4, 0, 0, 0],
            vec![RECORD_BATCH_COMPACT, 0, 0, 0, 1, 1, 0],
            vec![RECORD_BATCH_COMPACT, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x20, 0],
        ] {
            assert!(decode(&bad).is_err(), "{bad:?}");
        }
        let mut big = vec![RECORD_BATCH_COMPACT, 0, 0, 0, 1, 2, 3, 0];
        put_varint(&mut big, (1 << 53) + 1);
        assert!(decode(&big).is_err());
        let mut fine = vec![RECORD_BATCH_COMPACT, 0, 0, 0, 1, 2, 3, 0];
        put_varint(&mut fine, 1 << 53);
        assert_eq!(decoded_series(&fine), vec![(1, vec![Sample::new(0, (1i64 << 53) as f64)])]);
    }

    #[test]
    fn a_share_decodes_only_its_series_and_reuses_memory() {
        let (a, b) = ([("__name__", "a")], [("__name__", "b")]);
        let s = [Sample::new(1, 1.0)];
        let mut buf = Vec::new();
        let (a, b) = (bytes(&a), bytes(&b));
        let defs = [(1, RawLabels::new(&a).unwrap()), (2, RawLabels::new(&b).unwrap())];
        encode(&defs, &plain(&[(1, &s), (2, &s)]), &mut buf);
        let mut out = DecodedBatch::default();
        decode_where(&buf, |id| id == 2, &mut out).unwrap();
        let defs: Vec<(SeriesId, String)> = out.defs().map(|(id, l)| (id, l.to_string())).collect();
        assert_eq!(defs, vec![(2, "b{}".to_string())]);
        assert_eq!(out.series().map(|(id, _)| id).collect::<Vec<_>>(), vec![2]);
        let capacity = out.labels.capacity();
        let other = buf.clone();
        let mut out = out.recycle();
        assert_eq!(out.labels.capacity(), capacity);
        decode_where(&other, |id| id == 1, &mut out).unwrap();
        assert_eq!(out.defs().map(|(id, _)| id).collect::<Vec<_>>(), vec![1]);
        // Strings of series left out are still checked for bounds.
        assert!(decode_where(&buf[..buf.len() - 9], |_| false, &mut out).is_err());
    }

    #[test]
    fn labels_out_of_order_are_normalized_as_labels_new_would() {
        // Hand-written: one definition with pairs (b, 1), (a, 2), (c, ""), no samples.
        let mut buf = vec![RECORD_BATCH, 1, 9, 3];
        for s in ["b", "1", "a", "2", "c", ""] {
            put_str(&mut buf, s);
        }
        buf.push(0);
        let d = decode(&buf).unwrap();
        let defs: Vec<(SeriesId, Labels)> = d.defs().map(|(id, l)| (id, l.to_labels())).collect();
        assert_eq!(defs, vec![(9, Labels::from_pairs(&[("b", "1"), ("a", "2"), ("c", "")]))]);
    }

    #[test]
    fn start_timestamps_round_trip_and_old_records_have_none() {
        let pairs = [("__name__", "c")];
        let s = [Sample::new(10, 1.0), Sample::new(20, 2.0), Sample::new(30, 3.0), Sample::new(40, 4.0)];
        let pairs = bytes(&pairs);
        let defs = [(1, RawLabels::new(&pairs).unwrap())];
        let (mut new, mut old) = (Vec::new(), Vec::new());
        let starts: [&[i64]; 2] = [&[5, 5, 0, 7], &[]];
        encode(&defs, &[(1, &s, starts[0], &[]), (2, &s[..1], starts[1], &[])], &mut new);
        encode_type2(&defs, &[(1, &s, starts[0]), (2, &s[..1], starts[1])], &mut old);
        assert_eq!(
            (new[..2].to_vec(), old[0]),
            (vec![RECORD_BATCH_COMPACT, FLAG_STARTS], RECORD_BATCH_STARTS)
        );
        for buf in [&new, &old] {
            let d = decode(buf).unwrap();
            let got: Vec<(SeriesId, usize, Vec<i64>)> =
                d.series_with_starts().map(|(id, s, st)| (id, s.len(), st.to_vec())).collect();
            assert_eq!(got, vec![(1, 4, vec![5, 5, 0, 7]), (2, 1, vec![])]);
            for cut in 0..buf.len() {
                assert!(decode(&buf[..cut]).is_err());
            }
            // A series left out of a share still has its runs checked and skipped.
            let mut out = DecodedBatch::default();
            decode_where(buf, |id| id == 2, &mut out).unwrap();
            assert_eq!(
                out.series_with_starts().map(|(id, _, st)| (id, st.len())).collect::<Vec<_>>(),
                vec![(2, 0)]
            );
        }
        // Type 1, as written before start timestamps existed (hand-written bytes): no starts.
        let old = [RECORD_BATCH, 1, 3, 1, 1, b'a', 1, b'b', 1, 3, 1, 20, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f];
        let d = decode(&old).unwrap();
        let got: Vec<(SeriesId, Vec<Sample>, usize)> =
            d.series_with_starts().map(|(id, s, st)| (id, s.to_vec(), st.len())).collect();
        assert_eq!(got, vec![(3, vec![Sample::new(10, 1.0)], 0)]);
        // A run reaching past the series' samples is corruption.
        let mut bad = Vec::new();
        bad.push(RECORD_BATCH_STARTS);
        put_uvarint(&mut bad, 0);
        put_uvarint(&mut bad, 1);
        put_samples(4, &s[..1], &mut bad);
        bad.extend_from_slice(&[1, 0, 2, 2]);
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn histograms_round_trip_in_types_3_and_4() {
        let h = |t, count| HistogramSample { t, h: FloatHistogram { count, sum: 2.5, ..Default::default() } };
        let hists = [h(10, 1.0), h(30, 4.0)];
        let s = [Sample::new(10, 0.5), Sample::new(20, 1.0), Sample::new(30, 0.5)];
        let series: [FullSeries<'_>; 2] = [(4, &s, &[], &hists), (9, &s[1..2], &[], &[])];
        let (mut new, mut old) = (Vec::new(), Vec::new());
        encode(&[], &series, &mut new);
        encode_type3(&[], &series, &mut old);
        assert_eq!((new[..2].to_vec(), old[0]), (vec![RECORD_BATCH_COMPACT, FLAG_HISTS], RECORD_BATCH_HISTS));
        for buf in [&new, &old] {
            let d = decode(buf).unwrap();
            let got: Vec<Vec<HistogramSample>> = d.histograms().map(<[_]>::to_vec).collect();
            assert_eq!(got, vec![hists.to_vec(), vec![]]);
            assert_eq!(decoded_series(buf), vec![(4, s.to_vec()), (9, s[1..2].to_vec())]);
            for cut in 0..buf.len() {
                assert!(decode(&buf[..cut]).is_err());
            }
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn round_trip(
            series in proptest::collection::vec(
                (any::<u32>(), proptest::collection::vec((any::<i64>(), any::<u64>(), -1000i64..1000), 0..20)),
                0..8,
            ),
        ) {
            // Raw bits (mostly not integers) and small integers, in any order of ids.
            let samples: Vec<(SeriesId, Vec<Sample>)> = series
                .iter()
                .enumerate()
                .map(|(i, (id, ts))| {
                    let s = ts.iter().map(|&(t, bits, int)| {
                        Sample::new(t, if i % 2 == 0 { f64::from_bits(bits) } else { int as f64 })
                    });
                    (*id, s.collect())
                })
                .collect();
            let refs: Vec<(SeriesId, &[Sample])> = samples.iter().map(|(id, s)| (*id, &s[..])).collect();
            let (mut new, mut old) = (Vec::new(), Vec::new());
            encode(&[], &plain(&refs), &mut new);
            encode_type1(&[], &refs, &mut old);
            for buf in [&new, &old] {
                prop_assert_eq!(decoded_series(buf), samples.clone());
                for cut in 0..buf.len() {
                    prop_assert!(decode(&buf[..cut]).is_err());
                }
            }
        }
    }
}
