//! Prometheus HA pairs (`--ha-tracker`): two Prometheus replicas with the same cluster label
//! and different replica labels (`cluster`, `__replica__` by default, as Cortex and Mimir) send
//! the same series; distributors keep one replica's samples at a time and fail over to the
//! other when the elected one stops sending, as Cortex's and Mimir's HA tracker do.
//!
//! The election is one etcd key per cluster, `strata/<log name>/ha/<cluster>` (a tenant's:
//! `strata/<log name>/tenants/<tenant>/ha/<cluster>`), holding
//! `<replica> <milliseconds>`: the elected replica and when a distributor last saw it, written
//! only by compare-and-swap on the key's revision, so distributors agree. A distributor
//! refreshes the time at most every `--ha-tracker.update-timeout` while the elected replica
//! sends; another replica takes over once the time is older than
//! `--ha-tracker.failover-timeout`. Samples of a replica that is not elected are dropped (the
//! request is answered as stored, as Mimir does); the replica label is removed from what is
//! kept, so both replicas' series are one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;

use super::LogError;
use super::leases::{Etcd, b64, int, kvs};

/// The HA tracker's settings.
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// etcd endpoints (`--leases.url`).
    pub endpoints: Vec<String>,
    /// The label naming a replica's cluster.
    pub cluster_label: String,
    /// The label naming the replica, removed from what is kept.
    pub replica_label: String,
    /// How often the elected replica's time is written while it sends.
    pub update_timeout: Duration,
    /// How long the elected replica may be silent before another takes over.
    pub failover_timeout: Duration,
}

/// What to do with a request from a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Keep its samples (without the replica label).
    Keep,
    /// Drop them: another replica is elected.
    Drop,
}

/// The election of each cluster as this distributor last read or wrote it.
#[derive(Debug, Clone)]
struct Elected {
    replica: String,
    /// When the elected replica was last seen, as stored (ms since the epoch).
    seen_ms: i64,
    /// When this was read from etcd.
    read: Instant,
}

/// The elections, shared by the distributors of a log through etcd.
pub struct HaTracker {
    etcd: Arc<Etcd>,
    /// `strata/<log name>/`.
    root: String,
    config: HaConfig,
    cache: Mutex<HashMap<String, Elected>>,
}

/// How long a cached election that drops a replica is trusted before it is read again.
const RECHECK: Duration = Duration::from_secs(1);

impl HaTracker {
    /// A tracker for the log `log_name`.
    pub fn new(config: HaConfig, log_name: &str) -> HaTracker {
        let etcd = Arc::new(Etcd::new(config.endpoints.clone(), Duration::from_secs(5)));
        HaTracker { etcd, root: format!("strata/{log_name}/"), config, cache: Mutex::new(HashMap::new()) }
    }

    /// The settings.
    pub fn config(&self) -> &HaConfig {
        &self.config
    }

