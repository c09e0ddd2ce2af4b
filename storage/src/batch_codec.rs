//! The payload of a WAL record: one ingest batch.
//!
//! Series ids are runtime ids, valid only inside one process, so each WAL run (a sequence of
//! segments one process wrote between two flushes, see [`crate::wal`]) is self-describing:
//! the first record in a run that uses a series carries its definition (id and labels), and
//! replay maps ids run by run. That lets whole old runs be deleted after a flush without a
//! separate series log or checkpoint, while a series' labels are written once per flush
//! rather than once per segment. Layout in `docs/format/batch.md`.
//!
//! A batch with start timestamps is written as record type 2: the same as type 1 with a list
//! of start-timestamp runs after each series' samples. A batch without any is written as type 1,
//! byte for byte as before, so series without start timestamps cost nothing in the WAL and old
//! segments replay unchanged.
//!
//! A batch with native histograms is written as record type 3: type 2 with, after each
//! series' start-timestamp runs, its histograms (time and histogram, in write order). The
//! histogram samples themselves are markers among the floats ([`crate::hist`]).
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

/// One series of a record of type 3: id, samples, start timestamps (as for
/// [`encode_with_starts`]) and histograms in write order.
pub type FullSeries<'a> = (SeriesId, &'a [Sample], &'a [i64], &'a [HistogramSample]);

