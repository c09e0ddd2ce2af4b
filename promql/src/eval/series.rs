//! Series as the evaluator holds them, and helpers to walk them step by step.

use std::sync::Arc;

use storage::{FloatHistogram, Labels};

use super::grid::Grid;
use super::labels::{HashMap, HashSet, NAME_LABELS, drop_metric_labels, hash_kept};
use crate::error::{Error, Result};

/// A float point (ms, value). The layout of `storage::Sample`, so a series' samples read
/// without stale markers are used as its points in place (`bytemuck::cast_slice`).
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct FPoint {
    pub t: i64,
    pub f: f64,
}

/// A histogram point (ms, histogram); shared, as selectors hand the same sample to many steps.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HPoint {
    pub t: i64,
    pub h: Arc<FloatHistogram>,
}

/// A series during evaluation.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub labels: Labels,
    /// With delayed name removal: `__name__` is to be dropped at the end of evaluation.
    pub drop_name: bool,
    pub points: Vec<FPoint>,
    /// Histogram points; a timestamp is in `points` or here, never in both.
    pub hpoints: Vec<HPoint>,
}

impl Series {
    pub fn new(labels: Labels, drop_name: bool, points: Vec<FPoint>) -> Self {
        Series { labels, drop_name, points, hpoints: Vec::new() }
    }

    /// A series with float and histogram points.
    pub fn with_histograms(
        labels: Labels,
        drop_name: bool,
        points: Vec<FPoint>,
        hpoints: Vec<HPoint>,
    ) -> Self {
        Series { labels, drop_name, points, hpoints }
    }

    /// True if the series has no points at all.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.hpoints.is_empty()
    }

    /// Marks the metric name for removal: right away, or at the end with delayed name removal.
    pub fn drop_metric_name(&mut self, delayed: bool) {
        if !delayed {
            self.labels = drop_metric_labels(&self.labels);
        }
        self.drop_name = true;
    }
}

/// One element of an instant vector at one step.
#[derive(Debug, Clone)]
pub(crate) struct StepSample<'a> {
    /// Index of the series in its matrix.
    pub idx: usize,
    pub labels: &'a Labels,
    pub drop_name: bool,
    /// The float value; 0 for a histogram sample.
    pub f: f64,
    /// The native histogram, for a histogram sample.
    pub h: Option<&'a Arc<FloatHistogram>>,
}

/// Walks a matrix of step-aligned series one grid step at a time.
pub(crate) struct StepCursor {
    pos: Vec<usize>,
    /// Per series, the position in its histogram points (empty if no series has any, so
    /// float-only inputs pay nothing).
    hpos: Vec<usize>,
}

impl StepCursor {
    pub fn new(m: &[Series]) -> Self {
        let any_histograms = m.iter().any(|s| !s.hpoints.is_empty());
        StepCursor { pos: vec![0; m.len()], hpos: if any_histograms { vec![0; m.len()] } else { Vec::new() } }
    }

    /// The samples of `m` at timestamp `t`; must be called with increasing `t`.
    pub fn at<'a>(&mut self, m: &'a [Series], t: i64, out: &mut Vec<StepSample<'a>>) {
        out.clear();
        for (idx, s) in m.iter().enumerate() {
            let p = &mut self.pos[idx];
            while *p < s.points.len() && s.points[*p].t < t {
                *p += 1;
            }
            if let Some(pt) = s.points.get(*p)
                && pt.t == t
            {
                out.push(StepSample { idx, labels: &s.labels, drop_name: s.drop_name, f: pt.f, h: None });
                *p += 1;
                continue;
            }
            if let Some(hp) = self.hpos.get_mut(idx) {
                while *hp < s.hpoints.len() && s.hpoints[*hp].t < t {
                    *hp += 1;
                }
                if let Some(pt) = s.hpoints.get(*hp)
                    && pt.t == t
                {
                    out.push(StepSample {
                        idx,
                        labels: &s.labels,
                        drop_name: s.drop_name,
                        f: 0.0,
                        h: Some(&pt.h),
                    });
                    *hp += 1;
                }
            }
        }
    }
}

/// Collects per-step results into series, like Prometheus' `rangeEval`: for a single-step grid
/// the order of the results is kept (it matters after `sort`, `topk`, ...); otherwise results are
/// grouped by label set, and a label set produced twice at the same step is an error.
pub(crate) struct OutputBuilder {
    instant: bool,
    series: Vec<Series>,
    index: HashMap<Labels, usize>,
    /// The series after the one last pushed to: where the next push most likely goes, since
    /// every step produces its results in the same order. Checked before hashing the labels;
    /// a hit is usually pointer equality (results share their input's `Labels`), so a range
    /// query stops paying a label-set hash per point (a tenth of a small TSBS query's time).
    next: usize,
}

impl OutputBuilder {
    pub fn new(g: Grid) -> Self {
        OutputBuilder { instant: g.is_instant(), series: Vec::new(), index: HashMap::default(), next: 0 }
    }

    /// The series holding `labels`, if any.
    fn find(&mut self, labels: &Labels) -> Option<usize> {
        let i = match self.series.get(self.next) {
            Some(s) if s.labels == *labels => self.next,
            _ => *self.index.get(labels)?,
        };
        self.next = if i + 1 < self.series.len() { i + 1 } else { 0 };
        Some(i)
    }

