//! Label set -> series id, split into shards so concurrent appenders rarely wait on each other.
//!
//! The label set is hashed once (foldhash, randomly seeded per process, through hashbrown's
//! default hasher); some bits of that hash pick the shard and others are the key hash inside
//! the shard's `HashTable`, so a lookup of a known series costs one pass over its strings, one
//! shared lock and one probe. Shards are reader-writer locks: the hit path (every sample of an
//! existing series) only reads.
//!
//! The hash covers the label strings only, fed pair by pair, so an owned [`Labels`] and a
//! borrowed [`LabelsRef`] of the same series hash alike: a decoder's borrowed pairs find the
//! stored series without an owned copy being built.

use std::hash::{BuildHasher, Hasher};

use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::RwLock;

use crate::labels_ref::{LabelsRef, RawLabels};
use crate::types::{Labels, SeriesId};

/// 64 shards: contention is negligible on the machines strata targets, and the empty map
/// stays small (64 empty tables).
const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

/// The shard index is taken from hash bits 40..46, disjoint from the 32 bits the table uses,
/// so entries of one shard do not agree on table bits (which would turn probes into long
/// false-positive scans).
const SHARD_SHIFT: u32 = 40;

/// One series. `short_hash` fills what would be padding and lets the table grow without
/// hashing label strings again (rehashing was 10% of creation time).
struct Entry {
    labels: Labels,
    id: SeriesId,
    short_hash: u32,
}

/// The hash the shard's table uses: the low 32 bits of the label hash, spread over 64 bits so
/// hashbrown's bucket bits (low) and tag bits (top 7) both vary.
fn table_hash(short_hash: u32) -> u64 {
    u64::from(short_hash).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The sharded map. Keys share their allocation with the id -> labels store (`Labels` is an
/// `Arc`), so an entry costs 24 bytes plus hash table overhead.
pub(super) struct SeriesMap {
    hasher: DefaultHashBuilder,
    shards: [RwLock<HashTable<Entry>>; SHARDS],
}

impl SeriesMap {
    pub(super) fn new() -> Self {
        SeriesMap {
            hasher: DefaultHashBuilder::default(),
            shards: std::array::from_fn(|_| RwLock::new(HashTable::new())),
        }
    }

    /// The hash of a label set, computed once per call of the public API.
    pub(super) fn hash(&self, labels: &Labels) -> u64 {
        self.hash_pairs(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())))
    }

    /// The hash of a borrowed label set: equal to [`SeriesMap::hash`] of the same labels.
    pub(super) fn hash_ref(&self, labels: LabelsRef<'_>) -> u64 {
        self.hash_pairs(labels.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    }

    /// The hash of a label set of unchecked bytes: equal to [`SeriesMap::hash`] of the same
    /// labels (the hash reads bytes only).
    pub(super) fn hash_raw(&self, labels: RawLabels<'_>) -> u64 {
        self.hash_pairs(labels.iter())
    }

    /// foldhash over each name and value. Its `write` mixes in the length of each string, so
    /// `("ab", "c")` and `("a", "bc")` differ without separators; and a collision costs only a
    /// comparison, since every probe compares the labels themselves.
    #[inline]
    fn hash_pairs<'s>(&self, pairs: impl Iterator<Item = (&'s [u8], &'s [u8])>) -> u64 {
        let mut h = self.hasher.build_hasher();
        for (name, value) in pairs {
            h.write(name);
            h.write(value);
        }
        h.finish()
    }

    fn shard(&self, hash: u64) -> &RwLock<HashTable<Entry>> {
        // The mask keeps the index below SHARDS.
        &self.shards[(hash >> SHARD_SHIFT) as usize & (SHARDS - 1)]
    }

    /// The id of the series whose labels hash to `hash` and satisfy `is_it` (a comparison with
    /// the labels looked for, owned or borrowed), if present.
    pub(super) fn get(&self, hash: u64, is_it: impl Fn(&Labels) -> bool) -> Option<SeriesId> {
        let short_hash = hash as u32;
        let shard = self.shard(hash).read();
        shard.find(table_hash(short_hash), |e| e.short_hash == short_hash && is_it(&e.labels)).map(|e| e.id)
    }

    /// The id of the series found as by [`SeriesMap::get`], or the id `create` returns, which
    /// runs under the shard's write lock so that two callers racing on one new label set create
    /// it once. `create` returns the label set to store as the key (the interned copy). The bool
    /// is true if `create` ran.
    pub(super) fn get_or_insert_with(
        &self,
        hash: u64,
        is_it: impl Fn(&Labels) -> bool,
        create: impl FnOnce() -> (Labels, SeriesId),
    ) -> (SeriesId, bool) {
        if let Some(id) = self.get(hash, &is_it) {
            return (id, false);
        }
        let short_hash = hash as u32;
        let mut shard = self.shard(hash).write();
        if let Some(e) =
            shard.find(table_hash(short_hash), |e| e.short_hash == short_hash && is_it(&e.labels))
        {
            return (e.id, false);
        }
        let (labels, id) = create();
        shard.insert_unique(table_hash(short_hash), Entry { labels, id, short_hash }, |e| {
            table_hash(e.short_hash)
        });
        (id, true)
    }

    /// Removes the entry of series `id` (whose label hash is `hash`); false if it was not there,
    /// e.g. because a concurrent `remove` took it first.
    pub(super) fn remove(&self, hash: u64, id: SeriesId) -> bool {
        match self.shard(hash).write().find_entry(table_hash(hash as u32), |e| e.id == id) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Heap bytes of the hash tables (not of the label sets they point to).
    pub(super) fn memory_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.read().allocation_size()).sum::<usize>()
    }

    /// Number of entries, for consistency checks in tests.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }
}
