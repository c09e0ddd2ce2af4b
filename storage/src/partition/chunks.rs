//! The series-chunk directory of a version 5 partition file: what lets a reader of a bucket
//! object (a query node) fetch only the part of the series table that a selection may need.
//!
//! Why: opening a file fetched its whole index, labels and block lists of every series, before
//! a query could select anything: 8.75 MB for a file of 100,000 series, about 165 ms from a
//! bucket on loopback, for a query that wanted 80 of them.
//!
//! The series table is cut into chunks of [`CHUNK_SERIES`] consecutive series. The directory,
//! after the symbol table at the end of the index (where a read of the file's tail finds both),
//! lists each chunk's length, checksum and the smallest and largest metric name among its
//! series. Series are stored in label-set order, and label sets start with `__name__` unless a
//! label name sorts before it (an uppercase one), so a metric's series are mostly consecutive,
//! and a selector that names a metric (`x`, `__name__=~"a|b"`, `__name__=~"cpu_.*"`) needs only
//! the chunks whose name range may hold it ([`may_match`]). The rule is a range test, so it
//! holds whatever the order: a chunk whose series are not grouped by name only has a wider
//! range, and is read more often.

use std::ops::Range;
use std::sync::Arc;

use crate::encoding::varint::{get_uvarint, put_uvarint};
use crate::error::{Error, Result};
use crate::matcher::{MatchOp, Matcher};

use super::DIRECTORY_TAG;

/// Series per chunk. 128 series of TSBS's ten labels take about 11 KB with their block lists:
/// small next to what a selection fetches, and the directory's 8 or so bytes per chunk are
/// small next to the chunk.
pub(crate) const CHUNK_SERIES: usize = 128;

/// One chunk of the series table as the writer builds it. Metric names are kept as the
/// directory refers to them: symbol + 1, 0 for a series without one (which sorts as `""`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkEntry {
    /// Bytes of the chunk's series entries (set when the chunk is closed).
    pub len: u64,
    /// CRC32 of those bytes (set when the chunk is closed).
    pub crc: u32,
    /// Series in the chunk.
    pub series: u32,
    min_name: u64,
    max_name: u64,
}

impl ChunkEntry {
    /// An empty chunk whose first series has metric name `name`.
    pub fn new(name: u64) -> ChunkEntry {
        ChunkEntry { len: 0, crc: 0, series: 0, min_name: name, max_name: name }
    }

    /// Counts a series with metric name `name` in, names compared through `symbols`.
    pub fn add(&mut self, name: u64, symbols: &[Arc<str>]) {
        self.series += 1;
        let s = name_str(name, symbols);
        if s < name_str(self.min_name, symbols) {
            self.min_name = name;
        }
        if s > name_str(self.max_name, symbols) {
            self.max_name = name;
        }
    }
}

fn name_str(r: u64, symbols: &[Arc<str>]) -> &str {
    r.checked_sub(1).and_then(|i| symbols.get(usize::try_from(i).ok()?)).map_or("", |s| s)
}

/// Appends the directory of a series table of `series` series cut into `chunks`.
pub(crate) fn encode_directory(series: u64, chunks: &[ChunkEntry], out: &mut Vec<u8>) {
    out.push(DIRECTORY_TAG);
    put_uvarint(out, series);
    put_uvarint(out, CHUNK_SERIES as u64);
    put_uvarint(out, chunks.len() as u64);
    for c in chunks {
        put_uvarint(out, c.len);
        out.extend_from_slice(&c.crc.to_le_bytes());
        put_uvarint(out, c.min_name);
        put_uvarint(out, c.max_name);
    }
}

/// One chunk of the series table as a reader knows it.
#[derive(Debug, Clone)]
pub(crate) struct Chunk {
    /// Where its entries are in the file.
    pub range: Range<usize>,
    /// CRC32 of those bytes.
    pub crc: u32,
    /// Series in it.
    pub series: usize,
    /// Smallest and largest metric name of its series (`""` for a series without one).
    min_name: Arc<str>,
    max_name: Arc<str>,
}

