//! Compaction, retention and deletion: everything that rewrites or removes partition files.
//!
//! Compaction merges a run of files of one partition that are adjacent in `seq` order into one
//! file (merging out-of-order and duplicate data, newest write winning, and dropping data hidden
//! by tombstones). Blocks that no other input shares a grid cell with are copied as they are
//! (`splice.rs`); the rest are decoded, merged and encoded again. Only adjacent runs are merged so that the output can take the highest `seq`
//! of its inputs without changing which copy of a sample wins against the other files.
//!
//! Policy, per partition (size-tiered):
//! - a partition that no longer receives in-order data (it ends before the newest sample minus
//!   the out-of-order window, or minus the block grid when there is no window) and that no
//!   flush has written to for three maintenance intervals is merged into a single file, so its
//!   blocks end up as an in-order load writes them; while flushes keep writing to it (a
//!   backfill), the tiers below apply, which rewrite each sample a logarithmic number of times
//!   instead of once per flush;
//! - otherwise, the longest run of at least `compact_files_min` adjacent files of the same size
//!   tier (sizes within a factor of 4) is merged.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Inner;
use super::splice::splice_series;
use crate::error::Result;
use crate::filenames;
use crate::fsutil;

use crate::manifest::{FileEntry, Manifest, Tombstone};
use crate::matcher::Matcher;
use crate::partition::{FileWriter, PartitionFile};
use crate::snapshot::LiveFile;
use crate::snapshot::files::{read_files_histograms, read_files_with_starts};
use crate::types::SeriesId;

/// The log target this module had before it moved into `db/` (operators filter by it, and
/// docs/operations.md quotes it).
const LOG_TARGET: &str = "storage::compact";

/// Which files a compaction pass merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompactMode {
    /// What the background worker does: the tiered policy of [`pick_run`].
    Policy,
    /// Exactly the partitions that live tombstones apply to, all files of each (the admin
    /// "clean tombstones" operation).
    Tombstones,
    /// Every partition with more than one file, into one file (the admin "compact" operation).
    All,
}

