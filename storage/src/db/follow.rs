//! A query node's database (`--role query`, [`crate::Options::follow`]): the files every
//! writer's prefix in the bucket lists, read through the local cache, kept current in the
//! background; no WAL is written and nothing is appended, flushed, compacted or deleted here.
//!
//! Each refresh asks every followed prefix for a newer record ([`Followed::refresh`]) and, when
//! one has one, swaps in a state listing exactly the files the prefixes' records list: a file
//! already listed keeps its [`LiveFile`] (and what its cache holds), a new one enters as a lazy
//! file that opens when a query first reaches its partition, and one no record lists any more
//! leaves, its cache file removed (readers still holding it keep reading their mapping).
//! Writers delete such files from the bucket only after `--storage.bucket-delete-delay`,
//! far longer than a refresh.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Inner;
use crate::bucket::Bucket;
use crate::bucket::follow::{Followed, discover};
use crate::error::Result;
use crate::filenames;
use crate::manifest::Tombstone;
use crate::snapshot::LiveFile;

/// The prefixes a query node follows and the files they list.
pub(crate) struct Follow {
    root: Arc<Bucket>,
    pub(crate) refresh: Duration,
    prefixes: Vec<Followed>,
    /// Every listed file by (prefix name, partition, the file's id in its prefix).
    files: HashMap<(String, i64, u64), Arc<LiveFile>>,
    /// Local ids, which name the files' cache files: prefixes number their files apart.
    next_id: u64,
    refreshes: u64,
}

/// Prefixes are looked for again every this many refreshes (one LIST each time).
const DISCOVER_EVERY: u64 = 8;

impl Follow {
    pub(crate) fn new(root: Arc<Bucket>, refresh: Duration) -> Follow {
        Follow { root, refresh, prefixes: Vec::new(), files: HashMap::new(), next_id: 1, refreshes: 0 }
    }

