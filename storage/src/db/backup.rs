//! Consistent copies of a database that a new strata can open: the admin API's "snapshot"
//! (Prometheus' `/api/v1/admin/tsdb/snapshot`), named `backup` here because [`crate::Snapshot`]
//! is the in-memory read view.
//!
//! A copy is the manifest plus every partition file it lists, in the same layout as a data
//! directory, with no WAL:
//!
//! ```text
//! <dir>/
//!   MANIFEST                              the source's manifest at the moment of the copy
//!   partitions/<start_ms>/<file_id>.spf   hard links to the source's files (copies across
//!                                         file systems)
//! ```
//!
//! Why this is consistent: partition files are immutable once listed, and every operation that
//! adds, rewrites or removes them (flush, compaction, retention, deletion) holds the maintenance
//! lock, which the copy holds from reading the manifest to writing its own. Hard links keep the
//! files' bytes alive after the source compacts them away. Tombstones travel in the manifest.
//! With `with_head`, the head is flushed first (under the same lock), so the copy holds every
//! sample acknowledged before the call; without it, samples still only in the head and WAL are
//! left out, as Prometheus' `skip_head`. The manifest's `wal_first_segment` is kept: opening the
//! copy finds no segments at or after it and starts an empty WAL there.

use std::path::Path;
use std::time::Instant;

use super::Inner;
use crate::error::{Error, Result};
use crate::filenames;
use crate::fsutil;

/// The log target this module had before it moved into `db/` (operators filter by it, and
/// docs/operations.md quotes it).
const LOG_TARGET: &str = "storage::backup";

/// What a copy contains and how it was made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupStats {
    /// Partition files in the copy.
    pub files: usize,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Files copied byte by byte because a hard link was not possible (another file system).
    pub copied: usize,
    /// Milliseconds taken, the head flush included.
    pub millis: u64,
}

/// Writes a copy of the database into `dir`, which must not exist or be empty.
pub(crate) fn backup_to(inner: &Inner, dir: &Path, with_head: bool) -> Result<BackupStats> {
    let started = Instant::now();
    let mut manifest = inner.maint.lock();
    if with_head {
        inner.flush_locked(&mut manifest)?;
    }
    ensure_empty(dir)?;
    fsutil::create_dir_durable(dir)?;
    fsutil::create_dir_durable(&filenames::partitions_dir(dir))?;
    let mut stats = BackupStats::default();
    let mut partitions: Vec<i64> = manifest.files.iter().map(|f| f.partition).collect();
    partitions.sort_unstable();
    partitions.dedup();
    for p in &partitions {
        fsutil::create_dir_durable(&filenames::partition_dir(dir, *p))?;
    }
    for f in &manifest.files {
        let from = filenames::partition_file(&inner.dir, f.partition, f.id);
        let to = filenames::partition_file(dir, f.partition, f.id);
        if inner.opts.bucket.is_some() && !from.exists() {
            // Read from the bucket through the cache: the copy gets the whole object.
            let state = inner.state.read().clone();
            let live = state.partitions.get(&f.partition).and_then(|l| l.iter().find(|l| l.entry.id == f.id));
            let Some(live) = live else {
                return Err(Error::Bucket(format!("{} is listed but not open", from.display())));
            };
            fsutil::replace_atomic(&to, live.file()?.whole()?)?;
            stats.copied += 1;
        } else if link_or_copy(&from, &to)? {
            stats.copied += 1;
        }
        stats.files += 1;
        stats.bytes += f.size;
    }
    for p in &partitions {
        fsutil::sync_dir(&filenames::partition_dir(dir, *p))?;
    }
    // Last: a copy without its manifest is just unlisted files, which opening would delete.
    manifest.store(&filenames::manifest(dir))?;
    stats.millis = started.elapsed().as_millis() as u64;
    tracing::info!(
        target: LOG_TARGET,
        dir = %dir.display(),
        files = stats.files,
        bytes = stats.bytes,
        copied = stats.copied,
        ms = stats.millis,
        "wrote a copy of the database"
    );
    Ok(stats)
}

/// Refuses a target that already holds something: a copy must never mix with other files.
fn ensure_empty(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::InvalidInput(format!(
                    "snapshot directory {} is not empty",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("list {}", dir.display()), e)),
    }
}

