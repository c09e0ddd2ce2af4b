//! Instant and range vector selectors: reading samples and sliding windows over them.
//!
//! Prometheus 3 semantics: an instant selector at time `t` takes the latest sample in
//! `(t - lookback, t]` unless that sample is a stale marker; a range selector `[r]` covers
//! `(t - r, t]` and ignores stale markers. `offset o` shifts `t` back by `o`, `@ a` replaces `t`
//! with `a`. Each series is read once for the union of all steps' windows.

use std::sync::Arc;
use std::time::Instant;

use storage::query::StartTimestamp;
use storage::{CounterResetHint, HistogramSample, Matcher, Sample, SeriesRef, is_stale};

use super::binary::Comparison;
use super::numeric::interpolate;
use super::parallel::{SeriesCtx, estimate_points};
use super::{Evaluator, FPoint, Grid, HPoint, Series, Val, float_histogram, start_timestamps};
use crate::error::{Error, Result};
use crate::parser::ast::{BinOp, MatrixSelector, VectorSelector};

/// What an instant vector selector reports for the sample it picks at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    /// The sample's value: a plain selector.
    Value,
    /// The sample's timestamp in seconds: `timestamp(selector)`.
    Timestamp,
    /// The sample's start timestamp in seconds, 0 if unknown: `start_timestamp(selector)`.
    StartTimestamp,
}

/// Which of a series' float samples a caller needs ([`SeriesCtx::load_series`]).
#[derive(Clone, Copy)]
pub(crate) enum FloatRead<'f> {
    /// All of them.
    All,
    /// The latest in range: the storage may answer it alone, from block statistics
    /// ([`storage::Querier::samples_latest`]).
    Latest,
    /// The latest at each step, only if its value passes a test: the storage may read a
    /// stretch where `may_keep(min, max)` says none passes as stale markers
    /// ([`storage::Querier::samples_pruned`]).
    Pruned(&'f dyn Fn(f64, f64) -> bool),
}

/// Buffers an instant selector reuses from one series to the next.
#[derive(Default)]
struct SelectorScratch {
    buf: Vec<Sample>,
    sts: Vec<StartTimestamp>,
    hbuf: Vec<HPoint>,
}

/// Buffers a range selector reuses from one series to the next.
#[derive(Default)]
struct RangeScratch {
    buf: Vec<Sample>,
    hbuf: Vec<HPoint>,
}

impl SeriesCtx<'_> {
    /// Reads one series in `[mint, maxt]`: its float samples into `buf`, and its native
    /// histogram samples into `hbuf` as shared points (replacing the contents of both).
    /// Storages without histograms answer the second read with nothing, so a float-only series
    /// costs one empty call. `stats_only` (see [`super::HistStatsScope`]) reads histograms as
    /// Prometheus' `HistogramStatsIterator` does. The two reads are timed together (the
    /// query's `read_time`): one clock read costs about as much as a float-only series' empty
    /// histogram call.
    #[allow(clippy::too_many_arguments)]
    pub fn load_series(
        &mut self,
        r: &SeriesRef,
        mint: i64,
        maxt: i64,
        read: FloatRead<'_>,
        stats_only: bool,
        buf: &mut Vec<Sample>,
        hbuf: &mut Vec<HPoint>,
    ) -> Result<()> {
        self.check_deadline()?;
        buf.clear();
        hbuf.clear();
        let mut raw: Vec<HistogramSample> = Vec::new();
        let began = Instant::now();
        match read {
            FloatRead::All => self.querier.samples_scanned(r, mint, maxt, buf, &mut self.scan)?,
            FloatRead::Latest => self.querier.samples_latest(r, mint, maxt, buf, &mut self.scan)?,
            FloatRead::Pruned(may_keep) => {
                self.querier.samples_pruned(r, mint, maxt, may_keep, buf, &mut self.scan)?;
            }
        }
        self.querier.histograms(r, mint, maxt, &mut raw)?;
        self.read_time += began.elapsed();
        self.samples_read += buf.len() as u64;
        if raw.is_empty() {
            return Ok(());
        }
        self.samples_read += raw.len() as u64;
        hbuf.extend(raw.into_iter().map(|s| HPoint { t: s.t, h: Arc::new(s.h) }));
        if stats_only {
            explicit_reset_hints(hbuf);
        }
        Ok(())
    }

    /// Reads the known start timestamps of one series in `[mint, maxt]` into `buf` (replacing
    /// its contents).
    pub(crate) fn load_start_timestamps(
        &mut self,
        r: &SeriesRef,
        mint: i64,
        maxt: i64,
        buf: &mut Vec<StartTimestamp>,
    ) -> Result<()> {
        buf.clear();
        let began = Instant::now();
        self.querier.start_timestamps(r, mint, maxt, buf)?;
        self.read_time += began.elapsed();
        Ok(())
    }
}