impl Chunk {
    /// Whether one of its series may be named `name`.
    fn may_hold(&self, name: &str) -> bool {
        &*self.min_name <= name && name <= &*self.max_name
    }

    /// Whether one of its series' names may start with `p`: strings starting with `p` are the
    /// strings from `p` up to the first above `p` that does not start with it.
    fn may_hold_prefix(&self, p: &str) -> bool {
        &*self.max_name >= p && (&*self.min_name <= p || self.min_name.starts_with(p))
    }
}

/// Decodes the directory at `*pos` of `tail` (the index from the symbol table on), for a
/// series table at `series_range` of the file, checking that its chunks tile that range.
pub(crate) fn decode_directory(
    tail: &[u8],
    pos: &mut usize,
    series_range: Range<usize>,
    symbols: &[Arc<str>],
) -> Result<Vec<Chunk>> {
    if tail.get(*pos) != Some(&DIRECTORY_TAG) {
        return Err(Error::Decode("no series-chunk directory after the symbol table".into()));
    }
    *pos += 1;
    let series = get_uvarint(tail, pos)?;
    let per_chunk = get_uvarint(tail, pos)?;
    let n = get_uvarint(tail, pos)?;
    if per_chunk == 0 || n > tail.len() as u64 || series.div_ceil(per_chunk) != n {
        return Err(Error::Decode(format!("{n} chunks of {per_chunk} for {series} series")));
    }
    let name = |r: u64| -> Result<Arc<str>> {
        if r == 0 {
            return Ok(Arc::from(""));
        }
        usize::try_from(r - 1)
            .ok()
            .and_then(|i| symbols.get(i))
            .cloned()
            .ok_or_else(|| Error::Decode("bad symbol ref in the chunk directory".into()))
    };
    let mut chunks = Vec::with_capacity(n as usize);
    let mut at = series_range.start;
    let mut left = series;
    for _ in 0..n {
        let len = usize::try_from(get_uvarint(tail, pos)?).unwrap_or(usize::MAX);
        let crc = tail
            .get(*pos..*pos + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| Error::Decode("chunk directory truncated".into()))?;
        *pos += 4;
        let (min_name, max_name) = (name(get_uvarint(tail, pos)?)?, name(get_uvarint(tail, pos)?)?);
        let count = left.min(per_chunk);
        left -= count;
        let end = at.saturating_add(len);
        chunks.push(Chunk { range: at..end, crc, series: count as usize, min_name, max_name });
        at = end;
    }
    if at != series_range.end {
        return Err(Error::Decode("series chunks do not tile the series table".into()));
    }
    Ok(chunks)
}

/// Whether `chunk` may hold a series that `matchers` select, by its metric-name range: every
/// `__name__` matcher that is an equality, an alternation of literals or a literal prefix
/// (`cpu_.*`) must allow a name in the range; any other matcher allows every chunk.
pub(crate) fn may_match(chunk: &Chunk, matchers: &[Matcher]) -> bool {
    matchers.iter().filter(|m| m.name == "__name__").all(|m| match m.op {
        MatchOp::Equal => chunk.may_hold(&m.value),
        MatchOp::Regex => match m.regex_literals() {
            Some(literals) => literals.iter().any(|v| chunk.may_hold(v)),
            None => literal_prefix(&m.value).is_none_or(|p| chunk.may_hold_prefix(p)),
        },
        MatchOp::NotEqual | MatchOp::NotRegex => true,
    })
}

