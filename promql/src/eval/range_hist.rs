//! Range functions over windows that hold native histograms (Prometheus' histogram branches of
//! `rate`, `increase`, `delta`, `irate`, `idelta`, the `*_over_time` functions, `changes` and
//! `resets`). Windows with floats only never get here: `range_fn` calls [`apply`] only for a
//! series that has histogram samples, so float-only queries pay nothing for it.

use std::sync::Arc;

use storage::{CounterResetHint, FloatHistogram, Labels};

use super::float_histogram as fh;
use super::histogram_sum;
use super::rate::Bounds;
use super::{FPoint, HPoint, labels, start_timestamps};
use crate::annotations::Annotations;

/// The value of a window: a float or a histogram.
pub(crate) enum Out {
    F(f64),
    H(Arc<FloatHistogram>),
}

/// One window with histogram samples and what it needs to report annotations.
pub(crate) struct HWindow<'w> {
    pub floats: &'w [FPoint],
    pub hists: &'w [HPoint],
    /// Start timestamps of `hists` (0 = unknown), or empty when none are known or used.
    pub sts: &'w [i64],
    pub bounds: Bounds,
    pub labels: &'w Labels,
    /// Position of the range argument (annotations point there).
    pub pos: usize,
}

impl HWindow<'_> {
    fn metric(&self) -> &str {
        labels::metric_name(self.labels)
    }

    fn mixed(&self, a: &mut Annotations) {
        a.warn(
            format!("encountered a mix of histograms and floats for metric name {:?}", self.metric()),
            self.pos,
        );
    }

    fn mixed_schemas(&self, a: &mut Annotations) {
        a.warn(
            format!(
                "vector contains a mix of histograms with exponential and custom buckets schemas for metric name {:?}",
                self.metric()
            ),
            self.pos,
        );
    }
}

/// Functions that read only floats and ignore histograms (with an info when a window mixes
/// both; a window of histograms only gives nothing).
const FLOAT_ONLY: &[&str] = &[
    "min_over_time",
    "max_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "quantile_over_time",
    "mad_over_time",
    "ts_of_min_over_time",
    "ts_of_max_over_time",
    "deriv",
    "predict_linear",
    "double_exponential_smoothing",
];

/// Whether `name` ignores histograms: the caller then evaluates the float samples alone.
pub(crate) fn ignores_histograms(name: &str) -> bool {
    FLOAT_ONLY.contains(&name)
}

/// Evaluates `name` over a window holding at least one histogram; `None` for no result.
pub(crate) fn apply(name: &str, w: &HWindow<'_>, a: &mut Annotations) -> Option<Out> {
    let (fl, hs) = (w.floats, w.hists);
    match name {
        "rate" | "increase" | "delta" => {
            if !fl.is_empty() {
                w.mixed(a);
                return None;
            }
            rate(hs, w, name != "delta", name == "rate", a).map(|h| Out::H(Arc::new(h)))
        }
        "irate" | "idelta" => instant(w, name == "irate", a),
        "sum_over_time" | "avg_over_time" => {
            if !fl.is_empty() {
                w.mixed(a);
                return None;
            }
            sum_or_avg(hs, name == "avg_over_time", w, a).map(|h| Out::H(Arc::new(h)))
        }
        "count_over_time" => Some(Out::F((fl.len() + hs.len()) as f64)),
        "present_over_time" | "absent_over_time" => Some(Out::F(1.0)),
        "last_over_time" | "ts_of_last_over_time" | "first_over_time" | "ts_of_first_over_time" => {
            let last = name.contains("last");
            let f = if last { fl.last() } else { fl.first() };
            let h = if last { hs.last() } else { hs.first() };
            let pick_h = match (f, h) {
                (Some(f), Some(h)) => (h.t > f.t) == last,
                (None, Some(_)) => true,
                _ => false,
            };
            let ts = name.starts_with("ts_of");
            match (pick_h, f, h) {
                (true, _, Some(h)) if ts => Some(Out::F(h.t as f64 / 1000.0)),
                (true, _, Some(h)) => Some(Out::H(h.h.clone())),
                (false, Some(f), _) if ts => Some(Out::F(f.t as f64 / 1000.0)),
                (false, Some(f), _) => Some(Out::F(f.f)),
                _ => None,
            }
        }
        "changes" | "resets" => Some(Out::F(changes_or_resets(fl, hs, w.sts, name == "resets") as f64)),
        _ => None,
    }
}

