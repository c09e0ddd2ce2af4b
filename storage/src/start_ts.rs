//! Start timestamps ("created timestamps") of samples, kept sparse: as runs, per series.
//!
//! The query contract ([`crate::Querier::start_timestamps`]) is per sample: a sample has a start
//! timestamp or it has none, and a sample written without one never inherits its neighbour's.
//! Most series never carry one, and a counter's start timestamp stays the same until it resets,
//! so a source (a head, a partition file) stores, per series that has any, a list of
//! [`StRun`]s: "every sample of this series *in this source* with a timestamp in
//! `[first_t, last_t]` has start timestamp `st`". Samples not covered have none. A counter
//! scraped with a constant start timestamp is one run, however many samples it has; a series
//! without start timestamps has no list at all.
//!
//! Because a run covers the samples of its own source, reading start timestamps resolves runs
//! against that source's samples ([`StRuns::resolve`]), and sources are merged sample by sample
//! with the newest write winning ([`merge`]), including a newer write that has no start
//! timestamp.

use std::collections::BTreeMap;

use crate::encoding::varint::{get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};
use crate::query::StartTimestamp;
use crate::types::Sample;

/// Every sample of a series in one source with a timestamp in `[first_t, last_t]` has start
/// timestamp `st` (never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StRun {
    /// Oldest timestamp covered (inclusive).
    pub first_t: i64,
    /// Newest timestamp covered (inclusive).
    pub last_t: i64,
    /// The start timestamp of the covered samples.
    pub st: i64,
}

/// The start-timestamp runs of one series in one source: sorted by time, not overlapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StRuns {
    runs: Vec<StRun>,
}

impl StRuns {
    /// True if no sample has a start timestamp.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The runs, in time order.
    #[cfg(test)]
    pub fn runs(&self) -> &[StRun] {
        &self.runs
    }

    /// Records a write of a sample at `t` with start timestamp `st` (0: none), where
    /// `prev_newest` is the series' newest sample time in this source before the write (None if
    /// it had none). The write wins over what was recorded for `t` before, including when it
    /// has no start timestamp. An in-order write extends the last run when it continues it, so
    /// a constant start timestamp stays one run.
    pub fn record(&mut self, t: i64, st: i64, prev_newest: Option<i64>) {
        if prev_newest.is_none_or(|p| t > p) {
            if st == 0 {
                return;
            }
            if let Some(last) = self.runs.last_mut()
                && last.st == st
                && Some(last.last_t) == prev_newest
            {
                last.last_t = t;
                return;
            }
            self.runs.push(StRun { first_t: t, last_t: t, st });
            return;
        }
        // Out of order or a rewrite: the run covering `t` (if any) loses `t`.
        let k = self.runs.partition_point(|r| r.last_t < t);
        match self.runs.get(k).copied() {
            Some(r) if r.first_t <= t => {
                if r.st == st {
                    return;
                }
                let left = (r.first_t < t).then(|| StRun { first_t: r.first_t, last_t: t - 1, st: r.st });
                let mid = (st != 0).then_some(StRun { first_t: t, last_t: t, st });
                let right = (t < r.last_t).then(|| StRun { first_t: t + 1, last_t: r.last_t, st: r.st });
                self.runs.splice(k..=k, left.into_iter().chain(mid).chain(right));
            }
            _ if st != 0 => self.runs.insert(k, StRun { first_t: t, last_t: t, st }),
            _ => {}
        }
    }

    /// The runs of `samples` (sorted, unique timestamps) whose start timestamps are `starts`
    /// (sorted by time; each at the time of one of the samples): consecutive samples with the
    /// same start timestamp form one run.
    pub fn from_samples(samples: &[Sample], starts: &[StartTimestamp]) -> StRuns {
        let mut runs: Vec<StRun> = Vec::new();
        let mut j = 0;
        let mut prev_t = None;
        for s in samples {
            while starts.get(j).is_some_and(|x| x.t < s.t) {
                j += 1;
            }
            let st = starts.get(j).filter(|x| x.t == s.t).map_or(0, |x| x.st);
            if st != 0 {
                match runs.last_mut() {
                    Some(r) if r.st == st && Some(r.last_t) == prev_t => r.last_t = s.t,
                    _ => runs.push(StRun { first_t: s.t, last_t: s.t, st }),
                }
            }
            prev_t = Some(s.t);
        }
        StRuns { runs }
    }