/// What Prometheus' `HistogramStatsIterator` (used where only a histogram's count and sum are
/// needed) makes of histogram samples: only the count, the sum, the schema and the
/// counter-reset hint are kept (no zero bucket, buckets or custom bounds), and resets are detected while
/// reading, so a sample with an `unknown` hint that follows another histogram sample read in
/// the same pass gets `reset` or `not_reset`, judged on the whole histograms. The schema is
/// kept too (Prometheus' corpus expects the exponential/custom mix to be noticed there). The hints matter
/// for the "conflicting counter resets" warning of `sum`, `avg`, `sum_over_time` and
/// `avg_over_time` below `histogram_count` and friends. The first sample read keeps its hint;
/// stale markers keep only their sum and are skipped.
pub(crate) fn explicit_reset_hints(hs: &mut [HPoint]) {
    let mut prev: Option<Arc<storage::FloatHistogram>> = None;
    for p in hs {
        let full = p.h.clone();
        let mut hint = full.counter_reset_hint;
        let stale = is_stale(full.sum);
        if !stale
            && hint == CounterResetHint::Unknown
            && let Some(before) = &prev
        {
            hint = if float_histogram::detect_reset(&full, before) {
                CounterResetHint::Reset
            } else {
                CounterResetHint::NotReset
            };
        }
        p.h = Arc::new(storage::FloatHistogram {
            counter_reset_hint: if stale { full.counter_reset_hint } else { hint },
            count: if stale { 0.0 } else { full.count },
            sum: full.sum,
            schema: full.schema,
            ..Default::default()
        });
        if !stale {
            prev = Some(full);
        }
    }
}

impl<'a> Evaluator<'a> {
    /// Selects series (counting them against the series limit).
    pub fn select(&mut self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        // Inline evaluation looks up only what an equality narrows down: a lone regex or
        // negative matcher may scan the whole index.
        if self.opts.inline_points_max.is_some()
            && !matchers.iter().any(|m| m.op == storage::MatchOp::Equal && !m.value.is_empty())
        {
            return Err(Error::NotInline);
        }
        let began = Instant::now();
        let refs = match self.preselected.remove(&super::preselect::key(matchers, mint, maxt)) {
            Some(refs) => refs,
            None => self.select_now(matchers, mint, maxt)?,
        };
        self.select_time += began.elapsed();
        if self.opts.max_series > 0 && refs.len() > self.opts.max_series {
            return Err(Error::TooManySeries(refs.len()));
        }
        self.series_selected += refs.len() as u64;
        Ok(refs)
    }

    /// Asks the querier for the series `matchers` select in `[mint, maxt]`.
    pub(crate) fn select_now(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        // A compiled regex's search caches (lazy-DFA tables, up to 2 MiB per thread) belong to
        // the clone that searched. Searching with clones ties them to this query instead of to
        // a syntax tree the parse cache keeps: 200 distinct queries whose regexes blow up into
        // many DFA states over 20,000 metric names took a server from 42 to 683 MB otherwise.
        let owned: Vec<Matcher>;
        let matchers = if matchers.iter().any(Matcher::has_compiled_regex) {
            owned = matchers.to_vec();
            &owned[..]
        } else {
            matchers
        };
        Ok(self.querier.select(matchers, mint, maxt)?)
    }

    /// Reads the samples of one series in `[mint, maxt]` into `buf` (replacing its contents).
    pub fn load(&mut self, r: &SeriesRef, mint: i64, maxt: i64, buf: &mut Vec<Sample>) -> Result<()> {
        self.check_deadline()?;
        buf.clear();
        let began = Instant::now();
        self.querier.samples_scanned(r, mint, maxt, buf, &mut self.scan)?;
        self.read_time += began.elapsed();
        self.samples_read += buf.len() as u64;
        Ok(())
    }

