//! Small label-set operations used throughout evaluation.

use std::hash::{BuildHasher, Hash, Hasher};

use storage::{Label, Labels};

/// Maps and sets keyed by label sets and signatures. foldhash (randomly seeded per map, like
/// std's) instead of SipHash: hashing a TSBS series' ten labels with SipHash was 2 % of a
/// small query, checking an eight-series result for duplicate label sets.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`HashMap`].
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A hash of the labels of `l` whose names pass `keep`: of the set they would make, without
/// making it. Hashes from one `state` are compared with each other only.
pub(crate) fn hash_kept(state: &foldhash::fast::RandomState, l: &Labels, keep: impl Fn(&str) -> bool) -> u64 {
    let mut h = state.build_hasher();
    l.iter().filter(|x| keep(&x.name)).for_each(|x| x.hash(&mut h));
    h.finish()
}

/// `l` without the labels named in `names`.
pub(crate) fn without(l: &Labels, names: &[&str]) -> Labels {
    if !l.iter().any(|x| names.contains(&x.name.as_ref())) {
        return l.clone();
    }
    Labels::from_sorted(l.iter().filter(|x| !names.contains(&x.name.as_ref())).cloned().collect())
}

/// `l` without the labels named in `names` (owned-string variant).
pub(crate) fn without_owned(l: &Labels, names: &[String]) -> Labels {
    if !l.iter().any(|x| names.iter().any(|n| n == x.name.as_ref())) {
        return l.clone();
    }
    Labels::from_sorted(l.iter().filter(|x| !names.iter().any(|n| n == x.name.as_ref())).cloned().collect())
}

/// Only the labels of `l` named in `names`.
pub(crate) fn keep(l: &Labels, names: &[String]) -> Labels {
    Labels::from_sorted(l.iter().filter(|x| names.iter().any(|n| n == x.name.as_ref())).cloned().collect())
}

/// `l` with label `name` set to `value` (removed if `value` is empty).
pub(crate) fn set(l: &Labels, name: &str, value: &str) -> Labels {
    if value.is_empty() {
        return without(l, &[name]);
    }
    set_label(l, &Label::new(name, value))
}

/// `l` with `label` (whose value is not empty) in place of any label of its name: put in its
/// place by name, so the set needs no sorting, and its strings shared, not copied.
pub(crate) fn set_label(l: &Labels, label: &Label) -> Labels {
    let mut v: Vec<Label> = Vec::with_capacity(l.len() + 1);
    let mut placed = false;
    for x in l.iter() {
        if !placed && x.name >= label.name {
            v.push(label.clone());
            placed = true;
        }
        if x.name != label.name {
            v.push(x.clone());
        }
    }
    if !placed {
        v.push(label.clone());
    }
    Labels::from_sorted(v)
}

/// The metric name or "".
pub(crate) fn metric_name(l: &Labels) -> &str {
    l.metric_name().unwrap_or("")
}

/// The labels Prometheus drops when a function changes a metric's meaning.
pub(crate) const NAME_LABELS: [&str; 3] = [storage::METRIC_NAME, "__type__", "__unit__"];

/// Creates labels without the [`NAME_LABELS`].
pub(crate) fn drop_metric_labels(l: &Labels) -> Labels {
    without(l, &NAME_LABELS)
}

/// Labels identifying an input series' group.
pub(crate) fn group_labels(l: &Labels, grouping: &[String], without: bool) -> Labels {
    if without {
        let mut names: Vec<&str> = grouping.iter().map(String::as_str).collect();
        names.push(storage::METRIC_NAME);
        self::without(l, &names)
    } else if grouping.is_empty() {
        Labels::default()
    } else {
        keep(l, grouping)
    }
}

/// A valid label name (UTF-8, non-empty), as Prometheus 3 accepts them.
pub(crate) fn is_valid_label_name(name: &str, valid_utf8: bool) -> bool {
    valid_utf8 && !name.is_empty()
}

/// The label-set hash Prometheus uses (`labels.Labels.Hash`): xxHash64 of
/// `name 0xff value 0xff ...`. `limit_ratio` relies on it to pick the same series Prometheus does.
pub(crate) fn hash(l: &Labels) -> u64 {
    let mut buf = Vec::with_capacity(256);
    for x in l.iter() {
        buf.extend_from_slice(x.name.as_bytes());
        buf.push(0xff);
        buf.extend_from_slice(x.value.as_bytes());
        buf.push(0xff);
    }
    xxh64(&buf)
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

fn read_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// xxHash64 with seed 0.
pub(crate) fn xxh64(data: &[u8]) -> u64 {
    let len = data.len() as u64;
    let mut rest = data;
    let mut h = if data.len() >= 32 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
        while rest.len() >= 32 {
            for (i, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, read_u64(&rest[i * 8..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge_round(h, lane);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(len);
    while rest.len() >= 8 {
        h ^= round(0, read_u64(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&rest[..4]);
        h ^= u64::from(u32::from_le_bytes(a)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh64_reference_values() {
        assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
        assert_eq!(xxh64(b"Nobody inspects the spammish repetition"), 0xFBCE_A83C_8A37_8BF1);
    }

    proptest::proptest! {
        /// Setting a label in place gives the set built anew without the old label of that name
        /// and with the new one (none if its value is empty).
        #[test]
        fn set_equals_building_the_set_anew(
            pairs in proptest::collection::vec(("[a-e]{1,2}", "[xy]{0,2}"), 0..8),
            name in "[a-e]{1,2}",
            value in "[xy]{0,2}",
        ) {
            let l = Labels::new(pairs.iter().map(|(n, v)| Label::new(n.as_str(), v.as_str())).collect());
            let mut all: Vec<Label> = l.iter().filter(|x| *x.name != *name).cloned().collect();
            all.push(Label::new(name.as_str(), value.as_str()));
            proptest::prop_assert_eq!(set(&l, &name, &value), Labels::new(all));
        }
    }
}
