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
use storage::BatchRef;

use super::ha::{HaTracker, without_label};
use super::metrics::LOG_METRICS;
use super::partition::{partition_of_raw, split};
use super::{Log, LogError};
use remote::metadata::MetricMetadata;

/// Publishes writes to the log.
pub struct Distributor {
    log: Arc<dyn Log>,
    /// With `--ha-tracker`: the elections of Prometheus HA pairs.
    ha: Option<HaTracker>,
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
}

impl Distributor {
    /// A distributor publishing to `log`.
    pub fn new(log: Arc<dyn Log>) -> Distributor {
        Distributor { log, ha: None }
    }

    /// The same distributor keeping one replica of each Prometheus HA pair (`--ha-tracker`).
    pub fn with_ha(self, ha: Option<HaTracker>) -> Distributor {
        Distributor { ha, ..self }
    }

    /// The HA tracker, with `--ha-tracker`.
    pub fn ha(&self) -> Option<&HaTracker> {
        self.ha.as_ref()
    }

    /// [`Distributor::prepare`] for a kept HA replica's request: its series without the
    /// replica label `label` (written as remote write 2.0).
    pub fn prepare_without(
        &self,
        batch: &BatchRef<'_>,
        label: &str,
        body: &[u8],
        metadata: &[MetricMetadata],
    ) -> Result<Prepared, storage::Error> {
        let (samples, histograms) = (batch.sample_count() as u64, batch.histogram_count() as u64);
        let owned = without_label(batch.to_batch()?, label);
        let raw = split(owned, self.log.partitions())
            .into_iter()
            .map(|(p, part)| (p, Version::V2, prw::encode_uncompressed(Version::V2, &part, metadata)))
            .collect();
        Ok(Prepared { parts: parts(raw, body)?, samples, histograms })
    }

    /// The log it publishes to.
    pub fn log(&self) -> &Arc<dyn Log> {
        &self.log
    }

    /// Splits `batch` (decoded from `body`) into the log's partitions and encodes each part
    /// (CPU work, for a blocking thread). `metadata` travels with the parts whose series it
    /// describes. Fails with `storage::Error::InvalidLabels` if a label is not UTF-8, as
    /// appending it would.
    ///
    /// Float series are written straight from the decoded request as remote write 1.0
    /// ([`prw::V1Writer`]); a request with native histograms, start timestamps or metadata goes
    /// through remote write 2.0's messages, which carry them all.
    pub fn prepare(
        &self,
        batch: &BatchRef<'_>,
        body: &[u8],
        metadata: &[MetricMetadata],
    ) -> Result<Prepared, storage::Error> {
        let partitions = self.log.partitions();
        let (samples, histograms) = (batch.sample_count() as u64, batch.histogram_count() as u64);
        let raw: Vec<(u32, Version, Vec<u8>)> =
            if batch.has_histograms() || batch.has_starts() || !metadata.is_empty() {
                split(batch.to_batch()?, partitions)
                    .into_iter()
                    .map(|(p, part)| (p, Version::V2, prw::encode_uncompressed(Version::V2, &part, metadata)))
                    .collect()
            } else {
                // Room for each part's share of the request, so writing seldom moves a part.
                let share = body.len().saturating_mul(4) / partitions as usize;
                let mut writers: Vec<prw::V1Writer> =
                    (0..partitions).map(|_| prw::V1Writer::with_capacity(share)).collect();
                for (labels, samples) in batch.iter() {
                    // Storage checks the labels of new series only; the log's consumers must
                    // not meet a label that refuses its record there.
                    if !labels
                        .iter()
                        .all(|(n, v)| std::str::from_utf8(n).is_ok() && std::str::from_utf8(v).is_ok())
                    {
                        // The error storage gives, naming the series.
                        labels.to_str_pairs()?;
                    }
                    writers[partition_of_raw(labels, partitions) as usize].series(labels, samples);
                }
                writers
                    .into_iter()
                    .enumerate()
                    .filter(|(_, w)| !w.is_empty())
                    .map(|(p, w)| (p as u32, Version::V1, w.finish()))
                    .collect()
            };
        Ok(Prepared { parts: parts(raw, body)?, samples, histograms })
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

/// Each partition's encoded share of the request `body` as a record: version byte, snappy
/// block, and the message id (the body's digest and the partition).
fn parts(raw: Vec<(u32, Version, Vec<u8>)>, body: &[u8]) -> Result<Vec<Part>, storage::Error> {
    let digest = Sha256::digest(body);
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
