//! [`BatchRef`]: the unit of ingest with borrowed label strings, the zero-copy twin of [`Batch`].
//!
//! A decoder fills one from a request buffer without allocating per series: the label pairs,
//! the per-series bounds and the samples each live in one flat vector. [`crate::Db::append_ref`]
//! takes it as is; [`crate::Db::append`] converts an owned [`Batch`] into one (copying
//! pointers, not strings).
//!
//! Start timestamps (remote write 2.0's created timestamps) are sparse: only samples that have
//! one add an entry, so a batch without any costs nothing for them.
//!
//! Native histograms ride along the same way: a histogram sample is a float sample holding the
//! histogram marker ([`crate::hist`]) plus an entry (index of that sample, histogram) in a
//! sparse side list, so a float-only batch costs nothing more.

use crate::error::Result;
use crate::hist;
use crate::labels_ref::{LabelPair, RawLabels, RawPair, name_less, normalize_tail_slow};
use crate::types::{Batch, FloatHistogram, HistogramSample, Sample};

/// Samples for many series, label strings borrowed for `'a`. Like [`Batch`], a series may
/// appear more than once and a batch is made durable as one WAL record.
#[derive(Debug, Clone, Default)]
pub struct BatchRef<'a> {
    /// The label pairs of every series, back to back; each series' pairs follow the rules of
    /// [`RawLabels`]. Bytes, because a decoder may leave checking UTF-8 to storage, which
    /// checks only the labels of new series ([`SeriesBuilder::label_bytes_checked`]).
    labels: Vec<RawPair<'a>>,
    /// Per series: where its pairs end in `labels` and its samples end in `samples` (each
    /// starts where the previous series' ends).
    ends: Vec<(usize, usize)>,
    samples: Vec<Sample>,
    /// Start timestamps of the samples that have one: (index of the sample within its series,
    /// start timestamp), series after series. Empty for most batches.
    starts: Vec<(u32, i64)>,
    /// Per series that has start timestamps: (its index in `ends`, where its entries end in
    /// `starts`).
    start_ends: Vec<(usize, usize)>,
    /// Histograms of the marker samples: (index of the sample within its series, histogram),
    /// series after series. Empty for float-only batches.
    hists: Vec<(u32, FloatHistogram)>,
    /// Per series that has histograms: (its index in `ends`, where its entries end in `hists`).
    hist_ends: Vec<(usize, usize)>,
}

impl<'a> BatchRef<'a> {
    /// An empty batch.
    pub fn new() -> Self {
        BatchRef::default()
    }

    /// An empty batch with room for `series` series of `labels` label pairs and `samples`
    /// samples in all, for decoders that know the totals up front.
    pub fn with_capacity(series: usize, labels: usize, samples: usize) -> Self {
        BatchRef {
            labels: Vec::with_capacity(labels),
            ends: Vec::with_capacity(series),
            samples: Vec::with_capacity(samples),
            starts: Vec::new(),
            start_ends: Vec::new(),
            hists: Vec::new(),
            hist_ends: Vec::new(),
        }
    }

    /// Starts adding a series in place: its labels and samples go straight into the batch.
    /// For decoders that find a series' pairs one by one and may still reject it: dropping the
    /// builder without [`SeriesBuilder::finish`] removes what it added.
    #[inline]
    pub fn series(&mut self) -> SeriesBuilder<'_, 'a> {
        let (labels, samples, starts) = (self.labels.len(), self.samples.len(), self.starts.len());
        let hists = self.hists.len();
        SeriesBuilder {
            batch: self,
            labels,
            samples,
            starts,
            hists,
            prev: None,
            follows_rules: true,
            finished: false,
        }
    }

    /// Adds one series: its label pairs in any order and its samples. Pairs are made to follow
    /// the rules the way [`crate::Labels::new`] does (empty values dropped, sorted by name, the
    /// last of duplicate names kept), so the same input names the same series as through an
    /// owned [`Batch`]. Decoders that reject unsorted or duplicate names check before pushing.
    #[inline]
    pub fn push(
        &mut self,
        labels: impl IntoIterator<Item = LabelPair<'a>>,
        samples: impl IntoIterator<Item = Sample>,
    ) {
        let mut series = self.series();
        for (name, value) in labels {
            series.label(name, value);
        }
        series.batch.samples.extend(samples);
        series.finish();
    }

