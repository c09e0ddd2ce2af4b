//! Series per metric name, for the per-metric series limit ([`crate::cardinality`]): the length of
//! the `__name__="<metric>"` postings, read under that name's lock, with no label set read.

use super::Index;
use crate::types::METRIC_NAME;

impl Index {
    /// Live series whose metric name (`__name__`) is `metric`.
    pub fn metric_series_count(&self, metric: &str) -> usize {
        self.postings
            .with_values(METRIC_NAME, |values| values.and_then(|v| v.postings(metric)).map_or(0, <[_]>::len))
    }
}
