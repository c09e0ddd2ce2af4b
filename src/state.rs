//! What every request handler shares: the database once it is open, whether the process is
//! shutting down, the write limits, the ingest counters, and the little in-memory state of the
//! write protocols (remote-write metadata, InfluxDB database names).
//!
//! The listener is bound before the database opens (so `/-/healthy` answers during a long WAL
//! replay), which is why the database is a slot filled once rather than a plain field.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use storage::Db;
use storage::ReplayProgress;

use crate::api::query::QueryService;
use crate::api::read::RemoteReadService;
use crate::api::status::StatusInfo;
use crate::influx::Databases;
use crate::ingest::admission::WriteAdmission;
use crate::log::distributor::Distributor;
use crate::log::ingester::Offsets;
use crate::metadata::MetadataStore;
use crate::metrics::Metrics;

/// Shared by all handlers through `axum::extract::State<Arc<AppState>>`.
#[derive(Default)]
pub struct AppState {
    db: OnceLock<Arc<Db>>,
    stopping: AtomicBool,
    limits: remote::Limits,
    metrics: Metrics,
    metadata: MetadataStore,
    databases: Databases,
    query: QueryService,
    remote_read: RemoteReadService,
    admin_api: bool,
    /// `--tenant.federation`: a read may name several tenants.
    tenant_federation: bool,
    status: StatusInfo,
    write_admission: WriteAdmission,
    wal_replay: Arc<ReplayProgress>,
    /// On a query node, the writers it reads recent data from (`--query.writer`).
    writers: Option<Arc<crate::query_node::Writers>>,
    /// With `--log.url`, the log writes are published to, once connected.
    distributor: OnceLock<Arc<Distributor>>,
    /// `--role distributor`: no database is opened here; writes only go to the log.
    distributor_only: bool,
    /// `--log.url` is set: writes go to the log (and wait for it to connect), never straight
    /// to a database.
    log_mode: bool,
    /// What this process consumes of the log, once its ingester started.
    log_offsets: OnceLock<Arc<Offsets>>,
}

impl AppState {
    /// A state whose database is still opening, with the default write limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A state whose database is still opening, with `limits` for write requests.
    pub fn with_limits(limits: remote::Limits) -> Self {
        AppState { limits, ..Self::default() }
    }

    /// The same state reading recent data from `writers` (a query node's `--query.writer`).
    pub fn with_writers(self, writers: Option<crate::query_node::Writers>) -> Self {
        AppState { writers: writers.map(Arc::new), ..self }
    }

    /// The same state for a distributor (`--role distributor`, with `true`), which opens no
    /// database.
    pub fn with_distributor_only(self, distributor_only: bool) -> Self {
        AppState { distributor_only, log_mode: self.log_mode || distributor_only, ..self }
    }

    /// The same state with writes going through the ingest log (`--log.url`).
    pub fn with_log_mode(self, log_mode: bool) -> Self {
        AppState { log_mode: log_mode || self.distributor_only, ..self }
    }

    /// Whether writes go through the ingest log.
    pub fn log_mode(&self) -> bool {
        self.log_mode
    }

    /// Whether this process is a distributor, with no database of its own.
    pub fn is_distributor_only(&self) -> bool {
        self.distributor_only
    }

    /// Sends writes to the log from now on. Called once, when the log is connected.
    pub fn set_distributor(&self, distributor: Arc<Distributor>) {
        let _ = self.distributor.set(distributor);
    }

    /// Records what this process consumes of the log. Called once, when its ingester starts.
    pub fn set_log_offsets(&self, offsets: Arc<Offsets>) {
        let _ = self.log_offsets.set(offsets);
    }

    /// What this process consumes of the log, if it consumes it.
    pub fn log_offsets(&self) -> Option<&Arc<Offsets>> {
        self.log_offsets.get()
    }

    /// Where writes go instead of the database, when `--log.url` is set and the log connected.
    pub fn distributor(&self) -> Option<&Arc<Distributor>> {
        self.distributor.get()
    }

    /// The writers a query node reads recent data from, if any.
    pub fn writers(&self) -> Option<&Arc<crate::query_node::Writers>> {
        self.writers.as_ref()
    }

    /// The same state with `query` evaluating PromQL (engine options and concurrency gate).
    pub fn with_query(self, query: QueryService) -> Self {
        AppState { query, ..self }
    }

    /// The same state with `status` answering the `/api/v1/status/*` endpoints.
    pub fn with_status(self, status: StatusInfo) -> Self {
        AppState { status, ..self }
    }

    /// The same state with `remote_read` bounding `/api/v1/read`.
    pub fn with_remote_read(self, remote_read: RemoteReadService) -> Self {
        AppState { remote_read, ..self }
    }

    /// The same state with the admin endpoints enabled or not (`--web.enable-admin-api`).
    pub fn with_admin_api(self, enabled: bool) -> Self {
        AppState { admin_api: enabled, ..self }
    }

    /// The same state with reads across tenants allowed or not (`--tenant.federation`).
    pub fn with_tenant_federation(self, enabled: bool) -> Self {
        AppState { tenant_federation: enabled, ..self }
    }

    /// Whether a read may name several tenants (`--tenant.federation`).
    pub fn tenant_federation(&self) -> bool {
        self.tenant_federation
    }

    /// Remote-read limits and the gate on concurrent remote reads.
    pub fn remote_read(&self) -> &RemoteReadService {
        &self.remote_read
    }

    /// The write request slots (`--write.max-concurrency`, `--write.max-queue-duration`).
    pub fn with_write_admission(self, write_admission: WriteAdmission) -> Self {
        AppState { write_admission, ..self }
    }

    /// The same state reporting `progress` at `/api/v1/status/walreplay` (the one the
    /// database's `Options::wal_replay_progress` updates while it opens).
    pub fn with_wal_replay(self, progress: Arc<ReplayProgress>) -> Self {
        AppState { wal_replay: progress, ..self }
    }

    /// How far the WAL replay of the opening database has come.
    pub fn wal_replay(&self) -> &ReplayProgress {
        &self.wal_replay
    }

    /// The write request slots.
    pub fn write_admission(&self) -> &WriteAdmission {
        &self.write_admission
    }

    /// Whether the admin endpoints (delete series, clean tombstones, snapshot) may be used.
    pub fn admin_api_enabled(&self) -> bool {
        self.admin_api
    }

    /// PromQL evaluation settings and the concurrency gate.
    pub fn query(&self) -> &QueryService {
        &self.query
    }

    /// Start time, flags and configuration, for the status endpoints.
    pub fn status(&self) -> &StatusInfo {
        &self.status
    }

    /// Publishes the opened database to the handlers. Called once, when `Db::open` returns; a
    /// second call is ignored because the first database stays the one being served.
    pub fn set_db(&self, db: Arc<Db>) {
        if self.db.set(db).is_err() {
            tracing::warn!("database already set; ignoring a second one");
        }
    }

    /// The database, or `None` while it is still opening.
    pub fn db(&self) -> Option<&Arc<Db>> {
        self.db.get()
    }

    /// Marks the process as shutting down, so `/-/ready` tells load balancers to stop sending.
    pub fn begin_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// True once shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// What one write request may contain.
    pub fn limits(&self) -> &remote::Limits {
        &self.limits
    }

    /// The latest remote-write metadata per metric name.
    pub fn metadata(&self) -> &MetadataStore {
        &self.metadata
    }

    /// The counters `/metrics` exposes beside storage's own.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// InfluxDB database names seen in `CREATE DATABASE` and writes.
    pub fn databases(&self) -> &Databases {
        &self.databases
    }
}
