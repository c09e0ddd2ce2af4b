//! One committed state of a bucket prefix: the object `manifest/<seq>`.
//!
//! The local manifest's text (`docs/format/manifest.md`) wrapped with what the bucket needs
//! besides: the sequence number, the writer epoch that fences older writers, a nonce that tells
//! two writers of one epoch apart, and the objects no longer listed with when they stopped
//! being listed (deleted once older than the delete delay). Layout in
//! `docs/format/bucket.md`.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};
use crate::manifest::Manifest;

const HEADER: &str = "strata-bucket-manifest 1";

/// A partition file the prefix no longer lists, and since when (unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gone {
    pub partition: i64,
    pub id: u64,
    pub since_ms: i64,
}

/// One `manifest/<seq>` object.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Its number: the object's name. Each is created once, if absent.
    pub seq: u64,
    /// The writer epoch: a writer that opens the prefix commits `epoch + 1` of the newest
    /// record, and a writer that finds a newer epoch than its own at its next number stops.
    pub epoch: u64,
    /// Random per writer process: two writers racing for one epoch write different bytes, so
    /// neither mistakes the other's record for its own lost put.
    pub writer: u64,
    /// The oldest record not known to be deleted: records from here to `seq - 16` are
    /// deleted once older than the delete delay.
    pub oldest: u64,
    /// Files dropped from the list and not yet deleted.
    pub gone: Vec<Gone>,
    /// The committed file list (and the writer's counters).
    pub manifest: Manifest,
}

impl Record {
    pub fn encode(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{HEADER}");
        let _ = writeln!(s, "seq {}", self.seq);
        let _ = writeln!(s, "epoch {}", self.epoch);
        let _ = writeln!(s, "writer {:016x}", self.writer);
        let _ = writeln!(s, "oldest {}", self.oldest);
        for g in &self.gone {
            let _ = writeln!(s, "gone {} {} {}", g.partition, g.id, g.since_ms);
        }
        s.push_str(&self.manifest.encode());
        let crc = crc32fast::hash(s.as_bytes());
        let _ = writeln!(s, "crc {crc:08x}");
        s
    }

    /// Parses a record, verifying both CRCs (its own and the embedded manifest's). `name`
    /// names the object in errors.
    pub fn decode(bytes: &[u8], name: &str) -> Result<Record> {
        let path = Path::new(name);
        let bad = |why: String| Error::corruption(path, None, why);
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let last = text.strip_suffix('\n').ok_or_else(|| bad("no final newline".into()))?;
        let body_end = last.rfind('\n').map_or(0, |i| i + 1);
        let (body, crc_line) = last.split_at(body_end);
        let crc = crc_line
            .strip_prefix("crc ")
            .filter(|h| h.len() == 8)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| bad("missing crc line".into()))?;
        if crc32fast::hash(body.as_bytes()) != crc {
            return Err(bad("crc mismatch".into()));
        }
        let manifest_at = body.find("strata-manifest ").ok_or_else(|| bad("no embedded manifest".into()))?;
        let (head, manifest) = body.split_at(manifest_at);
        let mut lines = head.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad(format!("expected {HEADER:?}")));
        }
        let mut field = |name: &str| -> Result<String> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(name))
                .and_then(|v| v.strip_prefix(' '))
                .map(str::to_string)
                .ok_or_else(|| bad(format!("expected the {name} line")))
        };
        let num = |v: String, radix: u32| {
            u64::from_str_radix(&v, radix).map_err(|_| bad(format!("bad number {v:?}")))
        };
        let seq = num(field("seq")?, 10)?;
        let epoch = num(field("epoch")?, 10)?;
        let writer = num(field("writer")?, 16)?;
        let oldest = num(field("oldest")?, 10)?;
        let mut gone = Vec::new();
        for l in lines {
            let parts: Vec<&str> = l.split(' ').collect();
            let parsed = match parts.as_slice() {
                ["gone", p, id, since] => (|| {
                    Some(Gone {
                        partition: p.parse().ok()?,
                        id: id.parse().ok()?,
                        since_ms: since.parse().ok()?,
                    })
                })(),
                _ => None,
            };
            gone.push(parsed.ok_or_else(|| bad(format!("bad line {l:?}")))?);
        }
        let manifest = Manifest::decode(manifest, path)?;
        Ok(Record { seq, epoch, writer, oldest, gone, manifest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::FileEntry;

    fn sample() -> Record {
        let mut m =
            Manifest { next_file_id: 7, next_seq: 9, partition_ms: 86_400_000, ..Manifest::default() };
        m.files.push(FileEntry {
            partition: 0,
            id: 3,
            seq: 4,
            size: 100,
            min_t: 1,
            max_t: 2,
            series: 5,
            samples: 6,
            tombs_applied: 0,
            origin: 0,
        });
        Record {
            seq: 12,
            epoch: 3,
            writer: 0xdead_beef,
            oldest: 1,
            gone: vec![Gone { partition: 0, id: 1, since_ms: 99 }],
            manifest: m,
        }
    }

    #[test]
    fn round_trips() {
        let r = sample();
        let text = r.encode();
        let back = Record::decode(text.as_bytes(), "manifest/12").unwrap();
        assert_eq!((back.seq, back.epoch, back.writer, back.oldest), (12, 3, 0xdead_beef, 1));
        assert_eq!(back.gone, r.gone);
        assert_eq!(back.manifest.files, r.manifest.files);
        assert_eq!(back.encode(), text);
    }

    #[test]
    fn any_flipped_byte_is_refused() {
        let text = sample().encode().into_bytes();
        for i in 0..text.len() {
            let mut bad = text.clone();
            bad[i] ^= 0x01;
            assert!(Record::decode(&bad, "m").is_err(), "flip at byte {i} went unnoticed");
        }
    }
}
