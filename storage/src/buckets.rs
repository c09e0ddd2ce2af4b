//! Classic (fixed-bucket) histograms for monitoring: fsync, flush and compaction latencies and
//! group-commit batch sizes, exported on `/metrics` as Prometheus `_bucket`/`_sum`/`_count`
//! series.
//!
//! Not to be confused with native histograms, the sample type ([`crate::FloatHistogram`],
//! the `hist` module): these only count strata's own events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A histogram with fixed bucket bounds, safe to observe from any number of threads.
///
/// Observing is two relaxed atomic adds after a short scan of the bounds, so it can sit on the
/// write path. Values are unsigned integers in a unit the owner chooses (nanoseconds for
/// durations, a count for batch sizes); the exporter converts them. Buckets are stored
/// non-cumulatively and summed up in [`BucketHistogram::snapshot`], so a snapshot's bucket counts,
/// `+Inf` bucket and count always agree even while observations race with it (the sum may lag by
/// the observations in flight, as in every lock-free Prometheus client).
#[derive(Debug)]
pub struct BucketHistogram {
    /// Upper bounds (inclusive) of the finite buckets, ascending.
    bounds: &'static [u64],
    /// One counter per finite bucket plus one for values above every bound.
    buckets: Box<[AtomicU64]>,
    /// Sum of all observed values.
    sum: AtomicU64,
}

/// A copy of a [`BucketHistogram`] at one moment, ready to be written out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSnapshot {
    /// Upper bounds (inclusive) of the finite buckets, ascending, in the histogram's unit.
    pub bounds: &'static [u64],
    /// Observations at or below each bound (cumulative), one per entry of `bounds`.
    pub cumulative: Vec<u64>,
    /// All observations (the `+Inf` bucket).
    pub count: u64,
    /// Sum of all observed values, in the histogram's unit.
    pub sum: u64,
}

impl BucketHistogram {
    /// An empty histogram with these bucket bounds. `bounds` must be ascending; an unsorted
    /// list would put values in the wrong buckets (checked in debug builds).
    pub fn new(bounds: &'static [u64]) -> BucketHistogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bucket bounds must ascend");
        BucketHistogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `value`.
    pub fn observe(&self, value: u64) {
        // The bounds are a dozen entries: a linear scan beats a binary search's branches.
        let bucket = self.bounds.iter().position(|&bound| value <= bound).unwrap_or(self.bounds.len());
        if let Some(counter) = self.buckets.get(bucket) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Counts one duration, in nanoseconds (saturating at 584 years).
    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The histogram as it is now.
    pub fn snapshot(&self) -> BucketSnapshot {
        let mut cumulative = Vec::with_capacity(self.bounds.len());
        let mut running = 0u64;
        for counter in self.buckets.iter().take(self.bounds.len()) {
            running = running.saturating_add(counter.load(Ordering::Relaxed));
            cumulative.push(running);
        }
        let above = self.buckets.last().map_or(0, |c| c.load(Ordering::Relaxed));
        BucketSnapshot {
            bounds: self.bounds,
            cumulative,
            count: running.saturating_add(above),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// Bucket bounds in nanoseconds for fsync latency: 100 µs (a fast NVMe) to 2.5 s (a disk in
/// trouble).
pub const FSYNC_NANOS_BUCKETS: &[u64] = &[
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
];

/// Bucket bounds in nanoseconds for flushes and compactions: 10 ms (a small head) to 10 min (a
/// 50-million-sample head or a large partition on a slow disk).
pub const MAINTENANCE_NANOS_BUCKETS: &[u64] = &[
    10_000_000,
    50_000_000,
    100_000_000,
    500_000_000,
    1_000_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
    60_000_000_000,
    120_000_000_000,
    300_000_000_000,
    600_000_000_000,
];

/// Bucket bounds for the number of WAL records one fsync made durable (group-commit batch size).
pub const GROUP_COMMIT_RECORDS_BUCKETS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        static BOUNDS: &[u64] = &[10, 100];
        let h = BucketHistogram::new(BOUNDS);
        for v in [0, 10, 11, 100, 101, 5000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.cumulative, vec![2, 4]);
        assert_eq!(s.count, 6);
        assert_eq!(s.sum, 10 + 11 + 100 + 101 + 5000);
        assert_eq!(s.bounds, BOUNDS);
    }

    #[test]
    fn durations_are_counted_in_nanoseconds() {
        let h = BucketHistogram::new(FSYNC_NANOS_BUCKETS);
        h.observe_duration(Duration::from_micros(300));
        h.observe_duration(Duration::from_secs(3));
        let s = h.snapshot();
        assert_eq!(s.sum, 3_000_300_000);
        assert_eq!(s.cumulative.first(), Some(&0));
        assert_eq!(s.cumulative.get(2), Some(&1), "300 µs is in the 500 µs bucket");
        assert_eq!(s.cumulative.last(), Some(&1), "3 s is above every bound");
        assert_eq!(s.count, 2);
    }

    #[test]
    fn bucket_bounds_ascend() {
        for bounds in [FSYNC_NANOS_BUCKETS, MAINTENANCE_NANOS_BUCKETS, GROUP_COMMIT_RECORDS_BUCKETS] {
            assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
        }
    }

    #[test]
    fn concurrent_observations_are_all_counted() {
        let h = BucketHistogram::new(GROUP_COMMIT_RECORDS_BUCKETS);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..1000 {
                        h.observe((i + t) % 300);
                    }
                });
            }
        });
        let s = h.snapshot();
        assert_eq!(s.count, 4000);
        assert!(s.cumulative.windows(2).all(|w| w[0] <= w[1]));
    }
}