/// Hard-links `from` to `to`, or copies and fsyncs it when linking is impossible. Returns
/// whether it copied.
fn link_or_copy(from: &Path, to: &Path) -> Result<bool> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(false),
        Err(link_err) => {
            // EXDEV (another file system) or a file system without hard links.
            std::fs::copy(from, to).map_err(|e| {
                Error::io(
                    format!("copy {} -> {} (hard link failed: {link_err})", from.display(), to.display()),
                    e,
                )
            })?;
            let f = std::fs::File::open(to).map_err(|e| Error::io(format!("open {}", to.display()), e))?;
            f.sync_all().map_err(|e| Error::io(format!("fsync {}", to.display()), e))?;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::types::{Labels, STALE_NAN_BITS, Sample};
    use crate::{Batch, Db, Matcher, Options, Querier};

    fn everything(db: &Db) -> Vec<(Labels, Vec<(i64, u64)>)> {
        let snap = db.snapshot();
        let all = [Matcher::new(crate::MatchOp::Regex, "__name__", ".+").unwrap()];
        snap.select(&all, i64::MIN, i64::MAX)
            .unwrap()
            .into_iter()
            .map(|s| {
                let mut out = Vec::new();
                snap.samples(&s, i64::MIN, i64::MAX, &mut out).unwrap();
                (s.labels, out.iter().map(|x| (x.t, x.v.to_bits())).collect())
            })
            .collect()
    }

    fn write(db: &Db, name: &str, from: i64, n: i64) {
        let mut batch = Batch::new();
        let samples = (from..from + n).map(|t| Sample::new(t * 1000, t as f64)).collect();
        batch.push(Labels::from_pairs(&[("__name__", name), ("job", "x")]), samples);
        db.append(&batch).unwrap();
    }

    fn now_s() -> i64 {
        crate::clock::now_ms() / 1000
    }

    #[test]
    fn a_copy_opens_with_the_same_data_and_tombstones() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let copy_dir = dst.path().join("copy");
        let t0 = now_s() - 3600;
        let db = Db::open(Options::new(src.path())).unwrap();
        write(&db, "flushed", t0, 100);
        db.flush().unwrap();
        write(&db, "deleted", t0, 10);
        let mut stale = Batch::new();
        stale.push(
            Labels::from_pairs(&[("__name__", "in_head"), ("job", "x")]),
            vec![Sample::new(t0 * 1000, 1.0), Sample::new(t0 * 1000 + 1, f64::from_bits(STALE_NAN_BITS))],
        );
        db.append(&stale).unwrap();
        db.delete(&[Matcher::equal("__name__", "deleted")], i64::MIN, i64::MAX).unwrap();

        let stats = db.backup_to(&copy_dir, true).unwrap();
        assert!(stats.files >= 2 && stats.bytes > 0, "{stats:?}");
        let expected = everything(&db);
        assert_eq!(expected.len(), 2, "the deleted series is hidden");
        // Later writes and compaction in the source do not reach the copy.
        write(&db, "later", t0, 5);
        db.flush().unwrap();
        db.clean_tombstones().unwrap();
        db.close().unwrap();

        let copy = Db::open(Options::new(&copy_dir)).unwrap();
        assert_eq!(everything(&copy), expected);
        copy.close().unwrap();
    }

    #[test]
    fn without_head_only_flushed_data_is_copied() {
        let src = tempfile::tempdir().unwrap();
        let copy_dir = src.path().join("snapshots").join("x");
        let t0 = now_s() - 600;
        let db = Db::open(Options::new(src.path())).unwrap();
        write(&db, "flushed", t0, 10);
        db.flush().unwrap();
        write(&db, "head_only", t0, 10);
        db.backup_to(&copy_dir, false).unwrap();
        let copy_in_data_dir = everything(&db);
        assert_eq!(copy_in_data_dir.len(), 2);
        db.close().unwrap();
        drop(db);

        // The data directory with a copy inside still opens cleanly, copy untouched.
        let reopened = Db::open(Options::new(src.path())).unwrap();
        assert_eq!(everything(&reopened), copy_in_data_dir);
        reopened.close().unwrap();
        let copy = Db::open(Options::new(&copy_dir)).unwrap();
        let names: Vec<String> =
            everything(&copy).iter().map(|(l, _)| l.metric_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["flushed"]);
        copy.close().unwrap();
    }

    #[test]
    fn an_existing_target_is_refused() {
        let src = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("something"), b"x").unwrap();
        let db = Db::open(Options::new(src.path())).unwrap();
        let err = db.backup_to(target.path(), true).unwrap_err();
        assert!(matches!(err, crate::Error::InvalidInput(_)), "{err}");
        db.close().unwrap();
    }
}