    /// The window end (`t - offset`, or `@ - offset`) for every step, in time order.
    /// The time range an instant vector selector reads for steps at `refs` (each step's time
    /// after `@` and `offset`): from a lookback before the first to the last, and a lookback
    /// past it for a smoothed selector. None without steps. `preselect.rs` selects the same.
    pub(crate) fn vector_span(&self, vs: &VectorSelector, refs: &[i64]) -> Option<(i64, i64)> {
        let (&lo, &hi) = (refs.iter().min()?, refs.iter().max()?);
        let lb = self.opts.lookback_delta_ms;
        let maxt = if vs.smoothed { hi.saturating_add(lb) } else { hi };
        Some((lo.saturating_sub(lb).saturating_add(1), maxt))
    }

    pub(crate) fn refs(&self, vs: &VectorSelector, g: Grid) -> Result<Vec<i64>> {
        let offset = self.offset_ms(&vs.offset)?;
        let at = self.at_ms(vs.at);
        Ok(g.timestamps().map(|ts| at.unwrap_or(ts).saturating_sub(offset)).collect())
    }

    /// Evaluates an instant vector selector; `pick` says what each point's value is. Start
    /// timestamps are read only for [`Pick::StartTimestamp`].
    pub(crate) fn eval_vector_selector(&mut self, vs: &VectorSelector, g: Grid, pick: Pick) -> Result<Val> {
        self.eval_vector_selector_where(vs, g, pick, None)
    }

    /// What [`Evaluator::eval`] of the selector `vs` followed by the filter `cmp` keeps of its
    /// float points, without holding the points that fail (histogram points are all kept, for
    /// the binary operator to handle). Counted against the sample limit as `eval` counts: the
    /// result, which here is what passed the filter.
    pub(crate) fn eval_filtered_selector(
        &mut self,
        vs: &VectorSelector,
        g: Grid,
        cmp: Comparison,
    ) -> Result<Val> {
        if std::time::Instant::now() > self.deadline {
            return Err(Error::Timeout("expression evaluation"));
        }
        let before = self.samples.current;
        let v = self.eval_vector_selector_where(vs, g, Pick::Value, Some(cmp))?;
        self.samples.current = before;
        self.track(v.sample_count())?;
        Ok(v)
    }

    /// [`Evaluator::eval_vector_selector`], keeping only the float points `keep` keeps.
    fn eval_vector_selector_where(
        &mut self,
        vs: &VectorSelector,
        g: Grid,
        pick: Pick,
        keep: Option<Comparison>,
    ) -> Result<Val> {
        let keeps = |f: f64| keep.is_none_or(|c| c.keeps(f));
        let refs = self.refs(vs, g)?;
        let Some((mint, maxt)) = self.vector_span(vs, &refs) else {
            return Ok(Val::Vector(Vec::new()));
        };
        let lb = self.opts.lookback_delta_ms;
        let series = self.select(&vs.matchers, mint, maxt)?;
        let est = estimate_points(g.len(), mint, maxt);
        let stats_only = self.hist_stats.stats_only();
        let out = self.map_series(&series, est, |ctx, scratch: &mut SelectorScratch, r| {
            let SelectorScratch { buf, sts, hbuf } = scratch;
            let plain = ctx.opts.pushdown && !vs.smoothed && pick != Pick::StartTimestamp;
            let may_keep = |min: f64, max: f64| keep.is_none_or(|c| c.may_keep(min, max));
            let read = match keep {
                // One step (an instant query): only the latest sample counts, which the
                // statistics of the block ending with it may hold.
                _ if plain && refs.len() == 1 => FloatRead::Latest,
                // Only the latest sample at each step counts, and it must pass: stretches of
                // the files whose statistics show none passes need not be decoded.
                Some(_) if plain && pick == Pick::Value => FloatRead::Pruned(&may_keep),
                _ => FloatRead::All,
            };
            ctx.load_series(r, mint, maxt, read, stats_only, buf, hbuf)?;
            if pick == Pick::StartTimestamp {
                ctx.load_start_timestamps(r, mint, maxt, sts)?;
            }
            if !hbuf.is_empty() && vs.smoothed {
                let (mut points, hpoints) =
                    smoothed_mixed_points(buf, hbuf, &refs, g, lb, &r.labels, vs.start, &mut ctx.annotations);
                points.retain(|p| keeps(p.f));
                let empty = points.is_empty() && hpoints.is_empty();
                return Ok(
                    (!empty).then(|| Series::with_histograms(r.labels.clone(), false, points, hpoints))
                );
            }
            if !hbuf.is_empty() {
                let (mut points, hpoints) = latest_mixed_points(buf, sts, hbuf, &refs, g, lb, pick);
                points.retain(|p| keeps(p.f));
                let empty = points.is_empty() && hpoints.is_empty();
                return Ok(
                    (!empty).then(|| Series::with_histograms(r.labels.clone(), false, points, hpoints))
                );
            }
            let points = if vs.smoothed {
                let mut points = smoothed_points(buf, &refs, g, lb);
                points.retain(|p| keeps(p.f));
                points
            } else {
                latest_points(buf, sts, &refs, g, lb, pick, keep)
            };
            Ok((!points.is_empty()).then(|| Series::new(r.labels.clone(), false, points)))
        })?;
        Ok(Val::Vector(out))
    }

