//! Helpers for the model tests of storage and of the crates above it, which write the same kind
//! of generated workloads into a real [`Db`](crate::Db). Public only with the `testing` feature
//! (tests only): kept here so storage's and promql's tests share one copy.

use std::collections::BTreeMap;

/// True when every key a write goes to (a series and a timestamp, say) is written by the
/// batches in the same relative order in `perm` as in `batches`. Applying the batches in either
/// order then leaves the same last write per key, so the two results must be equal; otherwise
/// a later write can win in one order and lose in the other, and they may differ. Writes inside
/// one batch keep their order either way.
///
/// `perm` is a permutation of the indices of `batches` (the `i`-th batch applied is
/// `batches[perm[i]]`); `key` gives what a write goes to.
pub fn keeps_write_order<W, K: Ord>(batches: &[Vec<W>], perm: &[usize], key: impl Fn(&W) -> K) -> bool {
    let mut pos = vec![0; perm.len()];
    for (i, &b) in perm.iter().enumerate() {
        pos[b] = i;
    }
    let mut last: BTreeMap<K, usize> = BTreeMap::new();
    for (b, writes) in batches.iter().enumerate() {
        for w in writes {
            if let Some(prev) = last.insert(key(w), b)
                && prev != b
                && pos[prev] > pos[b]
            {
                return false;
            }
        }
    }
    true
}