/// `p` for a regex `p.*` whose `p` is plain text (the regex is anchored: names starting with
/// `p`).
fn literal_prefix(pattern: &str) -> Option<&str> {
    let p = pattern.strip_suffix(".*")?;
    (!p.chars().any(|c| "\\.+*?()[]{}^$|".contains(c))).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(min: &str, max: &str) -> Chunk {
        Chunk { range: 0..0, crc: 0, series: 1, min_name: Arc::from(min), max_name: Arc::from(max) }
    }

    fn m(op: MatchOp, value: &str) -> Vec<Matcher> {
        vec![Matcher::new(op, "__name__", value).unwrap(), Matcher::equal("host", "a")]
    }

    /// The chunk test against the plain one: some name of the range (or any name, for a
    /// chunk without a usable rule) the matcher accepts.
    #[test]
    fn name_ranges_are_tested_as_the_matchers_match() {
        let names = ["", "a", "ab", "abc", "abd", "ac", "b", "cpu_idle", "cpu_user", "cpv", "mem"];
        let cases = [
            (MatchOp::Equal, "abc"),
            (MatchOp::Equal, ""),
            (MatchOp::Equal, "zzz"),
            (MatchOp::Regex, "ab|cpu_user"),
            (MatchOp::Regex, "cpu_.*"),
            (MatchOp::Regex, "ab.*"),
            (MatchOp::Regex, ".*"),
            (MatchOp::Regex, "a.c"),
            (MatchOp::NotEqual, "ab"),
            (MatchOp::NotRegex, "cpu_.*"),
        ];
        for (i, lo) in names.iter().enumerate() {
            for hi in &names[i..] {
                let c = chunk(lo, hi);
                for (op, v) in cases {
                    let ms = m(op, v);
                    // Names of the range among the sample set: `may_match` must not miss one.
                    let any = names.iter().filter(|n| lo <= *n && *n <= hi).any(|n| ms[0].matches(n));
                    if any {
                        assert!(may_match(&c, &ms), "{lo}..{hi} {op:?} {v}");
                    }
                    if matches!(op, MatchOp::Equal) {
                        assert_eq!(may_match(&c, &ms), lo <= &v && &v <= hi, "{lo}..{hi} = {v}");
                    }
                }
            }
        }
        // Ranges that cannot hold a match are left out.
        assert!(!may_match(&chunk("cpv", "mem"), &m(MatchOp::Regex, "cpu_.*")));
        assert!(!may_match(&chunk("a", "b"), &m(MatchOp::Regex, "cpu_.*")));
        assert!(may_match(&chunk("a", "cpu_idle"), &m(MatchOp::Regex, "cpu_.*")));
        assert!(may_match(&chunk("cpu_user", "mem"), &m(MatchOp::Regex, "cpu_.*")));
        assert!(!may_match(&chunk("b", "mem"), &m(MatchOp::Regex, "ab|a")));
        // Without a name matcher every chunk may hold a match.
        assert!(may_match(&chunk("x", "y"), &[Matcher::equal("host", "a")]));
    }

    #[test]
    fn directories_round_trip_and_reject_bad_bytes() {
        let symbols: Vec<Arc<str>> = ["m", "n"].into_iter().map(Arc::from).collect();
        let mut a = ChunkEntry::new(2);
        for name in [2, 1, 0] {
            a.add(name, &symbols);
        }
        a.len = 10;
        a.crc = 7;
        let mut b = ChunkEntry::new(1);
        b.add(1, &symbols);
        b.len = 5;
        let mut out = Vec::new();
        encode_directory(CHUNK_SERIES as u64 + 1, &[a, b], &mut out);
        let chunks = decode_directory(&out, &mut 0, 100..115, &symbols).unwrap();
        assert_eq!(chunks.len(), 2);
        assert_eq!((chunks[0].range.clone(), chunks[0].crc, chunks[0].series), (100..110, 7, CHUNK_SERIES));
        assert_eq!((&*chunks[0].min_name, &*chunks[0].max_name), ("", "n"));
        assert_eq!((chunks[1].range.clone(), chunks[1].series), (110..115, 1));
        assert!(decode_directory(&out, &mut 0, 100..116, &symbols).is_err(), "must tile");
        assert!(decode_directory(&out, &mut 0, 100..115, &symbols[..1]).is_err(), "bad symbol");
        for cut in 0..out.len() {
            assert!(decode_directory(&out[..cut], &mut 0, 100..115, &symbols).is_err(), "cut at {cut}");
        }
    }
}