    /// Appends every series of `other` after this batch's, as pushing them one by one would:
    /// how a consumer of the ingest log makes one append (one WAL record) of several records.
    pub fn extend_from(&mut self, other: &BatchRef<'a>) {
        let (labels, samples, series) = (self.labels.len(), self.samples.len(), self.ends.len());
        let (starts, hists) = (self.starts.len(), self.hists.len());
        self.labels.extend_from_slice(&other.labels);
        self.samples.extend_from_slice(&other.samples);
        self.ends.extend(other.ends.iter().map(|&(l, s)| (l + labels, s + samples)));
        // Entries of `starts` and `hists` index samples within their series: unchanged.
        self.starts.extend_from_slice(&other.starts);
        self.start_ends.extend(other.start_ends.iter().map(|&(e, at)| (e + series, at + starts)));
        self.hists.extend(other.hists.iter().cloned());
        self.hist_ends.extend(other.hist_ends.iter().map(|&(e, at)| (e + series, at + hists)));
    }

    /// Gives every series the label `name` with `value`, replacing a pair of that name it
    /// has; with `value` `None` (or empty), removes such pairs ([`BatchRef::remove_label`]).
    /// How a request's tenant is stamped on its series, and how a label a client may not set
    /// is taken off.
    pub fn set_label(&mut self, name: &'a str, value: Option<&'a str>) {
        match value.filter(|v| !v.is_empty()) {
            None => self.remove_label(name),
            Some(value) => self.rewrite(name.as_bytes(), Some((name.as_bytes(), value.as_bytes()))),
        }
    }

    /// Removes the label `name` from every series that has it (an HA pair's replica label,
    /// say). Changes nothing, at the cost of a search in each series' pairs, when none has it.
    pub fn remove_label(&mut self, name: &str) {
        if self.has_label(name.as_bytes()) {
            self.rewrite(name.as_bytes(), None);
        }
    }

    /// Rebuilds the pairs with each series' pair named `name` replaced by `pair` (which has
    /// that name), or removed if `pair` is `None`.
    fn rewrite(&mut self, name: &[u8], pair: Option<RawPair<'a>>) {
        let extra = if pair.is_some() { self.ends.len() } else { 0 };
        let mut labels = Vec::with_capacity(self.labels.len() + extra);
        let mut from = 0;
        for end in &mut self.ends {
            let pairs = &self.labels[from..end.0];
            from = end.0;
            // Pairs follow the rules: sorted by name, so the label's place is found by search.
            let at = pairs.partition_point(|(n, _)| name_less(n, name));
            labels.extend_from_slice(&pairs[..at]);
            labels.extend(pair);
            let rest = pairs.get(at..).unwrap_or_default();
            let skip = usize::from(rest.first().is_some_and(|(n, _)| *n == name));
            labels.extend_from_slice(&rest[skip..]);
            end.0 = labels.len();
        }
        self.labels = labels;
    }

    /// Whether any series has a label named `name`: a search in each series' sorted pairs.
    fn has_label(&self, name: &[u8]) -> bool {
        let mut from = 0;
        self.ends.iter().any(|&(end, _)| {
            let pairs = self.labels.get(from..end).unwrap_or_default();
            from = end;
            let at = pairs.partition_point(|(n, _)| name_less(n, name));
            pairs.get(at).is_some_and(|(n, _)| *n == name)
        })
    }

    /// The label pairs of every series, and their names' and values' bytes: what sizes an
    /// encoding of the batch.
    pub fn label_size(&self) -> (usize, usize) {
        (self.labels.len(), self.labels.iter().map(|(n, v)| n.len() + v.len()).sum())
    }