    /// A range vector at the top of an instant query: the raw samples of each series.
    pub fn eval_matrix_selector_raw(&mut self, ms: &MatrixSelector, t: i64) -> Result<Val> {
        let w = self.window_spec(ms)?;
        let refs = self.refs(&ms.vs, Grid { start: t, end: t, step: 1 })?;
        let ref_t = refs.first().copied().unwrap_or(t);
        let (mint, maxt) = (ref_t.saturating_sub(w.before).saturating_add(1), ref_t.saturating_add(w.after));
        let series = self.select(&ms.vs.matchers, mint, maxt)?;
        let est = estimate_points(1, mint, maxt);
        let stats_only = self.hist_stats.stats_only();
        let out = self.map_series(&series, est, |ctx, scratch: &mut RangeScratch, r| {
            let RangeScratch { buf, hbuf } = scratch;
            ctx.load_series(r, mint, maxt, FloatRead::All, stats_only, buf, hbuf)?;
            let mut points: Vec<FPoint> =
                buf.iter().filter(|s| !is_stale(s.v)).map(|s| FPoint { t: s.t, f: s.v }).collect();
            if ms.vs.anchored || ms.vs.smoothed {
                points = extend_floats(&points, ref_t.saturating_sub(w.range), ref_t, ms.vs.smoothed);
            }
            let hpoints = std::mem::take(hbuf);
            let empty = points.is_empty() && hpoints.is_empty();
            Ok((!empty).then(|| Series::with_histograms(r.labels.clone(), false, points, hpoints)))
        })?;
        Ok(Val::Range(out))
    }

    /// Range and window extension of a range selector.
    pub fn window_spec(&self, ms: &MatrixSelector) -> Result<WindowSpec> {
        let range = self.duration_ms(&ms.range, false)?;
        let lb = self.opts.lookback_delta_ms;
        let (before, after) = if ms.vs.anchored {
            (range + lb, 0)
        } else if ms.vs.smoothed {
            (range + lb, lb)
        } else {
            (range, 0)
        };
        Ok(WindowSpec { range, before, after })
    }
}

impl WindowSpec {
    /// The time range the windows ending at `refs` cover together (`(0, 0)`'s windows for no
    /// steps). `range_call` and `preselect.rs` select it.
    pub(crate) fn span(&self, refs: &[i64]) -> (i64, i64) {
        let lo = refs.iter().min().copied().unwrap_or(0);
        let hi = refs.iter().max().copied().unwrap_or(0);
        (lo.saturating_sub(self.before).saturating_add(1), hi.saturating_add(self.after))
    }
}

/// How far a range selector's window reaches around its end time `t`: samples in
/// `(t - before, t + after]`. `before` exceeds `range` for anchored and smoothed selectors, which
/// look for the samples just outside the range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowSpec {
    pub range: i64,
    pub before: i64,
    pub after: i64,
}

