//! The payload of a WAL record: one ingest batch.
//!
//! Series ids are runtime ids, valid only inside one process run, so each WAL segment is
//! self-describing: the first record in a segment that uses a series carries its definition
//! (id and labels), and replay maps ids segment by segment. That lets whole old segments be
//! deleted after a flush without a separate series log or checkpoint. Layout in
//! `docs/format/wal.md` ("Batch record payload").

use std::collections::HashMap;

use crate::encoding::varint::{get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};
use crate::types::{Label, Labels, Sample, SeriesId};

/// Record type byte of a batch record.
const RECORD_BATCH: u8 = 1;

/// Encodes a batch record: the definitions of `defs` (series not yet defined in this segment)
/// followed by the samples of every series.
pub fn encode(defs: &[(SeriesId, &Labels)], series: &[(SeriesId, &[Sample])], out: &mut Vec<u8>) {
    out.push(RECORD_BATCH);
    put_uvarint(out, defs.len() as u64);
    for (id, labels) in defs {
        put_uvarint(out, u64::from(*id));
        put_uvarint(out, labels.len() as u64);
        for l in labels.iter() {
            put_str(out, &l.name);
            put_str(out, &l.value);
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

/// A decoded batch record, ids as written by the process that wrote the segment.
#[derive(Debug, Default, PartialEq)]
pub struct DecodedBatch {
    /// Series defined by this record.
    pub defs: Vec<(SeriesId, Labels)>,
    /// Samples per series id.
    pub series: Vec<(SeriesId, Vec<Sample>)>,
}

/// Decodes a batch record. Total: never panics, bounds every allocation by the input length.
pub fn decode(buf: &[u8]) -> Result<DecodedBatch> {
    let mut pos = 0usize;
    let kind = *buf.first().ok_or_else(|| Error::Decode("empty WAL record".into()))?;
    if kind != RECORD_BATCH {
        return Err(Error::Decode(format!("unknown WAL record type {kind}")));
    }
    pos += 1;
    let ndefs = bounded_count(buf, &mut pos, 2)?;
    let mut out = DecodedBatch { defs: Vec::with_capacity(ndefs), series: Vec::new() };
    for _ in 0..ndefs {
        let id = get_id(buf, &mut pos)?;
        let n = bounded_count(buf, &mut pos, 2)?;
        let mut labels = Vec::with_capacity(n);
        for _ in 0..n {
            let name = get_str(buf, &mut pos)?;
            let value = get_str(buf, &mut pos)?;
            labels.push(Label::new(name, value));
        }
        out.defs.push((id, Labels::new(labels)));
    }
    let nseries = bounded_count(buf, &mut pos, 2)?;
    out.series.reserve(nseries);
    for _ in 0..nseries {
        let id = get_id(buf, &mut pos)?;
        let n = bounded_count(buf, &mut pos, 9)?;
        let mut samples = Vec::with_capacity(n);
        let mut t = 0i64;
        for _ in 0..n {
            t = t.wrapping_add(get_varint(buf, &mut pos)?);
            let bytes: [u8; 8] = buf
                .get(pos..pos + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| Error::Decode("WAL record truncated in a sample value".into()))?;
            pos += 8;
            samples.push(Sample::new(t, f64::from_bits(u64::from_le_bytes(bytes))));
        }
        out.series.push((id, samples));
    }
    if pos != buf.len() {
        return Err(Error::Decode(format!("{} trailing bytes after WAL batch record", buf.len() - pos)));
    }
    Ok(out)
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

/// A label string borrowed from the record (the `Arc<str>` is made once, by the caller).
fn get_str<'a>(buf: &'a [u8], pos: &mut usize) -> Result<&'a str> {
    let n = get_uvarint(buf, pos)? as usize;
    let bytes = buf
        .get(*pos..pos.saturating_add(n))
        .ok_or_else(|| Error::Decode("WAL record truncated in a label".into()))?;
    *pos += n;
    std::str::from_utf8(bytes).map_err(|_| Error::Decode("label is not UTF-8".into()))
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
    use crate::types::stale_nan;
    use proptest::prelude::*;

    #[test]
    fn round_trip_with_defs() {
        let l = Labels::from_pairs(&[("__name__", "up"), ("job", "a")]);
        let s = vec![Sample::new(-5, 1.0), Sample::new(i64::MAX, stale_nan()), Sample::new(i64::MIN, -0.0)];
        let mut buf = Vec::new();
        encode(&[(7, &l)], &[(7, &s), (3, &[])], &mut buf);
        let d = decode(&buf).unwrap();
        assert_eq!(d.defs, vec![(7, l)]);
        assert_eq!(d.series, vec![(7, s), (3, vec![])]);
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
            prop_assert_eq!(d.series, vec![(id, s)]);
            for cut in 0..buf.len() {
                prop_assert!(decode(&buf[..cut]).is_err());
            }
        }
    }
}
