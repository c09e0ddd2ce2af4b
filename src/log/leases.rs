//! Which ingester consumes which partition of the log: claims held with etcd leases
//! (`--leases.url`), so that a partition whose ingester died is taken over once its lease
//! expires (`--leases.ttl`), and no two live ingesters consume it at once.
//!
//! Keys, under `strata/<log name>/`:
//!
//! - `members/<member>`: one per live ingester, attached to its lease;
//! - `owners/<p>`: the member consuming partition `p`, attached to that member's lease: created
//!   only if absent (a transaction on its create revision), so one claim wins; it disappears
//!   when the lease expires or is revoked;
//! - `stored/<p>`: the offset up to which partition `p`'s records are in files in the bucket
//!   (the positions of the owner's newest bucket record, `Db::positions_stored`), written only
//!   by the current owner (a transaction comparing `owners/<p>`); not leased, so the next owner
//!   starts after it.
//!
//! A member whose lease keep-alive fails is fenced: it stops consuming and recording at once,
//! since its claims may already be another's.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tracing::warn;

use super::LogError;

/// Where the leases are and how long they last (the `--leases.*` flags).
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// etcd endpoints, `http://host:port`.
    pub endpoints: Vec<String>,
    /// A lease's time to live: how long a dead ingester's partitions wait for a new owner.
    pub ttl: Duration,
    /// This ingester's name among the members (unique among live ones).
    pub member: String,
}

/// etcd's v3 API through its JSON gateway (`POST /v3/<service>/<method>`, keys and values in
/// base64, 64-bit integers as strings), which every etcd 3.4 and later serves on its client
/// port. Calls block; [`Etcd::call`] runs them on tokio's blocking pool.
pub(super) struct Etcd {
    endpoints: Vec<String>,
    agent: ureq::Agent,
}

impl Etcd {
    pub(super) fn new(endpoints: Vec<String>, timeout: Duration) -> Etcd {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Etcd { endpoints, agent }
    }

    /// `path` with `body` on the first endpoint that answers.
    pub(super) async fn call(self: &Arc<Self>, path: &'static str, body: Value) -> Result<Value, LogError> {
        let etcd = Arc::clone(self);
        tokio::task::spawn_blocking(move || etcd.call_blocking(path, &body))
            .await
            .map_err(|e| LogError::Unavailable(format!("etcd {path}: {e}")))?
    }

    fn call_blocking(&self, path: &str, body: &Value) -> Result<Value, LogError> {
        let body = body.to_string();
        let mut last = String::from("no endpoint");
        for endpoint in &self.endpoints {
            let url = format!("{}{path}", endpoint.trim_end_matches('/'));
            let response =
                match self.agent.post(&url).header("Content-Type", "application/json").send(body.as_str()) {
                    Ok(r) => r,
                    Err(e) => {
                        last = format!("{url}: {e}");
                        continue;
                    }
                };
            let status = response.status().as_u16();
            let mut text = String::new();
            if let Err(e) = response.into_body().into_reader().read_to_string(&mut text) {
                last = format!("{url}: {e}");
                continue;
            }
            if status != 200 {
                return Err(LogError::Refused(format!("etcd {url}: HTTP {status}: {}", text.trim())));
            }
            return serde_json::from_str(&text).map_err(|e| LogError::Refused(format!("etcd {url}: {e}")));
        }
        Err(LogError::Unavailable(format!("etcd: {last}")))
    }
}

pub(super) fn b64(s: &str) -> String {
    BASE64.encode(s)
}

/// A 64-bit integer of the gateway's answers (written as a string), 0 where absent.
pub(super) fn int(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64()).unwrap_or(0)
}

/// The keys and values of a range answer, decoded.
pub(super) fn kvs(answer: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| {
        let bytes = BASE64.decode(v.as_str().unwrap_or_default()).unwrap_or_default();
        String::from_utf8(bytes).unwrap_or_default()
    };
    answer["kvs"].as_array().into_iter().flatten().map(|kv| (text(&kv["key"]), text(&kv["value"]))).collect()
}

/// The end of the range of keys starting with `prefix` (its last byte plus one).
fn prefix_end(prefix: &str) -> String {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    BASE64.encode(end)
}

/// One ingester's membership: its lease, kept alive in the background.
pub struct Membership {
    etcd: Arc<Etcd>,
    lease: i64,
    member: String,
    root: String,
    lost: Arc<AtomicBool>,
    keeper: JoinHandle<()>,
}

impl Membership {
    /// Takes a lease and registers as a member of the log `log_name`.
    pub async fn join(config: &LeaseConfig, log_name: &str) -> Result<Membership, LogError> {
        let etcd = Arc::new(Etcd::new(config.endpoints.clone(), config.ttl / 2));
        let ttl = config.ttl.as_secs().max(2);
        let lease = int(&etcd.call("/v3/lease/grant", json!({ "TTL": ttl })).await?["ID"]);
        if lease == 0 {
            return Err(LogError::Refused("etcd granted no lease".into()));
        }
        let root = format!("strata/{log_name}/");
        let key = format!("{root}members/{}", config.member);
        let put = json!({ "key": b64(&key), "value": b64(&config.member), "lease": lease.to_string() });
        etcd.call("/v3/kv/put", put).await?;
        let lost = Arc::new(AtomicBool::new(false));
        let keeper = tokio::spawn(keep_alive(Arc::clone(&etcd), lease, config.ttl, Arc::clone(&lost)));
        Ok(Membership { etcd, lease, member: config.member.clone(), root, lost, keeper })
    }

