//! The commit protocol of a bucket prefix: manifests as numbered objects created only if
//! absent, and writer epochs that fence a writer once another has opened the prefix.
//!
//! - **No fork.** Record `n` is created with a conditional put (`If-None-Match: *`), so of two
//!   writers committing `n` exactly one succeeds; the other reads `n` and learns who won.
//! - **Fencing.** A writer opening the prefix commits `latest + 1` with the latest epoch plus
//!   one ([`claim`]). An older writer's next commit then meets a record of a newer epoch at its
//!   number and stops ([`Commit::Fenced`]): it can never commit again, because every number it
//!   could try next is taken or comes after one it must read first.
//! - **Lost answers.** A create whose answer was lost (applied, then a timeout; or applied and
//!   retried by the client, whose retry gets "exists") is retried; finding an object with
//!   exactly the bytes sent means it was ours. The writer nonce makes two writers' records
//!   differ even when they list the same files.
//! - **No LIST.** The newest record is found from the `latest` hint by probing the next
//!   numbers with HEAD requests ([`latest`]).

use std::path::Path;

use bytes::Bytes;

use super::Bucket;
use super::record::Record;
use crate::error::{Error, Result};
use crate::filenames;
use crate::fsutil;
use crate::manifest::Manifest;

/// Records kept behind the newest whatever their age.
const MANIFESTS_KEPT: u64 = 16;

/// What became of a commit.
#[derive(Debug)]
pub(crate) enum Commit {
    /// The record is the prefix's state at its number.
    Done,
    /// A record of a newer epoch holds the number: this writer is fenced.
    Fenced { theirs: u64 },
    /// A record of the same or an older epoch holds the number (another writer racing for the
    /// same epoch at open): read the newest again and retry.
    Lost,
}

/// The newest record of the prefix, or None if the prefix holds none: from the hint, then
/// HEAD requests for the next numbers until one is absent.
pub(crate) fn latest(b: &Bucket) -> Result<Option<Record>> {
    let hint = match b.get(&b.hint_key())? {
        Some(bytes) => {
            std::str::from_utf8(&bytes).ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0)
        }
        None => 0,
    };
    let mut seq = hint;
    while b.exists(&b.manifest_key(seq + 1))? {
        seq += 1;
    }
    if seq == 0 {
        return Ok(None);
    }
    let key = b.manifest_key(seq);
    match b.get(&key)? {
        Some(bytes) => Record::decode(&bytes, key.as_ref()).map(Some),
        None => Err(Error::Bucket(format!("{}: manifest {seq} (named by the hint) is missing", b.url()))),
    }
}

/// The hint is moved on at every this many records: one PUT per commit (the record) most of
/// the time, and a reader probes at most this many numbers past the hint with HEADs.
const HINT_EVERY: u64 = 8;

/// Creates `rec` as record `rec.seq`, recognising an earlier attempt of this very commit.
/// Moves the hint on at the first record and every [`HINT_EVERY`] (a hint that lags costs a
/// reader a few HEADs, nothing more).
pub(crate) fn commit(b: &Bucket, rec: &Record) -> Result<Commit> {
    let bytes = Bytes::from(rec.encode());
    let key = b.manifest_key(rec.seq);
    crate::failpoint::hit("bucket.before_commit");
    if !b.create(&key, bytes.clone())? {
        let theirs = b.get(&key)?;
        match theirs {
            Some(t) if t == bytes => {}
            Some(t) => {
                let theirs = Record::decode(&t, key.as_ref())?;
                return Ok(if theirs.epoch > rec.epoch {
                    Commit::Fenced { theirs: theirs.epoch }
                } else {
                    Commit::Lost
                });
            }
            // Created, then deleted as one of the oldest: an epoch far newer committed since.
            None => return Ok(Commit::Fenced { theirs: u64::MAX }),
        }
    }
    crate::failpoint::hit("bucket.after_commit");
    if (rec.seq == 1 || rec.seq.is_multiple_of(HINT_EVERY))
        && let Err(e) = b.put(&b.hint_key(), Bytes::from(rec.seq.to_string()))
    {
        tracing::warn!(error = %e, "could not move the bucket's manifest hint on; readers probe further");
    }
    Ok(Commit::Done)
}

/// Deletes records from `rec.oldest` on that lie more than [`MANIFESTS_KEPT`] behind `rec` and
/// are older than the delete delay; returns the new oldest, for the next record to carry.
///
/// Records are deleted by age, not only by number, because a deleted number can be created
/// again: a writer that was fenced while paused, and wakes to commit the number after its last,
/// would find it free. The mirror checks that it still holds the prefix before a commit that
/// follows a pause of half the delete delay ([`still_ours`]), so only a writer that stalls
/// longer than the delay between that check and its create could (the time-based assumption
/// Thanos' and Mimir's deletion delays make too).
pub(crate) fn prune_records(b: &Bucket, rec: &Record) -> Result<u64> {
    let cutoff = now_ms().saturating_sub(b.delete_delay().as_millis() as i64);
    let mut oldest = rec.oldest.max(1);
    while oldest + MANIFESTS_KEPT < rec.seq {
        let key = b.manifest_key(oldest);
        match b.modified_ms(&key)? {
            Some(t) if t > cutoff => break,
            Some(_) => b.delete(&key)?,
            None => {}
        }
        oldest += 1;
    }
    Ok(oldest)
}