/// Histogram `rate`/`increase`/`delta` (Prometheus' `histogramRate` plus the extrapolation of
/// `extrapolatedRate`). With start timestamps (counters only) a first sample whose counter
/// started inside the range is counted from zero at that start instead of extrapolated, so one
/// sample is enough then.
fn rate(
    hs: &[HPoint],
    w: &HWindow<'_>,
    is_counter: bool,
    is_rate: bool,
    a: &mut Annotations,
) -> Option<FloatHistogram> {
    let (first, last) = (hs.first()?, hs.last()?);
    let sts = if is_counter { w.sts } else { &[] };
    let mut result = if hs.len() > 1 { Some(histogram_rate(hs, sts, w, is_counter, a)?) } else { None };
    let b = w.bounds;
    let gaps = (hs.len() - 1) as f64;
    let mut sampled = (last.t - first.t) as f64 / 1000.0;
    let avg_gap = if hs.len() > 1 { sampled / gaps } else { 0.0 };
    let threshold = avg_gap * 1.1;
    let mut to_start = (first.t - b.range_start) as f64 / 1000.0;
    let mut to_end = (b.range_end - last.t) as f64 / 1000.0;
    match sts.first() {
        // The counter started inside the range (whose start is exclusive): assume a zero
        // sample at its start.
        Some(&st) if st != 0 && st > b.range_start && st < first.t => {
            to_start = 0.0;
            sampled = (last.t - st) as f64 / 1000.0;
            result = Some(match result {
                None => (*first.h).clone(),
                Some(h) => combine_or_warn(&h, &first.h, true, w, a)?,
            });
        }
        _ if hs.len() == 1 => return None,
        _ => {
            if to_start >= threshold {
                to_start = avg_gap / 2.0;
            }
            if let Some(h) = &result
                && is_counter
                && h.count > 0.0
                && first.h.count >= 0.0
            {
                // Never extrapolate below the counter's zero point (judged by the count).
                let to_zero = sampled * (first.h.count / h.count);
                if to_zero < to_start {
                    to_start = to_zero;
                }
            }
        }
    }
    if to_end >= threshold {
        to_end = avg_gap / 2.0;
    }
    let mut h = result?;
    let mut factor = if sampled != 0.0 { (sampled + to_start + to_end) / sampled } else { 1.0 };
    if is_rate {
        factor /= b.range_secs;
    }
    fh::scale(&mut h, factor);
    Some(h)
}