/// Encodes a batch record with histograms (type 3).
pub fn encode_full(defs: &[(SeriesId, RawLabels<'_>)], series: &[FullSeries<'_>], out: &mut Vec<u8>) {
    out.push(RECORD_BATCH_HISTS);
    put_defs(defs, out);
    put_uvarint(out, series.len() as u64);
    for (id, samples, starts, hists) in series {
        put_samples(*id, samples, out);
        put_start_runs(starts, out);
        put_uvarint(out, hists.len() as u64);
        let mut prev = 0i64;
        for h in hists.iter() {
            put_varint(out, h.t.wrapping_sub(prev));
            prev = h.t;
            hist::encode_one(&h.h, out);
        }
    }
}

/// Encodes a batch record: the definitions of `defs` (series not yet defined in this run)
/// followed by the samples of every series.
pub fn encode(defs: &[(SeriesId, RawLabels<'_>)], series: &[(SeriesId, &[Sample])], out: &mut Vec<u8>) {
    out.push(RECORD_BATCH);
    put_defs(defs, out);
    put_uvarint(out, series.len() as u64);
    for (id, samples) in series {
        put_samples(*id, samples, out);
    }
}

/// Encodes a batch record whose samples have start timestamps (type 2): like [`encode`], with
/// each series' `starts` (empty: none has one; otherwise one per sample, 0 for none) as runs
/// of consecutive samples sharing a start timestamp after its samples.
pub fn encode_with_starts(
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
    let kind = *buf.first().ok_or_else(|| Error::Decode("empty WAL record".into()))?;
    if !matches!(kind, RECORD_BATCH | RECORD_BATCH_STARTS | RECORD_BATCH_HISTS) {
        return Err(Error::Decode(format!("unknown WAL record type {kind}")));
    }
    pos += 1;
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
    for _ in 0..nseries {
        let id = get_id(buf, &mut pos)?;
        let n = bounded_count(buf, &mut pos, 9)?;
        let keep = keep(id);
        if keep {
            out.samples.reserve(n);
        }
        let mut t = 0i64;
        for _ in 0..n {
            t = t.wrapping_add(get_varint(buf, &mut pos)?);
            let bytes: [u8; 8] = buf
                .get(pos..pos + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| Error::Decode("WAL record truncated in a sample value".into()))?;
            pos += 8;
            if keep {
                out.samples.push(Sample::new(t, f64::from_bits(u64::from_le_bytes(bytes))));
            }
        }
        if keep {
            out.series.push((id, out.samples.len()));
        }
        if kind == RECORD_BATCH_STARTS || kind == RECORD_BATCH_HISTS {
            let target = keep.then_some(&mut out.starts);
            get_start_runs(buf, &mut pos, n, target)?;
            if keep {
                out.start_ends.push(out.starts.len());
            }
        }
        if kind == RECORD_BATCH_HISTS {
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
    let rest = buf.len().saturating_sub(*pos) as u64;
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
    use crate::types::{Labels, stale_nan};
    use proptest::prelude::*;

    /// String pairs as the byte pairs a batch carries.
    fn bytes<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<crate::labels_ref::RawPair<'a>> {
        pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect()
    }

    #[test]
    fn round_trip_with_defs() {
        let l = Labels::from_pairs(&[("__name__", "up"), ("job", "a")]);
        let pairs = [("__name__", "up"), ("job", "a")];
        let s = vec![Sample::new(-5, 1.0), Sample::new(i64::MAX, stale_nan()), Sample::new(i64::MIN, -0.0)];
        let mut buf = Vec::new();
        let raw = bytes(&pairs);
        encode(&[(7, RawLabels::new(&raw).unwrap())], &[(7, &s), (3, &[])], &mut buf);
        let d = decode(&buf).unwrap();
        let defs: Vec<(SeriesId, Labels)> = d.defs().map(|(id, l)| (id, l.to_labels())).collect();
        assert_eq!(defs, vec![(7, l)]);
        let series: Vec<(SeriesId, Vec<Sample>)> = d.series().map(|(id, s)| (id, s.to_vec())).collect();
        assert_eq!(series, vec![(7, s), (3, vec![])]);
        // The label strings are the record's own bytes.
        let (_, labels) = d.defs().next().unwrap();
        let name = labels.pairs()[0].0.as_ptr() as usize;
        assert!((buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len()).contains(&name));
    }

    #[test]
    fn a_share_decodes_only_its_series_and_reuses_memory() {
        let (a, b) = ([("__name__", "a")], [("__name__", "b")]);
        let s = [Sample::new(1, 1.0)];
        let mut buf = Vec::new();
        let (a, b) = (bytes(&a), bytes(&b));
        let defs = [(1, RawLabels::new(&a).unwrap()), (2, RawLabels::new(&b).unwrap())];
        encode(&defs, &[(1, &s), (2, &s)], &mut buf);
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
        assert!(decode_where(&buf[..buf.len() - 12], |_| false, &mut out).is_err());
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
        let mut buf = Vec::new();
        encode_with_starts(&defs, &[(1, &s, &[5, 5, 0, 7]), (2, &s[..1], &[])], &mut buf);
        assert_eq!(buf[0], RECORD_BATCH_STARTS);
        let d = decode(&buf).unwrap();
        let got: Vec<(SeriesId, usize, Vec<i64>)> =
            d.series_with_starts().map(|(id, s, st)| (id, s.len(), st.to_vec())).collect();
        assert_eq!(got, vec![(1, 4, vec![5, 5, 0, 7]), (2, 1, vec![])]);
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err());
        }
        // A series left out of a share still has its runs checked and skipped.
        let mut out = DecodedBatch::default();
        decode_where(&buf, |id| id == 2, &mut out).unwrap();
        assert_eq!(
            out.series_with_starts().map(|(id, _, st)| (id, st.len())).collect::<Vec<_>>(),
            vec![(2, 0)]
        );
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

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn round_trip(ts in proptest::collection::vec((any::<i64>(), any::<u64>()), 0..50), id in any::<u32>()) {
            let s: Vec<Sample> = ts.iter().map(|(t, b)| Sample::new(*t, f64::from_bits(*b))).collect();
            let mut buf = Vec::new();
            encode(&[], &[(id, &s)], &mut buf);
            let d = decode(&buf).unwrap();
            let series: Vec<(SeriesId, Vec<Sample>)> = d.series().map(|(id, s)| (id, s.to_vec())).collect();
            prop_assert_eq!(series, vec![(id, s)]);
            for cut in 0..buf.len() {
                prop_assert!(decode(&buf[..cut]).is_err());
            }
        }
    }
}
