//! A simple in-memory store: the model the engine is checked against in property tests, and a
//! fake [`Querier`] for testing the PromQL engine without the real storage.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Result;
use crate::matcher::{Matcher, matches_all};
use crate::query::{Querier, SeriesRef, check_selective};
use crate::types::{Labels, Sample};

/// Series -> time -> value; last write wins per timestamp.
#[derive(Debug, Default, Clone)]
pub struct MemStore {
    series: BTreeMap<Labels, BTreeMap<i64, f64>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        MemStore::default()
    }

    /// Adds samples to a series (creating it), overwriting equal timestamps.
    pub fn append(&mut self, labels: &Labels, samples: &[Sample]) {
        let s = self.series.entry(labels.clone()).or_default();
        for x in samples {
            s.insert(x.t, x.v);
        }
    }

    /// Deletes the samples in `[mint, maxt]` of every series matching `matchers`.
    pub fn delete(&mut self, matchers: &[Matcher], mint: i64, maxt: i64) {
        for (l, s) in self.series.iter_mut() {
            if matches_all(matchers, l) {
                s.retain(|t, _| *t < mint || *t > maxt);
            }
        }
        self.series.retain(|_, s| !s.is_empty());
    }

    /// Drops every sample older than `mint`.
    pub fn drop_before(&mut self, mint: i64) {
        for s in self.series.values_mut() {
            s.retain(|t, _| *t >= mint);
        }
        self.series.retain(|_, s| !s.is_empty());
    }

    /// All series with all their samples, in label order.
    pub fn dump(&self) -> Vec<(Labels, Vec<Sample>)> {
        self.series
            .iter()
            .map(|(l, s)| (l.clone(), s.iter().map(|(t, v)| Sample::new(*t, *v)).collect()))
            .collect()
    }

    fn matching(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> impl Iterator<Item = &Labels> {
        self.series
            .iter()
            .filter(move |(l, s)| matches_all(matchers, l) && s.range(mint..=maxt).next().is_some())
            .map(|(l, _)| l)
    }
}

impl Querier for MemStore {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        check_selective(matchers)?;
        Ok(self
            .matching(matchers, mint, maxt)
            .enumerate()
            .map(|(i, l)| SeriesRef { id: i as u32, labels: l.clone() })
            .collect())
    }

    fn samples(&self, series: &SeriesRef, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
        if let Some(s) = self.series.get(&series.labels) {
            out.extend(s.range(mint..=maxt).map(|(t, v)| Sample::new(*t, *v)));
        }
        Ok(())
    }

    fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        let mut names = BTreeSet::new();
        for l in self.matching(matchers, mint, maxt) {
            names.extend(l.iter().map(|x| x.name.to_string()));
        }
        Ok(names.into_iter().collect())
    }

    fn label_values(&self, name: &str, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        let mut values = BTreeSet::new();
        for l in self.matching(matchers, mint, maxt) {
            if let Some(v) = l.get(name) {
                values.insert(v.to_string());
            }
        }
        Ok(values.into_iter().collect())
    }
}
