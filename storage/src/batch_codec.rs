//! The payload of a WAL record: one ingest batch.
//!
//! Series ids are runtime ids, valid only inside one process run, so each WAL segment is
//! self-describing: the first record in a segment that uses a series carries its definition
//! (id and labels), and replay maps ids segment by segment. That lets whole old segments be
//! deleted after a flush without a separate series log or checkpoint. Layout in
//! `docs/format/wal.md` ("Batch record payload").
//!
//! Decoding borrows the label strings from the record ([`DecodedBatch`]): replay looks each
//! defined series up in the index by those strings and allocates only for a series it creates.

use hashbrown::HashMap;

use crate::encoding::varint::{get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};
use crate::labels_ref::{LabelPair, LabelsRef, normalize_tail};
use crate::types::{Sample, SeriesId};

/// Record type byte of a batch record.
const RECORD_BATCH: u8 = 1;

/// Encodes a batch record: the definitions of `defs` (series not yet defined in this segment)
/// followed by the samples of every series.
pub fn encode(defs: &[(SeriesId, LabelsRef<'_>)], series: &[(SeriesId, &[Sample])], out: &mut Vec<u8>) {
    out.push(RECORD_BATCH);
    put_uvarint(out, defs.len() as u64);
    for (id, labels) in defs {
        put_uvarint(out, u64::from(*id));
        put_uvarint(out, labels.len() as u64);
        for (name, value) in labels.iter() {
            put_str(out, name);
            put_str(out, value);
        }
    }
    put_uvarint(out, series.len() as u64);
    for (id, samples) in series {
        put_uvarint(out, u64::from(*id));
        put_uvarint(out, samples.len() as u64);
        let mut prev = 0i64;
        for s in samples.iter() {
            put_varint(out, s.t.wrapping_sub(prev));
            prev = s.t;
            out.extend_from_slice(&s.v.to_bits().to_le_bytes());
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
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
        }
    }

    fn clear(&mut self) {
        self.labels.clear();
        self.defs.clear();
        self.samples.clear();
        self.series.clear();
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
}

/// Decodes a batch record. Total: never panics, bounds every allocation by the input length.
/// Labels are made to follow the rules of [`crate::Labels`] as `Labels::new` would (a record
/// written by strata always does).
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
    if kind != RECORD_BATCH {
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
    }
    if pos != buf.len() {
        return Err(Error::Decode(format!("{} trailing bytes after WAL batch record", buf.len() - pos)));
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

/// Maps the ids of one WAL segment (as written by the process that wrote it) to this process's
/// ids. Reset at every segment boundary, because each segment defines the series it uses.
#[derive(Debug, Default)]
pub struct IdMap {
    segment: Option<u64>,
    map: HashMap<SeriesId, SeriesId>,
}

impl IdMap {
    /// Starts mapping for `segment`, forgetting the previous segment's ids if it changed.
    pub fn enter_segment(&mut self, segment: u64) {
        if self.segment != Some(segment) {
            self.segment = Some(segment);
            self.map.clear();
        }
    }
    /// Records that `old` (in the WAL) is `new` (in this process).
    pub fn insert(&mut self, old: SeriesId, new: SeriesId) {
        self.map.insert(old, new);
    }
    /// This process's id for WAL id `old`, if the segment defined it.
    pub fn get(&self, old: SeriesId) -> Option<SeriesId> {
        self.map.get(&old).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Labels, stale_nan};
    use proptest::prelude::*;

    #[test]
    fn round_trip_with_defs() {
        let l = Labels::from_pairs(&[("__name__", "up"), ("job", "a")]);
        let pairs = [("__name__", "up"), ("job", "a")];
        let s = vec![Sample::new(-5, 1.0), Sample::new(i64::MAX, stale_nan()), Sample::new(i64::MIN, -0.0)];
        let mut buf = Vec::new();
        encode(&[(7, LabelsRef::new(&pairs).unwrap())], &[(7, &s), (3, &[])], &mut buf);
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
        let defs = [(1, LabelsRef::new(&a).unwrap()), (2, LabelsRef::new(&b).unwrap())];
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