/// For each step, the latest non-stale sample in `(ref - lb, ref]` (`sts`: the start timestamps
/// of `buf`, needed for [`Pick::StartTimestamp`] only), if `keep` keeps its value.
fn latest_points(
    buf: &[Sample],
    sts: &[StartTimestamp],
    refs: &[i64],
    g: Grid,
    lb: i64,
    pick: Pick,
    keep: Option<Comparison>,
) -> Vec<FPoint> {
    // At most a point a step; at the scrape interval (a selector over a day) nearly every step
    // has one, and growing the vector step by step copied it a dozen times. A filter keeps
    // few as often as many: then the vector grows with what it keeps. Each filter is its own
    // loop: matching the operator per step took a fifth of high-cpu-all's selector loop.
    let all = refs.len();
    let value = |s: &Sample| match pick {
        Pick::Value => s.v,
        Pick::Timestamp => s.t as f64 / 1000.0,
        Pick::StartTimestamp => start_timestamps::at(sts, s.t) as f64 / 1000.0,
    };
    let Some(cmp) = keep else {
        return latest_where(buf, refs, g, lb, all, |s| Some(value(s)));
    };
    let c = cmp.literal();
    macro_rules! filtered {
        ($op:tt) => {
            latest_where(buf, refs, g, lb, 0, |s| {
                let f = value(s);
                (f $op c).then_some(f)
            })
        };
    }
    match cmp.op() {
        BinOp::Gtr => filtered!(>),
        BinOp::Lss => filtered!(<),
        BinOp::Gte => filtered!(>=),
        BinOp::Lte => filtered!(<=),
        BinOp::Eql => filtered!(==),
        _ => filtered!(!=),
    }
}

/// The loop of [`latest_points`]: for each step, the latest non-stale sample in
/// `(ref - lb, ref]`, valued by `value` (`None`: no point). `capacity`: points to reserve.
///
/// `refs` are in time order, as [`Evaluator::refs`] makes them (grid times shifted by one
/// offset, or one `@` time). Where a step gets no point, no later step before the next sample
/// gets one either (they see the same latest sample, or none): the loop jumps to the first step
/// at or after the next sample. A filter that keeps few points, or pruned stretches read as
/// stale markers (`SeriesCtx::load_pruned`), then cost a jump instead of a step each.
#[inline(always)]
fn latest_where(
    buf: &[Sample],
    refs: &[i64],
    g: Grid,
    lb: i64,
    capacity: usize,
    value: impl Fn(&Sample) -> Option<f64>,
) -> Vec<FPoint> {
    if buf.is_empty() {
        return Vec::new();
    }
    debug_assert!(refs.is_sorted(), "steps out of time order");
    let mut points = Vec::with_capacity(capacity);
    let mut j = 0;
    let mut i = 0;
    while let Some(&r) = refs.get(i) {
        while j < buf.len() && buf[j].t <= r {
            j += 1;
        }
        let point = match j.checked_sub(1).map(|k| &buf[k]) {
            Some(s) if s.t > r - lb && !is_stale(s.v) => value(s),
            _ => None,
        };
        i += 1;
        match point {
            Some(f) => points.push(FPoint { t: g.ts(i - 1), f }),
            None => match buf.get(j) {
                // Usually the next step is past the next sample already (a step per sample).
                Some(next) if refs.get(i).is_some_and(|&r| r < next.t) => {
                    i += refs[i..].partition_point(|&r| r < next.t);
                }
                Some(_) => {}
                None => break,
            },
        }
    }
    points
}

/// The `smoothed` instant selector: the value at each step interpolated between the samples
/// around it, or the last value when no later sample exists yet.
fn smoothed_points(buf: &[Sample], refs: &[i64], g: Grid, lb: i64) -> Vec<FPoint> {
    let floats: Vec<FPoint> =
        buf.iter().filter(|s| !is_stale(s.v)).map(|s| FPoint { t: s.t, f: s.v }).collect();
    let mut points = Vec::new();
    for (i, &r) in refs.iter().enumerate() {
        if let Some(f) = smoothed_value(&floats, r, lb) {
            points.push(FPoint { t: g.ts(i), f });
        }
    }
    points
}

/// The smoothed value of `floats` (sorted, no stale markers) at `r`, from the samples in
/// `(r - lb, r + lb]`.
fn smoothed_value(floats: &[FPoint], r: i64, lb: i64) -> Option<f64> {
    let lo = floats.partition_point(|p| p.t <= r - lb);
    let hi = floats.partition_point(|p| p.t <= r + lb);
    let w = &floats[lo..hi];
    let k = w.partition_point(|p| p.t < r);
    if k < w.len() && w[k].t == r {
        Some(w[k].f)
    } else if k > 0 && k < w.len() {
        Some(interpolate(w[k - 1], w[k], r))
    } else if k > 0 {
        Some(w[k - 1].f)
    } else {
        None
    }
}

