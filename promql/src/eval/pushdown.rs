//! Push-down of range aggregations: `min|max|count|first|last|present_over_time(sel[r])`,
//! `sum|avg_over_time(sel[r])` over integer data, and `rate|increase|delta(sel[r])`, over a plain
//! range selector are answered by [`storage::Querier::window_aggregates`], one call per series
//! covering the windows of all steps, instead of decoding every sample and folding each window
//! here.
//!
//! Storage answers whole blocks from their statistics where that is exact (for sums also the
//! part of a block after a window boundary, as its sum less the decoded part before it) and
//! decodes the rest, with the same fold as these functions (`storage::window_agg::WindowAgg`), so the result is
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
//! vouches for ([`WindowAgg::exact_sum`]) from block statistics where they record integer
//! values (`BlockStats::integral`, partition format 4; in older files the block header shows
//! them). If any window lacks an exact sum (floats, NaN, huge values), the series is
//! decoded as usual.
//!
//! `rate`, `increase` and `delta` need of a window only its first and last samples with their
//! times, its sample count and, for counters, the value before each reset, added to
//! `last - first` in time order (`rate::Sampled`); then the same extrapolation runs as on the
//! decoding path (`rate::extrapolate`). Storage answers a block from statistics for them only
//! if it holds no stale marker (its time range then starts and ends with values) and, for
//! counters, never decreases (`BlockStats::no_decrease`, partition format 3 on), so resets can only
//! fall between sources, where storage compares the values. A window with more resets than
//! storage tracks is decoded. With start timestamps in use (`use_start_timestamps`), which can
//! mark resets the values hide, `rate` and `increase` are not pushed down.
//!
//! Not pushed down, and why:
//! - subqueries (their points are results, not stored samples), `anchored`/`smoothed` ranges
//!   (not allowed with these functions anyway), and every other range function.
//!
//! Aggregations over these calls (`sum by (h) (max_over_time(x[1h]))`) need nothing special:
//! the inner call goes through here. The exception is `max(max_over_time(..))` and
//! `min(min_over_time(..))`, which storage answers per group (`group_extreme.rs`), leaving out
//! blocks that cannot change a group's answer.

use std::time::Instant;

use storage::SeriesRef;
use storage::window_agg::{Need, ScanStats, WindowAgg};

use super::notes::note_possible_non_counter;
use super::parallel::SeriesCtx;
use super::rate::{Bounds, Sampled, extrapolate};
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
    Rate,
    Increase,
    Delta,
}

/// One window's answer.
enum Answer {
    Point(f64),
    /// The function gives no point for this window (`rate` of a single sample).
    NoPoint,
    /// Storage could not vouch for what the function needs (an exact sum, the resets): the
    /// caller decodes the series.
    Decline,
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
            "rate" => Pushed::Rate,
            "increase" => Pushed::Increase,
            "delta" => Pushed::Delta,
            _ => return None,
        })
    }

    /// What the function needs of each window.
    pub(crate) fn need(self) -> Need {
        match self {
            Pushed::Sum | Pushed::Avg => Need::Sums,
            Pushed::Rate | Pushed::Increase => Need::Resets,
            Pushed::Delta => Need::Ends,
            _ => Need::Values,
        }
    }

    /// Whether the function reports a metric that might not be a counter (`rate`, `increase`).
    pub(crate) fn counter(self) -> bool {
        self.need() == Need::Resets
    }

    /// The function's answer for one non-empty window `a` whose range is `b` (known for
    /// `rate`, `increase` and `delta`, which alone need it).
    fn answer(self, a: &WindowAgg, b: Option<Bounds>) -> Answer {
        match (self, b) {
            (Pushed::Rate | Pushed::Increase | Pushed::Delta, Some(b)) => self.rate(a, b),
            (Pushed::Rate | Pushed::Increase | Pushed::Delta, None) => Answer::Decline,
            _ => self.value(a).map_or(Answer::Decline, Answer::Point),
        }
    }

    /// `rate`, `increase`, `delta` of window `a` as `rate::extrapolated_rate` computes them from
    /// its samples.
    fn rate(self, a: &WindowAgg, b: Bounds) -> Answer {
        let is_counter = self != Pushed::Delta;
        let (Some((first_t, last_t)), Some(resets)) =
            (a.times(), if is_counter { a.resets() } else { Some(&[][..]) })
        else {
            return Answer::Decline;
        };
        let mut increase = a.last - a.first;
        for prev in resets {
            increase += prev;
        }
        let s = Sampled {
            first: FPoint { t: first_t, f: a.first },
            last: FPoint { t: last_t, f: a.last },
            gaps: (a.count - 1) as usize,
            increase,
        };
        match extrapolate(s, None, b, is_counter, self == Pushed::Rate) {
            Some(v) => Answer::Point(v),
            None => Answer::NoPoint,
        }
    }

    /// The value of one non-empty window for the `*_over_time` functions; `None` if it needs an
    /// exact sum storage could not vouch for.
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
            Pushed::Rate | Pushed::Increase | Pushed::Delta => return None,
        })
    }

    /// `first_over_time` and `last_over_time` keep the metric name, as in Prometheus.
    fn keeps_name(self) -> bool {
        matches!(self, Pushed::First | Pushed::Last)
    }
}

