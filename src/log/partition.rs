//! Which log partition a series belongs to, and a batch split accordingly.
//!
//! The rule is part of the deployment's data layout (ingesters own partitions, and a series must
//! land in the same one whatever the protocol, the distributor or the release), so it is fixed
//! and documented rather than left to a hasher that may change: FNV-1a (64 bits) over the
//! series' labels sorted by name, each written as its name, a 0xFF byte, its value and a 0xFF
//! byte (0xFF never occurs in UTF-8), taken modulo the number of partitions.

use storage::{Batch, Labels};

/// FNV-1a's 64-bit offset basis and prime.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The partition of the series `labels` among `partitions` (at least 1).
pub fn partition_of(labels: &Labels, partitions: u32) -> u32 {
    let mut h = FNV_OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    };
    for l in labels.iter() {
        eat(l.name.as_bytes());
        eat(&[0xFF]);
        eat(l.value.as_bytes());
        eat(&[0xFF]);
    }
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
        // FNV-1a 64 of "__name__\xffup\xffinstance\xffa:9100\xffjob\xffnode\xff", computed
        // independently of this code.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in b"__name__\xffup\xffinstance\xffa:9100\xffjob\xffnode\xff" {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
        for n in [1, 2, 7, 16, 1000] {
            assert_eq!(u64::from(partition_of(&up, n)), h % u64::from(n));
        }
        assert_eq!(partition_of(&up, 1), 0);
    }

    /// Label order in the request does not matter: the set is hashed sorted.
    #[test]
    fn the_same_series_lands_in_the_same_partition_whatever_the_label_order() {
        let a = labels(&[("a", "1"), ("__name__", "m"), ("b", "2")]);
        let b = labels(&[("b", "2"), ("a", "1"), ("__name__", "m")]);
        assert_eq!(partition_of(&a, 16), partition_of(&b, 16));
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
