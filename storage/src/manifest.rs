//! The manifest: the list of live partition files, tombstones and where WAL replay starts.
//!
//! It is the commit point of every flush, compaction, deletion and retention run: the new
//! manifest is written to a temporary file, fsynced and renamed over the old one
//! ([`crate::fsutil::replace_atomic`]). Whatever is on disk but not listed is garbage from an
//! interrupted operation and is removed at startup. A small line-oriented text format with a
//! trailing CRC, so an operator can read it; layout in `docs/format/manifest.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};
use crate::matcher::{MatchOp, Matcher};

const HEADER: &str = "strata-manifest 1";

/// One live partition file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Start of the partition (ms), which names its directory.
    pub partition: i64,
    /// File id, which names the file.
    pub id: u64,
    /// Write order: where two files hold the same series and timestamp, the higher `seq` wins.
    /// A compaction output takes the highest `seq` of its inputs.
    pub seq: u64,
    /// Size in bytes.
    pub size: u64,
    /// Oldest sample.
    pub min_t: i64,
    /// Newest sample.
    pub max_t: i64,
    /// Series in the file.
    pub series: u64,
    /// Samples in the file.
    pub samples: u64,
    /// Every tombstone with `seq <=` this was applied when the file was written (compaction), so
    /// it no longer hides anything in it.
    pub tombs_applied: u64,
    /// On a query node, which followed prefix listed the file (1 for the first, ...); 0
    /// elsewhere. Not stored: seqs order the files and tombstones of one prefix only, so a
    /// tombstone hides data in files of its own prefix only.
    pub origin: u32,
}

impl FileEntry {
    /// The entry of a file this process just wrote (a flush's or a compaction's): `written`
    /// is the writer's series, samples and time range, the partition's start for a file
    /// without samples.
    pub(crate) fn written(
        partition: i64,
        id: u64,
        seq: u64,
        size: u64,
        (series, samples, range): (u64, u64, Option<(i64, i64)>),
        tombs_applied: u64,
    ) -> FileEntry {
        let (min_t, max_t) = range.unwrap_or((partition, partition));
        FileEntry { partition, id, seq, size, min_t, max_t, series, samples, tombs_applied, origin: 0 }
    }
}

/// A deletion: samples of series matching `matchers` in `[mint, maxt]`, in files with
/// `seq < self.seq` (data written before the deletion), are hidden from reads and dropped by
/// the next compaction of those files.
#[derive(Debug, Clone)]
pub struct Tombstone {
    /// Ordering against file seqs.
    pub seq: u64,
    /// First deleted timestamp.
    pub mint: i64,
    /// Last deleted timestamp.
    pub maxt: i64,
    /// Which series.
    pub matchers: Vec<Matcher>,
    /// On a query node, which followed prefix's record holds the tombstone (see
    /// [`FileEntry::origin`]); 0 elsewhere. Not stored.
    pub origin: u32,
}

impl Tombstone {
    /// Does this tombstone hide anything in file `f`?
    pub fn applies_to(&self, f: &FileEntry) -> bool {
        self.origin == f.origin
            && f.seq < self.seq
            && self.seq > f.tombs_applied
            && f.min_t <= self.maxt
            && f.max_t >= self.mint
    }
}

/// The manifest's contents.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// Next file id to hand out.
    pub next_file_id: u64,
    /// Next seq to hand out.
    pub next_seq: u64,
    /// WAL segments below this were flushed and are not replayed.
    pub wal_first_segment: u64,
    /// Width of the time partitions in ms, fixed when the database is created (0: not yet set).
    /// Kept here because retention and reads depend on it: a database opened with another
    /// `--partition-duration` keeps its own.
    pub partition_ms: i64,
    /// Live files.
    pub files: Vec<FileEntry>,
    /// Live tombstones.
    pub tombstones: Vec<Tombstone>,
    /// How far outside sources had been appended when the data these files hold was: per
    /// source (an opaque name, such as a partition of the ingest log), a position every
    /// record up to which is in the listed files ([`crate::Db::note_position`]).
    pub positions: BTreeMap<String, u64>,
}

