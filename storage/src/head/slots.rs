//! A head shard's series, by id: a table indexed by the id rather than a hash map.
//!
//! Ids are dense and a shard holds the ids `i` with `i % shards == shard`, so `i / shards`
//! indexes a table with no hashing and no probing. At 10,000 TSBS hosts (100,000 series,
//! ten samples each per request) the head's hash-map look-ups were a fifth of the
//! request path's CPU. The table is cut into chunks of [`CHUNK`] slots allocated when a series
//! of their range first arrives, so a head holds chunks only for the id ranges it has
//! series in: ids are never reused, but a head starts empty at every flush, and series that
//! stopped (churn) leave no slot in later heads.

/// Slots per chunk: 2 KiB of 32-byte values, so a head of a few series (64 shards, a chunk
/// each) costs 128 KiB, and a sparse id range little more than its series.
const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;

/// Values by id for the ids `shard + k * shards`.
pub(super) struct IdSlots<V> {
    shard: usize,
    shards: usize,
    chunks: Vec<Option<Box<[Option<V>]>>>,
    len: usize,
}

impl<V> IdSlots<V> {
    pub(super) fn new(shard: usize, shards: usize) -> Self {
        IdSlots { shard, shards: shards.max(1), chunks: Vec::new(), len: 0 }
    }

    /// Chunk and slot of `id` (which must belong to this shard).
    fn pos(&self, id: u32) -> (usize, usize) {
        let local = id as usize / self.shards;
        (local >> CHUNK_BITS, local & (CHUNK - 1))
    }

    pub(super) fn get(&self, id: u32) -> Option<&V> {
        let (c, i) = self.pos(id);
        self.chunks.get(c)?.as_ref()?.get(i)?.as_ref()
    }

    /// The value of `id`, created with `make` if it has none.
    pub(super) fn get_or_insert_with(&mut self, id: u32, make: impl FnOnce() -> V) -> &mut V {
        let (c, i) = self.pos(id);
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || None);
        }
        let chunk = self.chunks[c].get_or_insert_with(|| (0..CHUNK).map(|_| None).collect());
        let slot = &mut chunk[i];
        if slot.is_none() {
            self.len += 1;
        }
        slot.get_or_insert_with(make)
    }

    /// Number of ids with a value.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The ids with a value and their values, ascending by id.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &V)> {
        let (shard, shards) = (self.shard, self.shards);
        self.chunks.iter().enumerate().flat_map(move |(c, chunk)| {
            chunk.iter().flat_map(move |slots| {
                slots.iter().enumerate().filter_map(move |(i, v)| {
                    let local = (c << CHUNK_BITS) | i;
                    // Ids are u32, so every slot's id fits.
                    v.as_ref().map(|v| ((local * shards + shard) as u32, v))
                })
            })
        })
    }

    /// The values, in id order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// Heap bytes of the table itself (the values' own heap memory is the caller's to count).
    pub(super) fn memory_bytes(&self) -> usize {
        self.chunks.capacity() * size_of::<Option<Box<[Option<V>]>>>()
            + self.chunks.iter().flatten().count() * CHUNK * size_of::<Option<V>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The table behaves as a map from id to value.
        #[test]
        fn behaves_as_a_map(shard in 0usize..4, ops in proptest::collection::vec((0u32..5000, any::<u8>(), any::<bool>()), 0..300)) {
            let shards = 4;
            let mut table = IdSlots::new(shard, shards);
            let mut model = BTreeMap::new();
            for (k, v, mutate) in ops {
                let id = k * shards as u32 + shard as u32;
                if mutate {
                    *table.get_or_insert_with(id, || v) = v;
                    model.insert(id, v);
                } else {
                    table.get_or_insert_with(id, || v);
                    model.entry(id).or_insert(v);
                }
                prop_assert_eq!(table.get(id), model.get(&id));
            }
            prop_assert_eq!(table.len(), model.len());
            prop_assert_eq!(table.iter().map(|(i, v)| (i, *v)).collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
        }
    }
}
