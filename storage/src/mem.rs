//! A simple in-memory store: the model the engine is checked against in property tests, and a
//! fake [`Querier`] for testing the PromQL engine without the real storage.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Result;
use crate::matcher::{Matcher, matches_all};
use crate::query::{Querier, SeriesRef, StartTimestamp, check_selective};
use crate::types::{FloatHistogram, HistogramSample, Labels, Sample};

/// One stored sample: a float (`h` is `None`) or a native histogram, and its start timestamp
/// (0 = unknown).
#[derive(Debug, Clone)]
struct Point {
    v: f64,
    h: Option<Box<FloatHistogram>>,
    st: i64,
}

/// Series -> time -> value (with an optional start timestamp); last write wins per timestamp.
#[derive(Debug, Default, Clone)]
pub struct MemStore {
    series: BTreeMap<Labels, BTreeMap<i64, Point>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        MemStore::default()
    }

    /// Adds samples to a series (creating it), overwriting equal timestamps. The samples have
    /// no start timestamp (one written earlier at the same timestamp is replaced too).
    pub fn append(&mut self, labels: &Labels, samples: &[Sample]) {
        self.append_with_start_timestamps(labels, samples, &[]);
    }

    /// Like [`MemStore::append`], with the start timestamp of each sample: `start_timestamps[i]`
    /// belongs to `samples[i]`; 0, or a missing entry, means unknown.
    pub fn append_with_start_timestamps(
        &mut self,
        labels: &Labels,
        samples: &[Sample],
        start_timestamps: &[i64],
    ) {
        let s = self.series.entry(labels.clone()).or_default();
        for (i, x) in samples.iter().enumerate() {
            let st = start_timestamps.get(i).copied().unwrap_or(0);
            s.insert(x.t, Point { v: x.v, h: None, st });
        }
    }

    /// Adds native histogram samples to a series (creating it), replacing whatever sample
    /// (float or histogram) was stored at an equal timestamp.
    pub fn append_histograms(&mut self, labels: &Labels, samples: &[HistogramSample]) {
        self.append_histograms_with_start_timestamps(labels, samples, &[]);
    }

    /// Like [`MemStore::append_histograms`], with the start timestamp of each sample (as for
    /// [`MemStore::append_with_start_timestamps`]).
    pub fn append_histograms_with_start_timestamps(
        &mut self,
        labels: &Labels,
        samples: &[HistogramSample],
        start_timestamps: &[i64],
    ) {
        let s = self.series.entry(labels.clone()).or_default();
        for (i, x) in samples.iter().enumerate() {
            let st = start_timestamps.get(i).copied().unwrap_or(0);
            s.insert(x.t, Point { v: 0.0, h: Some(Box::new(x.h.clone())), st });
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

    /// All series with all their float samples (histogram samples left out), in label order.
    pub fn dump(&self) -> Vec<(Labels, Vec<Sample>)> {
        self.series
            .iter()
            .map(|(l, s)| {
                (
                    l.clone(),
                    s.iter().filter(|(_, p)| p.h.is_none()).map(|(t, p)| Sample::new(*t, p.v)).collect(),
                )
            })
            .collect()
    }

    fn matching(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> impl Iterator<Item = &Labels> {
        self.series
            .iter()
            .filter(move |(l, s)| matches_all(matchers, l) && in_range(s, mint, maxt).next().is_some())
            .map(|(l, _)| l)
    }
}

/// The points of `s` in `[mint, maxt]`, none if `mint > maxt`, as [`Querier`] promises:
/// `BTreeMap::range` panics on an inverted range, and the engine asks for one when a window
/// saturates at the ends of i64 (`x offset 2m` at the earliest time; found by the
/// `promql_eval` fuzz target).
fn in_range(s: &BTreeMap<i64, Point>, mint: i64, maxt: i64) -> impl Iterator<Item = (&i64, &Point)> {
    (mint <= maxt).then(|| s.range(mint..=maxt)).into_iter().flatten()
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
            out.extend(
                in_range(s, mint, maxt).filter(|(_, p)| p.h.is_none()).map(|(t, p)| Sample::new(*t, p.v)),
            );
        }
        Ok(())
    }

    fn histograms(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<HistogramSample>,
    ) -> Result<()> {
        if let Some(s) = self.series.get(&series.labels) {
            out.extend(
                in_range(s, mint, maxt)
                    .filter_map(|(t, p)| p.h.as_ref().map(|h| HistogramSample { t: *t, h: (**h).clone() })),
            );
        }
        Ok(())
    }

    fn start_timestamps(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<StartTimestamp>,
    ) -> Result<()> {
        if let Some(s) = self.series.get(&series.labels) {
            out.extend(
                in_range(s, mint, maxt)
                    .filter(|(_, p)| p.st != 0)
                    .map(|(t, p)| StartTimestamp { t: *t, st: p.st }),
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Label;

    fn labels(name: &str) -> Labels {
        Labels::new(vec![Label::new(crate::types::METRIC_NAME, name)])
    }

    fn start_timestamps(m: &MemStore, name: &str, mint: i64, maxt: i64) -> Vec<(i64, i64)> {
        let r = SeriesRef { id: 0, labels: labels(name) };
        let mut out = Vec::new();
        m.start_timestamps(&r, mint, maxt, &mut out).unwrap();
        out.into_iter().map(|s| (s.t, s.st)).collect()
    }

    #[test]
    fn start_timestamps_are_reported_per_sample_in_range() {
        let mut m = MemStore::new();
        let samples: Vec<Sample> = (1..=4).map(|i| Sample::new(i * 10, i as f64)).collect();
        // The third sample has no start timestamp (0), the fourth none given at all.
        m.append_with_start_timestamps(&labels("c"), &samples, &[5, 15, 0]);
        assert_eq!(start_timestamps(&m, "c", 0, 100), vec![(10, 5), (20, 15)]);
        assert_eq!(start_timestamps(&m, "c", 11, 100), vec![(20, 15)]);
        assert_eq!(start_timestamps(&m, "other", 0, 100), vec![]);
        // The samples themselves are unchanged.
        let r = SeriesRef { id: 0, labels: labels("c") };
        let mut out = Vec::new();
        m.samples(&r, 0, 100, &mut out).unwrap();
        assert_eq!(out, samples);
    }

    #[test]
    fn histogram_samples_keep_their_start_timestamps() {
        let mut m = MemStore::new();
        let h = |t| HistogramSample { t, h: FloatHistogram { count: 1.0, ..Default::default() } };
        m.append_with_start_timestamps(&labels("c"), &[Sample::new(10, 1.0)], &[5]);
        m.append_histograms_with_start_timestamps(&labels("c"), &[h(20), h(30)], &[12, 0]);
        assert_eq!(start_timestamps(&m, "c", 0, 100), vec![(10, 5), (20, 12)]);
    }

    #[test]
    fn an_inverted_range_holds_nothing() {
        let mut m = MemStore::new();
        m.append(&labels("c"), &[Sample::new(i64::MIN, 1.0), Sample::new(0, 2.0)]);
        let all = [Matcher::equal(crate::types::METRIC_NAME, "c")];
        assert!(m.select(&all, i64::MIN + 1, i64::MIN).unwrap().is_empty());
        let r = SeriesRef { id: 0, labels: labels("c") };
        let mut out = Vec::new();
        m.samples(&r, 1, 0, &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(start_timestamps(&m, "c", 1, 0), vec![]);
        assert!(m.label_names(&all, 1, 0).unwrap().is_empty());
    }

    #[test]
    fn rewriting_a_sample_replaces_its_start_timestamp() {
        let mut m = MemStore::new();
        m.append_with_start_timestamps(&labels("c"), &[Sample::new(10, 1.0), Sample::new(20, 2.0)], &[5, 6]);
        m.append(&labels("c"), &[Sample::new(10, 3.0)]);
        m.append_with_start_timestamps(&labels("c"), &[Sample::new(20, 4.0)], &[7]);
        assert_eq!(start_timestamps(&m, "c", 0, 100), vec![(20, 7)]);
        m.delete(&[], 20, 20);
        assert_eq!(start_timestamps(&m, "c", 0, 100), vec![]);
    }
}
