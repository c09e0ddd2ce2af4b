//! Set operations on postings lists: ascending, duplicate-free vectors of series ids.
//!
//! Plain sorted `Vec<u32>` is the representation: 4 bytes per entry, cache-friendly scans, and
//! every operation below is a merge or a galloping search. Intersections and differences walk
//! the smaller list and gallop (exponential, then binary search) through the larger one, so
//! `{__name__="cpu", hostname="host_42"}` costs about `10 * log(100k)` steps, not `100k`.

use crate::types::SeriesId;

/// Above this many ids per bitmap bit, a union of many lists is sorted instead of bitmapped.
/// A bitmap costs `max_id / 64` words to clear and scan; sorting costs `n log n`. With fewer
/// than one id per 32 possible ids the sort is cheaper.
const BITMAP_MIN_DENSITY: usize = 32;

/// Inserts `id` keeping `list` sorted; false if it was already present.
///
/// Ids are handed out in increasing order, so this is almost always a push; the binary-search
/// insert covers two creators that finished out of order.
pub(super) fn insert(list: &mut Vec<SeriesId>, id: SeriesId) -> bool {
    match list.last() {
        Some(&last) if last >= id => match list.binary_search(&id) {
            Ok(_) => false,
            Err(pos) => {
                list.insert(pos, id);
                true
            }
        },
        _ => {
            list.push(id);
            true
        }
    }
}

/// Removes every id in `removed` (sorted) from `list`; returns how many were removed.
/// Shrinks the allocation when most of it became unused, so mass deletions give memory back.
pub(super) fn remove_all(list: &mut Vec<SeriesId>, removed: &[SeriesId]) -> usize {
    let before = list.len();
    let mut cursor = 0;
    list.retain(|&id| {
        cursor = gallop(removed, cursor, id);
        removed.get(cursor) != Some(&id)
    });
    if list.capacity() > 4 * list.len().max(4) {
        list.shrink_to_fit();
    }
    before - list.len()
}

/// The first position `>= from` in `list` whose id is `>= target` (or `list.len()`).
/// Steps 1, 2, 4, ... ahead and then binary-searches the last step, so the cost is logarithmic
/// in the distance moved: cheap both for dense walks and for long jumps.
fn gallop(list: &[SeriesId], from: usize, target: SeriesId) -> usize {
    let mut lo = from;
    let mut hi = from;
    let mut step = 1;
    while let Some(&id) = list.get(hi) {
        if id >= target {
            break;
        }
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    let hi = hi.min(list.len());
    lo + list.get(lo..hi).map_or(0, |s| s.partition_point(|&id| id < target))
}

/// Ids present in both lists.
pub(super) fn intersect(a: &[SeriesId], b: &[SeriesId]) -> Vec<SeriesId> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    intersect_into(a, b, &mut out);
    out
}

/// How many ids are in both lists.
pub(super) fn intersect_count(a: &[SeriesId], b: &[SeriesId]) -> usize {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let (mut cursor, mut n) = (0, 0);
    for &id in small {
        cursor = gallop(large, cursor, id);
        match large.get(cursor) {
            None => break,
            Some(&found) if found == id => n += 1,
            Some(_) => {}
        }
    }
    n
}

/// Appends the ids present in both lists to `out`.
pub(super) fn intersect_into(a: &[SeriesId], b: &[SeriesId], out: &mut Vec<SeriesId>) {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut cursor = 0;
    for &id in small {
        cursor = gallop(large, cursor, id);
        match large.get(cursor) {
            None => break,
            Some(&found) if found == id => out.push(id),
            Some(_) => {}
        }
    }
}

/// Appends to `out` the first `limit` ids of `small` that are also in `large`, galloping through
/// `large`; true if there are more than `limit` (the walk stopped at the next one), so a caller
/// that needs more knows to continue after the last id appended.
pub(super) fn intersect_first(
    small: &[SeriesId],
    large: &[SeriesId],
    limit: usize,
    out: &mut Vec<SeriesId>,
) -> bool {
    let mut cursor = 0;
    let mut found = 0;
    for &id in small {
        cursor = gallop(large, cursor, id);
        match large.get(cursor) {
            None => break,
            Some(&x) if x == id => {
                if found == limit {
                    return true;
                }
                out.push(id);
                found += 1;
            }
            Some(_) => {}
        }
    }
    false
}

/// Removes from `list` every id that is in `other`.
pub(super) fn subtract(list: &mut Vec<SeriesId>, other: &[SeriesId]) {
    let mut cursor = 0;
    list.retain(|&id| {
        cursor = gallop(other, cursor, id);
        other.get(cursor) != Some(&id)
    });
}