    /// Number of series entries.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True if there is no series.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total number of samples.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// The series in the order they were pushed, with their samples. Label strings may be
    /// unchecked bytes (see [`RawLabels`]).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (RawLabels<'_>, &[Sample])> + '_ {
        let mut start = (0, 0);
        self.ends.iter().map(move |&(labels_end, samples_end)| {
            let labels = self.labels.get(start.0..labels_end).unwrap_or_default();
            let samples = self.samples.get(start.1..samples_end).unwrap_or_default();
            start = (labels_end, samples_end);
            (RawLabels::new_unchecked(labels), samples)
        })
    }

    /// True if some sample has a start timestamp.
    pub fn has_starts(&self) -> bool {
        !self.starts.is_empty()
    }

    /// Like [`BatchRef::iter`], also giving each series' start timestamps: (index of the sample
    /// in the series' samples, start timestamp), ascending by index; empty for a series
    /// without any.
    pub fn iter_with_starts(
        &self,
    ) -> impl ExactSizeIterator<Item = (RawLabels<'_>, &[Sample], &[(u32, i64)])> + '_ {
        let mut next = self.start_ends.iter().peekable();
        let mut from = 0;
        self.iter().enumerate().map(move |(i, (labels, samples))| {
            let starts = match next.next_if(|(series, _)| *series == i) {
                Some(&(_, end)) => {
                    let s = self.starts.get(from..end).unwrap_or_default();
                    from = end;
                    s
                }
                None => &[],
            };
            (labels, samples, starts)
        })
    }

    /// True if some sample is a histogram.
    pub fn has_histograms(&self) -> bool {
        !self.hists.is_empty()
    }

    /// Number of histogram samples (also counted in [`BatchRef::sample_count`]).
    pub fn histogram_count(&self) -> usize {
        self.hists.len()
    }

    /// Each series' histograms: (index of the marker sample in the series' samples,
    /// histogram), ascending by index; empty for a series without any. In the order of
    /// [`BatchRef::iter`].
    pub fn iter_histograms(&self) -> impl ExactSizeIterator<Item = &[(u32, FloatHistogram)]> + '_ {
        let mut next = self.hist_ends.iter().peekable();
        let mut from = 0;
        (0..self.ends.len()).map(move |i| match next.next_if(|(series, _)| *series == i) {
            Some(&(_, end)) => {
                let h = self.hists.get(from..end).unwrap_or_default();
                from = end;
                h
            }
            None => &[],
        })
    }

    /// An owned copy (allocates every label string): for tests and callers that keep the batch
    /// beyond the buffer it borrows from. Start timestamps are not copied: [`Batch`] has none.
    /// Histogram samples go to [`Batch::histograms`], their markers left out of the floats.
    /// Fails with [`crate::Error::InvalidLabels`] if a label string is not UTF-8, as appending
    /// the batch would for a new series.
    pub fn to_batch(&self) -> Result<Batch> {
        let mut out = Batch::new();
        for ((labels, samples), hists) in self.iter().zip(self.iter_histograms()) {
            let labels = labels.to_labels()?;
            if hists.is_empty() {
                out.series.push((labels, samples.to_vec()));
                continue;
            }
            let floats: Vec<Sample> = samples.iter().filter(|s| !hist::is_marker(s.v)).copied().collect();
            let hs = hists
                .iter()
                .filter_map(|(i, h)| {
                    samples.get(*i as usize).map(|s| HistogramSample { t: s.t, h: h.clone() })
                })
                .collect();
            if !floats.is_empty() {
                out.series.push((labels.clone(), floats));
            }
            out.histograms.push((labels, hs));
        }
        Ok(out)
    }
}

/// A series being added to a [`BatchRef`] ([`BatchRef::series`]).
pub struct SeriesBuilder<'b, 'a> {
    batch: &'b mut BatchRef<'a>,
    /// Where the series' labels and samples start in the batch.
    labels: usize,
    samples: usize,
    starts: usize,
    hists: usize,
    /// The last name added, and whether the pairs so far follow the rules: checked pair by
    /// pair as they come, so that `finish` rarely has anything left to do.
    prev: Option<&'a [u8]>,
    follows_rules: bool,
    finished: bool,
}

impl<'a> SeriesBuilder<'_, 'a> {
    /// Adds a label pair (in any order; [`SeriesBuilder::finish`] applies the rules).
    #[inline]
    pub fn label(&mut self, name: &'a str, value: &'a str) {
        let (name, value) = (name.as_bytes(), value.as_bytes());
        self.follows_rules &= !value.is_empty() && self.prev.is_none_or(|p| name_less(p, name));
        self.prev = Some(name);
        self.batch.labels.push((name, value));
    }

    /// Adds a label pair that the caller has already checked against the rules: its name
    /// after every name added before (byte order) and its value non-empty. For decoders that
    /// check the order while parsing, so the comparison is not made twice. A pair that breaks
    /// the promise names a wrong series (checked in debug builds); it cannot corrupt the batch.
    #[inline]
    pub fn label_checked(&mut self, name: &'a str, value: &'a str) {
        self.label_bytes_checked(name.as_bytes(), value.as_bytes());
    }

    /// [`SeriesBuilder::label_checked`] for strings not checked as UTF-8. Storage checks them
    /// if the series is new and refuses the batch if they are not UTF-8
    /// ([`crate::Error::InvalidLabels`]); bytes equal to a known series' labels are valid.
    #[inline]
    pub fn label_bytes_checked(&mut self, name: &'a [u8], value: &'a [u8]) {
        debug_assert!(!value.is_empty() && self.prev.is_none_or(|p| name_less(p, name)));
        self.prev = Some(name);
        self.batch.labels.push((name, value));
    }

    /// Adds a sample.
    #[inline]
    pub fn sample(&mut self, sample: Sample) {
        self.batch.samples.push(sample);
    }

    /// Adds a sample with its start timestamp (0: none, the same as [`SeriesBuilder::sample`]).
    #[inline]
    pub fn sample_with_start(&mut self, sample: Sample, start: i64) {
        if start != 0 {
            let index = (self.batch.samples.len() - self.samples) as u32;
            self.batch.starts.push((index, start));
        }
        self.batch.samples.push(sample);
    }

    /// Adds a native histogram sample (a histogram marker among the floats, see
    /// the `hist` module).
    #[inline]
    pub fn histogram(&mut self, t: i64, h: FloatHistogram) {
        let index = (self.batch.samples.len() - self.samples) as u32;
        self.batch.hists.push((index, h));
        self.batch.samples.push(Sample::new(t, hist::marker()));
    }

    /// Completes the series, making its pairs follow the rules as [`BatchRef::push`] does.
    #[inline]
    pub fn finish(mut self) {
        if !self.follows_rules {
            normalize_tail_slow(&mut self.batch.labels, self.labels);
        }
        if self.batch.starts.len() > self.starts {
            self.batch.start_ends.push((self.batch.ends.len(), self.batch.starts.len()));
        }
        if self.batch.hists.len() > self.hists {
            self.batch.hist_ends.push((self.batch.ends.len(), self.batch.hists.len()));
        }
        self.batch.ends.push((self.batch.labels.len(), self.batch.samples.len()));
        self.finished = true;
    }
}

