//! Cardinality statistics of the index: which metric names, label names and label pairs hold
//! the most series. They answer `/api/v1/status/tsdb`, the cardinality explorer users open when
//! the series count grows unexpectedly, so they come straight from the postings (one pass over
//! the name and value maps, no label set is read).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Index, postings};
use crate::types::{METRIC_NAME, SeriesId, TENANT_LABEL};

/// One entry of a top list: a name (a metric name, a label name, or `name=value`) and its count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// What is counted.
    pub name: String,
    /// The count (series, values or bytes, depending on the list).
    pub value: u64,
}

/// Cardinality of the live series, each list the `limit` largest entries, largest first (ties
/// by name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Live series.
    pub series: u64,
    /// Distinct label pairs (name and value) over all series.
    pub label_pairs: u64,
    /// Series per metric name (`__name__` value).
    pub series_by_metric_name: Vec<Stat>,
    /// Distinct values per label name.
    pub values_by_label_name: Vec<Stat>,
    /// Bytes of the distinct values per label name (each string is stored once, interned).
    pub value_bytes_by_label_name: Vec<Stat>,
    /// Series per label pair, named `name=value`.
    pub series_by_label_pair: Vec<Stat>,
}

/// The `limit` largest entries seen, by count then name; a name is copied only when its entry
/// gets in.
struct TopK {
    limit: usize,
    /// A min-heap on (count, reversed name): the root is the entry to evict first.
    heap: BinaryHeap<Reverse<(u64, Reverse<String>)>>,
}

impl TopK {
    fn new(limit: usize) -> Self {
        TopK { limit, heap: BinaryHeap::with_capacity(limit + 1) }
    }

    /// Offers an entry whose name `name()` builds.
    fn offer(&mut self, count: u64, name: impl FnOnce() -> String) {
        if self.limit == 0 {
            return;
        }
        if self.heap.len() >= self.limit {
            // An entry enters only if it beats the smallest kept one; at equal counts the
            // smaller name wins, which needs the name, so build it only then.
            let Some(Reverse((min, _))) = self.heap.peek() else { return };
            if count < *min {
                return;
            }
        }
        self.heap.push(Reverse((count, Reverse(name()))));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    /// Largest first, ties by name.
    fn into_stats(self) -> Vec<Stat> {
        let mut out: Vec<Stat> =
            self.heap.into_iter().map(|Reverse((value, Reverse(name)))| Stat { name, value }).collect();
        out.sort_unstable_by(|a, b| b.value.cmp(&a.value).then_with(|| a.name.cmp(&b.name)));
        out
    }
}

impl Index {
    /// Cardinality statistics with the `limit` largest entries of each list, over the series
    /// `of` (sorted ids; `None`: every live series), the tenant label left out of the lists
    /// (a tenant's page names no other tenant). Holds one name's value-map lock at a time, for
    /// one pass over its values; a subset costs a walk of each value's postings against it.
    pub fn stats(&self, limit: usize, of: Option<&[SeriesId]>) -> IndexStats {
        let of = of.filter(|ids| ids.len() < self.len());
        let mut label_pairs = 0u64;
        let mut values_by_name = TopK::new(limit);
        let mut bytes_by_name = TopK::new(limit);
        let mut by_metric = TopK::new(limit);
        let mut pairs = TopK::new(limit);
        for name in self.postings.names() {
            if name == TENANT_LABEL {
                continue;
            }
            self.postings.with_values(&name, |values| {
                let Some(values) = values else { return };
                let (mut bytes, mut distinct) = (0u64, 0u64);
                for (value, ids) in values.iter() {
                    let series = match of {
                        None => ids.len() as u64,
                        Some(of) => postings::intersect_count(of, ids) as u64,
                    };
                    if series == 0 {
                        continue;
                    }
                    distinct += 1;
                    bytes += value.len() as u64;
                    if name == METRIC_NAME {
                        by_metric.offer(series, || value.to_string());
                    }
                    pairs.offer(series, || format!("{name}={value}"));
                }
                if distinct == 0 {
                    return;
                }
                label_pairs += distinct;
                values_by_name.offer(distinct, || name.clone());
                bytes_by_name.offer(bytes, || name.clone());
            });
        }
        IndexStats {
            series: of.map_or(self.len(), <[_]>::len) as u64,
            label_pairs,
            series_by_metric_name: by_metric.into_stats(),
            values_by_label_name: values_by_name.into_stats(),
            value_bytes_by_label_name: bytes_by_name.into_stats(),
            series_by_label_pair: pairs.into_stats(),
        }
    }
}
