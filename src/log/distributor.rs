//! `--role distributor`: a write is decoded as on any other role, then split by series into
//! the log's partitions ([`super::partition`]), each part encoded as a remote write message
//! (snappy-compressed protobuf, the request format ingesters already decode; 1.0 for float
//! series, 2.0 where histograms, start timestamps or metadata need it, docs/format/log.md) and
//! published; the client is answered once the log has acknowledged every part.
//!
//! A retried request must not be stored twice: each part's message id is a digest of the
//! request's body and the partition, so the log drops a retry's parts that it already holds
//! (within its de-duplication window) and stores those it lacks. A request refused by its
//! decoder is refused here with the same 4xx; a log that cannot take a part gets a 503, which
//! senders retry.

use std::sync::Arc;

use axum::body::Bytes;
use futures_util::future::try_join_all;
use remote::prw::{self, Version};
use sha2::{Digest, Sha256};
use storage::{Batch, BatchRef, Labels, Sample};

use super::ha::HaTracker;
use super::metrics::LOG_METRICS;
use super::partition::{partition_of_raw, split};
use super::{Log, LogError};
use remote::metadata::MetricMetadata;

/// Publishes writes to the log.
pub struct Distributor {
    log: Arc<dyn Log>,
    /// With `--ha-tracker`: the elections of Prometheus HA pairs.
    ha: Option<HaTracker>,
    /// Samples further ahead of the wall clock are refused here (`--future-window`), as the
    /// writer would refuse them after the client was answered.
    future_window_ms: i64,
}

/// One partition's share of a request, ready to publish.
pub struct Part {
    partition: u32,
    id: String,
    payload: Bytes,
}

/// A request split for the log: its parts and the samples they carry.
pub struct Prepared {
    parts: Vec<Part>,
    /// Float samples and native histogram samples in all parts.
    pub samples: u64,
    /// Of `samples`, the native histogram samples.
    pub histograms: u64,
    /// Samples refused as too far in the future, not in any part.
    pub too_far_future: u64,
    /// The first of them, for the answer's message.
    pub first_rejected: Option<(Labels, Sample)>,
}

impl Prepared {
    /// Whether no part is left to publish.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

/// What [`future_filter`] left out of a request.
#[derive(Default)]
struct Refused {
    count: u64,
    first: Option<(Labels, Sample)>,
}

impl Distributor {
    /// A distributor publishing to `log`.
    pub fn new(log: Arc<dyn Log>) -> Distributor {
        Distributor { log, ha: None, future_window_ms: i64::MAX }
    }

    /// The same distributor refusing samples more than `ms` ahead of the wall clock.
    pub fn with_future_window(self, ms: i64) -> Distributor {
        Distributor { future_window_ms: ms, ..self }
    }

    /// The newest timestamp accepted now.
    fn newest_accepted(&self) -> i64 {
        chrono::Utc::now().timestamp_millis().saturating_add(self.future_window_ms)
    }

    /// The same distributor keeping one replica of each Prometheus HA pair (`--ha-tracker`).
    pub fn with_ha(self, ha: Option<HaTracker>) -> Distributor {
        Distributor { ha, ..self }
    }

    /// The HA tracker, with `--ha-tracker`.
    pub fn ha(&self) -> Option<&HaTracker> {
        self.ha.as_ref()
    }

    /// An owned batch as remote write 2.0 parts, its samples past the future window left out.
    fn prepare_owned(
        &self,
        batch: Batch,
        tenant: Option<&str>,
        body: &[u8],
        metadata: &[MetricMetadata],
    ) -> Result<Prepared, storage::Error> {
        let (owned, refused) = future_filter(batch, self.newest_accepted());
        let histograms = owned.histograms.iter().map(|(_, h)| h.len() as u64).sum();
        let samples = owned.sample_count() as u64;
        let raw = split(owned, self.log.partitions())
            .into_iter()
            .map(|(p, part)| (p, Version::V2, prw::encode_uncompressed(Version::V2, &part, metadata)))
            .collect();
        Ok(Prepared {
            parts: parts(raw, tenant, body)?,
            samples,
            histograms,
            too_far_future: refused.count,
            first_rejected: refused.first,
        })
    }

    /// The log it publishes to.
    pub fn log(&self) -> &Arc<dyn Log> {
        &self.log
    }