/// An unfinished series is removed from the batch.
impl Drop for SeriesBuilder<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        if !self.finished {
            self.batch.labels.truncate(self.labels);
            self.batch.samples.truncate(self.samples);
            self.batch.starts.truncate(self.starts);
            self.batch.hists.truncate(self.hists);
        }
    }
}

/// Borrows an owned batch's strings (no string is copied).
impl<'a> From<&'a Batch> for BatchRef<'a> {
    fn from(batch: &'a Batch) -> Self {
        let mut out = BatchRef {
            labels: Vec::with_capacity(batch.series.iter().map(|(l, _)| l.len()).sum()),
            ends: Vec::with_capacity(batch.series.len()),
            samples: Vec::with_capacity(batch.sample_count()),
            starts: Vec::new(),
            start_ends: Vec::new(),
            hists: Vec::new(),
            hist_ends: Vec::new(),
        };
        for (labels, samples) in &batch.series {
            out.labels.extend(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())));
            out.samples.extend_from_slice(samples);
            out.ends.push((out.labels.len(), out.samples.len()));
        }
        for (labels, hists) in &batch.histograms {
            let mut s = out.series();
            for l in labels.iter() {
                s.label_checked(&l.name, &l.value);
            }
            for h in hists {
                s.histogram(h.t, h.h.clone());
            }
            s.finish();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Labels;

    #[test]
    fn series_keep_their_own_labels_and_samples() {
        let mut b = BatchRef::new();
        b.push([("job", "a"), ("__name__", "up")], [Sample::new(1, 1.0), Sample::new(2, 2.0)]);
        b.push([("__name__", "x")], []);
        b.push([("__name__", "y"), ("a", ""), ("b", "1"), ("b", "2")], [Sample::new(3, 3.0)]);
        assert_eq!((b.len(), b.sample_count()), (3, 3));
        let series: Vec<(String, Vec<Sample>)> = b.iter().map(|(l, s)| (l.to_string(), s.to_vec())).collect();
        assert_eq!(
            series,
            vec![
                ("up{job=\"a\"}".to_string(), vec![Sample::new(1, 1.0), Sample::new(2, 2.0)]),
                ("x{}".to_string(), vec![]),
                ("y{b=\"2\"}".to_string(), vec![Sample::new(3, 3.0)]),
            ]
        );
    }

    /// Extending by another batch gives the batch that pushing its series would: floats,
    /// start timestamps and histograms of each series where they were.
    #[test]
    fn extending_is_pushing_the_other_batch_series() {
        let h = FloatHistogram { count: 2.0, sum: 3.0, ..FloatHistogram::default() };
        let build = |b: &mut BatchRef<'static>, with_extras: bool| {
            let mut s = b.series();
            s.label("__name__", "a");
            s.sample(Sample::new(1, 1.0));
            if with_extras {
                s.sample_with_start(Sample::new(2, 2.0), 1);
                s.histogram(3, h.clone());
            }
            s.finish();
            b.push([("__name__", "b")], [Sample::new(4, 4.0)]);
        };
        let (mut first, mut second, mut all) = (BatchRef::new(), BatchRef::new(), BatchRef::new());
        build(&mut first, true);
        build(&mut second, true);
        build(&mut all, true);
        build(&mut all, true);
        first.extend_from(&second);
        let view = |b: &BatchRef<'_>| format!("{:?}", b.to_batch().unwrap());
        assert_eq!(view(&first), view(&all));
        let starts = |b: &BatchRef<'_>| -> Vec<Vec<(u32, i64)>> {
            b.iter_with_starts().map(|(_, _, starts)| starts.to_vec()).collect()
        };
        assert_eq!(starts(&first), starts(&all));
        assert_eq!(first.histogram_count(), 2);
        let mut plain = BatchRef::new();
        build(&mut plain, false);
        plain.extend_from(&all);
        assert_eq!((plain.len(), plain.sample_count(), plain.histogram_count()), (6, 2 + 8, 2));
    }

    proptest::proptest! {
        /// Setting or removing a label gives each series the labels that pushing them with
        /// that pair replaced or left out would, and keeps every series' samples.
        #[test]
        fn setting_a_label_is_pushing_with_it_replaced(
            series in proptest::collection::vec(
                (proptest::collection::btree_map("[_A-Za-z][a-z_]{0,3}", "[a-z]{1,2}", 0..5), 0..3usize),
                0..6,
            ),
            name in "[_A-Za-z][a-z_]{0,3}",
            value in proptest::option::of("[a-z]{0,2}"),
        ) {
            let mut b = BatchRef::new();
            let mut model = Vec::new();
            for (i, (pairs, n)) in series.iter().enumerate() {
                let samples: Vec<Sample> = (0..*n).map(|k| Sample::new(k as i64, i as f64)).collect();
                b.push(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())), samples.clone());
                let mut labels: Vec<(String, String)> =
                    pairs.iter().filter(|(k, _)| **k != name).map(|(k, v)| (k.clone(), v.clone())).collect();
                if let Some(v) = &value {
                    labels.push((name.clone(), v.clone()));
                }
                model.push((Labels::from_pairs(&labels), samples));
            }
            b.set_label(&name, value.as_deref());
            let got = b.to_batch().unwrap().series;
            proptest::prop_assert_eq!(got, model);
        }
    }

    #[test]
    fn a_series_built_in_place_is_added_only_when_finished() {
        let mut b = BatchRef::new();
        let mut s = b.series();
        s.label("job", "a");
        s.label("__name__", "up");
        s.sample(Sample::new(1, 1.0));
        s.finish();
        let mut dropped = b.series();
        dropped.label("__name__", "gone");
        dropped.sample(Sample::new(2, 2.0));
        drop(dropped);
        b.push([("__name__", "x")], [Sample::new(3, 3.0)]);
        let series: Vec<String> = b.iter().map(|(l, s)| format!("{l} {s:?}")).collect();
        assert_eq!(series, vec!["up{job=\"a\"} [Sample { t: 1, v: 1.0 }]", "x{} [Sample { t: 3, v: 3.0 }]"]);
    }

    #[test]
    fn start_timestamps_stay_with_their_series() {
        let mut b = BatchRef::new();
        b.push([("__name__", "plain")], [Sample::new(1, 1.0)]);
        let mut s = b.series();
        s.label("__name__", "c");
        s.sample_with_start(Sample::new(1, 1.0), 0);
        s.sample_with_start(Sample::new(2, 2.0), 500);
        s.finish();
        let mut dropped = b.series();
        dropped.label("__name__", "gone");
        dropped.sample_with_start(Sample::new(2, 2.0), 7);
        drop(dropped);
        b.push([("__name__", "after")], [Sample::new(3, 3.0)]);
        assert!(b.has_starts());
        let starts: Vec<(String, Vec<(u32, i64)>)> =
            b.iter_with_starts().map(|(l, _, st)| (l.to_string(), st.to_vec())).collect();
        assert_eq!(
            starts,
            vec![
                ("plain{}".to_string(), vec![]),
                ("c{}".to_string(), vec![(1, 500)]),
                ("after{}".to_string(), vec![]),
            ]
        );
    }

    #[test]
    fn owned_and_borrowed_batches_convert_both_ways() {
        let mut owned = Batch::new();
        owned.push(Labels::from_pairs(&[("__name__", "up"), ("job", "a")]), vec![Sample::new(5, 0.5)]);
        owned.push(Labels::from_pairs(&[("__name__", "up")]), vec![]);
        let borrowed = BatchRef::from(&owned);
        assert_eq!(borrowed.to_batch().unwrap().series, owned.series);
        // The strings are the owned batch's own.
        let (labels, _) = borrowed.iter().next().unwrap();
        assert!(std::ptr::eq(labels.pairs()[0].1, owned.series[0].0.as_slice()[0].value.as_bytes()));
    }
}
