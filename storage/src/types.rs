//! The data model: labels, series ids and samples.
//!
//! A series is identified by its sorted label set, which includes `__name__`. Samples are
//! `(milliseconds since the epoch, f64)`; every f64 bit pattern is stored exactly, including
//! the Prometheus stale marker [`STALE_NAN_BITS`].

use std::fmt;
use std::sync::Arc;

/// The bit pattern Prometheus uses to mark a series as stale (a NaN that no arithmetic produces).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The label that holds the metric name.
pub const METRIC_NAME: &str = "__name__";

/// The label that holds a series' tenant (the `X-Scope-OrgID` it was written with); series of
/// the default tenant do not have it. The server stamps it on every write and hides it from
/// reads, which it scopes to one tenant; storage counts series limits per tenant.
pub const TENANT_LABEL: &str = "__tenant__";

/// True if `v` is the Prometheus stale marker (compared by bits: other NaNs are ordinary values).
#[inline]
pub fn is_stale(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// The stale marker as an `f64`.
#[inline]
pub fn stale_nan() -> f64 {
    f64::from_bits(STALE_NAN_BITS)
}

/// One sample: a timestamp in milliseconds and a value.
///
/// `repr(C)` and plain old data, so a slice of them can be viewed as another type of the same
/// layout without copying (the engine reads a series' samples as its points that way).
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Sample {
    /// Milliseconds since the Unix epoch (may be negative).
    pub t: i64,
    /// The value; compared bit-exactly by `PartialEq` so NaNs round-trip in tests.
    pub v: f64,
}

impl Sample {
    /// A sample at `t` with value `v`.
    #[inline]
    pub fn new(t: i64, v: f64) -> Self {
        Sample { t, v }
    }
}

impl PartialEq for Sample {
    fn eq(&self, other: &Self) -> bool {
        self.t == other.t && self.v.to_bits() == other.v.to_bits()
    }
}
impl Eq for Sample {}

/// How a native histogram sample relates to the one before it in its series, as the
/// instrumentation (or remote write) declares it. PromQL uses it to decide whether a decrease is a
/// counter reset, and warns when counter functions meet gauges (and vice versa).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CounterResetHint {
    /// Not known: a reset is detected by comparing with the previous sample.
    #[default]
    Unknown,
    /// The counter was reset right before this sample.
    Reset,
    /// The counter was not reset since the previous sample.
    NotReset,
    /// The histogram is a gauge: it may go up and down, resets do not apply.
    Gauge,
}

/// A native histogram with float counts (Prometheus' `FloatHistogram`): counts are absolute per
/// bucket, never deltas, and may be fractional (results of `rate` are histograms too).
///
/// Buckets are kept sparse as `(index, count)` pairs sorted by index, which is Prometheus' span
/// layout with empty buckets left out: every query result and every comparison in Prometheus
/// goes through its `Compact(0)`, which removes exactly those, and counter-reset detection
/// treats a missing bucket like an empty one. Which index covers which values depends on
/// [`FloatHistogram::schema`]: for the exponential schemas `-4..=8`, positive index `i` covers
/// `(2^((i-1)·2^-schema), 2^(i·2^-schema)]` and negative index `i` its mirror; for the custom
/// bucket schema [`FloatHistogram::CUSTOM_BUCKETS_SCHEMA`] index `i` covers
/// `(custom_values[i-1], custom_values[i]]` (open to -Inf below index 0, to +Inf above the last
/// bound) and there are no negative buckets or zero bucket.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FloatHistogram {
    /// The sample's counter-reset hint.
    pub counter_reset_hint: CounterResetHint,
    /// Bucket layout: exponential `-4..=8`, or [`FloatHistogram::CUSTOM_BUCKETS_SCHEMA`].
    pub schema: i32,
    /// The zero bucket covers `[-zero_threshold, zero_threshold]`.
    pub zero_threshold: f64,
    /// Observations in the zero bucket.
    pub zero_count: f64,
    /// Total number of observations (including NaN observations, which are in no bucket).
    pub count: f64,
    /// Sum of all observations.
    pub sum: f64,
    /// Positive buckets `(index, count)`, ascending by index.
    pub positive: Vec<(i32, f64)>,
    /// Negative buckets `(index, count)`, ascending by index (index 1 is closest to zero).
    pub negative: Vec<(i32, f64)>,
    /// Upper bounds of the custom buckets (schema -53 only), ascending, finite.
    pub custom_values: Vec<f64>,
}