    /// Splits `batch` (decoded from `body`, sent to `tenant`, whose label its series carry)
    /// into the log's partitions and encodes each part (CPU work, for a blocking thread).
    /// `metadata` travels with the parts whose series it describes. Fails with `storage::Error::InvalidLabels` if a label is not UTF-8, as
    /// appending it would.
    ///
    /// Float series are written straight from the decoded request as remote write 1.0
    /// ([`prw::V1Writer`]); a request with native histograms, start timestamps or metadata goes
    /// through remote write 2.0's messages, which carry them all.
    pub fn prepare(
        &self,
        batch: &BatchRef<'_>,
        tenant: Option<&str>,
        body: &[u8],
        metadata: &[MetricMetadata],
    ) -> Result<Prepared, storage::Error> {
        if batch.has_histograms() || batch.has_starts() || !metadata.is_empty() {
            return self.prepare_owned(batch.to_batch()?, tenant, body, metadata);
        }
        let partitions = self.log.partitions();
        let newest = self.newest_accepted();
        let mut refused = Refused::default();
        // Room for each part's share of the request (its labels, and a float and a timestamp
        // per sample, with the fields' tags and lengths), so writing seldom moves a part.
        let (pairs, label_bytes) = batch.label_size();
        let bytes = label_bytes + pairs * 6 + batch.sample_count() * 20 + batch.len() * 4;
        let share = bytes / partitions as usize + bytes / 16;
        let mut writers: Vec<prw::V1Writer> =
            (0..partitions).map(|_| prw::V1Writer::with_capacity(share)).collect();
        for (labels, samples) in batch.iter() {
            let (partition, ascii) = partition_of_raw(labels, partitions);
            // Storage checks the labels of new series only; the log's consumers must not meet a
            // label that refuses its record there.
            if !ascii
                && !labels
                    .iter()
                    .all(|(n, v)| std::str::from_utf8(n).is_ok() && std::str::from_utf8(v).is_ok())
            {
                // The error storage gives, naming the series.
                labels.to_str_pairs()?;
            }
            let writer = &mut writers[partition as usize];
            if samples.iter().all(|s| s.t <= newest) {
                writer.series(labels, samples);
                continue;
            }
            let kept: Vec<Sample> = samples.iter().copied().filter(|s| s.t <= newest).collect();
            if refused.first.is_none()
                && let (Ok(pairs), Some(s)) = (labels.to_str_pairs(), samples.iter().find(|s| s.t > newest))
            {
                refused.first = Some((Labels::from_pairs(&pairs), *s));
            }
            refused.count += (samples.len() - kept.len()) as u64;
            if !kept.is_empty() {
                writer.series(labels, &kept);
            }
        }
        let raw = writers
            .into_iter()
            .enumerate()
            .filter(|(_, w)| !w.is_empty())
            .map(|(p, w)| (p as u32, Version::V1, w.finish()))
            .collect();
        Ok(Prepared {
            parts: parts(raw, tenant, body)?,
            samples: batch.sample_count() as u64 - refused.count,
            histograms: 0,
            too_far_future: refused.count,
            first_rejected: refused.first,
        })
    }

    /// Publishes every part at once; resolves when the log has acknowledged all of them, or
    /// with the first failure (parts already stored stay: the sender's retry stores the rest,
    /// and the log drops the repeats by their ids).
    pub async fn publish(&self, prepared: Prepared) -> Result<(), LogError> {
        let publish = |p: Part| async move {
            let done = self.log.publish(p.partition, p.id, p.payload).await;
            match &done {
                Ok(()) => LOG_METRICS.published(),
                Err(_) => LOG_METRICS.publish_failed(),
            }
            done
        };
        try_join_all(prepared.parts.into_iter().map(publish)).await?;
        Ok(())
    }
}

/// `batch` without its samples (floats and histograms) after `newest`, and what was left out.
fn future_filter(mut batch: Batch, newest: i64) -> (Batch, Refused) {
    let mut refused = Refused::default();
    for (labels, samples) in &mut batch.series {
        if let Some(s) = samples.iter().find(|s| s.t > newest) {
            refused.first.get_or_insert_with(|| (labels.clone(), *s));
            let before = samples.len();
            samples.retain(|s| s.t <= newest);
            refused.count += (before - samples.len()) as u64;
        }
    }
    for (labels, hists) in &mut batch.histograms {
        if let Some(h) = hists.iter().find(|h| h.t > newest) {
            refused.first.get_or_insert_with(|| (labels.clone(), Sample::new(h.t, f64::NAN)));
            let before = hists.len();
            hists.retain(|h| h.t <= newest);
            refused.count += (before - hists.len()) as u64;
        }
    }
    batch.series.retain(|(_, s)| !s.is_empty());
    batch.histograms.retain(|(_, h)| !h.is_empty());
    (batch, refused)
}

/// Each partition's encoded share of the request `body` to `tenant` as a record: version
/// byte, snappy block, and the message id (the digest of the body and the tenant, and the
/// partition: the same body sent to two tenants is two writes, not a retry).
fn parts(
    raw: Vec<(u32, Version, Vec<u8>)>,
    tenant: Option<&str>,
    body: &[u8],
) -> Result<Vec<Part>, storage::Error> {
    let mut hasher = Sha256::new();
    hasher.update(body);
    if let Some(tenant) = tenant {
        // A tenant id holds no NUL: bodies with and without one cannot meet.
        hasher.update([0]);
        hasher.update(tenant.as_bytes());
    }
    let digest = hasher.finalize();
    let request: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let mut parts = Vec::with_capacity(raw.len());
    for (partition, version, bytes) in raw {
        let compressed = prw::compress(&bytes).map_err(|e| storage::Error::InvalidInput(e.to_string()))?;
        let mut payload = Vec::with_capacity(compressed.len() + 1);
        payload.push(version_byte(version));
        payload.extend_from_slice(&compressed);
        parts.push(Part { partition, id: format!("{request}-{partition}"), payload: Bytes::from(payload) });
    }
    Ok(parts)
}

/// The first byte of a record: the remote write version of the snappy block that follows
/// (docs/format/log.md).
fn version_byte(version: Version) -> u8 {
    match version {
        Version::V1 => 1,
        Version::V2 => 2,
    }
}

/// The version a record's first byte names, and the snappy block after it.
pub fn payload_version(payload: &[u8]) -> Option<(Version, &[u8])> {
    match payload.split_first()? {
        (1, rest) => Some((Version::V1, rest)),
        (2, rest) => Some((Version::V2, rest)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use storage::{FloatHistogram, HistogramSample};

    use super::*;

    /// A log that only counts partitions: enough to prepare parts.
    struct Partitions(u32);

    impl Log for Partitions {
        fn partitions(&self) -> u32 {
            self.0
        }
        fn publish(&self, _: u32, _: String, _: Bytes) -> crate::log::LogFuture<'_, ()> {
            Box::pin(async { Err(LogError::Unavailable("not a log".into())) })
        }
        fn read_after(&self, _: u32, _: u64) -> crate::log::LogFuture<'_, crate::log::Records> {
            Box::pin(async { Err(LogError::Unavailable("not a log".into())) })
        }
        fn last_offset(&self, _: u32) -> crate::log::LogFuture<'_, u64> {
            Box::pin(async { Err(LogError::Unavailable("not a log".into())) })
        }
    }