    /// Looks for new prefixes now and then and reads every prefix's newest record. True if
    /// one changed; an error only if none did and some prefix could not be read.
    pub(crate) fn poll(&mut self) -> Result<bool> {
        if self.refreshes.is_multiple_of(DISCOVER_EVERY) {
            for name in discover(&self.root)? {
                if !self.prefixes.iter().any(|p| p.name == name) {
                    tracing::info!(bucket = self.root.url(), prefix = %name, "following a writer's prefix");
                    let bucket =
                        if name.is_empty() { Arc::clone(&self.root) } else { Arc::new(self.root.sub(&name)) };
                    self.prefixes.push(Followed::new(name, bucket));
                }
            }
        }
        self.refreshes += 1;
        let mut changed = false;
        let mut first_error = None;
        for p in &mut self.prefixes {
            match p.refresh() {
                Ok(c) => changed |= c,
                Err(e) => {
                    tracing::warn!(prefix = %p.name, error = %e, "reading the prefix's newest manifest failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        match (changed, first_error) {
            (false, Some(e)) => Err(e),
            _ => Ok(changed),
        }
    }

    /// The partition width of the first prefix with a record that sets one, once
    /// [`Follow::poll`] read it. A writer's first record, made when it claims a new prefix,
    /// lists no file and has no width yet (0).
    pub(crate) fn partition_width(&self) -> Option<i64> {
        self.prefixes
            .iter()
            .filter_map(|p| p.record.as_ref())
            .map(|r| r.manifest.partition_ms)
            .find(|&ms| ms > 0)
    }

    /// (writer nonce, record number) of the newest record read of each prefix.
    pub(crate) fn records(&self) -> Vec<(u64, u64)> {
        self.prefixes.iter().filter_map(|p| p.record.as_ref()).map(|r| (r.writer, r.seq)).collect()
    }

    /// The prefixes followed and the newest record number read of each.
    pub(crate) fn prefixes(&self) -> Vec<(String, Option<u64>)> {
        self.prefixes.iter().map(|p| (p.name.clone(), p.record.as_ref().map(|r| r.seq))).collect()
    }
}

impl Inner {
    /// The query node's background loop: a refresh every `refresh`, until the database closes.
    pub(crate) fn follow_loop(&self) {
        let Some(follow) = &self.follow else { return };
        let every = follow.lock().refresh;
        loop {
            {
                let (m, cv) = &*self.wake;
                let mut woken = m.lock();
                if !*woken {
                    cv.wait_for(&mut woken, every);
                }
                *woken = false;
            }
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            if let Err(e) = self.refresh_follow() {
                self.counters.maintenance_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "refreshing from the bucket failed; will retry");
            }
            if let Err(e) = self.trim_follow_cache() {
                self.counters.maintenance_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "trimming the bucket cache failed; will retry");
            }
        }
    }

    /// Keeps a query node's cache files within `--storage.bucket-cache-size`: the least
    /// recently read open files are swapped for unopened copies, which open again (from the
    /// bucket) when a query next reaches them. Their cache files are removed first: a query
    /// still reading the old copy keeps its mapping of the removed file. Returns the bytes freed.
    pub(crate) fn trim_follow_cache(&self) -> Result<u64> {
        let Some(follow) = &self.follow else { return Ok(0) };
        let max = self.opts.bucket.as_ref().map_or(0, |b| b.cache_bytes_max);
        if max == 0 {
            return Ok(0);
        }
        let mut f = follow.lock();
        // Reads after this trim rank later than every read before it.
        crate::file_source::advance_read_clock();
        let mut open: Vec<_> = f
            .files
            .iter()
            .filter_map(|(k, l)| {
                l.opened().map(|p| (k.clone(), Arc::clone(l), p.local_bytes(), p.last_read()))
            })
            .collect();
        let before: u64 = open.iter().map(|o| o.2).sum();
        if before <= max {
            return Ok(0);
        }
        open.sort_by_key(|o| o.3);
        let (mut total, mut swapped) = (before, HashMap::new());
        for (key, old, bytes, _) in open {
            if total <= max {
                break;
            }
            let Some(cold) = old.unopened() else { continue };
            let path = filenames::partition_cache_file(&self.dir, old.entry.partition, old.entry.id);
            crate::fsutil::remove_path(&path)?;
            let cold = Arc::new(cold);
            f.files.insert(key, Arc::clone(&cold));
            swapped.insert(Arc::as_ptr(&old) as usize, cold);
            total -= bytes;
        }
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            for slot in n.partitions.values_mut().flatten() {
                if let Some(cold) = swapped.get(&(Arc::as_ptr(slot) as usize)) {
                    *slot = Arc::clone(cold);
                }
            }
            n
        });
        Ok(before - total)
    }

    /// Looks for new prefixes now and then, reads every prefix's newest record, and swaps in
    /// the files they list if any changed. True if the state changed.
    pub(crate) fn refresh_follow(&self) -> Result<bool> {
        let Some(follow) = &self.follow else { return Ok(false) };
        let mut f = follow.lock();
        if !f.poll()? {
            return Ok(false);
        }
        self.install_follow(&mut f);
        Ok(true)
    }

    /// Makes the state list exactly the files the followed prefixes' records list (see the
    /// module docs).
    pub(crate) fn install_follow(&self, f: &mut Follow) {
        let mut partitions: BTreeMap<i64, Vec<Arc<LiveFile>>> = BTreeMap::new();
        let mut files = HashMap::new();
        let mut tombstones = Vec::new();
        for (k, p) in f.prefixes.iter().enumerate() {
            let Some(r) = &p.record else { continue };
            // Prefixes are only ever added to the list, so a prefix keeps its number.
            let origin = u32::try_from(k + 1).unwrap_or(u32::MAX);
            // A record without a width (a new prefix's first) lists no file to leave out.
            if r.manifest.partition_ms != 0 && r.manifest.partition_ms != self.shared.partition_ms {
                tracing::error!(
                    prefix = %p.name,
                    its_ms = r.manifest.partition_ms,
                    ours_ms = self.shared.partition_ms,
                    "the prefix's partition width differs from the first prefix's; it is left out"
                );
                continue;
            }
            tombstones.extend(r.manifest.tombstones.iter().map(|t| Tombstone { origin, ..t.clone() }));
            for e in &r.manifest.files {
                let key = (p.name.clone(), e.partition, e.id);
                let live = match f.files.remove(&key) {
                    Some(live) => live,
                    None => {
                        let mut entry = e.clone();
                        entry.origin = origin;
                        entry.id = f.next_id;
                        f.next_id += 1;
                        Arc::new(LiveFile::lazy(
                            entry,
                            Arc::clone(&p.bucket),
                            p.bucket.file_key(e.partition, e.id),
                            filenames::partition_cache_file(&self.dir, e.partition, f.next_id - 1),
                            Arc::clone(&self.shared),
                        ))
                    }
                };
                partitions.entry(e.partition).or_default().push(Arc::clone(&live));
                files.insert(key, live);
            }
        }
        for list in partitions.values_mut() {
            list.sort_by_key(|f| f.entry.seq);
        }
        if !tombstones.is_empty() {
            self.shared.deleted.store(true, Ordering::Release);
        }
        let gone = std::mem::replace(&mut f.files, files);
        let newest = partitions.values().flatten().map(|f| f.entry.max_t).max();
        if let Some(t) = newest {
            self.newest.fetch_max(t, Ordering::AcqRel);
        }
        self.update_state(|s| {
            let mut n = s.clone_shallow();
            n.partitions = partitions;
            n.tombstones = Arc::new(tombstones);
            n
        });
        for (_, live) in gone {
            let path = filenames::partition_cache_file(&self.dir, live.entry.partition, live.entry.id);
            if let Err(e) = crate::fsutil::remove_path(&path) {
                tracing::warn!(path = %path.display(), error = %e, "removing a cache file failed");
            }
        }
    }
}