impl FloatHistogram {
    /// The schema number of histograms with custom bucket boundaries (NHCB).
    pub const CUSTOM_BUCKETS_SCHEMA: i32 = -53;

    /// True for custom-bucket histograms (schema -53).
    pub fn uses_custom_buckets(&self) -> bool {
        self.schema == Self::CUSTOM_BUCKETS_SCHEMA
    }
}

/// One native histogram sample of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSample {
    /// Milliseconds since the Unix epoch.
    pub t: i64,
    /// The histogram.
    pub h: FloatHistogram,
}

/// A series id, dense and assigned at runtime by the series index. It is never persisted in
/// partition files (they carry label sets), only inside one WAL segment (see `wal` and
/// `batch_codec`), so the id space can be rebuilt freely on every start.
pub type SeriesId = u32;

/// One label pair. Names and values are shared `Arc<str>` so the index can intern them.
///
/// Compared by name, then value, as strings; two interned copies of one string are the same
/// allocation, so the comparisons look at the pointers first: sorting many series whose label
/// sets share most pairs (the usual case) then reads only the pairs that differ.
#[derive(Clone)]
pub struct Label {
    /// Label name, e.g. `__name__` or `instance`.
    pub name: Arc<str>,
    /// Label value; never empty in a stored series (an empty value means "label absent").
    pub value: Arc<str>,
}

/// `a` and `b` compared as strings, without reading them if they are one allocation.
fn cmp_shared(a: &Arc<str>, b: &Arc<str>) -> std::cmp::Ordering {
    if Arc::ptr_eq(a, b) { std::cmp::Ordering::Equal } else { a.as_ref().cmp(b.as_ref()) }
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
            && (Arc::ptr_eq(&self.value, &other.value) || self.value == other.value)
    }
}

impl Eq for Label {}

/// As derived: the strings, so equal labels hash alike whether shared or not.
impl std::hash::Hash for Label {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.as_ref().hash(state);
        self.value.as_ref().hash(state);
    }
}

impl Ord for Label {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        cmp_shared(&self.name, &other.name).then_with(|| cmp_shared(&self.value, &other.value))
    }
}

impl PartialOrd for Label {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Label {
    /// A label from any string-ish name and value.
    pub fn new(name: impl Into<Arc<str>>, value: impl Into<Arc<str>>) -> Self {
        Label { name: name.into(), value: value.into() }
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}", self.name, self.value)
    }
}

/// A label set sorted by name with unique names: the identity of a series. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Labels(Arc<[Label]>);

impl Labels {
    /// Builds a label set: sorts by name, drops pairs with an empty value (Prometheus treats an
    /// empty value as an absent label) and keeps the last of duplicate names.
    pub fn new(mut labels: Vec<Label>) -> Self {
        labels.retain(|l| !l.value.is_empty());
        // Stable sort keeps input order among equal names, so "last wins" below is the caller's last.
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out: Vec<Label> = Vec::with_capacity(labels.len());
        for l in labels {
            match out.last_mut() {
                Some(prev) if prev.name == l.name => *prev = l,
                _ => out.push(l),
            }
        }
        Labels(out.into())
    }

    /// Builds a label set from `(name, value)` string pairs (convenient in tests and decoders).
    pub fn from_pairs<N: AsRef<str>, V: AsRef<str>>(pairs: &[(N, V)]) -> Self {
        Labels::new(pairs.iter().map(|(n, v)| Label::new(n.as_ref(), v.as_ref())).collect())
    }

    /// Wraps labels the caller guarantees are sorted by name, unique, and non-empty valued
    /// (used by decoders of our own files, which wrote them in that order).
    pub fn from_sorted(labels: Vec<Label>) -> Self {
        debug_assert!(labels.windows(2).all(|w| w[0].name < w[1].name));
        Labels(labels.into())
    }