    /// Both encodings count what they keep once: the samples kept, the refused apart.
    #[test]
    fn kept_and_refused_samples_are_counted_once() {
        let d = Distributor::new(Arc::new(Partitions(4))).with_future_window(0);
        let far = chrono::Utc::now().timestamp_millis() + 3_600_000;
        let mut batch = BatchRef::new();
        batch.push([("__name__", "a"), ("i", "1")], [Sample::new(1_000, 1.0), Sample::new(far, 2.0)]);
        batch.push([("__name__", "b")], [Sample::new(2_000, 3.0)]);
        let metadata = [MetricMetadata {
            metric_family_name: "a".into(),
            metric_type: remote::metadata::MetricType::Gauge,
            help: String::new(),
            unit: String::new(),
        }];
        // Float series only: remote write 1.0; with metadata: 2.0.
        for metadata in [&[][..], &metadata[..]] {
            let p = d.prepare(&batch, None, b"body", metadata).unwrap();
            assert_eq!((p.samples, p.too_far_future), (2, 1), "metadata: {}", metadata.len());
            assert_eq!(p.first_rejected.as_ref().map(|(_, s)| s.t), Some(far));
            assert!(!p.is_empty());
        }
    }

    /// A retried request keeps its message ids; the same body sent to another tenant is
    /// another write, with other ids (else the log would drop it as a retry).
    #[test]
    fn message_ids_name_the_body_and_the_tenant() {
        let d = Distributor::new(Arc::new(Partitions(4)));
        let mut batch = BatchRef::new();
        batch.push([("__name__", "a")], [Sample::new(1_000, 1.0)]);
        let ids = |tenant: Option<&str>| -> Vec<String> {
            d.prepare(&batch, tenant, b"body", &[]).unwrap().parts.into_iter().map(|p| p.id).collect()
        };
        assert_eq!(ids(None), ids(None));
        assert_eq!(ids(Some("a")), ids(Some("a")));
        assert_ne!(ids(None), ids(Some("a")));
        assert_ne!(ids(Some("a")), ids(Some("b")));
    }

    /// Samples and histograms after the newest accepted time are left out and counted, the
    /// first named; series left empty go.
    #[test]
    fn samples_ahead_of_the_clock_are_left_out() {
        let mut b = Batch::new();
        b.push(Labels::from_pairs(&[("__name__", "a")]), vec![Sample::new(5, 1.0), Sample::new(20, 2.0)]);
        b.push(Labels::from_pairs(&[("__name__", "b")]), vec![Sample::new(30, 3.0)]);
        b.push_histograms(
            Labels::from_pairs(&[("__name__", "h")]),
            vec![HistogramSample { t: 40, h: FloatHistogram::default() }],
        );
        let (kept, refused) = future_filter(b, 10);
        assert_eq!(refused.count, 3);
        assert_eq!(
            refused.first.map(|(l, s)| (l, s.t)),
            Some((Labels::from_pairs(&[("__name__", "a")]), 20))
        );
        assert_eq!(kept.series.len(), 1);
        assert_eq!(kept.series[0].1, vec![Sample::new(5, 1.0)]);
        assert!(kept.histograms.is_empty());
    }
}
