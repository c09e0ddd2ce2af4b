//! Metric metadata (type, help, unit) received through remote write, kept for
//! `/api/v1/metadata`.
//!
//! Prometheus sends metadata separately from samples (1.0: every `metadata_send_interval`, 1 min
//! by default; 2.0: with every series). It is advisory and cheap to resend, so strata keeps the
//! latest entry per metric name in memory only; after a restart the next sends fill it again.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use remote::metadata::MetricMetadata;

/// The latest metadata per metric family name.
#[derive(Debug, Default)]
pub struct MetadataStore {
    by_name: RwLock<HashMap<String, MetricMetadata>>,
}

impl MetadataStore {
    /// Records `entries`, each replacing what was known for its metric name. Entries without a
    /// name are ignored: there is nothing to look them up by.
    pub fn update(&self, entries: Vec<MetricMetadata>) {
        if entries.is_empty() {
            return;
        }
        let mut by_name = self.by_name.write().unwrap_or_else(PoisonError::into_inner);
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

    /// The metadata of `name`, if any was received.
    pub fn get(&self, name: &str) -> Option<MetricMetadata> {
        self.by_name.read().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Every entry, sorted by metric name.
    pub fn all(&self) -> Vec<MetricMetadata> {
        let mut all: Vec<MetricMetadata> =
            self.by_name.read().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        all.sort_by(|a, b| a.metric_family_name.cmp(&b.metric_family_name));
        all
    }

    /// Number of metric names with metadata.
    pub fn len(&self) -> usize {
        self.by_name.read().unwrap_or_else(PoisonError::into_inner).len()
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
        store.update(vec![meta("up", MetricType::Gauge, "old"), meta("a_total", MetricType::Counter, "a")]);
        store.update(vec![meta("up", MetricType::Gauge, "new")]);
        assert_eq!(store.len(), 2);
        assert_eq!(store.get("up").unwrap().help, "new");
        let names: Vec<String> = store.all().into_iter().map(|m| m.metric_family_name).collect();
        assert_eq!(names, ["a_total", "up"]);
    }

    #[test]
    fn nameless_entries_are_ignored() {
        let store = MetadataStore::default();
        store.update(vec![meta("", MetricType::Gauge, "x")]);
        assert!(store.is_empty());
    }
}
