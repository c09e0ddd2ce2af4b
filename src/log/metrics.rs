//! What the ingest log did in this process, for `/metrics` (`strata_log_*`): counters kept
//! process-wide, since a process has at most one log, one distributor and one ingester.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ingester::Offsets;
use crate::metrics::exposition::{Exposition, Kind};

/// The log's counters.
pub struct LogMetrics {
    published: AtomicU64,
    publish_failures: AtomicU64,
    skipped: AtomicU64,
    lease_losses: AtomicU64,
    ha_dropped: AtomicU64,
    stalls: AtomicU64,
    /// Records appended, by partition.
    consumed: Mutex<BTreeMap<u32, u64>>,
}

/// This process's.
pub static LOG_METRICS: LogMetrics = LogMetrics {
    published: AtomicU64::new(0),
    publish_failures: AtomicU64::new(0),
    skipped: AtomicU64::new(0),
    lease_losses: AtomicU64::new(0),
    ha_dropped: AtomicU64::new(0),
    stalls: AtomicU64::new(0),
    consumed: Mutex::new(BTreeMap::new()),
};

impl LogMetrics {
    /// A part of a request the log acknowledged.
    pub fn published(&self) {
        self.published.fetch_add(1, Ordering::Relaxed);
    }

    /// A part the log did not take (the request was answered 503).
    pub fn publish_failed(&self) {
        self.publish_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A record skipped because it does not decode or storage refuses it whole.
    pub fn skipped(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// Samples of an HA replica that is not elected, dropped.
    pub fn ha_dropped(&self, samples: u64) {
        self.ha_dropped.fetch_add(samples, Ordering::Relaxed);
    }

    /// A lease lost (the member stopped consuming).
    pub fn lease_lost(&self) {
        self.lease_losses.fetch_add(1, Ordering::Relaxed);
    }

    /// A reading of a partition that stopped delivering behind the log, started again.
    pub fn stalled(&self) {
        self.stalls.fetch_add(1, Ordering::Relaxed);
    }

    /// `records` of partition `p` appended.
    pub fn consumed(&self, p: u32, records: u64) {
        let mut consumed = self.consumed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *consumed.entry(p).or_default() += records;
    }

    /// Writes the `strata_log_*` families; the per-partition state of what this process
    /// consumes comes from `offsets`.
    pub(crate) fn write_to(&self, out: &mut Exposition, offsets: Option<&Offsets>) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        out.single(
            "strata_log_records_published_total",
            Kind::Counter,
            "Parts of write requests (one per partition a request reaches) the ingest log acknowledged.",
            load(&self.published),
        );
        out.single(
            "strata_log_publish_failures_total",
            Kind::Counter,
            "Parts of write requests the ingest log did not take; their requests were answered 503.",
            load(&self.publish_failures),
        );
        out.single(
            "strata_log_records_skipped_total",
            Kind::Counter,
            "Log records not stored because they do not decode or storage refuses them whole.",
            load(&self.skipped),
        );
        out.single(
            "strata_log_lease_losses_total",
            Kind::Counter,
            "Leases lost: each time, this writer stopped consuming its partitions and joined again.",
            load(&self.lease_losses),
        );
        out.single(
            "strata_log_ha_samples_dropped_total",
            Kind::Counter,
            "Samples of Prometheus HA replicas that were not elected, dropped (--ha-tracker).",
            load(&self.ha_dropped),
        );
        out.single(
            "strata_log_read_stalls_total",
            Kind::Counter,
            "Readings of a partition that stopped delivering while the log held more, started again.",
            load(&self.stalls),
        );
        out.family(
            "strata_log_records_consumed_total",
            Kind::Counter,
            "Log records appended to the database, by partition.",
        );
        let consumed = self.consumed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        for (p, n) in &consumed {
            out.sample("strata_log_records_consumed_total", &[("partition", &p.to_string())], *n);
        }
        let Some(offsets) = offsets else { return };
        let partitions = offsets.all();
        out.family(
            "strata_log_partition_held",
            Kind::Gauge,
            "1 for each partition of the ingest log this process consumes now.",
        );
        for (p, _, held) in &partitions {
            out.sample("strata_log_partition_held", &[("partition", &p.to_string())], u64::from(*held));
        }
        out.family(
            "strata_log_consumed_offset",
            Kind::Gauge,
            "The offset of the last log record appended, by partition (the stream's sequence).",
        );
        for (p, offset, _) in &partitions {
            out.sample("strata_log_consumed_offset", &[("partition", &p.to_string())], *offset);
        }
    }
}