/// [`smoothed_points`] for a series with histogram samples: at each step the histogram
/// interpolated between the samples around it (a counter reset in between makes it the later
/// sample scaled as if counted from zero), or the last one when no later sample exists yet.
/// A step whose window `(ref - lb, ref + lb]` holds floats and histograms gives nothing and a
/// warning, as does interpolating between exponential and custom buckets.
#[allow(clippy::too_many_arguments)]
fn smoothed_mixed_points(
    buf: &[Sample],
    hbuf: &[HPoint],
    refs: &[i64],
    g: Grid,
    lb: i64,
    labels: &storage::Labels,
    pos: usize,
    a: &mut crate::annotations::Annotations,
) -> (Vec<FPoint>, Vec<HPoint>) {
    let floats: Vec<Sample> = buf.iter().filter(|s| !is_stale(s.v)).copied().collect();
    let hists: Vec<&HPoint> = hbuf.iter().filter(|p| !is_stale(p.h.sum)).collect();
    let metric = super::labels::metric_name(labels);
    let (mut points, mut hpoints) = (Vec::new(), Vec::new());
    for (i, &r) in refs.iter().enumerate() {
        let window = |t: i64| t > r - lb && t <= r + lb;
        let fw: Vec<FPoint> =
            floats.iter().filter(|s| window(s.t)).map(|s| FPoint { t: s.t, f: s.v }).collect();
        let hw: Vec<&HPoint> = hists.iter().copied().filter(|p| window(p.t)).collect();
        if !fw.is_empty() && !hw.is_empty() {
            a.warn(format!("encountered a mix of histograms and floats for metric name {metric:?}"), pos);
            continue;
        }
        if hw.is_empty() {
            if let Some(f) = smoothed_value(&fw, r, lb) {
                points.push(FPoint { t: g.ts(i), f });
            }
            continue;
        }
        let k = hw.partition_point(|p| p.t < r);
        let h = if k < hw.len() && hw[k].t == r {
            hw[k].h.clone()
        } else if k > 0 && k < hw.len() {
            let gauge = |p: &HPoint| p.h.counter_reset_hint == CounterResetHint::Gauge;
            let is_counter = !(gauge(hw[k - 1]) && gauge(hw[k]));
            let mixed_schemas = format!(
                "vector contains a mix of histograms with exponential and custom buckets schemas for metric name {metric:?}"
            );
            // Exponential and custom buckets cannot be interpolated (checked before any reset
            // detection, which would call the change of schema a reset).
            if hw[k - 1].h.uses_custom_buckets() != hw[k].h.uses_custom_buckets() {
                a.warn(mixed_schemas, pos);
                continue;
            }
            let interpolated =
                super::range_hist::interpolate_histograms(hw[k - 1], hw[k], r, is_counter, |res| {
                    match res {
                        Ok(Some(op)) => {
                            a.info(format!("mismatched custom buckets were reconciled during {op}"), pos)
                        }
                        Ok(None) => {}
                        Err(()) => a.warn(mixed_schemas.clone(), pos),
                    }
                    true
                });
            match interpolated {
                Some(h) => Arc::new(h),
                None => continue,
            }
        } else if k > 0 {
            hw[k - 1].h.clone()
        } else {
            continue;
        };
        hpoints.push(HPoint { t: g.ts(i), h });
    }
    (points, hpoints)
}

/// Extends the samples of an anchored or smoothed range to its boundaries (Prometheus'
/// `extendFloats`): a point at `mint` (the last sample at or before it, or for smoothed ranges
/// the value interpolated there) and one at `maxt`, with the samples strictly inside between.
pub(crate) fn extend_floats(floats: &[FPoint], mint: i64, maxt: i64, smoothed: bool) -> Vec<FPoint> {
    if floats.is_empty() {
        return Vec::new();
    }
    let mut last = floats.len() - 1;
    let mut first = floats[..last].partition_point(|p| p.t <= mint).saturating_sub(1);
    if smoothed {
        last = floats[..last].partition_point(|p| p.t < maxt);
    }
    if floats[last].t <= mint {
        return Vec::new();
    }
    let left = pick_left(floats, first, mint, smoothed);
    let right = pick_right(floats, last, maxt, smoothed);
    if floats[first].t <= mint {
        first += 1;
    }
    let mut out = Vec::with_capacity(last.saturating_sub(first) + 3);
    out.push(FPoint { t: mint, f: left });
    if floats[last].t >= maxt {
        if last > first {
            out.extend_from_slice(&floats[first..last]);
        }
    } else if last >= first {
        out.extend_from_slice(&floats[first..=last]);
    }
    out.push(FPoint { t: maxt, f: right });
    out
}

