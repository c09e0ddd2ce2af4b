//! Flush: freeze the head and write it to partition files.
//!
//! 1. Under the `appending` write lock: rotate the WAL and swap in an empty head; the old head joins
//!    `frozen` (still readable) with the segment number the new head starts at.
//! 2. Write the frozen head, one file per partition it touches, series in label order; where the
//!    head holds out-of-order samples, two: its in-order samples, then its out-of-order ones
//!    (the next `seq`, so they win where both hold a timestamp, as they did in the head).
//! 3. Commit: the new manifest lists the files and says WAL replay starts at that segment.
//! 4. Publish the files to readers, drop the frozen head, delete the old WAL segments.
//!
//! A crash before 3 leaves `.tmp` or unlisted files (removed at startup) and the WAL replays the
//! head; a crash after 3 leaves WAL segments the manifest says to skip (deleted at startup).
//!
//! A failure before 3 (a full disk) removes the files this attempt wrote and keeps the frozen
//! head, which the next flush retries. If the manifest rename happened but syncing its
//! directory failed, either manifest may be the one a power loss leaves, so nothing is removed
//! and a later sweep ([`Inner::sweep_locked`]) deletes what the next manifest does not list.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Inner;
use crate::error::Result;
use crate::filenames;
use crate::fsutil;
use crate::head::{Head, Part, PartRead};
use crate::manifest::{FileEntry, Manifest};
use crate::partition::{FileWriter, PartitionFile};
use crate::snapshot::{Frozen, LiveFile};

/// The log target this module had before it moved into `db/` (operators filter by it, and
/// docs/operations.md quotes it).
const LOG_TARGET: &str = "storage::flush";

impl Inner {
    /// Flushes the active head and any frozen heads left by an earlier failed flush.
    pub(crate) fn flush_locked(&self, m: &mut Manifest) -> Result<()> {
        let result = self.flush_all(m);
        if result.is_err() {
            self.counters.flush_failures.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn flush_all(&self, m: &mut Manifest) -> Result<()> {
        {
            let _appending = self.appending.write();
            let cur = self.state.read().clone();
            if cur.head.sample_count() > 0 {
                let next_segment = self.wal.rotate()?;
                self.freeze_active(&cur.head, next_segment);
            }
        }
        self.flush_frozen_all(m)
    }

    /// Swaps in an empty head and moves `head` (the active one) to the frozen list, recording
    /// that its records end before WAL segment `wal_end_segment`. The caller holds the
    /// `appending` write lock, so no append is half-way into `head`.
    pub(crate) fn freeze_active(&self, head: &Arc<Head>, wal_end_segment: u64) {
        let positions = self.positions.lock().noted.clone();
        let frozen = Arc::new(Frozen { head: head.clone(), wal_end_segment, positions });
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            n.head = Arc::new(Head::new());
            n.frozen.push(frozen);
            n
        });
    }

    /// Writes every frozen head to partition files, oldest first.
    pub(crate) fn flush_frozen_all(&self, m: &mut Manifest) -> Result<()> {
        loop {
            let Some(frozen) = self.state.read().frozen.first().cloned() else { return Ok(()) };
            self.flush_frozen(m, &frozen)?;
        }
    }

