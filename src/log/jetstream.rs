//! [`Log`] on NATS JetStream: partition `k` is the stream `<prefix>-p<k>` with the one subject
//! `<prefix>.p<k>`, file storage, `--log.replicas` replicas, records kept `--log.retention`.
//!
//! A stream per partition rather than one stream with a subject per partition: a stream is
//! JetStream's unit of replication and ordering (its own Raft group in a cluster), so
//! partitions are spread over the cluster's servers and a slow one holds back only its own.
//! Publishes carry `Nats-Msg-Id`, JetStream's de-duplication within the stream's window (2 min),
//! and resolve on the stream's acknowledgement, which a replicated stream gives once a quorum
//! of its replicas stored the message. Reads are ordered consumers: ephemeral, flow-controlled,
//! recreated by the client from the last sequence seen after any gap or reconnection.

use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull::OrderedConfig};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{Config as StreamConfig, StorageType};
use async_nats::jetstream::{self, Context};
use axum::body::Bytes;
use futures_util::StreamExt;
use tracing::info;

use super::{Log, LogError, LogFuture, Record, Records};

/// How a log on JetStream is laid out (the `--log.*` flags).
#[derive(Debug, Clone)]
pub struct JetStreamConfig {
    /// The server(s) to connect to: `nats://host:port`, comma-separated for a cluster.
    pub url: String,
    /// Names the streams (`<prefix>-p<k>`) and subjects (`<prefix>.p<k>`).
    pub prefix: String,
    /// Partitions, each a stream.
    pub partitions: u32,
    /// Replicas of each stream (1 on a single server; 3 in a production cluster).
    pub replicas: usize,
    /// How long records are kept: longer than an ingester may take to upload what it consumed.
    pub retention: Duration,
}

/// An open log on JetStream.
pub struct JetStreamLog {
    js: Context,
    config: JetStreamConfig,
}

impl JetStreamLog {
    /// Connects and makes sure every partition's stream exists with this layout (created if
    /// missing; an existing stream's other settings are left as they are).
    pub async fn open(config: JetStreamConfig) -> Result<JetStreamLog, LogError> {
        let servers = config
            .url
            .split(',')
            .map(|u| u.trim().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LogError::Refused(format!("--log.url {}: {e}", config.url)))?;
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(servers)
            .await
            .map_err(|e| LogError::Unavailable(format!("cannot connect to {}: {e}", config.url)))?;
        let js = jetstream::new(client);
        // Checking the streams gets a shorter timeout than publishing: while a stream's leader
        // is being elected again (a server restarting), its requests go unanswered, and with
        // the default (5 s per request, then a retry a second later) a restarting writer took
        // 11 s to be ready in the kill loop. Publish acks keep the default, which a loaded
        // cluster may need.
        let mut admin = js.clone();
        admin.set_timeout(STREAM_CHECK_TIMEOUT);
        for p in 0..config.partitions {
            admin
                .get_or_create_stream(StreamConfig {
                    name: stream_name(&config.prefix, p),
                    subjects: vec![subject(&config.prefix, p)],
                    storage: StorageType::File,
                    num_replicas: config.replicas,
                    max_age: config.retention,
                    duplicate_window: Duration::from_secs(120),
                    ..Default::default()
                })
                .await
                .map_err(|e| {
                    LogError::Refused(format!(
                        "stream {} ({} replicas, --log.replicas): {e}",
                        stream_name(&config.prefix, p),
                        config.replicas
                    ))
                })?;
        }
        info!(url = %config.url, partitions = config.partitions, replicas = config.replicas, "ingest log open");
        Ok(JetStreamLog { js, config })
    }
}

/// The timeout of the requests that check (and create) the streams at startup.
const STREAM_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

fn stream_name(prefix: &str, partition: u32) -> String {
    format!("{prefix}-p{partition}")
}

fn subject(prefix: &str, partition: u32) -> String {
    format!("{prefix}.p{partition}")
}

impl Log for JetStreamLog {
    fn partitions(&self) -> u32 {
        self.config.partitions
    }

    fn publish(&self, partition: u32, id: String, payload: Bytes) -> LogFuture<'_, ()> {
        Box::pin(async move {
            let message = PublishMessage::build().payload(payload).message_id(id);
            let ack = self
                .js
                .send_publish(subject(&self.config.prefix, partition), message)
                .await
                .map_err(|e| LogError::Unavailable(format!("publish to partition {partition}: {e}")))?;
            ack.await.map_err(|e| {
                LogError::Unavailable(format!("partition {partition} did not acknowledge: {e}"))
            })?;
            Ok(())
        })
    }

    fn last_offset(&self, partition: u32) -> LogFuture<'_, u64> {
        Box::pin(async move {
            let name = stream_name(&self.config.prefix, partition);
            let mut stream = self
                .js
                .get_stream(&name)
                .await
                .map_err(|e| LogError::Unavailable(format!("stream {name}: {e}")))?;
            let info =
                stream.info().await.map_err(|e| LogError::Unavailable(format!("stream {name}: {e}")))?;
            Ok(info.state.last_sequence)
        })
    }

    fn read_after(&self, partition: u32, after: u64) -> LogFuture<'_, Records> {
        Box::pin(async move {
            let name = stream_name(&self.config.prefix, partition);
            let stream = self
                .js
                .get_stream(&name)
                .await
                .map_err(|e| LogError::Unavailable(format!("stream {name}: {e}")))?;
            let deliver_policy = match after {
                0 => DeliverPolicy::All,
                n => DeliverPolicy::ByStartSequence { start_sequence: n.saturating_add(1) },
            };
            let consumer = stream
                .create_consumer(OrderedConfig { deliver_policy, ..Default::default() })
                .await
                .map_err(|e| LogError::Unavailable(format!("consumer on {name}: {e}")))?;
            let messages = consumer
                .messages()
                .await
                .map_err(|e| LogError::Unavailable(format!("reading {name}: {e}")))?;
            let records = messages.map(move |m| {
                let m =
                    m.map_err(|e| LogError::Unavailable(format!("reading partition {partition}: {e}")))?;
                let offset = m
                    .info()
                    .map_err(|e| {
                        LogError::Refused(format!(
                            "a record of partition {partition} without its sequence: {e}"
                        ))
                    })?
                    .stream_sequence;
                Ok(Record { offset, payload: m.payload.clone() })
            });
            Ok(Box::pin(records) as Records)
        })
    }
}
