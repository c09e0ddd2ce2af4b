//! Metric metadata (type, help, unit) received through remote write, kept for
//! `/api/v1/metadata`.
//!
//! Prometheus sends metadata separately from samples (1.0: every `metadata_send_interval`, 1 min
//! by default; 2.0: with every series). It is advisory and cheap to resend, so strata keeps the
//! latest entry per tenant and metric name in memory only; after a restart the next sends fill
//! it again.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use remote::metadata::MetricMetadata;

/// The latest metadata per tenant and metric family name.
#[derive(Debug, Default)]
pub struct MetadataStore {
    /// By tenant (`""`: the default tenant), then by metric family name.
    by_tenant: RwLock<HashMap<String, HashMap<String, MetricMetadata>>>,
}

impl MetadataStore {
    /// Records `entries` of `tenant` (`None`: the default tenant), each replacing what was
    /// known for its metric name. Entries without a name are ignored: there is nothing to look
    /// them up by.
    pub fn update(&self, tenant: Option<&str>, entries: Vec<MetricMetadata>) {
        if entries.iter().all(|e| e.metric_family_name.is_empty()) {
            return;
        }
        let tenant = tenant.unwrap_or_default();
        let mut by_tenant = self.by_tenant.write().unwrap_or_else(PoisonError::into_inner);
        if !by_tenant.contains_key(tenant) {
            by_tenant.insert(tenant.to_string(), HashMap::new());
        }
        let Some(by_name) = by_tenant.get_mut(tenant) else { return };
        for entry in entries {
            if entry.metric_family_name.is_empty() {
                continue;
            }
            // Most sends repeat what is already known; skip the allocation of a new key then.
            match by_name.get_mut(&entry.metric_family_name) {
                Some(known) => *known = entry,
                None => {
                    by_name.insert(entry.metric_family_name.clone(), entry);
                }
            }
        }
    }

    /// The metadata of `name` for `tenant`, if any was received.
    pub fn get(&self, tenant: Option<&str>, name: &str) -> Option<MetricMetadata> {
        let by_tenant = self.by_tenant.read().unwrap_or_else(PoisonError::into_inner);
        by_tenant.get(tenant.unwrap_or_default()).and_then(|m| m.get(name)).cloned()
    }

    /// Every entry of the tenants `tenants` (`None`: the default tenant), sorted by metric
    /// name; for a name several tenants have, each tenant's entry.
    pub fn all(&self, tenants: &[Option<&str>]) -> Vec<MetricMetadata> {
        let by_tenant = self.by_tenant.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<MetricMetadata> = tenants
            .iter()
            .filter_map(|t| by_tenant.get(t.unwrap_or_default()))
            .flat_map(|m| m.values().cloned())
            .collect();
        all.sort_by(|a, b| a.metric_family_name.cmp(&b.metric_family_name));
        all
    }

    /// Number of metric names with metadata, over every tenant.
    pub fn len(&self) -> usize {
        self.by_tenant.read().unwrap_or_else(PoisonError::into_inner).values().map(HashMap::len).sum()
    }

    /// True if no metadata was received yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use remote::metadata::MetricType;

    use super::*;

    fn meta(name: &str, metric_type: MetricType, help: &str) -> MetricMetadata {
        MetricMetadata {
            metric_family_name: name.into(),
            metric_type,
            help: help.into(),
            unit: String::new(),
        }
    }

    #[test]
    fn the_latest_entry_per_name_wins() {
        let store = MetadataStore::default();
        store.update(
            None,
            vec![meta("up", MetricType::Gauge, "old"), meta("a_total", MetricType::Counter, "a")],
        );
        store.update(None, vec![meta("up", MetricType::Gauge, "new")]);
        assert_eq!(store.len(), 2);
        assert_eq!(store.get(None, "up").unwrap().help, "new");
        let names: Vec<String> = store.all(&[None]).into_iter().map(|m| m.metric_family_name).collect();
        assert_eq!(names, ["a_total", "up"]);
    }

    #[test]
    fn tenants_keep_their_own_metadata() {
        let store = MetadataStore::default();
        store.update(None, vec![meta("up", MetricType::Gauge, "default")]);
        store
            .update(Some("a"), vec![meta("up", MetricType::Counter, "a"), meta("x", MetricType::Gauge, "a")]);
        assert_eq!(store.get(None, "up").unwrap().help, "default");
        assert_eq!(store.get(Some("a"), "up").unwrap().help, "a");
        assert_eq!(store.get(Some("b"), "up"), None);
        assert_eq!(store.all(&[None]).len(), 1);
        assert_eq!(store.all(&[Some("a")]).len(), 2);
        assert_eq!(store.all(&[Some("b")]).len(), 0);
        assert_eq!(store.len(), 3);
    }

    #[test]
    fn nameless_entries_are_ignored() {
        let store = MetadataStore::default();
        store.update(None, vec![meta("", MetricType::Gauge, "x")]);
        assert!(store.is_empty());
    }
}