    /// Whether samples of `replica` of `cluster` of `tenant` (`None`: the default tenant;
    /// each tenant's clusters are elected apart, as in Mimir) are kept, at `now_ms`.
    pub async fn check(
        &self,
        tenant: Option<&str>,
        cluster: &str,
        replica: &str,
        now_ms: i64,
    ) -> Result<Verdict, LogError> {
        let update = i64::try_from(self.config.update_timeout.as_millis()).unwrap_or(i64::MAX);
        let failover = i64::try_from(self.config.failover_timeout.as_millis()).unwrap_or(i64::MAX);
        // Tenant ids hold no `/`: a tenant's keys cannot meet the default tenant's.
        let key = match tenant {
            None => format!("{}ha/{cluster}", self.root),
            Some(t) => format!("{}tenants/{t}/ha/{cluster}", self.root),
        };
        if let Some(e) = self.cache.lock().get(&key).cloned() {
            if e.replica == replica && now_ms - e.seen_ms < update {
                return Ok(Verdict::Keep);
            }
            if e.replica != replica && now_ms - e.seen_ms < failover && e.read.elapsed() < RECHECK {
                return Ok(Verdict::Drop);
            }
        }
        for _ in 0..4 {
            let answer = self.etcd.call("/v3/kv/range", json!({ "key": b64(&key) })).await?;
            let current = kvs(&answer).into_iter().next().and_then(|(_, v)| {
                let (r, t) = v.rsplit_once(' ')?;
                Some((r.to_string(), t.parse::<i64>().ok()?))
            });
            let revision = int(&answer["kvs"][0]["mod_revision"]);
            let (verdict, write) = match &current {
                Some((r, seen)) if r == replica => (Verdict::Keep, now_ms - seen >= update),
                Some((_, seen)) if now_ms - seen < failover => (Verdict::Drop, false),
                // No election yet, or the elected replica fell silent: this one takes over.
                _ => (Verdict::Keep, true),
            };
            if !write {
                let (r, seen) = current.clone().unwrap_or_default();
                self.cache
                    .lock()
                    .insert(key.clone(), Elected { replica: r, seen_ms: seen, read: Instant::now() });
                return Ok(verdict);
            }
            let compare = json!([{ "target": "MOD", "key": b64(&key), "result": "EQUAL", "modRevision": revision.to_string() }]);
            let put =
                json!([{ "requestPut": { "key": b64(&key), "value": b64(&format!("{replica} {now_ms}")) } }]);
            let answer = self.etcd.call("/v3/kv/txn", json!({ "compare": compare, "success": put })).await?;
            if answer["succeeded"].as_bool().unwrap_or(false) {
                if current.as_ref().is_none_or(|(r, _)| r != replica) {
                    tracing::info!(cluster, replica, "HA tracker: elected replica");
                }
                let elected = Elected { replica: replica.to_string(), seen_ms: now_ms, read: Instant::now() };
                self.cache.lock().insert(key.clone(), elected);
                return Ok(Verdict::Keep);
            }
            // Another distributor wrote first: read again.
        }
        Err(LogError::Unavailable(format!("HA tracker: cluster {cluster:?} kept changing in etcd")))
    }
}

/// The (cluster, replica) a request's series name, if any carries both labels. A Prometheus
/// sets them as external labels, the same on every series it sends.
pub fn replica_of<'a>(
    series: impl Iterator<Item = storage::RawLabels<'a>>,
    config: &HaConfig,
) -> Option<(String, String)> {
    for labels in series {
        let (Some(cluster), Some(replica)) =
            (labels.get(&config.cluster_label), labels.get(&config.replica_label))
        else {
            continue;
        };
        return Some((
            String::from_utf8_lossy(cluster).into_owned(),
            String::from_utf8_lossy(replica).into_owned(),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use storage::{BatchRef, Labels, Sample};

    use super::*;

    fn config() -> HaConfig {
        HaConfig {
            endpoints: Vec::new(),
            cluster_label: "cluster".into(),
            replica_label: "__replica__".into(),
            update_timeout: Duration::from_secs(15),
            failover_timeout: Duration::from_secs(30),
        }
    }

    /// The pair is read off the first series that names both; a request without is no pair's.
    #[test]
    fn a_request_names_its_replica_by_its_labels() {
        let mut b = BatchRef::new();
        b.push([("__name__", "a"), ("cluster", "c")], [Sample::new(1, 1.0)]);
        b.push([("__name__", "b"), ("cluster", "c"), ("__replica__", "r2")], [Sample::new(1, 1.0)]);
        let got = replica_of(b.iter().map(|(l, _)| l), &config());
        assert_eq!(got, Some(("c".to_string(), "r2".to_string())));
        let mut plain = BatchRef::new();
        plain.push([("__name__", "a"), ("cluster", "c")], [Sample::new(1, 1.0)]);
        assert_eq!(replica_of(plain.iter().map(|(l, _)| l), &config()), None);
    }

    /// Only the replica label goes (`BatchRef::remove_label`, as the distributor keeps a
    /// replica's request); series without it stay as they are.
    #[test]
    fn the_replica_label_is_removed() {
        let mut b = BatchRef::new();
        b.push([("__name__", "up"), ("__replica__", "r1"), ("cluster", "c")], [Sample::new(1, 1.0)]);
        b.push([("__name__", "x")], [Sample::new(1, 1.0)]);
        b.remove_label("__replica__");
        let out = b.to_batch().unwrap();
        assert_eq!(out.series[0].0, Labels::from_pairs(&[("__name__", "up"), ("cluster", "c")]));
        assert_eq!(out.series[1].0, Labels::from_pairs(&[("__name__", "x")]));
    }
}