/// The value at the left boundary: interpolated for smoothed ranges, else the first sample.
pub(crate) fn pick_left(floats: &[FPoint], first: usize, start: i64, smoothed: bool) -> f64 {
    if smoothed && floats[first].t < start && first + 1 < floats.len() {
        return interpolate(floats[first], floats[first + 1], start);
    }
    floats[first].f
}

/// The value at the right boundary: interpolated for smoothed ranges, else the last sample.
pub(crate) fn pick_right(floats: &[FPoint], last: usize, end: i64, smoothed: bool) -> f64 {
    if smoothed && last > 0 && floats[last].t > end {
        return interpolate(floats[last - 1], floats[last], end);
    }
    floats[last].f
}

/// [`latest_points`] for a series that has histogram samples: for each step the latest sample
/// of either kind in `(ref - lb, ref]`, unless it is a stale marker (`sts`: the start
/// timestamps of both kinds, needed for [`Pick::StartTimestamp`] only).
fn latest_mixed_points(
    buf: &[Sample],
    sts: &[StartTimestamp],
    hbuf: &[HPoint],
    refs: &[i64],
    g: Grid,
    lb: i64,
    pick: Pick,
) -> (Vec<FPoint>, Vec<HPoint>) {
    let (mut points, mut hpoints) = (Vec::new(), Vec::new());
    for (i, &r) in refs.iter().enumerate() {
        let fj = buf.partition_point(|s| s.t <= r);
        let hj = hbuf.partition_point(|s| s.t <= r);
        let f = fj.checked_sub(1).map(|k| buf[k]);
        let h = hj.checked_sub(1).map(|k| &hbuf[k]);
        let t = g.ts(i);
        // The float is the latest sample unless a histogram came after it; a stale float
        // hides any older histogram.
        let float_latest = f.is_some_and(|f| h.is_none_or(|h| h.t < f.t));
        if let (true, Some(f)) = (float_latest, f) {
            if f.t > r - lb && !is_stale(f.v) {
                let v = match pick {
                    Pick::Value => f.v,
                    Pick::Timestamp => f.t as f64 / 1000.0,
                    Pick::StartTimestamp => start_timestamps::at(sts, f.t) as f64 / 1000.0,
                };
                points.push(FPoint { t, f: v });
            }
            continue;
        }
        if let Some(h) = h.filter(|h| h.t > r - lb) {
            match pick {
                Pick::Value => hpoints.push(HPoint { t, h: h.h.clone() }),
                Pick::Timestamp => points.push(FPoint { t, f: h.t as f64 / 1000.0 }),
                Pick::StartTimestamp => {
                    points.push(FPoint { t, f: start_timestamps::at(sts, h.t) as f64 / 1000.0 })
                }
            }
        }
    }
    (points, hpoints)
}

#[cfg(test)]
mod tests {
    use storage::FloatHistogram;

    use super::*;

    fn hpoint(t: i64, count: f64, bucket: f64, hint: CounterResetHint) -> HPoint {
        let h = FloatHistogram {
            counter_reset_hint: hint,
            count,
            sum: count,
            positive: vec![(0, bucket)],
            ..Default::default()
        };
        HPoint { t, h: Arc::new(h) }
    }

    #[test]
    fn statistics_reading_makes_hints_explicit_and_drops_buckets() {
        use CounterResetHint::*;
        let mut hs = vec![
            hpoint(1, 5.0, 5.0, Unknown),
            hpoint(2, 6.0, 6.0, NotReset),
            // Only the bucket shows the reset.
            hpoint(3, 7.0, 1.0, Unknown),
            hpoint(4, 8.0, 2.0, Unknown),
        ];
        explicit_reset_hints(&mut hs);
        let hints: Vec<CounterResetHint> = hs.iter().map(|p| p.h.counter_reset_hint).collect();
        assert_eq!(hints, vec![Unknown, NotReset, Reset, NotReset]);
        assert!(hs.iter().all(|p| p.h.positive.is_empty()));
        assert_eq!(hs[2].h.count, 7.0);
    }
}
