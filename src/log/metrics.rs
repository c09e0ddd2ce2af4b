//! What the ingest log did in this process, for `/metrics` (`strata_log_*`): counters kept
//! process-wide, since a process has at most one log, one distributor and one ingester.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics::exposition::{Exposition, Kind};

/// The log's counters.
pub struct LogMetrics {
    published: AtomicU64,
    publish_failures: AtomicU64,
    skipped: AtomicU64,
    lease_losses: AtomicU64,
    ha_dropped: AtomicU64,
    partitions: Mutex<BTreeMap<u32, Partition>>,
}

/// One partition as this process consumes it.
#[derive(Debug, Default, Clone, Copy)]
struct Partition {
    /// The offset of the last record appended.
    offset: u64,
    /// Records appended.
    records: u64,
    /// Whether this process consumes it now.
    held: bool,
}

/// A per-partition family: name, kind, help, and its value of a partition.
type Family = (&'static str, Kind, &'static str, fn(&Partition) -> u64);

/// This process's.
pub static LOG_METRICS: LogMetrics = LogMetrics {
    published: AtomicU64::new(0),
    publish_failures: AtomicU64::new(0),
    skipped: AtomicU64::new(0),
    lease_losses: AtomicU64::new(0),
    ha_dropped: AtomicU64::new(0),
    partitions: Mutex::new(BTreeMap::new()),
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

    /// `records` of partition `p`, up to `offset`, appended.
    pub fn consumed(&self, p: u32, records: u64, offset: u64) {
        self.with(p, |c| {
            c.records += records;
            c.offset = c.offset.max(offset);
        });
    }

    /// Partition `p` consumed here from now on (`true`) or no longer.
    pub fn held(&self, p: u32, held: bool) {
        self.with(p, |c| c.held = held);
    }

    /// The partitions consumed here now, each with the offset of its last record appended.
    pub fn held_offsets(&self) -> BTreeMap<u32, u64> {
        let partitions = self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        partitions.iter().filter(|(_, c)| c.held).map(|(&p, c)| (p, c.offset)).collect()
    }

    fn with(&self, p: u32, f: impl FnOnce(&mut Partition)) {
        let mut partitions = self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(partitions.entry(p).or_default());
    }

    /// Writes the `strata_log_*` families.
    pub(crate) fn write_to(&self, out: &mut Exposition) {
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
        let partitions = self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let families: [Family; 3] = [
            (
                "strata_log_partition_held",
                Kind::Gauge,
                "1 for each partition of the ingest log this process consumes now.",
                |c| u64::from(c.held),
            ),
            (
                "strata_log_records_consumed_total",
                Kind::Counter,
                "Log records appended to the database, by partition.",
                |c| c.records,
            ),
            (
                "strata_log_consumed_offset",
                Kind::Gauge,
                "The offset of the last log record appended, by partition (the stream's sequence).",
                |c| c.offset,
            ),
        ];
        for (name, kind, help, value) in families {
            out.family(name, kind, help);
            for (p, c) in &partitions {
                out.sample(name, &[("partition", &p.to_string())], value(c));
            }
        }
    }
}