    fn flush_frozen(&self, m: &mut Manifest, frozen: &Arc<Frozen>) -> Result<()> {
        let started = Instant::now();
        let mut created = Vec::new();
        let written = self.write_frozen(m, frozen, &mut created);
        let (entries, opened, bytes) = match written {
            Ok(w) => w,
            Err(e) => {
                self.remove_attempt(&created);
                return Err(e);
            }
        };
        let mut next = m.clone();
        next.files.extend(entries);
        next.wal_first_segment = frozen.wal_end_segment;
        for (source, &position) in &frozen.positions {
            let at = next.positions.entry(source.clone()).or_default();
            *at = (*at).max(position);
        }
        let opened = self.store_manifest(&next, &created, opened)?;
        self.positions.lock().flushed.clone_from(&next.positions);
        *m = next;
        {
            let mut writes = self.partition_writes.lock();
            for f in &opened {
                writes.insert(f.entry.partition, Instant::now());
            }
        }
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            for f in &opened {
                let files = n.partitions.entry(f.entry.partition).or_default();
                files.push(f.clone());
                files.sort_by_key(|f| f.entry.seq);
            }
            n.frozen.retain(|f| !Arc::ptr_eq(f, frozen));
            n
        });
        crate::failpoint::hit("flush.before_wal_remove");
        if let Err(e) = self.wal.remove_segments_before(frozen.wal_end_segment) {
            // Committed: replay starts after them, and a later flush or startup deletes them.
            tracing::warn!(target: LOG_TARGET, error = %e, "flush: could not delete flushed WAL segments; will retry");
        }
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.counters.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.counters.flush_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.counters.flush_duration.observe_duration(started.elapsed());
        tracing::debug!(
            target: LOG_TARGET,
            files = opened.len(),
            bytes,
            ms = started.elapsed().as_millis() as u64,
            "flushed head"
        );
        Ok(())
    }

    /// Writes one file per partition of a frozen head and opens them; every path it creates
    /// (or starts to) goes into `created`, for the caller to remove if the flush fails.
    #[allow(clippy::type_complexity)]
    fn write_frozen(
        &self,
        m: &mut Manifest,
        frozen: &Arc<Frozen>,
        created: &mut Vec<PathBuf>,
    ) -> Result<(Vec<FileEntry>, Vec<Arc<LiveFile>>, u64)> {
        let head = &frozen.head;
        let mut entries = Vec::new();
        let mut bytes = 0;
        let partitions = head.partitions(self.opts.partition_ms);
        if !partitions.is_empty() {
            // Partition files store series in label order.
            let ids = self.shared.index.sorted_by_labels(&head.series_ids());
            let pms = self.opts.partition_ms.max(1);
            let any_ooo = head.ooo_sample_count() > 0;
            let mut read = PartRead::default();
            for p in partitions {
                let pend = p.saturating_add(pms - 1);
                fsutil::create_dir_durable(&filenames::partition_dir(&self.dir, p))?;
                // The in-order samples first, then (in a file of the next seq, which wins) the
                // out-of-order ones: the in-order file's blocks are those an in-order load
                // writes, and compaction merges the two.
                let parts: &[Part] = if any_ooo { &[Part::InOrder, Part::OutOfOrder] } else { &[Part::All] };
                for &part in parts {
                    let id = m.next_file_id;
                    let path = filenames::partition_file(&self.dir, p, id);
                    created.push(path.clone());
                    let mut w =
                        FileWriter::create(&path, self.opts.block_samples_max, self.opts.block_grid_ms)?;
                    for (sid, labels) in &ids {
                        head.read_part(*sid, part, p, pend, &mut read);
                        if let Err(e) = w.add_series_full(labels, &read.samples, &read.starts, &read.hists) {
                            w.abort();
                            return Err(e);
                        }
                    }
                    if w.series_count() == 0 {
                        w.abort();
                        continue;
                    }
                    m.next_file_id += 1;
                    let (series, samples, range) = (w.series_count(), w.samples, w.time_range);
                    let size = w.finish()?;
                    crate::failpoint::hit("flush.after_file");
                    let seq = m.next_seq;
                    m.next_seq += 1;
                    entries.push(FileEntry::written(p, id, seq, size, (series, samples, range), 0));
                    bytes += size;
                }
            }
        }
        // Open what we wrote before committing, so a file we cannot read never enters the manifest.
        let mut opened = Vec::with_capacity(entries.len());
        for e in &entries {
            let path = filenames::partition_file(&self.dir, e.partition, e.id);
            let file = PartitionFile::open(&path, |labels, _| self.shared.index.get_or_create(labels).0)?;
            opened.push(Arc::new(LiveFile::open(e.clone(), file)));
        }
        Ok((entries, opened, bytes))
    }

    /// Commits `next` as the manifest, handing `opened` (the mappings of the files it adds)
    /// back. On failure the attempt is given up: its mappings are dropped first, then its
    /// `created` files are removed, unless the new manifest may already have replaced the old
    /// one, in which case the next sweep decides which files are live.
    pub(crate) fn store_manifest<T>(&self, next: &Manifest, created: &[PathBuf], opened: T) -> Result<T> {
        if let Err(e) = next.store(&filenames::manifest(&self.dir)) {
            drop(opened);
            if e.replaced {
                self.sweep_pending.store(true, Ordering::Release);
            } else {
                self.remove_attempt(created);
            }
            return Err(e.error);
        }
        self.offer_to_bucket(next);
        Ok(opened)
    }

    /// Commits `next` as the manifest (compaction's, retention's and deletion's commits that
    /// add no file).
    pub(crate) fn commit_manifest(&self, next: &Manifest) -> Result<()> {
        next.store(&filenames::manifest(&self.dir))?;
        self.offer_to_bucket(next);
        Ok(())
    }

    /// Hands a committed manifest to the bucket mirror, if there is one.
    fn offer_to_bucket(&self, next: &Manifest) {
        if let Some(m) = &self.mirror {
            m.offer(next);
        }
    }

    /// Removes the files a failed flush or compaction created (final names and `.tmp`s) and
    /// the partition directories that are left empty. None is in any manifest. What cannot be
    /// removed now is left for [`Inner::sweep_locked`].
    pub(crate) fn remove_attempt(&self, created: &[PathBuf]) {
        for path in created {
            for p in [path.clone(), fsutil::tmp_path(path)] {
                if let Err(e) = fsutil::remove_path(&p) {
                    tracing::warn!(target: LOG_TARGET, error = %e, "could not remove a file of a failed write; will retry");
                    self.sweep_pending.store(true, Ordering::Release);
                }
            }
            if let Some(dir) = path.parent() {
                // Fails harmlessly when the directory holds live files.
                let _ = fsutil::remove_empty_dir(dir);
            }
        }
    }
}