/// A range function call to push down: the function, and per step its window and range.
pub(crate) struct Plan {
    pub f: Pushed,
    /// The closed windows, as storage takes them, of steps ending at the reference times with
    /// reach `spec`: samples in `(ref - before, ref + after]`. Ends are non-decreasing because
    /// the steps' are.
    pub windows: Vec<(i64, i64)>,
    /// Each step's range, for `rate`, `increase` and `delta` (empty otherwise).
    pub bounds: Vec<Bounds>,
    /// Where the call's argument starts in the query, for annotations.
    pub pos: usize,
    /// The name stays in the output labels (the call's `names_kept`).
    pub names_kept: bool,
}

impl Plan {
    /// The plan for `f` over steps ending at `refs` with reach `spec`.
    pub(crate) fn new(f: Pushed, refs: &[i64], spec: WindowSpec, pos: usize, names_kept: bool) -> Plan {
        let windows = refs
            .iter()
            .map(|&r| (r.saturating_sub(spec.before).saturating_add(1), r.saturating_add(spec.after)))
            .collect();
        let bounds = match f.need() {
            Need::Ends | Need::Resets => refs
                .iter()
                .map(|&r| Bounds {
                    range_start: r.saturating_sub(spec.range),
                    range_end: r,
                    range_secs: spec.range as f64 / 1000.0,
                })
                .collect(),
            Need::Values | Need::Sums => Vec::new(),
        };
        Plan { f, windows, bounds, pos, names_kept }
    }
}

impl SeriesCtx<'_> {
    /// Evaluates `f(sel[r])` for one selected series from storage's windowed aggregates.
    /// `None`: storage could answer nothing from statistics (windows narrower than its blocks,
    /// or data rewritten), so the caller decodes the series as usual. `Some(None)`: answered,
    /// and no window holds a sample.
    pub(crate) fn pushdown_series(
        &mut self,
        plan: &Plan,
        series: &SeriesRef,
        g: Grid,
    ) -> Result<Option<Option<Series>>> {
        self.check_deadline()?;
        let (f, windows) = (plan.f, &plan.windows);
        let mut aggs = Vec::with_capacity(windows.len());
        let mut scan = ScanStats::default();
        let began = Instant::now();
        let answered = self.querier.window_aggregates(series, windows, f.need(), &mut aggs, &mut scan)?;
        // Counted even when declined: the time was spent, though the decoding path then reads
        // the series again (and counts its blocks and samples itself).
        self.read_time += began.elapsed();
        if !answered {
            return Ok(None);
        }
        let mut points: Vec<FPoint> = Vec::with_capacity(aggs.len());
        for (i, a) in aggs.iter().enumerate().filter(|(_, a)| !a.is_empty()) {
            match f.answer(a, plan.bounds.get(i).copied()) {
                Answer::Point(v) => points.push(FPoint { t: g.ts(i), f: v }),
                Answer::NoPoint => {}
                // A window without an exact sum or known resets: decode the series instead
                // (the work done here is not counted, as the decoding path counts its own).
                Answer::Decline => return Ok(None),
            }
        }
        self.samples_read += scan.samples_decoded;
        self.scan.add(&scan);
        if points.is_empty() {
            return Ok(Some(None));
        }
        if f.counter() {
            note_possible_non_counter(self.opts, &mut self.annotations, &series.labels, plan.pos);
        }
        let labels = if !f.keeps_name() && !plan.names_kept {
            drop_metric_labels(&series.labels)
        } else {
            series.labels.clone()
        };
        Ok(Some(Some(Series::new(labels, !f.keeps_name(), points))))
    }
}