    /// Whether the lease was lost: every claim of this membership may be another's now.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// The live members.
    pub async fn members(&self) -> Result<usize, LogError> {
        let prefix = format!("{}members/", self.root);
        let range = json!({ "key": b64(&prefix), "range_end": prefix_end(&prefix), "count_only": true });
        let answer = self.etcd.call("/v3/kv/range", range).await?;
        Ok(usize::try_from(int(&answer["count"])).unwrap_or(0))
    }

    /// The partitions claimed now, by member.
    pub async fn owners(&self) -> Result<BTreeMap<u32, String>, LogError> {
        let prefix = format!("{}owners/", self.root);
        let range = json!({ "key": b64(&prefix), "range_end": prefix_end(&prefix) });
        let answer = self.etcd.call("/v3/kv/range", range).await?;
        Ok(kvs(&answer)
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.parse().ok()?, v)))
            .collect())
    }

    /// Runs a transaction: `then` if every comparison in `when` holds; whether they did.
    async fn txn(&self, when: Value, then: Value) -> Result<bool, LogError> {
        let answer = self.etcd.call("/v3/kv/txn", json!({ "compare": when, "success": then })).await?;
        Ok(answer["succeeded"].as_bool().unwrap_or(false))
    }

    fn owner_is_me(&self, key: &str) -> Value {
        json!([{ "target": "VALUE", "key": b64(key), "result": "EQUAL", "value": b64(&self.member) }])
    }

    /// Claims partition `p` if nobody holds it; whether the claim is ours.
    pub async fn claim(&self, p: u32) -> Result<bool, LogError> {
        let key = format!("{}owners/{p}", self.root);
        let absent =
            json!([{ "target": "CREATE", "key": b64(&key), "result": "EQUAL", "createRevision": "0" }]);
        let put = json!([{ "requestPut": { "key": b64(&key), "value": b64(&self.member), "lease": self.lease.to_string() } }]);
        self.txn(absent, put).await
    }

    /// Gives partition `p` up, if it is ours.
    pub async fn release(&self, p: u32) -> Result<(), LogError> {
        let key = format!("{}owners/{p}", self.root);
        let delete = json!([{ "requestDeleteRange": { "key": b64(&key) } }]);
        self.txn(self.owner_is_me(&key), delete).await.map(|_| ())
    }

    /// The offset up to which partition `p`'s records are in the bucket (0: none recorded).
    pub async fn stored(&self, p: u32) -> Result<u64, LogError> {
        let key = format!("{}stored/{p}", self.root);
        let answer = self.etcd.call("/v3/kv/range", json!({ "key": b64(&key) })).await?;
        Ok(kvs(&answer).first().and_then(|(_, v)| v.parse().ok()).unwrap_or(0))
    }

    /// Records that partition `p`'s records up to `offset` are in the bucket, if `p` is still
    /// ours; whether it was.
    pub async fn record_stored(&self, p: u32, offset: u64) -> Result<bool, LogError> {
        if self.lost() {
            return Ok(false);
        }
        let owner = format!("{}owners/{p}", self.root);
        let key = format!("{}stored/{p}", self.root);
        let put = json!([{ "requestPut": { "key": b64(&key), "value": b64(&offset.to_string()) } }]);
        self.txn(self.owner_is_me(&owner), put).await
    }

    /// Ends the membership: the lease is revoked, so its partitions are free at once rather
    /// than when the lease would have expired.
    pub async fn leave(self) {
        self.keeper.abort();
        if let Err(e) = self.etcd.call("/v3/lease/revoke", json!({ "ID": self.lease.to_string() })).await {
            warn!("etcd: revoking the lease failed ({e}); its partitions are free when it expires");
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Renews the lease every third of its time to live; sets `lost` once a renewal fails or
/// finds the lease gone, and stops.
async fn keep_alive(etcd: Arc<Etcd>, lease: i64, ttl: Duration, lost: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(ttl / 3).await;
        let answer = etcd.call("/v3/lease/keepalive", json!({ "ID": lease.to_string() })).await;
        let why = match answer {
            Ok(a) if int(&a["result"]["TTL"]) > 0 => continue,
            Ok(_) => "it expired".to_string(),
            Err(e) => e.to_string(),
        };
        warn!("etcd: the lease was lost ({why}); this ingester stops consuming its partitions");
        lost.store(true, Ordering::Release);
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gateway's answers, as etcd 3.4 writes them.
    #[test]
    fn answers_are_read_as_the_gateway_writes_them() {
        let range: Value = serde_json::from_str(
            r#"{"header":{"revision":"2"},"kvs":[{"key":"c3RyYXRhL3gvb3duZXJzLzA=","create_revision":"2","value":"bWU=","lease":"9041999153514966279"}],"count":"1"}"#,
        )
        .unwrap();
        assert_eq!(kvs(&range), [("strata/x/owners/0".to_string(), "me".to_string())]);
        assert_eq!(int(&range["count"]), 1);
        assert_eq!(int(&range["missing"]), 0);
        let expired: Value = serde_json::from_str(r#"{"result":{"header":{},"ID":"7"}}"#).unwrap();
        assert_eq!(int(&expired["result"]["TTL"]), 0);
        assert_eq!(BASE64.decode(prefix_end("a/b/")).unwrap(), b"a/b0");
    }
}
