//! Which log partition a series belongs to, and a batch split accordingly.
//!
//! The rule is part of the deployment's data layout (ingesters own partitions, and a series must
//! land in the same one whatever the protocol, the distributor or the release), so it is fixed
//! and documented rather than left to a hasher that may change: XXH3 (64 bits, seed 0) of the
//! series' labels sorted by name, each written as its name, a 0xFF byte, its value and a 0xFF
//! byte (0xFF never occurs in UTF-8), taken modulo the number of partitions.

use std::cell::RefCell;

use storage::{Batch, Labels, RawLabels};

/// The partition of the series `labels` among `partitions` (at least 1).
pub fn partition_of(labels: &Labels, partitions: u32) -> u32 {
    of_pairs(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())), partitions)
}

/// [`partition_of`] for the borrowed labels of a decoded request (sorted by name, as a
/// `Labels` is), and whether every label string is ASCII (so certainly UTF-8): the distributor
/// checks the labels it forwards, and this pass reads them anyway.
pub fn partition_of_raw(labels: RawLabels<'_>, partitions: u32) -> (u32, bool) {
    let mut ascii = true;
    let pairs = labels.iter().inspect(|(name, value)| ascii &= name.is_ascii() & value.is_ascii());
    let partition = of_pairs(pairs, partitions);
    (partition, ascii)
}

fn of_pairs<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>, partitions: u32) -> u32 {
    thread_local! {
        /// The bytes hashed, kept per thread: a request hashes thousands of label sets.
        static BYTES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let h = BYTES.with_borrow_mut(|bytes| {
        bytes.clear();
        for (name, value) in pairs {
            bytes.extend_from_slice(name);
            bytes.push(0xFF);
            bytes.extend_from_slice(value);
            bytes.push(0xFF);
        }
        xxhash_rust::xxh3::xxh3_64(bytes)
    });
    // The remainder is below `partitions`, a u32.
    (h % u64::from(partitions.max(1))) as u32
}

/// `batch` split by partition: the non-empty parts, in partition order, each keeping its
/// series in the order they came.
pub fn split(batch: Batch, partitions: u32) -> Vec<(u32, Batch)> {
    let mut parts: Vec<Batch> = (0..partitions.max(1)).map(|_| Batch::new()).collect();
    for (labels, samples) in batch.series {
        let p = partition_of(&labels, partitions) as usize;
        parts[p].push(labels, samples);
    }
    for (labels, samples) in batch.histograms {
        let p = partition_of(&labels, partitions) as usize;
        parts[p].push_histograms(labels, samples);
    }
    parts
        .into_iter()
        .enumerate()
        .filter(|(_, b)| !b.series.is_empty() || !b.histograms.is_empty())
        .map(|(p, b)| (p as u32, b))
        .collect()
}

#[cfg(test)]
mod tests {
    use storage::{Label, Sample};

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        Labels::new(pairs.iter().map(|(n, v)| Label::new(*n, *v)).collect())
    }

    /// The rule is fixed: these values are what any release must compute, or a deployment's
    /// series would move between partitions on upgrade.
    #[test]
    fn partitions_are_fixed_by_the_documented_hash() {
        let up = labels(&[("__name__", "up"), ("job", "node"), ("instance", "a:9100")]);
        // XXH3-64 of "__name__\xffup\xffinstance\xffa:9100\xffjob\xffnode\xff", computed
        // with Python's xxhash package (xxh3_64_intdigest), not with this code.
        let h: u64 = 11_119_733_136_783_753_215;
        for (n, want) in [(1, 0), (2, 1), (7, 6), (16, 15), (1000, 215)] {
            assert_eq!(u64::from(partition_of(&up, n)), h % u64::from(n));
            assert_eq!(partition_of(&up, n), want);
        }
        assert_eq!(partition_of(&up, 1), 0);
    }

    /// Label order in the request does not matter: the set is hashed sorted.
    #[test]
    fn the_same_series_lands_in_the_same_partition_whatever_the_label_order() {
        let a = labels(&[("a", "1"), ("__name__", "m"), ("b", "2")]);
        let b = labels(&[("b", "2"), ("a", "1"), ("__name__", "m")]);
        assert_eq!(partition_of(&a, 16), partition_of(&b, 16));
        // A decoded request's borrowed labels land where the owned set does.
        let mut batch = storage::BatchRef::new();
        batch.push([("__name__", "m"), ("a", "1"), ("b", "2")], [Sample::new(1, 1.0)]);
        let (raw, _) = batch.iter().next().unwrap();
        for n in [1, 3, 16, 1000] {
            assert_eq!(partition_of_raw(raw, n).0, partition_of(&a, n));
        }
    }

    /// Every series goes to exactly one part, the one its partition names, in arrival order;
    /// empty parts are left out.
    #[test]
    fn a_split_keeps_every_series_once_in_its_partition() {
        let mut batch = Batch::new();
        for i in 0..200 {
            batch.push(labels(&[("__name__", "m"), ("i", &i.to_string())]), vec![Sample::new(i, i as f64)]);
        }
        let parts = split(batch.clone(), 8);
        assert!(parts.windows(2).all(|w| w[0].0 < w[1].0));
        let mut seen = 0;
        for (p, part) in &parts {
            assert!(!part.series.is_empty());
            for (l, _) in &part.series {
                assert_eq!(partition_of(l, 8), *p);
            }
            assert!(part.series.windows(2).all(|w| w[0].1[0].t < w[1].1[0].t), "arrival order kept");
            seen += part.series.len();
        }
        assert_eq!(seen, 200);
        assert_eq!(split(batch, 1).len(), 1);
    }
}