    /// Starts a series for `labels` (not yet present).
    fn add(&mut self, series: Series) {
        self.index.insert(series.labels.clone(), self.series.len());
        self.series.push(series);
        self.next = 0;
    }

    /// Adds a float or (with `h`) a histogram result.
    pub fn push_value(
        &mut self,
        labels: Labels,
        drop_name: bool,
        t: i64,
        f: f64,
        h: Option<Arc<FloatHistogram>>,
    ) -> Result<()> {
        let Some(h) = h else { return self.push(labels, drop_name, t, f) };
        if self.instant {
            self.series.push(Series::with_histograms(labels, drop_name, Vec::new(), vec![HPoint { t, h }]));
            return Ok(());
        }
        match self.find(&labels) {
            Some(i) => {
                let s = &mut self.series[i];
                if s.points.last().is_some_and(|p| p.t == t) || s.hpoints.last().is_some_and(|p| p.t == t) {
                    return Err(duplicate_labelset());
                }
                s.hpoints.push(HPoint { t, h });
            }
            None => self.add(Series::with_histograms(labels, drop_name, Vec::new(), vec![HPoint { t, h }])),
        }
        Ok(())
    }

    pub fn push(&mut self, labels: Labels, drop_name: bool, t: i64, f: f64) -> Result<()> {
        if self.instant {
            self.series.push(Series::new(labels, drop_name, vec![FPoint { t, f }]));
            return Ok(());
        }
        match self.find(&labels) {
            Some(i) => {
                let s = &mut self.series[i];
                if s.points.last().is_some_and(|p| p.t == t) || s.hpoints.last().is_some_and(|p| p.t == t) {
                    return Err(duplicate_labelset());
                }
                s.points.push(FPoint { t, f });
            }
            None => self.add(Series::new(labels, drop_name, vec![FPoint { t, f }])),
        }
        Ok(())
    }

    /// The collected series. For a single step without delayed name removal, duplicates are
    /// an error here (with delayed removal they are checked after names are dropped).
    pub fn finish(self, delayed_name_removal: bool) -> Result<Vec<Series>> {
        if self.instant && !delayed_name_removal && has_duplicate_labels(&self.series) {
            return Err(duplicate_labelset());
        }
        Ok(self.series)
    }
}

/// Error for duplicate output series; the exact text Prometheus uses.
pub(crate) fn duplicate_labelset() -> Error {
    Error::Execution("vector cannot contain metrics with the same labelset".to_string())
}

/// True if two series share a label set.
pub(crate) fn has_duplicate_labels(m: &[Series]) -> bool {
    if m.len() < 2 {
        return false;
    }
    let mut seen = HashSet::with_capacity_and_hasher(m.len(), Default::default());
    m.iter().any(|s| !seen.insert(&s.labels))
}

/// True if two series of `m` would share a label set once their names were dropped
/// (`drop_metric_labels`), found without building those label sets: by a hash of each set less
/// the dropped labels, and the sets themselves only when two hashes meet.
pub(crate) fn has_duplicate_labels_without_name(m: &[Series]) -> bool {
    labels_collide_without_name(m.iter().map(|s| &s.labels))
}

/// [`has_duplicate_labels_without_name`] for label sets.
pub(crate) fn labels_collide_without_name<'l>(
    sets: impl ExactSizeIterator<Item = &'l Labels> + Clone,
) -> bool {
    if sets.len() < 2 {
        return false;
    }
    let state = foldhash::fast::RandomState::default();
    let hash = |l: &Labels| hash_kept(&state, l, |name| !NAME_LABELS.contains(&name));
    let mut seen = HashSet::with_capacity_and_hasher(sets.len(), Default::default());
    if sets.clone().all(|l| seen.insert(hash(l))) {
        return false;
    }
    let dropped: Vec<Labels> = sets.map(drop_metric_labels).collect();
    let mut seen = HashSet::with_capacity_and_hasher(dropped.len(), Default::default());
    dropped.iter().any(|l| !seen.insert(l))
}

/// Merges series that ended up with the same labels (after dropping names) if their points do
/// not overlap in time; overlapping points are an error (Prometheus'
/// `mergeSeriesWithSameLabelset`).
pub(crate) fn merge_same_labelsets(m: Vec<Series>) -> Result<Vec<Series>> {
    if !has_duplicate_labels(&m) {
        return Ok(m);
    }
    let mut index: HashMap<Labels, usize> = HashMap::default();
    let mut out: Vec<Series> = Vec::with_capacity(m.len());
    for s in m {
        match index.get(&s.labels) {
            Some(&i) => {
                let base = &mut out[i];
                base.points.extend(s.points);
                base.points.sort_by_key(|p| p.t);
                base.hpoints.extend(s.hpoints);
                base.hpoints.sort_by_key(|p| p.t);
                if base.points.windows(2).any(|w| w[0].t == w[1].t)
                    || base.hpoints.windows(2).any(|w| w[0].t == w[1].t)
                    || base.hpoints.iter().any(|h| base.points.binary_search_by_key(&h.t, |p| p.t).is_ok())
                {
                    return Err(duplicate_labelset());
                }
            }
            None => {
                index.insert(s.labels.clone(), out.len());
                out.push(s);
            }
        }
    }
    Ok(out)
}