    /// Appends the start timestamp of each of `samples` (sorted; samples of the source these
    /// runs belong to) that has one to `out`.
    pub fn resolve(&self, samples: &[Sample], out: &mut Vec<StartTimestamp>) {
        let mut k = 0;
        for s in samples {
            while self.runs.get(k).is_some_and(|r| r.last_t < s.t) {
                k += 1;
            }
            let Some(r) = self.runs.get(k) else { return };
            if r.first_t <= s.t {
                out.push(StartTimestamp { t: s.t, st: r.st });
            }
        }
    }

    /// Encodes the runs (layout in `docs/format/start_timestamps.md`): a count, then per run
    /// its first time as a delta from the previous run's last time (0 for the first), its
    /// length in milliseconds, and its start timestamp as a delta from the previous run's.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_uvarint(out, self.runs.len() as u64);
        let (mut prev_t, mut prev_st) = (0i64, 0i64);
        for r in &self.runs {
            put_varint(out, r.first_t.wrapping_sub(prev_t));
            put_uvarint(out, r.last_t.wrapping_sub(r.first_t) as u64);
            put_varint(out, r.st.wrapping_sub(prev_st));
            (prev_t, prev_st) = (r.last_t, r.st);
        }
    }

    /// Decodes what [`StRuns::encode`] wrote, starting at `pos`. Total: counts are checked
    /// against the bytes left, runs must be ordered and not overlap, and no start timestamp
    /// may be 0.
    pub fn decode(buf: &[u8], pos: &mut usize) -> Result<StRuns> {
        let n = get_uvarint(buf, pos)?;
        if n.saturating_mul(3) > buf.len().saturating_sub(*pos) as u64 {
            return Err(Error::Decode(format!("start timestamp run count {n} exceeds the bytes left")));
        }
        let mut runs = Vec::with_capacity(n as usize);
        let (mut prev_t, mut prev_st) = (0i64, 0i64);
        for i in 0..n {
            let first_t = prev_t.wrapping_add(get_varint(buf, pos)?);
            let len = get_uvarint(buf, pos)?;
            let last_t = i64::try_from(len)
                .ok()
                .and_then(|len| first_t.checked_add(len))
                .ok_or_else(|| Error::Decode("start timestamp run too long".into()))?;
            let st = prev_st.wrapping_add(get_varint(buf, pos)?);
            if st == 0 || (i > 0 && first_t <= prev_t) {
                return Err(Error::Decode("start timestamp runs out of order or zero".into()));
            }
            runs.push(StRun { first_t, last_t, st });
            (prev_t, prev_st) = (last_t, st);
        }
        Ok(StRuns { runs })
    }

    /// Approximate heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.runs.capacity() * size_of::<StRun>() + size_of::<Self>()
    }
}

