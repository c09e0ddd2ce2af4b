//! `--role distributor`: a write is decoded as on any other role, then split by series into
//! the log's partitions ([`super::partition`]), each part encoded as a remote write 2.0 message
//! (snappy-compressed protobuf, the request format ingesters already decode) and published; the
//! client is answered once the log has acknowledged every part.
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

use super::metrics::LOG_METRICS;
use super::partition::split;
use super::{Log, LogError};
use remote::metadata::MetricMetadata;

/// Publishes writes to the log.
pub struct Distributor {
    log: Arc<dyn Log>,
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
        Distributor { log }
    }

    /// Splits `batch` (decoded from `body`) into the log's partitions and encodes each part
    /// (CPU work, for a blocking thread). `metadata` travels with the parts whose series it
    /// describes. Fails with `storage::Error::InvalidLabels` if a label is not UTF-8, as
    /// appending it would.
    pub fn prepare(
        &self,
        batch: &BatchRef<'_>,
        body: &[u8],
        metadata: &[MetricMetadata],
    ) -> Result<Prepared, storage::Error> {
        let batch = batch.to_batch()?;
        let histograms = batch.histograms.iter().map(|(_, h)| h.len() as u64).sum();
        let samples = batch.sample_count() as u64;
        let digest = Sha256::digest(body);
        let request: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let parts = split(batch, self.log.partitions())
            .into_iter()
            .map(|(partition, part)| Part {
                partition,
                id: format!("{request}-{partition}"),
                payload: Bytes::from(prw::encode(Version::V2, &part, metadata)),
            })
            .collect();
        Ok(Prepared { parts, samples, histograms })
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