/// The increase from the first to the last of `hs` (at least two), corrected for counter
/// resets (seen in the buckets, the hints or the start timestamps `sts`) for counters
/// (Prometheus' `histogramRate`). `None`, with a warning, if the samples cannot be combined.
fn histogram_rate(
    hs: &[HPoint],
    sts: &[i64],
    w: &HWindow<'_>,
    is_counter: bool,
    a: &mut Annotations,
) -> Option<FloatHistogram> {
    let (first, last) = (&hs[0], &hs[hs.len() - 1]);
    let metric = w.metric();
    let st_reset =
        |i: usize| i + 1 < sts.len() && start_timestamps::is_reset(sts[i], hs[i].t, sts[i + 1], hs[i + 1].t);
    if is_counter && hs.iter().any(|p| p.h.counter_reset_hint == CounterResetHint::Gauge) {
        a.warn(format!("this native histogram metric is not a counter: {metric:?}"), w.pos);
    }
    // A reset between the first two samples: the first one's layout does not matter.
    let mut prev: FloatHistogram = (*first.h).clone();
    if is_counter && (st_reset(0) || fh::detect_reset(&hs[1].h, &first.h)) {
        prev = FloatHistogram {
            schema: hs[1].h.schema,
            custom_values: hs[1].h.custom_values.clone(),
            ..FloatHistogram::default()
        };
    }
    let custom = prev.uses_custom_buckets();
    if hs[1..].iter().any(|p| p.h.uses_custom_buckets() != custom) {
        w.mixed_schemas(a);
        return None;
    }
    // The coarsest schema among the samples that take part (the first one only if no reset
    // follows it).
    let middle = if is_counter { &hs[1..hs.len() - 1] } else { &[] };
    let min_schema = middle.iter().map(|p| p.h.schema).fold(last.h.schema.min(prev.schema), i32::min);
    let start = if custom { (*last.h).clone() } else { fh::reduce_resolution(&last.h, min_schema) };
    let (mut h, info) = match fh::sub(&start, &prev) {
        Ok(x) => x,
        Err(_) => {
            w.mixed_schemas(a);
            return None;
        }
    };
    if info.reconciled_custom_buckets {
        a.info("mismatched custom buckets were reconciled during subtraction", w.pos);
    }
    if is_counter {
        // `prev` starts as the first sample, or the empty one if a reset follows it (which then
        // adds nothing).
        let mut prev = &prev;
        let mut overlap_warned = false;
        for (i, p) in hs.iter().enumerate().skip(1) {
            if !overlap_warned && i < sts.len() && start_timestamps::overlaps(sts[i - 1], hs[i - 1].t, sts[i])
            {
                overlap_warned = true;
                a.warn(
                    format!("sample has start time that overlaps with previous sample timestamp for metric {metric:?}"),
                    w.pos,
                );
            }
            if st_reset(i - 1) || fh::detect_reset(&p.h, prev) {
                match fh::add(&h, prev) {
                    Ok((sum, info)) => {
                        if info.reconciled_custom_buckets {
                            a.info("mismatched custom buckets were reconciled during addition", w.pos);
                        }
                        h = sum;
                    }
                    Err(_) => {
                        w.mixed_schemas(a);
                        return None;
                    }
                }
            }
            prev = &p.h;
        }
    } else if first.h.counter_reset_hint != CounterResetHint::Gauge
        || last.h.counter_reset_hint != CounterResetHint::Gauge
    {
        a.warn(format!("this native histogram metric is not a gauge: {metric:?}"), w.pos);
    }
    h.counter_reset_hint = CounterResetHint::Gauge;
    fh::compact(&mut h);
    Some(h)
}