/// Merges the start timestamps of several sources of one series, given in priority order as
/// (the source's samples, their start timestamps): where sources share a timestamp the later
/// source wins, with its start timestamp or without one, exactly as samples are merged.
pub fn merge(sources: &[(Vec<Sample>, Vec<StartTimestamp>)], out: &mut Vec<StartTimestamp>) {
    if sources.iter().all(|(_, st)| st.is_empty()) {
        return;
    }
    let mut with_samples = sources.iter().filter(|(s, _)| !s.is_empty());
    if let (Some((_, only)), None) = (with_samples.next(), with_samples.next()) {
        out.extend_from_slice(only);
        return;
    }
    let mut by_t: BTreeMap<i64, i64> = BTreeMap::new();
    for (samples, starts) in sources {
        let mut j = 0;
        for s in samples {
            while starts.get(j).is_some_and(|x| x.t < s.t) {
                j += 1;
            }
            by_t.insert(s.t, starts.get(j).filter(|x| x.t == s.t).map_or(0, |x| x.st));
        }
    }
    out.extend(by_t.into_iter().filter(|(_, st)| *st != 0).map(|(t, st)| StartTimestamp { t, st }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn st(t: i64, st: i64) -> StartTimestamp {
        StartTimestamp { t, st }
    }

    #[test]
    fn a_constant_start_timestamp_is_one_run() {
        let mut r = StRuns::default();
        let mut prev = None;
        for t in (10..=100).step_by(10) {
            r.record(t, 5, prev);
            prev = Some(t);
        }
        assert_eq!(r.runs(), &[StRun { first_t: 10, last_t: 100, st: 5 }]);
        // A sample without one ends the run; the next with one starts another.
        r.record(110, 0, Some(100));
        r.record(120, 5, Some(110));
        assert_eq!(r.runs().len(), 2);
    }

    #[test]
    fn rewrites_win_with_or_without_a_start_timestamp() {
        let mut r = StRuns::default();
        let mut prev = None;
        for t in [10, 20, 30, 40] {
            r.record(t, 5, prev);
            prev = Some(t);
        }
        r.record(20, 0, Some(40)); // rewrite without: 20 has none
        r.record(30, 7, Some(40)); // rewrite with another
        r.record(25, 0, Some(40)); // a new out-of-order sample without one
        r.record(15, 9, Some(40)); // a new out-of-order sample with one
        let samples: Vec<Sample> = [10, 15, 20, 25, 30, 40].iter().map(|&t| Sample::new(t, 0.0)).collect();
        let mut out = Vec::new();
        r.resolve(&samples, &mut out);
        assert_eq!(out, vec![st(10, 5), st(15, 9), st(30, 7), st(40, 5)]);
    }

    #[test]
    fn merge_lets_the_newest_source_win() {
        let old = (vec![Sample::new(10, 0.0), Sample::new(20, 0.0)], vec![st(10, 1), st(20, 1)]);
        let new = (vec![Sample::new(20, 1.0), Sample::new(30, 1.0)], vec![st(30, 2)]);
        let mut out = Vec::new();
        merge(&[old, new], &mut out);
        assert_eq!(out, vec![st(10, 1), st(30, 2)]);
    }

    proptest! {
        /// Recording writes one by one gives, for every sample, the start timestamp of its last
        /// write; encoding round-trips; building from resolved samples gives equivalent runs.
        #[test]
        fn runs_match_a_map_of_last_writes(
            writes in proptest::collection::vec((0i64..60, prop_oneof![Just(0i64), 1i64..4]), 1..80)
        ) {
            let mut runs = StRuns::default();
            let mut model: BTreeMap<i64, i64> = BTreeMap::new();
            for (t, s) in writes {
                let prev = model.keys().next_back().copied();
                runs.record(t, s, prev);
                model.insert(t, s);
            }
            let samples: Vec<Sample> = model.keys().map(|&t| Sample::new(t, 0.0)).collect();
            let want: Vec<StartTimestamp> =
                model.iter().filter(|(_, s)| **s != 0).map(|(&t, &s)| st(t, s)).collect();
            let mut got = Vec::new();
            runs.resolve(&samples, &mut got);
            prop_assert_eq!(&got, &want);
            let mut buf = Vec::new();
            runs.encode(&mut buf);
            let mut pos = 0;
            prop_assert_eq!(StRuns::decode(&buf, &mut pos).unwrap(), runs.clone());
            prop_assert_eq!(pos, buf.len());
            let rebuilt = StRuns::from_samples(&samples, &want);
            let mut again = Vec::new();
            rebuilt.resolve(&samples, &mut again);
            prop_assert_eq!(again, want);
            prop_assert!(rebuilt.runs().len() <= runs.runs().len().max(1));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut pos = 0;
            let _ = StRuns::decode(&bytes, &mut pos);
        }
    }
}
