//! Storage's numbers on `/metrics`: ingest outcomes, the series index, the heads, the WAL,
//! flushes, compactions, retention and disk use.
//!
//! Nothing here counts anything: every value is read from the database at scrape time
//! (`Db::counters`, `Db::wal_stats`, `Db::head_stats`, `Db::disk_stats`), so each number has one
//! source of truth in the storage crate. Called on a blocking thread, because the head and disk
//! statistics take shard locks and list the WAL directory.

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, SecondsFormat};
use storage::Db;

use super::exposition::{Exposition, Kind};

/// Nanoseconds per second, the divisor that turns storage's nanosecond histograms into seconds.
const NANOS: f64 = 1e9;

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Writes every storage family. `histograms_rejected` is counted by the HTTP layer (storage never
/// sees native histograms) but belongs to the samples-rejected family written here.
pub(super) fn write_to(db: &Db, histograms_rejected: u64, out: &mut Exposition) {
    write_ingest(db, histograms_rejected, out);
    write_series_and_head(db, out);
    write_wal(db, out);
    write_maintenance(db, out);
    write_disk(db, out);
    write_bucket(db, out);
}

/// The bucket's families, only with `--storage.bucket`: a writer's mirror, a query node's
/// prefixes, and the reads of both through the local cache.
fn write_bucket(db: &Db, out: &mut Exposition) {
    let mirror = db.mirror_status();
    if mirror.is_none() && !db.reads_only() {
        return;
    }
    let cache = storage::bucket_cache_counters();
    let reads = [
        (
            "strata_storage_bucket_range_reads_total",
            "GET requests for ranges of partition files held in the bucket (pages missing from the local cache), as the client coalesces them.",
            load(&cache.requests),
        ),
        (
            "strata_storage_bucket_range_read_bytes_total",
            "Bytes those requests fetched, coalesced gaps included.",
            load(&cache.bytes),
        ),
        (
            "strata_storage_bucket_cache_hits_total",
            "Reads of bucket files that the local cache answered whole.",
            load(&cache.hits),
        ),
    ];
    for (name, help, value) in reads {
        out.single(name, Kind::Counter, help, value);
    }
    if db.reads_only() {
        out.single(
            "strata_storage_bucket_prefixes",
            Kind::Gauge,
            "Writers' bucket prefixes this query node follows.",
            db.followed_prefixes().len() as u64,
        );
    }
    let Some(m) = mirror else { return };
    let counters = [
        ("strata_storage_bucket_uploads_total", "Partition files uploaded to the bucket.", load(&m.uploads)),
        (
            "strata_storage_bucket_uploaded_bytes_total",
            "Bytes of partition files uploaded to the bucket.",
            load(&m.uploaded_bytes),
        ),
        ("strata_storage_bucket_commits_total", "Manifests committed to the bucket.", load(&m.commits)),
        (
            "strata_storage_bucket_failures_total",
            "Attempts to bring the bucket up to date that failed (each is retried).",
            load(&m.failures),
        ),
        (
            "strata_storage_bucket_deleted_total",
            "Partition files deleted from the bucket after --storage.bucket-delete-delay.",
            load(&m.deleted),
        ),
    ];
    for (name, help, value) in counters {
        out.single(name, Kind::Counter, help, value);
    }
    out.single(
        "strata_storage_bucket_manifest_seq",
        Kind::Gauge,
        "Number of the newest manifest this writer committed to the bucket.",
        load(&m.committed_seq),
    );
    out.single(
        "strata_storage_bucket_behind",
        Kind::Gauge,
        "1 while the bucket lacks something committed locally (uploads or the manifest pending).",
        u64::from(m.behind.load(Ordering::Relaxed)),
    );
    out.single(
        "strata_storage_bucket_fenced",
        Kind::Gauge,
        "1 once another writer took this writer's bucket prefix over (writes are refused).",
        u64::from(m.fenced.load(Ordering::Relaxed)),
    );
}

fn write_ingest(db: &Db, histograms_rejected: u64, out: &mut Exposition) {
    let c = db.counters();
    out.single(
        "strata_ingest_samples_appended_total",
        Kind::Counter,
        "Samples stored (durable per --wal-sync), including idempotent repeats of stored samples.",
        load(&c.samples_appended),
    );
    out.single(
        "strata_ingest_samples_out_of_order_total",
        Kind::Counter,
        "Samples stored although older than their series' newest sample.",
        load(&c.samples_out_of_order),
    );
    out.family(
        "strata_ingest_samples_rejected_total",
        Kind::Counter,
        "Samples received and not stored, by reason; the rest of their request was stored.",
    );
    let rejected = [
        ("too_old", load(&c.rejected_too_old)),
        ("outside_retention", load(&c.rejected_outside_retention)),
        ("too_far_future", load(&c.rejected_too_far_future)),
        ("series_limit", load(&c.rejected_series_limit)),
        ("native_histogram_unsupported", histograms_rejected),
    ];
    for (reason, n) in rejected {
        out.sample("strata_ingest_samples_rejected_total", &[("reason", reason)], n);
    }
}

fn write_series_and_head(db: &Db, out: &mut Exposition) {
    let c = db.counters();
    out.single("strata_storage_series", Kind::Gauge, "Series in the series index.", db.series_count() as u64);
    out.single(
        "strata_storage_series_created_total",
        Kind::Counter,
        "Series seen for the first time.",
        load(&c.series_created),
    );
    out.family(
        "strata_series_rejected_total",
        Kind::Counter,
        "New series refused by a cardinality limit (--series-max, --series-per-metric-max, \
         --new-series-per-day-max), each time a write brought one.",
    );
    let refused = db.series_rejected_total();
    for limit in storage::cardinality::SeriesLimit::ALL {
        out.sample("strata_series_rejected_total", &[("limit", limit.name())], refused.get(limit));
    }
    out.single(
        "strata_storage_series_removed_total",
        Kind::Counter,
        "Series removed from the index because retention or cleaned tombstones left no data of theirs.",
        load(&c.series_removed),
    );

    let head = db.head_stats();
    out.single(
        "strata_head_series",
        Kind::Gauge,
        "Series with samples in the active in-memory head.",
        head.series as u64,
    );
    out.single(
        "strata_head_samples",
        Kind::Gauge,
        "Samples held in memory: the active head plus heads still being flushed.",
        head.samples,
    );
    out.single(
        "strata_head_out_of_order_samples",
        Kind::Gauge,
        "Of strata_head_samples, those written behind their series' newest sample (or rewriting one).",
        head.out_of_order_samples,
    );
    out.single(
        "strata_head_frozen",
        Kind::Gauge,
        "Heads frozen by a flush and not yet written to partition files (more than 1 means flushes fail or lag).",
        head.frozen_heads as u64,
    );
    out.single(
        "strata_head_memory_bytes",
        Kind::Gauge,
        "Approximate heap bytes of the in-memory heads (compressed chunks and per-series structures).",
        head.memory_bytes as u64,
    );
    out.single(
        "strata_storage_index_memory_bytes",
        Kind::Gauge,
        "Approximate heap bytes of the series index.",
        head.index_memory_bytes as u64,
    );
    out.single(
        "strata_storage_block_lists_bytes",
        Kind::Gauge,
        "Bytes of decoded block lists kept for queries (at most 64 MiB, freed with their files).",
        storage::block_list_bytes() as u64,
    );
}

fn write_wal(db: &Db, out: &mut Exposition) {
    let wal = db.wal_stats();
    out.single(
        "strata_wal_records_total",
        Kind::Counter,
        "WAL records appended (one per stored write request).",
        wal.records,
    );
    out.single(
        "strata_wal_bytes_written_total",
        Kind::Counter,
        "Bytes of WAL records written, frame headers included.",
        wal.bytes_written,
    );
    out.single("strata_wal_fsyncs_total", Kind::Counter, "fdatasync calls on WAL segment files.", wal.fsyncs);
    out.single_f64(
        "strata_wal_fsync_seconds_total",
        Kind::Counter,
        "Time spent in WAL fdatasync calls (the same as strata_wal_fsync_duration_seconds_sum).",
        wal.fsync_nanos_total as f64 / NANOS,
    );
    out.single_f64(
        "strata_wal_fsync_seconds_max",
        Kind::Gauge,
        "The slowest WAL fdatasync call since start.",
        wal.fsync_nanos_max as f64 / NANOS,
    );
    out.family("strata_wal_fsync_duration_seconds", Kind::Histogram, "Latency of WAL fdatasync calls.");
    out.histogram("strata_wal_fsync_duration_seconds", &[], &db.wal_fsync_durations(), NANOS);
    out.family(
        "strata_wal_group_commit_records",
        Kind::Histogram,
        "WAL records made durable by one fdatasync: how many writes share each fsync.",
    );
    out.histogram("strata_wal_group_commit_records", &[], &db.wal_group_commit_records(), 1.0);
    out.single(
        "strata_wal_segment_current",
        Kind::Gauge,
        "Number of the WAL segment appends go to.",
        wal.current_segment,
    );
    out.single(
        "strata_wal_poisoned",
        Kind::Gauge,
        "1 while writes are refused because a WAL write or fsync failed (disk full, I/O error), \
         until storage recovers by itself; else 0.",
        u64::from(db.wal_poisoned()),
    );
    let c = db.counters();
    out.single(
        "strata_storage_recoveries_total",
        Kind::Counter,
        "Times storage became writable again by itself after a failed WAL write or fsync.",
        load(&c.recoveries),
    );
    out.single(
        "strata_storage_recovery_failures_total",
        Kind::Counter,
        "Recovery attempts that failed (the disk was still full); each is retried with a backoff.",
        load(&c.recovery_failures),
    );
}

fn write_maintenance(db: &Db, out: &mut Exposition) {
    let c = db.counters();
    out.single(
        "strata_storage_flushes_total",
        Kind::Counter,
        "Flushes of the in-memory head to partition files.",
        load(&c.flushes),
    );
    out.single(
        "strata_appends_refused_backlog_total",
        Kind::Counter,
        "Write batches refused (503) because the samples waiting to be flushed reached twice \
         --head-samples-max: ingest is outrunning the disk.",
        load(&c.appends_refused_backlog),
    );
    out.single(
        "strata_storage_flush_failures_total",
        Kind::Counter,
        "Flushes that failed; the head stays in memory and in the WAL and is retried.",
        load(&c.flush_failures),
    );
    out.single(
        "strata_storage_flush_bytes_written_total",
        Kind::Counter,
        "Bytes of partition files written by flushes.",
        load(&c.flush_bytes),
    );
    out.family("strata_storage_flush_duration_seconds", Kind::Histogram, "Duration of completed flushes.");
    out.histogram("strata_storage_flush_duration_seconds", &[], &c.flush_duration.snapshot(), NANOS);

    out.single(
        "strata_storage_compactions_total",
        Kind::Counter,
        "Runs of partition files merged into one.",
        load(&c.compactions),
    );
    out.single(
        "strata_storage_compaction_failures_total",
        Kind::Counter,
        "Compactions that failed; their input files stay live and are retried.",
        load(&c.compaction_failures),
    );
    out.single(
        "strata_storage_compaction_bytes_written_total",
        Kind::Counter,
        "Bytes of partition files written by compactions.",
        load(&c.compaction_bytes),
    );
    out.single(
        "strata_storage_compaction_blocks_written_total",
        Kind::Counter,
        "Blocks of partition files written by compactions.",
        load(&c.compaction_blocks),
    );
    out.single(
        "strata_storage_compaction_blocks_copied_total",
        Kind::Counter,
        "Blocks compactions copied from their inputs as they were, without decoding them.",
        load(&c.compaction_blocks_copied),
    );
    out.family(
        "strata_storage_compaction_duration_seconds",
        Kind::Histogram,
        "Duration of completed compactions.",
    );
    out.histogram(
        "strata_storage_compaction_duration_seconds",
        &[],
        &c.compaction_duration.snapshot(),
        NANOS,
    );

    out.single(
        "strata_storage_retention_partitions_removed_total",
        Kind::Counter,
        "Partitions removed because all their data was older than --retention.",
        load(&c.retention_partitions_removed),
    );
    out.single(
        "strata_storage_maintenance_failures_total",
        Kind::Counter,
        "Background maintenance runs (flush, compaction, retention) that failed and will be retried.",
        load(&c.maintenance_errors),
    );
}

fn write_disk(db: &Db, out: &mut Exposition) {
    let disk = match db.disk_stats() {
        Ok(disk) => disk,
        Err(e) => {
            tracing::warn!(error = %e, "cannot measure disk use; leaving it out of /metrics");
            return;
        }
    };
    out.single(
        "strata_storage_partitions",
        Kind::Gauge,
        "Time partitions with data on disk.",
        disk.partitions.len() as u64,
    );
    let labels: Vec<String> = disk.partitions.iter().map(|p| partition_label(p.start_ms)).collect();
    out.family(
        "strata_storage_partition_bytes",
        Kind::Gauge,
        "Bytes of partition files per time partition, labelled with the partition's start (RFC 3339, UTC).",
    );
    for (p, label) in disk.partitions.iter().zip(&labels) {
        out.sample("strata_storage_partition_bytes", &[("partition", label)], p.bytes);
    }
    out.family(
        "strata_storage_partition_files",
        Kind::Gauge,
        "Partition files per time partition (compaction merges them).",
    );
    for (p, label) in disk.partitions.iter().zip(&labels) {
        out.sample("strata_storage_partition_files", &[("partition", label)], p.files as u64);
    }
    out.single(
        "strata_storage_tombstones",
        Kind::Gauge,
        "Deletion tombstones not yet applied by a compaction.",
        disk.tombstones as u64,
    );
    out.single("strata_wal_segments", Kind::Gauge, "WAL segment files on disk.", disk.wal_segments as u64);
    out.single("strata_wal_bytes", Kind::Gauge, "Bytes of WAL segment files on disk.", disk.wal_bytes);
    out.single(
        "strata_storage_disk_bytes",
        Kind::Gauge,
        "Bytes on disk: partition files plus WAL segments.",
        disk.total_bytes(),
    );
}

/// A partition's start as RFC 3339 in UTC (`2024-05-01T00:00:00Z`, with milliseconds only when
/// the partition width is not whole seconds); the raw milliseconds if out of chrono's range.
fn partition_label(start_ms: i64) -> String {
    DateTime::from_timestamp_millis(start_ms)
        .map_or_else(|| start_ms.to_string(), |t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_labelled_with_their_start_in_utc() {
        assert_eq!(partition_label(0), "1970-01-01T00:00:00Z");
        assert_eq!(partition_label(1_714_521_600_000), "2024-05-01T00:00:00Z");
        assert_eq!(partition_label(1_500), "1970-01-01T00:00:01.500Z");
        assert_eq!(partition_label(i64::MAX), i64::MAX.to_string());
    }
}