/// The sorted union of any number of lists.
///
/// Two lists are merged; many lists (e.g. every hostname matching a regex) are combined in a
/// bitmap when they are dense enough relative to the largest id, else concatenated and sorted.
pub(super) fn union(lists: &[&[SeriesId]]) -> Vec<SeriesId> {
    match lists {
        [] => Vec::new(),
        [one] => one.to_vec(),
        [a, b] => merge(a, b),
        _ => {
            let total: usize = lists.iter().map(|l| l.len()).sum();
            let max = lists.iter().filter_map(|l| l.last()).max().map_or(0, |&m| m as usize);
            if total.saturating_mul(BITMAP_MIN_DENSITY) >= max {
                union_bitmap(lists, max, total)
            } else {
                let mut out = Vec::with_capacity(total);
                for l in lists {
                    out.extend_from_slice(l);
                }
                out.sort_unstable();
                out.dedup();
                out
            }
        }
    }
}

fn merge(a: &[SeriesId], b: &[SeriesId]) -> Vec<SeriesId> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
        if x <= y {
            out.push(x);
            i += 1;
            j += usize::from(x == y);
        } else {
            out.push(y);
            j += 1;
        }
    }
    out.extend_from_slice(a.get(i..).unwrap_or_default());
    out.extend_from_slice(b.get(j..).unwrap_or_default());
    out
}

fn union_bitmap(lists: &[&[SeriesId]], max: usize, total: usize) -> Vec<SeriesId> {
    let mut words = vec![0u64; max / 64 + 1];
    for l in lists {
        for &id in *l {
            if let Some(w) = words.get_mut(id as usize / 64) {
                *w |= 1 << (id % 64);
            }
        }
    }
    let mut out = Vec::with_capacity(total);
    for (i, &word) in words.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            let bit = w.trailing_zeros();
            // `i * 64 + bit <= max`, which came from a SeriesId, so it fits.
            out.push((i * 64) as SeriesId + bit);
            w &= w - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn sorted_set() -> impl Strategy<Value = Vec<SeriesId>> {
        prop::collection::btree_set(0u32..300, 0..60).prop_map(|s| s.into_iter().collect())
    }

    #[test]
    fn insert_keeps_order_when_ids_arrive_out_of_order() {
        let mut l = Vec::new();
        for id in [3, 5, 4, 1, 9, 5] {
            insert(&mut l, id);
        }
        assert_eq!(l, vec![1, 3, 4, 5, 9]);
        assert!(!insert(&mut l, 4));
    }

    #[test]
    fn union_of_many_dense_and_sparse_lists() {
        let dense: Vec<Vec<u32>> = (0..10).map(|k| (0..100).map(|i| i * 10 + k).collect()).collect();
        let refs: Vec<&[u32]> = dense.iter().map(Vec::as_slice).collect();
        assert_eq!(union(&refs), (0..1000).collect::<Vec<u32>>());
        let sparse = [&[1_000_000u32][..], &[5, 2_000_000], &[5, 7]];
        assert_eq!(union(&sparse), vec![5, 7, 1_000_000, 2_000_000]);
    }

    proptest! {
        #[test]
        fn operations_match_set_semantics(a in sorted_set(), b in sorted_set(), c in sorted_set()) {
            let (sa, sb, sc): (BTreeSet<u32>, BTreeSet<u32>, BTreeSet<u32>) =
                (a.iter().copied().collect(), b.iter().copied().collect(), c.iter().copied().collect());
            prop_assert_eq!(intersect(&a, &b), sa.intersection(&sb).copied().collect::<Vec<_>>());
            for limit in [0, 1, 3, 100] {
                let both: Vec<u32> = sa.intersection(&sb).copied().collect();
                let mut out = vec![7];
                let more = intersect_first(&a, &b, limit, &mut out);
                prop_assert_eq!(&out[1..], both.get(..limit.min(both.len())).unwrap());
                prop_assert_eq!(more, both.len() > limit);
            }
            let mut d = a.clone();
            subtract(&mut d, &b);
            prop_assert_eq!(d, sa.difference(&sb).copied().collect::<Vec<_>>());
            let mut r = a.clone();
            prop_assert_eq!(remove_all(&mut r, &b), sa.intersection(&sb).count());
            prop_assert_eq!(r, sa.difference(&sb).copied().collect::<Vec<_>>());
            let all: BTreeSet<u32> = sa.union(&sb).chain(sc.iter()).copied().collect();
            prop_assert_eq!(union(&[&a, &b, &c]), all.into_iter().collect::<Vec<_>>());
            prop_assert_eq!(union(&[&a, &b]), sa.union(&sb).copied().collect::<Vec<_>>());
        }
    }
}
