//! The read interface the layers above see: select series by matchers, read their samples.
//!
//! `promql` and the HTTP API only ever talk to storage through [`Querier`], so they can be
//! tested against [`crate::mem::MemStore`] and cannot reach into the engine's internals.

mod decode;

use crate::error::Result;
use crate::matcher::Matcher;
use crate::types::{HistogramSample, Labels, Sample, SeriesId};
use crate::window_agg::{Extreme, Need, ScanStats, WindowAgg};
pub use decode::{decode_group_extremes, decode_window_aggregates};

/// A series picked by [`Querier::select`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesRef {
    /// Runtime id, valid for the querier that returned it. A [`crate::Snapshot`] reads the
    /// series by its id alone, so a layer above may hand it back with other labels (a tenant's
    /// scope hides the tenant label).
    pub id: SeriesId,
    /// The series' labels.
    pub labels: Labels,
}

/// A sample's start timestamp: when the counter behind the sample last started counting from
/// zero (Prometheus' "created timestamp"; remote write 2.0 `created_timestamp`, OTLP
/// `start_time_unix_nano`). For a delta sample it is the start of the interval the value covers.
///
/// Storage only carries it; what it means for queries (counter resets, rate extrapolation) is
/// the query engine's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartTimestamp {
    /// Timestamp of the sample it belongs to, in milliseconds.
    pub t: i64,
    /// The start timestamp, in milliseconds. Never 0: 0 means "unknown" (the remote-write
    /// convention), and unknown start timestamps are simply not reported.
    pub st: i64,
}

/// Read access to a consistent view of the data (a snapshot: later writes are not seen).
///
/// Time ranges are closed `[mint, maxt]` in milliseconds; callers that need the left-open
/// PromQL range ask for `mint + 1`.
pub trait Querier: Send + Sync {
    /// Series matching every matcher that have at least one sample (or tombstone-surviving data)
    /// in `[mint, maxt]`, sorted by labels. At least one matcher must not match the empty
    /// string, as in Prometheus; otherwise `Error::InvalidInput`.
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>>;

    /// Whether a query's reads gain from every selection of the query being made before the
    /// first read, so that a caller that can should select all its selectors first. True for a
    /// query node, whose first read of a bucket file fetches the blocks of all the query's
    /// selections so far in one request (see `footprint`); false by default.
    fn selects_ahead(&self) -> bool {
        false
    }

    /// Makes ready what `selections` (matchers, `mint`, `maxt`), about to be selected one by
    /// one, need, all at once where that saves work: a query node loads the series chunks of
    /// all of them from each file in one request (see `partition::chunks`). Nothing by default.
    fn prepare(&self, selections: &[(&[Matcher], i64, i64)]) -> Result<()> {
        let _ = selections;
        Ok(())
    }

    /// Appends the samples of `series` in `[mint, maxt]` to `out`, ascending by time with one
    /// sample per timestamp (the last written wins). Stale markers are included.
    fn samples(&self, series: &SeriesRef, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()>;

    /// [`Querier::samples`], adding what the read cost to `stats`: partition-file blocks
    /// decoded, and samples decoded or read from the heads. Query statistics show it for
    /// series that push-down did not answer. The default counts nothing.
    fn samples_scanned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        _stats: &mut ScanStats,
    ) -> Result<()> {
        self.samples(series, mint, maxt, out)
    }