/// `rate`, `increase` or `delta` of an `anchored` or `smoothed` range with histograms
/// (Prometheus' `extendedHistogramRate`): the difference between the histograms at the range
/// boundaries (for `anchored` the last sample at or before the range start and the last sample
/// in the range; for `smoothed` the values interpolated at both boundaries), corrected for the
/// counter resets in between, without extrapolation. `hs` holds the samples of the extended
/// window (the look-back delta before the range, and for `smoothed` after it).
pub(crate) fn extended_rate(name: &str, w: &HWindow<'_>, smoothed: bool, a: &mut Annotations) -> Option<Out> {
    if !w.floats.is_empty() {
        w.mixed(a);
        return None;
    }
    let hs = w.hists;
    if hs.is_empty() {
        return None;
    }
    let (is_counter, is_rate) = (name != "delta", name == "rate");
    let (range_start, range_end) = (w.bounds.range_start, w.bounds.range_end);
    let mut last = hs.len() - 1;
    let first = hs[..last].partition_point(|p| p.t <= range_start).saturating_sub(1);
    if smoothed {
        last = hs[..last].partition_point(|p| p.t < range_end);
    }
    if hs[last].t <= range_start || (smoothed && hs[first].t > range_end) {
        return None;
    }
    // The samples taking part must share one kind of schema; gauges in a counter's range warn.
    let custom = hs[first].h.uses_custom_buckets();
    let mut gauge_seen = false;
    for p in &hs[first..=last] {
        if p.h.uses_custom_buckets() != custom {
            w.mixed_schemas(a);
            return None;
        }
        gauge_seen |= p.h.counter_reset_hint == CounterResetHint::Gauge;
    }
    if is_counter && gauge_seen {
        a.warn(format!("this native histogram metric is not a counter: {:?}", w.metric()), w.pos);
    }
    let left = if smoothed && hs[first].t < range_start {
        interpolate(&hs[first], &hs[first + 1], range_start, is_counter, w, a)?
    } else {
        (*hs[first].h).clone()
    };
    let right = if smoothed && last > 0 && hs[last].t > range_end {
        interpolate(&hs[last - 1], &hs[last], range_end, is_counter, w, a)?
    } else {
        (*hs[last].h).clone()
    };
    let gauge = |h: &FloatHistogram| h.counter_reset_hint == CounterResetHint::Gauge;
    if !is_counter && (!gauge(&left) || !gauge(&right)) {
        a.warn(format!("this native histogram metric is not a gauge: {:?}", w.metric()), w.pos);
    }
    let mut h = combine_or_warn(&right, &left, false, w, a)?;
    if is_counter
        && let Some(correction) =
            reset_correction(hs, first, last, &left, &right, range_start, smoothed, w, a)?
    {
        h = combine_or_warn(&h, &correction, true, w, a)?;
    }
    if is_rate {
        fh::divide(&mut h, w.bounds.range_secs);
    }
    h.counter_reset_hint = CounterResetHint::Gauge;
    fh::compact(&mut h);
    Some(Out::H(Arc::new(h)))
}

/// `a + b` or `a - b` with the annotations Prometheus gives for them; `None` (with a warning)
/// for exponential and custom buckets.
fn combine_or_warn(
    a: &FloatHistogram,
    b: &FloatHistogram,
    add: bool,
    w: &HWindow<'_>,
    ann: &mut Annotations,
) -> Option<FloatHistogram> {
    let res = if add { fh::add(a, b) } else { fh::sub(a, b) };
    match res {
        Ok((h, info)) => {
            if info.reconciled_custom_buckets {
                let op = if add { "addition" } else { "subtraction" };
                ann.info(format!("mismatched custom buckets were reconciled during {op}"), w.pos);
            }
            Some(h)
        }
        Err(_) => {
            w.mixed_schemas(ann);
            None
        }
    }
}

/// The histogram at `t` between samples `p1` and `p2` (Prometheus' `interpolateHistograms`):
/// linear between them, or, for a counter that was reset in between, `p2` scaled as if it
/// had started from zero at `p1`.
fn interpolate(
    p1: &HPoint,
    p2: &HPoint,
    t: i64,
    is_counter: bool,
    w: &HWindow<'_>,
    a: &mut Annotations,
) -> Option<FloatHistogram> {
    interpolate_histograms(p1, p2, t, is_counter, |res| match res {
        Ok(info) => {
            if let Some(op) = info {
                a.info(format!("mismatched custom buckets were reconciled during {op}"), w.pos);
            }
            true
        }
        Err(()) => {
            w.mixed_schemas(a);
            false
        }
    })
}

