//! With a bucket, the local disk is a cache: when the partition files on it (whole local files
//! the bucket holds, and the fetched parts of files read from the bucket) take more than
//! `--storage.bucket-cache-size`, the least recently read are replaced by cold copies read
//! from the bucket.
//!
//! A replacement is a new [`LiveFile`] swapped into the state, as compaction swaps files: a
//! query that holds the old state keeps reading the old mapping, whose file was unlinked (a
//! local file) or replaced by a new inode (a cache file), and the disk space comes back when
//! the last such query ends. So no byte ever changes under a reader. Only files that a record
//! committed to the bucket lists are dropped from the local disk.

use std::sync::Arc;

use super::Inner;
use crate::error::Result;
use crate::filenames;
use crate::fsutil;
use crate::partition::PartitionFile;
use crate::snapshot::LiveFile;

impl Inner {
    /// Trims the local copies of bucket files down to the cache size; returns the bytes freed.
    /// Called with the maintenance lock held (it swaps files in the state as compaction does).
    pub(crate) fn trim_bucket_cache_locked(&self) -> Result<u64> {
        let Some(mirror) = &self.mirror else { return Ok(0) };
        let max = self.opts.bucket.as_ref().map_or(0, |b| b.cache_bytes_max);
        if max == 0 {
            return Ok(0);
        }
        let state = self.state.read().clone();
        // Reads after this trim rank later than every read before it.
        crate::file_source::advance_read_clock();
        // A writer opens every file at start: none is lazy here.
        let files: Vec<(&Arc<LiveFile>, &PartitionFile)> =
            state.partitions.values().flatten().filter_map(|f| Some((f, f.opened()?))).collect();
        let mut total: u64 = files.iter().map(|(_, p)| p.local_bytes()).sum();
        if total <= max {
            return Ok(0);
        }
        let committed = mirror.committed_files();
        let mut candidates: Vec<(&Arc<LiveFile>, &PartitionFile)> = files
            .into_iter()
            .filter(|(f, p)| {
                p.local_bytes() > 0 && (p.is_cached() || committed.contains(&(f.entry.partition, f.entry.id)))
            })
            .collect();
        candidates.sort_by_key(|(_, p)| p.last_read());
        let bucket = mirror.bucket();
        let mut replaced: Vec<(Arc<LiveFile>, bool)> = Vec::new();
        let before = total;
        for (f, p) in candidates {
            if total <= max {
                break;
            }
            let e = &f.entry;
            let cold = PartitionFile::open_cached(
                Arc::clone(bucket),
                bucket.file_key(e.partition, e.id),
                &filenames::partition_cache_file(&self.dir, e.partition, e.id),
                e.size,
                |labels, _| self.shared.index.get_or_create(labels).0,
            )?;
            total = total - p.local_bytes() + cold.local_bytes();
            replaced.push((Arc::new(LiveFile::open(e.clone(), cold)), !p.is_cached()));
        }
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            for (new, _) in &replaced {
                if let Some(list) = n.partitions.get_mut(&new.entry.partition) {
                    for slot in list.iter_mut().filter(|f| f.entry.id == new.entry.id) {
                        *slot = Arc::clone(new);
                    }
                }
            }
            n
        });
        for (new, was_local) in &replaced {
            if *was_local {
                // The bucket holds it; readers of the old state keep their mapping.
                fsutil::remove_path(&filenames::partition_file(
                    &self.dir,
                    new.entry.partition,
                    new.entry.id,
                ))?;
            }
        }
        let freed = before.saturating_sub(total);
        tracing::debug!(files = replaced.len(), freed, local_bytes = total, "trimmed the bucket cache");
        Ok(freed)
    }
}