impl Inner {
    /// One compaction pass, choosing the files to merge as `mode` says.
    pub(crate) fn compact_locked(&self, m: &mut Manifest, mode: CompactMode) -> Result<()> {
        let state = self.state.read().clone();
        let newest = newest_time(&state.partitions, state.head.time_bounds().map(|b| b.1));
        let settle_ms = self.opts.ooo_window_ms.unwrap_or(self.opts.block_grid_ms);
        let quiet = self.opts.maintenance_interval * 3;
        let writes = self.partition_writes.lock().clone();
        for (p, files) in &state.partitions {
            let run = match mode {
                CompactMode::Tombstones => {
                    let touched =
                        files.iter().any(|f| state.tombstones.iter().any(|t| t.applies_to(&f.entry)));
                    if touched { files.clone() } else { Vec::new() }
                }
                CompactMode::All if files.len() > 1 => files.clone(),
                CompactMode::All => Vec::new(),
                CompactMode::Policy => {
                    let pend = p.saturating_add(self.opts.partition_ms.max(1) - 1);
                    let cold = newest.is_some_and(|n| pend < n.saturating_sub(settle_ms))
                        && writes.get(p).is_none_or(|at| at.elapsed() >= quiet);
                    pick_run(files, cold, self.opts.compact_files_min)
                }
            };
            if run.is_empty() {
                continue;
            }
            if let Err(e) = self.compact_run(m, *p, &run, &state.tombstones) {
                self.counters.compaction_failures.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        }
        let mut collect = false;
        // Tombstones that no longer apply to any file are done.
        let live: Vec<Tombstone> = {
            let s = self.state.read();
            s.tombstones
                .iter()
                .filter(|t| s.partitions.values().flatten().any(|f| t.applies_to(&f.entry)))
                .cloned()
                .collect()
        };
        if live.len() != m.tombstones.len() {
            // Data a tombstone hid is gone from the files now: a series deleted whole has
            // nothing left, and leaves the index as retention's do.
            collect = true;
            let mut next = m.clone();
            next.tombstones = live.clone();
            self.commit_manifest(&next)?;
            *m = next;
            self.update_state(|s| {
                let mut n = s.clone_shallow();
                n.tombstones = Arc::new(live);
                n
            });
        }
        if collect {
            self.collect_dead_series();
        }
        Ok(())
    }

    /// Merges `run` (adjacent files of partition `p`, ascending seq) into one file. A failure
    /// before the manifest commit (a full disk) removes the output and leaves the inputs live.
    fn compact_run(
        &self,
        m: &mut Manifest,
        p: i64,
        run: &[Arc<LiveFile>],
        tombs: &[Tombstone],
    ) -> Result<()> {
        let started = Instant::now();
        let mut ids = BTreeSet::new();
        for f in run {
            ids.extend(f.file()?.series_ids());
        }
        let ids = self.shared.index.sorted_by_labels(&ids.into_iter().collect::<Vec<_>>());
        let id = m.next_file_id;
        let path = filenames::partition_file(&self.dir, p, id);
        let created = [path.clone()];
        let mut w = match FileWriter::create(&path, self.opts.block_samples_max, self.opts.block_grid_ms) {
            Ok(w) => w,
            Err(e) => {
                self.remove_attempt(&created);
                return Err(e);
            }
        };
        let mut buf = Vec::new();
        let mut starts = Vec::new();
        let mut hists = Vec::new();
        let policy = (self.opts.block_samples_max, self.opts.block_grid_ms);
        let mut copied = 0;
        for (sid, labels) in &ids {
            match splice_series(run, tombs, *sid, labels, &mut w, policy) {
                Ok(Some(done)) => {
                    copied += done.copied;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    w.abort();
                    return Err(e);
                }
            }
            buf.clear();
            starts.clear();
            hists.clear();
            let read =
                read_files_with_starts(run, tombs, *sid, labels, i64::MIN, i64::MAX, &mut buf, &mut starts)
                    .and_then(|()| {
                        read_files_histograms(run, tombs, *sid, labels, i64::MIN, i64::MAX, &mut hists)
                    });
            if let Err(e) = read {
                w.abort();
                return Err(e);
            }
            if let Err(e) = w.add_series_full(labels, &buf, &starts, &hists) {
                w.abort();
                return Err(e);
            }
        }
        m.next_file_id += 1;
        let seq = run.iter().map(|f| f.entry.seq).max().unwrap_or(0);
        let mut next = m.clone();
        let inputs: Vec<(i64, u64)> = run.iter().map(|f| (f.entry.partition, f.entry.id)).collect();
        next.files.retain(|f| !inputs.contains(&(f.partition, f.id)));
        let mut opened = None;
        let blocks = w.blocks;
        if w.series_count() > 0 {
            let (series, samples, range) = (w.series_count(), w.samples, w.time_range);
            let written = w.finish().and_then(|size| {
                crate::failpoint::hit("compact.after_write");
                let file = PartitionFile::open(&path, |labels, _| self.shared.index.get_or_create(labels).0)?;
                Ok((size, file))
            });
            let (size, file) = match written {
                Ok(w) => w,
                Err(e) => {
                    self.remove_attempt(&created);
                    return Err(e);
                }
            };
            let tombs_applied = tombs.iter().map(|t| t.seq).max().unwrap_or(0);
            let entry = FileEntry::written(p, id, seq, size, (series, samples, range), tombs_applied);
            opened = Some(Arc::new(LiveFile::open(entry.clone(), file)));
            next.files.push(entry);
            self.counters.compaction_bytes.fetch_add(size, Ordering::Relaxed);
            self.counters.compaction_blocks.fetch_add(blocks, Ordering::Relaxed);
            self.counters.compaction_blocks_copied.fetch_add(copied, Ordering::Relaxed);
        } else {
            w.abort();
        }
        let opened = self.store_manifest(&next, &created, opened)?;
        *m = next;
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            let files = n.partitions.entry(p).or_default();
            files.retain(|f| !inputs.contains(&(f.entry.partition, f.entry.id)));
            if let Some(o) = &opened {
                files.push(o.clone());
                files.sort_by_key(|f| f.entry.seq);
            }
            if files.is_empty() {
                n.partitions.remove(&p);
            }
            n
        });
        crate::failpoint::hit("compact.before_delete_inputs");
        // Readers holding older snapshots keep their mappings; unlinking a mapped file is safe.
        for f in run {
            if let Err(e) = fsutil::remove_path(f.file()?.path()) {
                // Committed: the input is no longer listed, so a sweep or startup removes it.
                tracing::warn!(target: LOG_TARGET, error = %e, "compaction: could not delete an input file; will retry");
                self.sweep_pending.store(true, Ordering::Release);
            }
        }
        if opened.is_none() {
            let _ = fsutil::remove_empty_dir(&filenames::partition_dir(&self.dir, p));
        }
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        self.counters.compaction_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.counters.compaction_duration.observe_duration(started.elapsed());
        tracing::debug!(
            target: LOG_TARGET,
            partition = p,
            inputs = run.len(),
            blocks,
            blocks_copied = copied,
            ms = started.elapsed().as_millis() as u64,
            "compacted"
        );
        Ok(())
    }

    /// Removes partitions that end before `newest sample - retention`.
    pub(crate) fn retention_locked(&self, m: &mut Manifest) -> Result<usize> {
        let state = self.state.read().clone();
        let Some(newest) = newest_time(&state.partitions, state.head.time_bounds().map(|b| b.1)) else {
            return Ok(0);
        };
        let cutoff = newest.saturating_sub(self.opts.retention_ms);
        let pms = self.opts.partition_ms.max(1);
        let first_kept = cutoff.div_euclid(pms).saturating_mul(pms);
        // Expired samples still in a head (late out-of-order writes) would otherwise be flushed
        // into an expired partition after it is removed: write them out first, then drop them
        // with their partition.
        let heads_expired = std::iter::once(&state.head)
            .chain(state.frozen.iter().map(|f| &f.head))
            .any(|h| h.time_bounds().is_some_and(|(lo, _)| lo < first_kept));
        let state = if heads_expired {
            drop(state);
            self.flush_locked(m)?;
            self.state.read().clone()
        } else {
            state
        };
        let expired: Vec<i64> =
            state.partitions.keys().copied().filter(|p| p.saturating_add(pms - 1) < cutoff).collect();
        if expired.is_empty() {
            return Ok(0);
        }
        let mut next = m.clone();
        next.files.retain(|f| !expired.contains(&f.partition));
        self.commit_manifest(&next)?;
        *m = next;
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            for p in &expired {
                n.partitions.remove(p);
            }
            n
        });
        crate::failpoint::hit("retention.before_remove");
        for p in &expired {
            if let Err(e) = fsutil::remove_path(&filenames::partition_dir(&self.dir, *p)) {
                tracing::warn!(target: LOG_TARGET, error = %e, "retention: could not delete a partition; will retry");
                self.sweep_pending.store(true, Ordering::Release);
            }
        }
        self.partition_writes.lock().retain(|p, _| !expired.contains(p));
        self.counters.retention_partitions_removed.fetch_add(expired.len() as u64, Ordering::Relaxed);
        self.collect_dead_series();
        tracing::info!(target: LOG_TARGET, partitions = expired.len(), cutoff, "retention removed partitions");
        Ok(expired.len())
    }

    /// Removes from the index every series that has no data left in any file or head, so the
    /// index does not grow forever under series churn. Runs with appends paused, because an
    /// appender must never hold an id that is being removed.
    fn collect_dead_series(&self) {
        let _appending = self.appending.write();
        let state = self.state.read().clone();
        let mut live: Vec<SeriesId> = state.head.series_ids();
        for f in &state.frozen {
            live.extend(f.head.series_ids());
        }
        for f in state.partitions.values().flatten() {
            live.extend(f.opened().into_iter().flat_map(|p| p.series_ids()));
        }
        live.sort_unstable();
        live.dedup();
        let dead: Vec<SeriesId> =
            self.shared.index.select(&[]).into_iter().filter(|id| live.binary_search(id).is_err()).collect();
        if !dead.is_empty() {
            self.shared.index.remove(&dead);
            self.counters.series_removed.fetch_add(dead.len() as u64, Ordering::Relaxed);
            tracing::info!(target: LOG_TARGET, series = dead.len(), "removed series with no data left");
        }
    }

    /// Flushes, then records a tombstone that hides the matching data of every existing file.
    pub(crate) fn delete_locked(
        &self,
        m: &mut Manifest,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> Result<()> {
        crate::query::check_selective(matchers)?;
        // Everything written before the deletion must be in files older than the tombstone.
        self.flush_locked(m)?;
        let t = Tombstone { seq: m.next_seq, mint, maxt, matchers: matchers.to_vec(), origin: 0 };
        let mut next = m.clone();
        next.next_seq += 1;
        next.tombstones.push(t.clone());
        self.commit_manifest(&next)?;
        *m = next;
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            let mut tombs = (*s.tombstones).clone();
            tombs.push(t);
            n.tombstones = Arc::new(tombs);
            n
        });
        Ok(())
    }
}

/// Newest timestamp in files or the head.
fn newest_time(
    partitions: &std::collections::BTreeMap<i64, Vec<Arc<LiveFile>>>,
    head_max: Option<i64>,
) -> Option<i64> {
    let files = partitions.values().flatten().map(|f| f.entry.max_t).max();
    match (files, head_max) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Chooses the files of one partition to merge now (empty: nothing to do): all of them when
/// the partition is `cold` (see the module documentation), else the longest run of one tier.
fn pick_run(files: &[Arc<LiveFile>], cold: bool, min_files: usize) -> Vec<Arc<LiveFile>> {
    if files.len() < 2 {
        return Vec::new();
    }
    if cold {
        return files.to_vec();
    }
    let tier = |f: &LiveFile| (64 - f.entry.size.max(1).leading_zeros()) / 2; // log4 of size
    let min_files = min_files.max(2);
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < files.len() {
        let t = tier(&files[i]);
        let mut j = i + 1;
        while j < files.len() && tier(&files[j]) == t {
            j += 1;
        }
        if j - i >= min_files && best.is_none_or(|(a, b)| j - i > b - a) {
            best = Some((i, j));
        }
        i = j;
    }
    best.map(|(a, b)| files[a..b].to_vec()).unwrap_or_default()
}
