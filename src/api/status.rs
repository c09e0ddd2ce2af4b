//! `/api/v1/status/buildinfo`, `runtimeinfo`, `flags`, `config` and `walreplay`, shaped as
//! Prometheus'.
//!
//! **Which version strata reports.** Grafana's Prometheus data source decides what to send
//! from `buildinfo`: its alerting code (`discoverDataSourceFeatures`) treats an answer with
//! no `application` and no `features` member as vanilla Prometheus, and the data source's
//! "detect version" maps `version` onto its list of Prometheus releases (anything newer than
//! the last one it knows counts as that last one) to gate API features by semver. strata
//! serves Prometheus 3's API (the `limit` parameters, `U__`-escaped label names, `infos`,
//! `parse_query`), so it reports [`PROMETHEUS_VERSION`], a 3.x release: Grafana then treats it
//! as a current Prometheus and uses every API it has. strata's own version is in `revision`
//! (`strata-<version>`) and `branch`, which Grafana shows but never parses; no extra members
//! are added, because Grafana reads any `features` member as "Mimir-like".

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::api::respond::Success;
use crate::error::ApiError;
use crate::state::AppState;

/// The Prometheus release whose API strata serves and reports in `buildinfo.version`.
pub const PROMETHEUS_VERSION: &str = "3.5.0";

/// What the status endpoints report about how the server was started.
#[derive(Debug, Clone, Default)]
pub struct StatusConfig {
    /// Every flag by name (without dashes) with its effective value as text.
    pub flags: BTreeMap<String, String>,
    /// `--retention` as given, e.g. "15d".
    pub retention: String,
}

/// [`StatusConfig`] plus the moment the server started.
#[derive(Debug, Clone)]
pub struct StatusInfo {
    config: StatusConfig,
    started: DateTime<Utc>,
}

impl Default for StatusInfo {
    fn default() -> Self {
        StatusInfo::new(StatusConfig::default())
    }
}

impl StatusInfo {
    /// Status for a server starting now.
    pub fn new(config: StatusConfig) -> Self {
        StatusInfo { config, started: Utc::now() }
    }

    /// The flags and their values.
    pub fn flags(&self) -> &BTreeMap<String, String> {
        &self.config.flags
    }

    /// strata's effective configuration as YAML. strata has no configuration file: every
    /// setting is a flag, so this lists the flags, one `name: "value"` line each (JSON
    /// string syntax is also YAML's double-quoted style).
    pub fn config_yaml(&self) -> String {
        let mut yaml = String::from(
            "# strata is configured by command-line flags only; these are their effective values.\n",
        );
        for (name, value) in &self.config.flags {
            let quoted = serde_json::to_string(value).unwrap_or_else(|_| "\"\"".into());
            yaml.push_str(&format!("{name}: {quoted}\n"));
        }
        yaml
    }
}

/// The status routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/status/buildinfo", get(buildinfo))
        .route("/api/v1/status/runtimeinfo", get(runtimeinfo))
        .route("/api/v1/status/flags", get(flags))
        .route("/api/v1/status/config", get(config))
        .route("/api/v1/status/walreplay", get(walreplay))
}

/// `GET /api/v1/status/buildinfo`; see the module documentation for the version reported.
async fn buildinfo() -> Success {
    Success::new(json!({
        "version": PROMETHEUS_VERSION,
        "revision": concat!("strata-", env!("CARGO_PKG_VERSION")),
        "branch": "strata",
        "buildUser": "strata",
        "buildDate": "",
        "goVersion": "none (strata is written in Rust)",
    }))
}

/// `GET /api/v1/status/runtimeinfo`, with Go runtime fields given their closest meaning:
/// `goroutineCount` is the number of OS threads, `GOMAXPROCS` the available parallelism,
/// `GOMEMLIMIT` "no limit" (Go's maximum int64), `GOGC` and `GODEBUG` empty.
async fn runtimeinfo(State(state): State<Arc<AppState>>) -> Result<Success, ApiError> {
    let status = state.status();
    let started = go_time(status.started);
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
    let parallelism = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
    // serde_json writes members in name order, not Prometheus' struct order; JSON clients do
    // not depend on member order.
    Ok(Success::new(json!({
        "startTime": started,
        "CWD": cwd,
        "reloadConfigSuccess": true,
        "lastConfigTime": started,
        "corruptionCount": 0,
        "goroutineCount": thread_count(),
        "GOMAXPROCS": parallelism,
        "GOMEMLIMIT": i64::MAX,
        "GOGC": "",
        "GODEBUG": "",
        "storageRetention": status.config.retention,
    })))
}

/// `GET /api/v1/status/flags`: every flag by name with its value as text.
async fn flags(State(state): State<Arc<AppState>>) -> Success {
    let map: serde_json::Map<String, Value> =
        state.status().flags().iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    Success::new(Value::Object(map))
}

/// `GET /api/v1/status/config`: `{"yaml": "..."}`.
async fn config(State(state): State<Arc<AppState>>) -> Success {
    Success::new(json!({ "yaml": state.status().config_yaml() }))
}

/// `GET /api/v1/status/walreplay`: the first and last WAL segment the startup replay reads
/// and the one it is reading, as Prometheus reports its own. It answers while the database is
/// still opening (every endpoint that needs the database answers 503 until then); all three
/// are 0 before the replay starts and when there was nothing to replay.
async fn walreplay(State(state): State<Arc<AppState>>) -> Success {
    let status = state.wal_replay().status();
    Success::new(json!({ "min": status.min, "max": status.max, "current": status.current }))
}

/// A time as Go's `time.Time` marshals it: RFC 3339 with the fraction's trailing zeros trimmed.
fn go_time(t: DateTime<Utc>) -> String {
    let text = t.to_rfc3339_opts(SecondsFormat::Nanos, true);
    match text.strip_suffix('Z').and_then(|s| s.split_once('.')) {
        Some((whole, frac)) => {
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() { format!("{whole}Z") } else { format!("{whole}.{frac}Z") }
        }
        None => text,
    }
}

/// Threads of this process (Linux: `Threads:` in /proc/self/status), 0 if unknown.
fn thread_count() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").and_then(|n| n.trim().parse().ok())))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