    /// [`Labels::from_sorted`] from an iterator of known length: one allocation, no
    /// intermediate vector (the index builds every new series this way).
    pub(crate) fn from_sorted_iter(labels: impl ExactSizeIterator<Item = Label>) -> Self {
        let labels: Arc<[Label]> = labels.collect();
        debug_assert!(labels.windows(2).all(|w| w[0].name < w[1].name));
        Labels(labels)
    }

    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|l| l.name.as_ref().cmp(name))
            .ok()
            .and_then(|i| self.0.get(i))
            .map(|l| l.value.as_ref())
    }

    /// The metric name (`__name__`), if present.
    pub fn metric_name(&self) -> Option<&str> {
        self.get(METRIC_NAME)
    }

    /// The pairs in name order.
    pub fn iter(&self) -> std::slice::Iter<'_, Label> {
        self.0.iter()
    }

    /// The pairs as a slice.
    pub fn as_slice(&self) -> &[Label] {
        &self.0
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Prometheus' notation: `name{a="1", b="2"}`.
impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(n) = self.metric_name() {
            f.write_str(n)?;
        }
        f.write_str("{")?;
        let mut first = true;
        for l in self.iter().filter(|l| l.name.as_ref() != METRIC_NAME) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{}={:?}", l.name, l.value)?;
        }
        f.write_str("}")
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = &'a Label;
    type IntoIter = std::slice::Iter<'a, Label>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The unit of ingest: samples for many series, appended and made durable as one WAL record,
/// so after a crash a batch is either wholly present or wholly absent.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Series and their samples; a series may appear more than once.
    pub series: Vec<(Labels, Vec<Sample>)>,
    /// Series and their native histogram samples, appended after all of `series` (so at an
    /// equal timestamp a histogram here wins over a float there).
    pub histograms: Vec<(Labels, Vec<HistogramSample>)>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }
    /// Adds samples for one series.
    pub fn push(&mut self, labels: Labels, samples: Vec<Sample>) {
        self.series.push((labels, samples));
    }
    /// Adds histogram samples for one series.
    pub fn push_histograms(&mut self, labels: Labels, samples: Vec<HistogramSample>) {
        self.histograms.push((labels, samples));
    }
    /// Total number of samples, histograms included.
    pub fn sample_count(&self) -> usize {
        self.series.iter().map(|(_, s)| s.len()).sum::<usize>()
            + self.histograms.iter().map(|(_, h)| h.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_sorted_deduped_empty_dropped() {
        let l = Labels::from_pairs(&[("b", "2"), ("a", "1"), ("c", ""), ("b", "3")]);
        assert_eq!(format!("{l}"), r#"{a="1", b="3"}"#);
        assert_eq!(l.get("b"), Some("3"));
        assert_eq!(l.get("c"), None);
    }

    proptest::proptest! {
        /// Label sets order and compare as their `(name, value)` string pairs do, whether
        /// their strings are shared allocations (as the index's are) or copies.
        #[test]
        fn labels_order_as_their_strings(
            a in proptest::collection::btree_map("[a-c]{1,2}", "[x-z]{1,2}", 0..4),
            b in proptest::collection::btree_map("[a-c]{1,2}", "[x-z]{1,2}", 0..4),
        ) {
            let pool: Vec<Arc<str>> = a.iter().chain(&b).flat_map(|(n, v)| [n, v]).map(|s| Arc::from(s.as_str())).collect();
            let shared = |s: &String| pool.iter().find(|p| p.as_ref() == s).cloned().unwrap_or_else(|| Arc::from(s.as_str()));
            let build = |m: &std::collections::BTreeMap<String, String>, share: bool| {
                Labels::from_sorted(m.iter().map(|(n, v)| if share {
                    Label { name: shared(n), value: shared(v) }
                } else {
                    Label::new(n.as_str(), v.as_str())
                }).collect())
            };
            let want = a.iter().cmp(b.iter());
            for (sa, sb) in [(true, true), (true, false), (false, true), (false, false)] {
                let (x, y) = (build(&a, sa), build(&b, sb));
                proptest::prop_assert_eq!(x.cmp(&y), want);
                proptest::prop_assert_eq!(x == y, want.is_eq());
            }
        }
    }

    #[test]
    fn stale_marker_is_a_specific_nan() {
        assert!(is_stale(stale_nan()));
        assert!(!is_stale(f64::NAN));
        assert_ne!(Sample::new(1, f64::NAN), Sample::new(1, stale_nan()));
        assert_eq!(Sample::new(1, stale_nan()), Sample::new(1, stale_nan()));
    }
}