    /// [`Querier::samples_scanned`] for a caller that drops every sample whose value fails a
    /// test: a storage with block statistics may leave out the samples of a stretch none of
    /// whose values passes, reading the stretch as two stale markers at its first and last
    /// timestamps (one if they are equal), so that for every time the latest sample at or before
    /// it fails the test or is a stale marker exactly when it does in the full read.
    ///
    /// `may_keep(min, max)` is told the smallest and largest value of a stretch, not counting
    /// stale markers and NaNs (both NaN if it has no other value); it returns false only if
    /// none of the stretch's values passes, NaNs included. The default reads everything.
    fn samples_pruned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        may_keep: &dyn Fn(f64, f64) -> bool,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        let _ = may_keep;
        self.samples_scanned(series, mint, maxt, out, stats)
    }

    /// [`Querier::samples_scanned`] for a caller that needs only the latest sample in
    /// `[mint, maxt]`: appends it, and perhaps (as the default does) the samples before it.
    /// A storage with block statistics may answer from the statistics of the block that ends
    /// with it, or from the last sample it keeps of a series in memory.
    fn samples_latest(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        self.samples_scanned(series, mint, maxt, out, stats)
    }

    /// Appends the native histogram samples of `series` in `[mint, maxt]` to `out`, ascending
    /// by time. [`Querier::samples`] reports the same series' float samples (and stale
    /// markers); a timestamp holds either a float or a histogram, never both.
    ///
    /// A separate call so float-only storages and queries pay nothing; the default reports
    /// none, for storages that do not keep histograms.
    fn histograms(
        &self,
        _series: &SeriesRef,
        _mint: i64,
        _maxt: i64,
        _out: &mut Vec<HistogramSample>,
    ) -> Result<()> {
        Ok(())
    }

    /// Appends the known start timestamps of the samples of `series` in `[mint, maxt]` to
    /// `out`, ascending by sample time, one per sample at most; samples without one are left
    /// out, so a series without start timestamps costs nothing.
    ///
    /// Kept apart from [`Querier::samples`] so the sample path stays as lean as it is, and only
    /// the few queries that use start timestamps pay for reading them. The default reports
    /// none, for storages that do not keep them.
    fn start_timestamps(
        &self,
        _series: &SeriesRef,
        _mint: i64,
        _maxt: i64,
        _out: &mut Vec<StartTimestamp>,
    ) -> Result<()> {
        Ok(())
    }

    /// Appends to `out` one [`WindowAgg`] per window of `windows` (closed ranges; they may
    /// overlap) over the samples of `series`, adding what it cost to `stats`, and returns true;
    /// or returns false, having appended nothing, when no part of the answer could come from
    /// statistics, so the caller reads the samples and folds them itself (a plain sample read
    /// is the faster way to decode everything).
    ///
    /// This is the push-down entry for `min|max|count|first|last|present_over_time`: a storage
    /// with block statistics answers whole blocks without decoding them, with exactly the bits
    /// the decoded samples give. Storages may answer only when both ends of the windows are
    /// non-decreasing, as PromQL steps make them. The default has no statistics and returns
    /// false.
    ///
    /// `need` says what the caller needs of each window, and so which blocks statistics may
    /// answer ([`Need`]): with [`Need::Sums`] (`sum_over_time`, `avg_over_time`), only blocks
    /// whose sum statistic is exact, and a storage declines (returns false) rather than answer
    /// mostly without exact sums; windows may then be [partial](WindowAgg::is_partial). With
    /// [`Need::Ends`] (`delta`) every window's [times](WindowAgg::times) are known, with
    /// [`Need::Resets`] (`rate`, `increase`) also its [resets](WindowAgg::resets), except where
    /// a window holds more than [`MAX_RESETS`](crate::window_agg::MAX_RESETS).
    fn window_aggregates(
        &self,
        _series: &SeriesRef,
        _windows: &[(i64, i64)],
        _need: Need,
        _out: &mut Vec<WindowAgg>,
        _stats: &mut ScanStats,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Appends to `out` one entry per window of `windows` (closed ranges, both ends
    /// non-decreasing): the [`Extreme`] of the non-stale values of all series of `group` in
    /// it, folded series by series in `group` order, each in time order (`None`: no value in
    /// the window), adding what it cost to `stats`, and returns true; or returns false, having
    /// appended nothing, so the caller folds each series' samples itself.
    ///
    /// This is the push-down entry for `max(max_over_time(x[r]))` and `min(min_over_time(..))`
    /// (per group of an aggregation's `by`/`without`): a storage with block statistics
    /// answers whole blocks in a window from them and leaves out blocks that cannot change the
    /// answer ([`Extreme::cannot_change`]), with exactly the bits the decoded samples give
    /// ([`decode_group_extremes`](decode_group_extremes), the oracle). The
    /// default has no statistics and returns false.
    fn group_extremes(
        &self,
        _group: &[SeriesRef],
        _windows: &[(i64, i64)],
        _which: Extreme,
        _out: &mut Vec<Option<f64>>,
        _stats: &mut ScanStats,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Label names (sorted, unique) of series matching `matchers` (all series if empty) with
    /// data in `[mint, maxt]`.
    fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>>;

    /// Values (sorted, unique) of label `name` on series matching `matchers` (all series if
    /// empty) with data in `[mint, maxt]`.
    fn label_values(&self, name: &str, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>>;
}

/// Checks the Prometheus rule that a selector must have a matcher that does not match `""`
/// (otherwise it would select every series in the database).
pub fn check_selective(matchers: &[Matcher]) -> Result<()> {
    if matchers.iter().any(|m| !m.matches_empty()) {
        Ok(())
    } else {
        Err(crate::Error::InvalidInput(
            "vector selector must contain at least one non-empty matcher".to_string(),
        ))
    }
}