/// Whether `rec` is still the prefix's newest record (no writer opened the prefix since).
pub(crate) fn still_ours(b: &Bucket, rec: &Record) -> Result<std::result::Result<(), u64>> {
    match latest(b)? {
        Some(n) if n.seq == rec.seq && n.epoch == rec.epoch => Ok(Ok(())),
        Some(n) => Ok(Err(n.epoch.max(rec.epoch + 1))),
        None => Ok(Err(u64::MAX)),
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// What this data directory last committed to the bucket: the `BUCKET` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalState {
    pub epoch: u64,
    pub seq: u64,
}

impl LocalState {
    pub fn load(dir: &Path) -> Result<Option<LocalState>> {
        let path = filenames::bucket_state(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let mut lines = text.lines();
        let header = lines.next() == Some("strata-bucket-state 1");
        let mut field =
            |name: &str| -> Option<u64> { lines.next()?.strip_prefix(name)?.strip_prefix(' ')?.parse().ok() };
        let epoch = field("epoch");
        let seq = field("seq");
        match (header, epoch, seq) {
            (true, Some(epoch), Some(seq)) => Ok(Some(LocalState { epoch, seq })),
            _ => Err(Error::corruption(
                path,
                None,
                "expected `strata-bucket-state 1`, then `epoch <n>` and `seq <n>`",
            )),
        }
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        let text = format!("strata-bucket-state 1\nepoch {}\nseq {}\n", self.epoch, self.seq);
        fsutil::replace_atomic(&filenames::bucket_state(dir), text.as_bytes()).map_err(Error::from)
    }
}

/// The prefix as this writer opened it.
#[derive(Debug)]
pub(crate) struct Claim {
    /// The record that took the epoch.
    pub record: Record,
    /// The data directory had no manifest: its files are to be fetched from the bucket and
    /// `record.manifest` becomes the local manifest.
    pub restore: bool,
}

/// Takes the prefix for this writer: checks that the data directory and the bucket belong
/// together, then commits the newest record again under the next epoch, which fences every
/// writer that opened the prefix before.
///
/// - An empty prefix is started from the local manifest (the mirror uploads its files).
/// - An empty data directory (no manifest) restores from the prefix.
/// - Otherwise the prefix's newest epoch must be the one this directory last committed: if
///   another writer committed since, this directory's files are not the prefix's history, and
///   opening is refused rather than forking it.
pub(crate) fn claim(b: &Bucket, dir: &Path, local: Option<&Manifest>, writer: u64) -> Result<Claim> {
    let state = LocalState::load(dir)?;
    for _ in 0..64 {
        let newest = latest(b)?;
        let restore = local.is_none() && newest.is_some();
        let (seq, epoch, oldest, gone, manifest) = match (&newest, local, state) {
            (None, _, Some(s)) => {
                return Err(Error::Bucket(format!(
                    "{} holds no manifest, but this data directory committed epoch {} to it: a wiped or different bucket? Remove {} to upload this directory's files to it afresh",
                    b.url(),
                    s.epoch,
                    filenames::bucket_state(dir).display()
                )));
            }
            (None, _, None) => {
                // A first commit lists no file yet: the mirror uploads them, then commits them.
                let partition_ms = local.map_or(0, |m| m.partition_ms);
                (1, 1, 1, Vec::new(), Manifest { partition_ms, ..Manifest::default() })
            }
            (Some(n), None, _) => (n.seq + 1, n.epoch + 1, n.oldest, n.gone.clone(), n.manifest.clone()),
            (Some(n), Some(_), Some(s)) if s.epoch == n.epoch => {
                (n.seq + 1, n.epoch + 1, n.oldest, n.gone.clone(), n.manifest.clone())
            }
            (Some(n), Some(_), s) => {
                return Err(Error::Bucket(format!(
                    "{}: epoch {} committed manifest {} after this data directory's last commit ({}); its files are not that history. Start on an empty data directory to serve the bucket's, or use another prefix",
                    b.url(),
                    n.epoch,
                    n.seq,
                    s.map_or("none".to_string(), |s| format!("epoch {}", s.epoch))
                )));
            }
        };
        let record = Record { seq, epoch, writer, oldest, gone, manifest };
        match commit(b, &record)? {
            Commit::Done => {
                LocalState { epoch, seq }.store(dir)?;
                return Ok(Claim { record, restore });
            }
            Commit::Fenced { .. } | Commit::Lost => continue,
        }
    }
    Err(Error::Bucket(format!(
        "{}: 64 attempts to open the prefix all lost a race with other writers",
        b.url()
    )))
}

/// A nonce for this writer process: the process id, the time and the randomly seeded std hash.
pub(crate) fn writer_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}
