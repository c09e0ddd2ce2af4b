//! Series per metric name and per tenant, for the series limits ([`crate::cardinality`]): lengths
//! (and, for a metric within a tenant, the overlap) of postings lists, read under the names'
//! locks, with no label set read.

use super::{Index, postings};
use crate::types::{METRIC_NAME, TENANT_LABEL};

impl Index {
    /// Live series whose metric name (`__name__`) is `metric`.
    pub fn metric_series_count(&self, metric: &str) -> usize {
        self.postings
            .with_values(METRIC_NAME, |values| values.and_then(|v| v.postings(metric)).map_or(0, <[_]>::len))
    }

    /// Live series of `tenant` ([`TENANT_LABEL`]'s value; `None`: the default tenant, the
    /// series without that label).
    pub fn tenant_series_count(&self, tenant: Option<&str>) -> usize {
        let labelled = self.postings.with_values(TENANT_LABEL, |values| match (values, tenant) {
            (None, _) => 0,
            (Some(v), Some(t)) => v.postings(t).map_or(0, <[_]>::len),
            (Some(v), None) => v.series_count(),
        });
        match tenant {
            Some(_) => labelled,
            None => self.len().saturating_sub(labelled),
        }
    }

    /// Live series of `tenant` (as for [`Index::tenant_series_count`]) whose metric name is
    /// `metric`. Costs a walk of the metric's postings per tenant list it meets, so callers
    /// ask only when [`Index::metric_series_count`] alone cannot settle a limit.
    pub fn tenant_metric_series_count(&self, tenant: Option<&str>, metric: &str) -> usize {
        self.postings.with_values_pair(METRIC_NAME, TENANT_LABEL, |names, tenants| {
            let Some(named) = names.and_then(|v| v.postings(metric)) else { return 0 };
            match (tenants, tenant) {
                (None, None) => named.len(),
                (None, Some(_)) => 0,
                (Some(t), Some(id)) => t.postings(id).map_or(0, |ids| postings::intersect_count(named, ids)),
                (Some(t), None) => {
                    let labelled: usize = t.iter().map(|(_, ids)| postings::intersect_count(named, ids)).sum();
                    named.len().saturating_sub(labelled)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Labels;

    /// Counts per tenant and per metric within a tenant agree with counting the label sets.
    #[test]
    fn counts_per_tenant_agree_with_the_label_sets() {
        let index = Index::new();
        let mut all = Vec::new();
        for i in 0..60u32 {
            let metric = ["up", "cpu", "mem"][(i % 3) as usize];
            let tenant = ["", "a", "b", "a"][(i % 4) as usize];
            let mut pairs = vec![(METRIC_NAME, metric.to_string()), ("i", i.to_string())];
            if !tenant.is_empty() {
                pairs.push((TENANT_LABEL, tenant.to_string()));
            }
            let labels = Labels::from_pairs(&pairs);
            index.get_or_create(&labels);
            all.push(labels);
        }
        for tenant in [None, Some("a"), Some("b"), Some("c")] {
            let of = |l: &Labels| l.get(TENANT_LABEL) == tenant;
            assert_eq!(index.tenant_series_count(tenant), all.iter().filter(|l| of(l)).count(), "{tenant:?}");
            for metric in ["up", "cpu", "mem", "none"] {
                let expected = all.iter().filter(|l| of(l) && l.metric_name() == Some(metric)).count();
                assert_eq!(index.tenant_metric_series_count(tenant, metric), expected, "{tenant:?} {metric}");
            }
        }
    }
}