/// The interpolation of [`interpolate`], reporting through `note`: `Ok(Some(op))` when custom
/// bounds were reconciled in `op`, `Err(())` for exponential and custom buckets (then the
/// result is `None`). `note` returns false to give up.
pub(crate) fn interpolate_histograms(
    p1: &HPoint,
    p2: &HPoint,
    t: i64,
    is_counter: bool,
    mut note: impl FnMut(Result<Option<&'static str>, ()>) -> bool,
) -> Option<FloatHistogram> {
    if t == p1.t {
        return Some((*p1.h).clone());
    }
    if t == p2.t {
        return Some((*p2.h).clone());
    }
    let fraction = (t - p1.t) as f64 / (p2.t - p1.t) as f64;
    if is_counter && fh::detect_reset(&p2.h, &p1.h) {
        let mut h = (*p2.h).clone();
        fh::scale(&mut h, fraction);
        return Some(h);
    }
    let mut h = match fh::sub(&p2.h, &p1.h) {
        Ok((h, info)) => {
            if info.reconciled_custom_buckets && !note(Ok(Some("subtraction"))) {
                return None;
            }
            h
        }
        Err(_) => {
            note(Err(()));
            return None;
        }
    };
    fh::scale(&mut h, fraction);
    match fh::add(&h, &p1.h) {
        Ok((h, info)) => {
            if info.reconciled_custom_buckets && !note(Ok(Some("addition"))) {
                return None;
            }
            Some(h)
        }
        Err(_) => {
            note(Err(()));
            None
        }
    }
}

/// The sum of the histograms before each counter reset strictly inside the range of an
/// extended rate (Prometheus' `correctForCounterResetsHistogram`); `Ok(None)` if there was no
/// reset, `None` if adding up failed (with a warning).
#[allow(clippy::too_many_arguments)]
fn reset_correction(
    hs: &[HPoint],
    first_idx: usize,
    last_idx: usize,
    left: &FloatHistogram,
    right: &FloatHistogram,
    range_start: i64,
    smoothed: bool,
    w: &HWindow<'_>,
    a: &mut Annotations,
) -> Option<Option<FloatHistogram>> {
    // The first sample is represented by `left`.
    let mut first = first_idx + 1;
    let mut prev: &FloatHistogram = left;
    if smoothed
        && hs[first_idx].t < range_start
        && first_idx + 1 < hs.len()
        && fh::detect_reset(&hs[first_idx + 1].h, &hs[first_idx].h)
    {
        // The left interpolation spanned that reset already: the sample after it is the anchor.
        prev = &hs[first_idx + 1].h;
        first += 1;
    }
    // The last sample is represented by `right` (a copy or an interpolation inheriting its
    // hint), so it is left out of the loop.
    if first > last_idx {
        return Some(None);
    }
    let mut correction: Option<FloatHistogram> = None;
    let add = |c: &mut Option<FloatHistogram>, h: &FloatHistogram, a: &mut Annotations| -> bool {
        *c = match c.take() {
            None => Some(h.clone()),
            Some(sum) => match combine_or_warn(&sum, h, true, w, a) {
                Some(x) => Some(x),
                None => return false,
            },
        };
        true
    };
    for p in &hs[first..last_idx] {
        if fh::detect_reset(&p.h, prev) && !add(&mut correction, prev, a) {
            return None;
        }
        prev = &p.h;
    }
    if fh::detect_reset(right, prev) && !add(&mut correction, prev, a) {
        return None;
    }
    Some(correction)
}

/// `irate`/`idelta` over a window with histograms: the last two samples of either kind.
fn instant(w: &HWindow<'_>, is_rate: bool, a: &mut Annotations) -> Option<Out> {
    // The last two samples in time order, each a float or a histogram.
    let mut tail: Vec<(i64, Option<&HPoint>, f64)> = Vec::with_capacity(4);
    tail.extend(w.floats.iter().rev().take(2).map(|p| (p.t, None, p.f)));
    tail.extend(w.hists.iter().rev().take(2).map(|p| (p.t, Some(p), 0.0)));
    // Start timestamps are known here for histogram samples only (mixed pairs give nothing).
    let st_of = |t: i64| {
        let i = w.hists.partition_point(|p| p.t < t);
        w.sts.get(i).copied().filter(|_| w.hists.get(i).is_some_and(|p| p.t == t)).unwrap_or(0)
    };
    tail.sort_by_key(|x| x.0);
    if tail.len() < 2 {
        return None;
    }
    let (prev, last) = (tail[tail.len() - 2], tail[tail.len() - 1]);
    let interval = (last.0 - prev.0) as f64 / 1000.0;
    match (prev.1, last.1) {
        (None, None) => {
            let v = if is_rate && last.2 < prev.2 { last.2 } else { last.2 - prev.2 };
            if is_rate {
                return (interval != 0.0).then(|| Out::F(v / interval));
            }
            Some(Out::F(v))
        }
        (Some(p), Some(l)) => {
            let metric = w.metric();
            let gauge = |h: &FloatHistogram| h.counter_reset_hint == CounterResetHint::Gauge;
            if is_rate && (gauge(&p.h) || gauge(&l.h)) {
                a.warn(format!("this native histogram metric is not a counter: {metric:?}"), w.pos);
            }
            if !is_rate && (!gauge(&p.h) || !gauge(&l.h)) {
                a.warn(format!("this native histogram metric is not a gauge: {metric:?}"), w.pos);
            }
            let st_reset = start_timestamps::is_reset(st_of(p.t), p.t, st_of(l.t), l.t);
            let mut h = if is_rate && (st_reset || fh::detect_reset(&l.h, &p.h)) {
                (*l.h).clone()
            } else {
                match fh::sub(&l.h, &p.h) {
                    Ok((h, info)) => {
                        if info.reconciled_custom_buckets {
                            a.info("mismatched custom buckets were reconciled during subtraction", w.pos);
                        }
                        h
                    }
                    Err(_) => {
                        w.mixed_schemas(a);
                        return None;
                    }
                }
            };
            h.counter_reset_hint = CounterResetHint::Gauge;
            fh::compact(&mut h);
            if is_rate {
                if interval == 0.0 {
                    return None;
                }
                fh::divide(&mut h, interval);
            }
            Some(Out::H(Arc::new(h)))
        }
        _ => {
            w.mixed(a);
            None
        }
    }
}

/// `sum_over_time` or `avg_over_time` of histograms (`histogram_sum`).
fn sum_or_avg(hs: &[HPoint], avg: bool, w: &HWindow<'_>, a: &mut Annotations) -> Option<FloatHistogram> {
    let refs: Vec<&FloatHistogram> = hs.iter().map(|p| &*p.h).collect();
    match histogram_sum::sum_or_mean(&refs, avg) {
        Ok((h, info)) => {
            if info.reconciled_custom_buckets {
                a.info("mismatched custom buckets were reconciled during aggregation", w.pos);
            }
            if info.counter_reset_collision {
                a.warn("conflicting counter resets during histogram aggregation", w.pos);
            }
            Some(h)
        }
        Err(_) => {
            w.mixed_schemas(a);
            None
        }
    }
}

/// `changes` (a different value, or a switch between float and histogram) or `resets` (a lower
/// float, a histogram reset, or a switch of kind) over floats and histograms in time order.
fn changes_or_resets(fl: &[FPoint], hs: &[HPoint], sts: &[i64], resets: bool) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    // The previous sample: value, histogram, time and start timestamp (histograms only).
    let mut prev: Option<(f64, Option<&FloatHistogram>, i64, i64)> = None;
    while i < fl.len() || j < hs.len() {
        let cur = if j >= hs.len() || (i < fl.len() && fl[i].t < hs[j].t) {
            i += 1;
            (fl[i - 1].f, None, fl[i - 1].t, 0)
        } else {
            j += 1;
            (0.0, Some(&*hs[j - 1].h), hs[j - 1].t, sts.get(j - 1).copied().unwrap_or(0))
        };
        if let Some(p) = prev {
            let hit = match (p.1, cur.1) {
                (None, None) if resets => cur.0 < p.0,
                (None, None) => p.0 != cur.0 && !(p.0.is_nan() && cur.0.is_nan()),
                (Some(ph), Some(ch)) if resets => {
                    start_timestamps::is_reset(p.3, p.2, cur.3, cur.2) || fh::detect_reset(ch, ph)
                }
                (Some(ph), Some(ch)) => !fh::same(ph, ch),
                _ => true,
            };
            n += usize::from(hit);
        }
        prev = Some(cur);
    }
    n
}