impl Manifest {
    /// Serializes to the text format.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{HEADER}");
        let _ = writeln!(s, "next_file_id {}", self.next_file_id);
        let _ = writeln!(s, "next_seq {}", self.next_seq);
        let _ = writeln!(s, "wal_first_segment {}", self.wal_first_segment);
        let _ = writeln!(s, "partition_ms {}", self.partition_ms);
        for f in &self.files {
            let _ = writeln!(
                s,
                "file {} {} {} {} {} {} {} {} {}",
                f.partition, f.id, f.seq, f.size, f.min_t, f.max_t, f.series, f.samples, f.tombs_applied
            );
        }
        for t in &self.tombstones {
            let _ = write!(s, "tombstone {} {} {} {}", t.seq, t.mint, t.maxt, t.matchers.len());
            for m in &t.matchers {
                let op = match m.op {
                    MatchOp::Equal => "=",
                    MatchOp::NotEqual => "!=",
                    MatchOp::Regex => "=~",
                    MatchOp::NotRegex => "!~",
                };
                let _ = write!(s, " {} {} {}", escape(&m.name), op, escape(&m.value));
            }
            s.push('\n');
        }
        for (source, position) in &self.positions {
            let _ = writeln!(s, "position {} {position}", escape(source));
        }
        let crc = crc32fast::hash(s.as_bytes());
        let _ = writeln!(s, "crc {crc:08x}");
        s
    }

    /// Parses the text format, verifying the CRC.
    pub fn decode(text: &str, path: &Path) -> Result<Manifest> {
        let bad = |line: usize, why: &str| Error::corruption(path, None, format!("line {}: {why}", line + 1));
        let body_end = text.rfind("crc ").ok_or_else(|| bad(0, "missing crc line"))?;
        let (body, crc_line) = text.split_at(body_end);
        let want = u32::from_str_radix(crc_line.trim_start_matches("crc ").trim(), 16)
            .map_err(|_| bad(body.lines().count(), "bad crc line"))?;
        if crc32fast::hash(body.as_bytes()) != want {
            return Err(Error::corruption(path, None, "manifest checksum mismatch"));
        }
        let mut m = Manifest::default();
        let mut lines = body.lines().enumerate();
        match lines.next() {
            Some((_, HEADER)) => {}
            _ => return Err(bad(0, "not a strata manifest (or unsupported version)")),
        }
        for (n, line) in lines {
            let mut w = line.split(' ');
            let kind = w.next().unwrap_or("");
            let mut num = |what: &str| -> Result<i64> {
                w.next().and_then(|x| x.parse::<i64>().ok()).ok_or_else(|| bad(n, &format!("bad {what}")))
            };
            match kind {
                "next_file_id" => m.next_file_id = num("next_file_id")? as u64,
                "next_seq" => m.next_seq = num("next_seq")? as u64,
                "wal_first_segment" => m.wal_first_segment = num("wal_first_segment")? as u64,
                "partition_ms" => m.partition_ms = num("partition_ms")?,
                "file" => m.files.push(FileEntry {
                    partition: num("partition")?,
                    id: num("id")? as u64,
                    seq: num("seq")? as u64,
                    size: num("size")? as u64,
                    min_t: num("min_t")?,
                    max_t: num("max_t")?,
                    series: num("series")? as u64,
                    samples: num("samples")? as u64,
                    tombs_applied: num("tombs_applied")? as u64,
                    origin: 0,
                }),
                "tombstone" => {
                    let seq = num("seq")? as u64;
                    let mint = num("mint")?;
                    let maxt = num("maxt")?;
                    let count = num("matcher count")?;
                    let mut matchers = Vec::new();
                    for _ in 0..count {
                        let (Some(name), Some(op), Some(value)) = (w.next(), w.next(), w.next()) else {
                            return Err(bad(n, "truncated matcher"));
                        };
                        let op = match op {
                            "=" => MatchOp::Equal,
                            "!=" => MatchOp::NotEqual,
                            "=~" => MatchOp::Regex,
                            "!~" => MatchOp::NotRegex,
                            _ => return Err(bad(n, "bad matcher op")),
                        };
                        let name = unescape(name).ok_or_else(|| bad(n, "bad escape"))?;
                        let value = unescape(value).ok_or_else(|| bad(n, "bad escape"))?;
                        matchers.push(Matcher::new(op, name, value).map_err(|e| bad(n, &e.to_string()))?);
                    }
                    m.tombstones.push(Tombstone { seq, mint, maxt, matchers, origin: 0 });
                }
                "position" => {
                    let source = w.next().and_then(unescape).ok_or_else(|| bad(n, "bad position source"))?;
                    let position = w.next().and_then(|x| x.parse::<u64>().ok()).ok_or_else(|| bad(n, "bad position"))?;
                    m.positions.insert(source, position);
                }
                "" => {}
                other => return Err(bad(n, &format!("unknown entry {other:?}"))),
            }
        }
        Ok(m)
    }

    /// Reads the manifest at `path`; `None` if there is none (a new database).
    pub fn load(path: &Path) -> Result<Option<Manifest>> {
        match crate::file_source::read_manifest(path) {
            Ok(bytes) => {
                let text =
                    String::from_utf8(bytes).map_err(|_| Error::corruption(path, None, "not UTF-8"))?;
                Manifest::decode(&text, path).map(Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
        }
    }

    /// Atomically replaces the manifest at `path` with this one (the commit point). On failure
    /// the error says whether the new manifest is nevertheless in place (its directory could
    /// not be synced): then the caller must keep the files of both versions.
    pub fn store(&self, path: &Path) -> std::result::Result<(), crate::fsutil::ReplaceError> {
        crate::failpoint::hit("manifest.before_replace");
        crate::fsutil::replace_atomic(path, self.encode().as_bytes())?;
        crate::failpoint::hit("manifest.after_replace");
        Ok(())
    }
}

/// Percent-escapes everything but unreserved characters, so values with spaces or newlines
/// survive the space-separated format. The empty string is written as `%`.
fn escape(s: &str) -> String {
    if s.is_empty() {
        return "%".to_string();
    }
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"_-.:".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    if s == "%" {
        return Some(String::new());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_crc() {
        let m = Manifest {
            next_file_id: 9,
            next_seq: 12,
            wal_first_segment: 3,
            partition_ms: 7_200_000,
            files: vec![FileEntry {
                partition: -86_400_000,
                id: 4,
                seq: 7,
                size: 100,
                min_t: -5,
                max_t: 7,
                series: 2,
                samples: 30,
                tombs_applied: 0,
                origin: 0,
            }],
            tombstones: vec![Tombstone {
                seq: 11,
                mint: 1,
                maxt: 2,
                matchers: vec![
                    Matcher::new(MatchOp::Regex, "job", "a b|c%").unwrap(),
                    Matcher::new(MatchOp::Equal, "x", "").unwrap(),
                ],
                origin: 0,
            }],
            positions: [("log:strata/3".to_string(), 1204), ("a b".to_string(), 0)].into(),
        };
        let text = m.encode();
        assert!(text.contains("\nposition a%20b 0\nposition log:strata%2F3 1204\ncrc "), "{text}");
        let p = Path::new("MANIFEST");
        let d = Manifest::decode(&text, p).unwrap();
        assert_eq!(d.files, m.files);
        assert_eq!(d.tombstones[0].matchers[0].value, "a b|c%");
        assert_eq!(d.tombstones[0].matchers[1].value, "");
        assert_eq!(d.encode(), text);
        assert_eq!(d.positions, m.positions);
        // Without positions the text is what it was before they existed.
        let plain = Manifest { positions: BTreeMap::new(), ..m.clone() };
        assert!(!plain.encode().contains("position"));
        let flipped = text.replacen("seq 12", "seq 13", 1);
        assert!(Manifest::decode(&flipped, p).is_err());
    }
}
