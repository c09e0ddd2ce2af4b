//! Sums and means of several native histograms with Prometheus' precision: every field (count,
//! sum, zero bucket, each bucket) is summed with Kahan compensation, and a mean switches to an
//! incremental computation where a plain sum would overflow, exactly like the float `sum` and
//! `avg` (`numeric::avg`). Used by the `sum`/`avg` aggregations and `sum_over_time`/
//! `avg_over_time`.

use std::collections::BTreeMap;

use storage::{CounterResetHint, FloatHistogram};

use super::FPoint;
use super::float_histogram::{self as fh, Combined, Incompatible};
use super::numeric::{avg, kahan_inc};

/// The sum (or with `mean`, the mean) of `hs` (at least one), compacted, with what combining
/// them noticed; an error if exponential and custom-bucket histograms meet.
pub(crate) fn sum_or_mean(
    hs: &[&FloatHistogram],
    mean: bool,
) -> Result<(FloatHistogram, Combined), Incompatible> {
    let Some((first, rest)) = hs.split_first() else {
        return Ok((FloatHistogram::default(), Combined::default()));
    };
    // The layout (schema, zero bucket, custom bounds) and hint of the result, and what Prometheus
    // reports, come from adding them up in order.
    let mut layout = (*first).clone();
    let mut info = Combined::default();
    for h in rest {
        let (next, i) = fh::add(&layout, h)?;
        info.reconciled_custom_buckets |= i.reconciled_custom_buckets;
        layout = next;
    }
    // Prometheus warns when any input is hinted `reset` and any other `not_reset`, whatever
    // comes between them (a gauge absorbs both in the result's hint, not in the warning).
    let hinted = |hint| hs.iter().any(|h| h.counter_reset_hint == hint);
    info.counter_reset_collision = hinted(CounterResetHint::Reset) && hinted(CounterResetHint::NotReset);
    let same: Vec<FloatHistogram> = hs.iter().map(|h| fh::to_layout(h, &layout)).collect();
    // Every field as a column of values, one per histogram (0 where a bucket is missing).
    let mut columns: BTreeMap<(bool, i32), Vec<FPoint>> = BTreeMap::new();
    for (i, h) in same.iter().enumerate() {
        for (neg, buckets) in [(false, &h.positive), (true, &h.negative)] {
            for &(idx, c) in buckets {
                let col =
                    columns.entry((neg, idx)).or_insert_with(|| vec![FPoint { t: 0, f: 0.0 }; hs.len()]);
                col[i].f = c;
            }
        }
    }
    let column = |get: &dyn Fn(&FloatHistogram) -> f64| -> Vec<FPoint> {
        same.iter().map(|h| FPoint { t: 0, f: get(h) }).collect()
    };
    let combine = |w: &[FPoint]| -> f64 {
        if mean {
            return avg(w);
        }
        let (mut sum, mut c) = (0.0, 0.0);
        for p in w {
            (sum, c) = kahan_inc(p.f, sum, c);
        }
        if sum.is_infinite() { sum } else { sum + c }
    };
    let mut out = layout;
    out.count = combine(&column(&|h| h.count));
    out.sum = combine(&column(&|h| h.sum));
    out.zero_count = combine(&column(&|h| h.zero_count));
    out.positive.clear();
    out.negative.clear();
    for ((neg, idx), col) in &columns {
        let v = combine(col);
        if *neg { out.negative.push((*idx, v)) } else { out.positive.push((*idx, v)) }
    }
    fh::compact(&mut out);
    Ok((out, info))
}
