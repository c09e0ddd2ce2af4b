//! Push-down of range aggregations: `min|max|count|first|last|present_over_time(sel[r])` over a
//! plain range selector are answered by [`storage::Querier::window_aggregates`], one call per
//! series covering the windows of all steps, instead of decoding every sample and folding each
//! window here.
//!
//! Storage answers whole blocks from their statistics where that is exact and decodes the
//! rest, with the same fold as these functions (`storage::window::WindowAgg`), so the result is
//! the same bit for bit. Where it can answer nothing from statistics it says so, and the series
//! is decoded by the usual path (a plain sample read is faster than storage's merge of decoded
//! blocks with statistics). `EngineOptions::pushdown = false` keeps the decoding path, which is
//! the oracle the property tests compare against.
//!
//! Not pushed down, and why:
//! - `sum_over_time`, `avg_over_time`: compensated (Neumaier) summation, and `avg`'s switch to
//!   an incremental mean, depend on every intermediate value; a block's plain sum cannot be
//!   combined into the same bits.
//! - `rate`, `increase`: they need counter resets inside the range, which block statistics do
//!   not carry, and the first and last samples' times for extrapolation.
//! - subqueries (their points are results, not stored samples), `anchored`/`smoothed` ranges
//!   (not allowed with these functions anyway), and every other range function.
//!
//! Aggregations over these calls (`sum by (h) (max_over_time(x[1h]))`) need nothing special:
//! the inner call goes through here.

use storage::SeriesRef;
use storage::window::{ScanStats, WindowAgg};

use super::parallel::SeriesCtx;
use super::selector::WindowSpec;
use super::{FPoint, Grid, Series, drop_metric_labels};
use crate::error::Result;

/// A range function storage can answer with windowed aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    Min,
    Max,
    Count,
    First,
    Last,
    Present,
}

impl Pushed {
    /// The push-down form of range function `name`, if it has one.
    pub(crate) fn of(name: &str) -> Option<Pushed> {
        Some(match name {
            "min_over_time" => Pushed::Min,
            "max_over_time" => Pushed::Max,
            "count_over_time" => Pushed::Count,
            "first_over_time" => Pushed::First,
            "last_over_time" => Pushed::Last,
            "present_over_time" => Pushed::Present,
            _ => return None,
        })
    }

    /// The function's value for one non-empty window.
    fn value(self, a: &WindowAgg) -> f64 {
        match self {
            Pushed::Min => a.min,
            Pushed::Max => a.max,
            Pushed::Count => a.count as f64,
            Pushed::First => a.first,
            Pushed::Last => a.last,
            Pushed::Present => 1.0,
        }
    }

    /// `first_over_time` and `last_over_time` keep the metric name, as in Prometheus.
    fn keeps_name(self) -> bool {
        matches!(self, Pushed::First | Pushed::Last)
    }
}

/// The closed windows, as storage takes them, of steps ending at `refs` with reach `spec`:
/// samples in `(ref - before, ref + after]`. Ends are non-decreasing because `refs` are.
pub(crate) fn windows(refs: &[i64], spec: WindowSpec) -> Vec<(i64, i64)> {
    refs.iter()
        .map(|&r| (r.saturating_sub(spec.before).saturating_add(1), r.saturating_add(spec.after)))
        .collect()
}

impl SeriesCtx<'_> {
    /// Evaluates `f(sel[r])` for one selected series from storage's windowed aggregates.
    /// `None`: storage could answer nothing from statistics (windows narrower than its blocks,
    /// or data rewritten), so the caller decodes the series as usual. `Some(None)`: answered,
    /// and no window holds a sample.
    pub(crate) fn pushdown_series(
        &mut self,
        f: Pushed,
        series: &SeriesRef,
        windows: &[(i64, i64)],
        g: Grid,
    ) -> Result<Option<Option<Series>>> {
        self.check_deadline()?;
        let mut aggs = Vec::with_capacity(windows.len());
        let mut scan = ScanStats::default();
        if !self.querier.window_aggregates(series, windows, &mut aggs, &mut scan)? {
            return Ok(None);
        }
        self.samples_read += scan.samples_decoded;
        self.scan.add(&scan);
        let points: Vec<FPoint> = aggs
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.is_empty())
            .map(|(i, a): (usize, &WindowAgg)| FPoint { t: g.ts(i), f: f.value(a) })
            .collect();
        if points.is_empty() {
            return Ok(Some(None));
        }
        let delayed = self.opts.delayed_name_removal;
        let labels = if !f.keeps_name() && !delayed {
            drop_metric_labels(&series.labels)
        } else {
            series.labels.clone()
        };
        Ok(Some(Some(Series::new(labels, !f.keeps_name(), points))))
    }
}
