//! Start timestamps ("created timestamps") of samples, and what they tell about counters.
//!
//! A cumulative counter's start timestamp (ST) is when it last started from zero; a delta
//! sample's is the start of the interval its value covers. 0 means unknown. Prometheus uses them
//! in `rate`, `increase`, `irate` and `resets` to see counter resets the values hide, in
//! `rate`/`increase` to count from zero at a start inside the range, and `start_timestamp()`
//! returns them. They are read from storage only for those functions, and only for samples
//! read by a selector: a subquery's points have none. The reading is
//! `SeriesCtx::load_start_timestamps`, next to the other readers in `selector`; this module is
//! the rules, a leaf.

use storage::query::StartTimestamp;

use super::FPoint;

/// Lines the (sparse, time-ordered) start timestamps up with `points`: `out[i]` is the start
/// timestamp of `points[i]`, 0 if unknown. `out` stays empty when there are none at all, so
/// functions can tell "no start timestamps" from a slice's emptiness.
pub(crate) fn align(points: &[FPoint], sts: &[StartTimestamp], out: &mut Vec<i64>) {
    align_times(points.iter().map(|p| p.t), sts, out);
}

/// [`align`] for samples given by their timestamps (histogram samples).
pub(crate) fn align_times(times: impl Iterator<Item = i64>, sts: &[StartTimestamp], out: &mut Vec<i64>) {
    out.clear();
    if sts.is_empty() {
        return;
    }
    let mut j = 0;
    out.extend(times.map(|t| {
        while j < sts.len() && sts[j].t < t {
            j += 1;
        }
        match sts.get(j) {
            Some(s) if s.t == t => s.st,
            _ => 0,
        }
    }));
}

/// The start timestamp of the sample at `t`, 0 if unknown (`sts` ordered by time).
pub(crate) fn at(sts: &[StartTimestamp], t: i64) -> i64 {
    match sts.binary_search_by_key(&t, |s| s.t) {
        Ok(i) => sts[i].st,
        Err(_) => 0,
    }
}

/// Whether the current sample's start timestamp says its counter restarted after the previous
/// sample (Prometheus' `isStartTimestampReset`).
pub(crate) fn is_reset(prev_st: i64, prev_t: i64, cur_st: i64, cur_t: i64) -> bool {
    // Unknown, invalid (after the sample), or OTel's "start unknown" (equal to the sample).
    if cur_st == 0 || cur_st >= cur_t {
        return false;
    }
    // Counting since before the previous sample: the same run.
    if cur_st < prev_t {
        return false;
    }
    if cur_st > prev_t {
        return true;
    }
    // The start is the previous sample itself: a delta sample (a reset each time) or a
    // cumulative counter whose first sample's start was unknown (no reset). Only the former has
    // a known, valid start on the previous sample.
    prev_st != 0 && prev_st < prev_t
}

/// Whether the current sample claims to have started counting before the previous sample was
/// taken, without belonging to the previous sample's run: the two samples' counts overlap
/// (Prometheus' `checkStartTimeOverlap`).
pub(crate) fn overlaps(prev_st: i64, prev_t: i64, cur_st: i64) -> bool {
    cur_st != 0 && cur_st < prev_t && cur_st != prev_st
}

/// True if any two neighbouring points of a window overlap by their start timestamps.
pub(crate) fn any_overlap(points: &[FPoint], sts: &[i64]) -> bool {
    points.windows(2).zip(sts.windows(2)).any(|(p, s)| overlaps(s[0], p[0].t, s[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_follow_prometheus_rules() {
        // Cumulative counter whose start moved past the previous sample: a reset.
        assert!(is_reset(100, 200, 250, 300));
        // Same run (start before the previous sample).
        assert!(!is_reset(100, 200, 100, 300));
        // Unknown, invalid, or "unknown start" (ST == T).
        assert!(!is_reset(100, 200, 0, 300));
        assert!(!is_reset(100, 200, 400, 300));
        assert!(!is_reset(100, 200, 300, 300));
        // Start at the previous sample: delta (reset) vs cumulative with unknown first start.
        assert!(is_reset(100, 200, 200, 300));
        assert!(!is_reset(0, 200, 200, 300));
        assert!(!is_reset(200, 200, 200, 300));
        assert!(!is_reset(250, 200, 200, 300));
    }

    #[test]
    fn overlaps_only_when_starting_inside_the_previous_run() {
        assert!(overlaps(0, 120, 60));
        assert!(!overlaps(60, 120, 60));
        assert!(!overlaps(60, 120, 120));
        assert!(!overlaps(60, 120, 0));
    }

    #[test]
    fn align_fills_unknown_with_zero() {
        let pts: Vec<FPoint> = [10, 20, 30, 40].iter().map(|&t| FPoint { t, f: 0.0 }).collect();
        let sts = [StartTimestamp { t: 20, st: 5 }, StartTimestamp { t: 40, st: 7 }];
        let mut out = Vec::new();
        align(&pts, &sts, &mut out);
        assert_eq!(out, vec![0, 5, 0, 7]);
        align(&pts, &[], &mut out);
        assert!(out.is_empty());
        assert_eq!(at(&sts, 40), 7);
        assert_eq!(at(&sts, 30), 0);
    }
}
