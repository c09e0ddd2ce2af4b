//! Push-down of range aggregations: `min|max|count|first|last|present_over_time(sel[r])`, and
//! `sum|avg_over_time(sel[r])` over integer data, over a plain range selector are answered by [`storage::Querier::window_aggregates`], one call per
//! series covering the windows of all steps, instead of decoding every sample and folding each
//! window here.
//!
//! Storage answers whole blocks from their statistics where that is exact (for sums also the
//! part of a block after a window boundary, as its sum less the decoded part before it) and
//! decodes the rest, with the same fold as these functions (`storage::window::WindowAgg`), so the result is
//! the same bit for bit. Where it can answer nothing from statistics it says so, and the series
//! is decoded by the usual path (a plain sample read is faster than storage's merge of decoded
//! blocks with statistics). `EngineOptions::pushdown = false` keeps the decoding path, which is
//! the oracle the property tests compare against.
//!
//! `sum_over_time` and `avg_over_time` use compensated (Neumaier) summation, and `avg` switches
//! to an incremental mean on overflow: in general the result depends on every intermediate
//! value and a block's plain sum cannot be combined into the same bits. Over integers whose
//! magnitudes sum to less than 2^53 every addition is exact and the compensation stays 0, so
//! Prometheus' fold gives `sum + 0` and `sum / n + 0 / n` for the exact sum, which storage
//! vouches for ([`WindowAgg::exact_sum`]) from block statistics where the block header shows
//! integer values. If any window lacks an exact sum (floats, NaN, huge values), the series is
//! decoded as usual.
//!
//! Not pushed down, and why:
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
    Sum,
    Avg,
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
            "sum_over_time" => Pushed::Sum,
            "avg_over_time" => Pushed::Avg,
            _ => return None,
        })
    }

    /// Whether the function needs the windows' exact sums.
    fn sums(self) -> bool {
        matches!(self, Pushed::Sum | Pushed::Avg)
    }

    /// The function's value for one non-empty window; `None` if it needs an exact sum storage
    /// could not vouch for.
    fn value(self, a: &WindowAgg) -> Option<f64> {
        Some(match self {
            Pushed::Min => a.min,
            Pushed::Max => a.max,
            Pushed::Count => a.count as f64,
            Pushed::First => a.first,
            Pushed::Last => a.last,
            Pushed::Present => 1.0,
            // `range_fn`'s folds with a compensation of exactly 0 (see the module docs).
            Pushed::Sum => a.exact_sum()? + 0.0,
            Pushed::Avg => {
                let n = a.count as f64;
                a.exact_sum()? / n + 0.0 / n
            }
        })
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
        if !self.querier.window_aggregates(series, windows, f.sums(), &mut aggs, &mut scan)? {
            return Ok(None);
        }
        let mut points: Vec<FPoint> = Vec::with_capacity(aggs.len());
        for (i, a) in aggs.iter().enumerate().filter(|(_, a)| !a.is_empty()) {
            match f.value(a) {
                Some(v) => points.push(FPoint { t: g.ts(i), f: v }),
                // A window without an exact sum: decode the series instead (the work done here
                // is not counted, as the decoding path counts its own).
                None => return Ok(None),
            }
        }
        self.samples_read += scan.samples_decoded;
        self.scan.add(&scan);
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
