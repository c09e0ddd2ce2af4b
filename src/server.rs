//! The HTTP router and the process lifecycle: bind, open the database, serve, shut down.
//!
//! Order matters. Signal handlers come first, then the listener is bound and its address logged
//! (so `/-/healthy` answers and `--listen 127.0.0.1:0` is discoverable at once), then `Db::open`
//! runs on a blocking thread while `/-/ready` says 503. On the first SIGTERM/SIGINT the listener
//! stops accepting, in-flight requests finish, and `Db::close` syncs and flushes. A second signal
//! while shutdown (or the open it has to wait for) is still running exits at once, non-zero;
//! that is safe because storage recovers from a crash at any point.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{get, post};
use storage::Db;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinError, JoinHandle};
use tracing::{info, warn};

use crate::api::query::{QueryConfig, QueryService};
use crate::api::read::{RemoteReadConfig, RemoteReadService};
use crate::api::status::{StatusConfig, StatusInfo};
use crate::auth::{AuthSettings, Authenticator};
use crate::ingest::{line_protocol, remote_write};
use crate::log::Log;
use crate::log::distributor::Distributor;
use crate::log::ha::HaTracker;
use crate::log::ingester::{Ingester, Ownership};
use crate::log::jetstream::{JetStreamConfig, JetStreamLog};
use crate::shutdown::Signals;
use crate::state::AppState;
use crate::tls::TlsSettings;
use crate::tls::listener::TlsListener;
use crate::{health, influx, metrics};

/// What the server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// host:port to bind; port 0 picks a free one.
    pub listen: String,
    /// Passed unchanged to `storage::Db::open`.
    pub storage: storage::Options,
    /// What one write request may contain.
    pub limits: remote::Limits,
    /// PromQL engine options and the query concurrency limit.
    pub query: QueryConfig,
    /// Flags and retention as the status endpoints report them.
    pub status: StatusConfig,
    /// Remote-read limits (`--storage.remote.read-*`).
    pub remote_read: RemoteReadConfig,
    /// Whether the admin endpoints are enabled (`--web.enable-admin-api`).
    pub admin_api: bool,
    /// Whether a read may name several tenants (`--tenant.federation`).
    pub tenant_federation: bool,
    /// Write request slots (`--write-max-concurrency`, `--write-max-queue-duration`).
    pub write_admission: crate::ingest::admission::WriteAdmission,
    /// Longest time to read a request or keep an idle connection (`--web.read-timeout`).
    pub read_timeout: std::time::Duration,
    /// Read and write credentials (`--auth.*`); none configured leaves every endpoint open.
    pub auth: AuthSettings,
    /// HTTPS certificate and key (`--tls.*`); `None` serves plain HTTP.
    pub tls: Option<TlsSettings>,
    /// On a query node, the writers to read recent data from (`--query.writer`).
    pub writers: Option<crate::query_node::Writers>,
    /// The ingest log writes go through (`--log.url`), if any.
    pub log: Option<crate::log::LogSettings>,
}

/// Why the process could not start or stop cleanly. `main` logs it and exits non-zero.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// SIGTERM/SIGINT handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] io::Error),
    /// The listen address is invalid, taken, or not ours to bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The `--listen` value.
        addr: String,
        /// Why binding failed.
        #[source]
        source: io::Error,
    },
    /// `Db::open` failed: an unreadable data directory, a corrupt WAL, ...
    #[error("cannot open the database in {}: {source}", dir.display())]
    Open {
        /// The `--data-dir` value.
        dir: PathBuf,
        /// The storage error, which names the file and what is wrong.
        #[source]
        source: storage::Error,
    },
    /// `Db::close` failed to sync or flush; the next start replays the WAL instead.
    #[error("closing the database failed: {0}")]
    Close(#[source] storage::Error),
    /// A credential file named by an `--auth.*` flag cannot be used.
    #[error("authentication setup: {0}")]
    Auth(String),
    /// The TLS certificate or key cannot be loaded, or TLS cannot be set up.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// The HTTP server stopped with an error.
    #[error("the HTTP server failed: {0}")]
    Serve(#[source] io::Error),
    /// A background task panicked (a bug).
    #[error("a background task failed: {0}")]
    Task(#[from] JoinError),
    /// The ingest log's offsets file cannot be read or written.
    #[error("the ingest log's offsets file: {0}")]
    LogOffsets(#[source] io::Error),
    /// A second signal arrived before a graceful shutdown finished.
    #[error("{0} received again; exiting without waiting for shutdown to finish")]
    Interrupted(&'static str),
}

/// The HTTP routes without authentication. Later API routes join here; handlers get the shared
/// state through `State`.
pub fn router(state: Arc<AppState>) -> Router {
    secured_router(state, None)
}

/// The HTTP routes, each checked by `auth` when given (see [`crate::auth`] for which path needs
/// which credentials). Refused requests are still counted in the request metrics.
pub fn secured_router(state: Arc<AppState>, auth: Option<Arc<Authenticator>>) -> Router {
    // axum's default body limit (2 MB) would refuse ordinary remote-write batches with a 413,
    // which senders drop: the write routes get the configured limit instead.
    // Outermost on each write route: a request waits for a slot before its body is read; a
    // request refused there is answered in its route's error dialect.
    use crate::ingest::admission::{Dialect, admit};
    let admitted = |dialect: Dialect| middleware::from_fn_with_state((Arc::clone(&state), dialect), admit);
    let writes = Router::new()
        .route("/api/v1/write", post(remote_write::write).layer(admitted(Dialect::RemoteWrite)))
        .route("/write", post(line_protocol::write_v1).layer(admitted(Dialect::Influx)))
        .route("/api/v2/write", post(line_protocol::write_v2).layer(admitted(Dialect::Influx)))
        .layer(DefaultBodyLimit::max(state.limits().body_bytes_max));
    let mut routes = Router::new()
        .route("/-/healthy", get(health::healthy))
        .route("/-/ready", get(health::ready))
        // Prometheus asks for gzip when it scrapes, as it does of its own /metrics (17 KB plain
        // on a fresh server).
        .route("/metrics", get(metrics::metrics).layer(middleware::from_fn(crate::api::gzip::layer)))
        // `get` answers HEAD too, as InfluxDB's /ping does.
        .route("/ping", get(influx::ping))
        .route("/query", get(influx::query).post(influx::query))
        .merge(writes)
        .merge(crate::api::routes(&state))
        .merge(crate::ui::routes())
        .fallback(not_found);
    if let Some(auth) = auth {
        routes = routes.layer(middleware::from_fn_with_state(auth, crate::auth::enforce));
    }
    // Outside auth and admission, whose refusals leave bodies unread (see `drain`). Twice the
    // write limit: a body refused with 413 for being somewhat over it is still read out.
    let drain_max = (state.limits().body_bytes_max as u64).saturating_mul(2);
    routes
        .layer(middleware::from_fn_with_state(drain_max, drain::drain_unread_body))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), metrics::count_requests))
        .with_state(state)
}

/// Unknown paths: a plain 404 as Prometheus (Go's net/http) answers them.
async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "404 page not found\n")
}

/// Runs strata until SIGTERM/SIGINT and a clean shutdown, or until startup fails.
pub async fn run(mut config: ServerConfig) -> Result<(), RunError> {
    let mut signals = Signals::install().map_err(RunError::Signals)?;
    let auth = Authenticator::load(&config.auth).map_err(RunError::Auth)?.map(Arc::new);
    if let Some(auth) = &auth {
        info!(reads_open = auth.reads_open(), writes_open = auth.writes_open(), "authentication enabled");
        if auth.writes_open() {
            warn!("read credentials are set but no write credentials: anyone who can connect may write");
        }
    }
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|source| RunError::Bind { addr: config.listen.clone(), source })?;
    let addr = local_addr(&listener, &config.listen)?;
    let listener = match &config.tls {
        Some(settings) => Bound::Tls(TlsListener::start(listener, settings).map_err(RunError::Tls)?),
        None => Bound::Plain(listener),
    };
    // Tests and scripts read the port from this line; keep its wording.
    info!(tls = config.tls.is_some(), "strata listening on {addr}");

    let distributor_only = config.log.as_ref().is_some_and(|l| l.consume.is_none());
    let state = Arc::new(
        AppState::with_limits(config.limits.clone())
            .with_query(QueryService::new(&config.query))
            .with_status(StatusInfo::new(config.status.clone()))
            .with_remote_read(RemoteReadService::new(config.remote_read.clone()))
            .with_admin_api(config.admin_api)
            .with_tenant_federation(config.tenant_federation)
            .with_write_admission(config.write_admission.clone())
            .with_wal_replay(Arc::clone(&config.storage.wal_replay_progress))
            .with_writers(config.writers.take())
            .with_log_mode(config.log.is_some())
            .with_distributor_only(distributor_only),
    );
    // The body read is bounded here; the header read and idle time by the accept loop.
    let app = secured_router(Arc::clone(&state), auth)
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(config.read_timeout));
    let (stop_serving, server) = match listener {
        Bound::Plain(tcp) => spawn_server(tcp, app, config.read_timeout),
        Bound::Tls(tls) => spawn_server(tls, app, config.read_timeout),
    };

    if distributor_only {
        let settings = config.log.take();
        return run_distributor(state, settings, signals, stop_serving, server).await;
    }

    let dir = config.storage.data_dir.clone();
    info!(data_dir = %dir.display(), "opening the database");
    let opening = Instant::now();
    let mut open = tokio::task::spawn_blocking(move || Db::open(config.storage));

    let early_signal = tokio::select! {
        opened = &mut open => {
            state.set_db(Arc::new(opened?.map_err(|source| RunError::Open { dir: dir.clone(), source })?));
            None
        }
        signal = signals.recv() => Some(signal),
    };
    let mut ingester = None;
    let early_signal = match (early_signal, config.log.take(), state.db()) {
        (None, Some(settings), Some(db)) => match connect_log(settings.jetstream.clone(), &mut signals).await
        {
            Ok(log) => {
                let ha = settings.ha.clone().map(|c| HaTracker::new(c, &settings.jetstream.prefix));
                state.set_distributor(Arc::new(
                    Distributor::new(Arc::clone(&log))
                        .with_ha(ha)
                        .with_future_window(settings.future_window_ms),
                ));
                let ownership = settings.consume.unwrap_or(Ownership::Fixed(Vec::new()));
                let started =
                    Ingester::start(log, Arc::clone(db), ownership, &dir, &settings.jetstream.prefix)
                        .map_err(RunError::LogOffsets)?;
                state.set_log_offsets(Arc::clone(started.offsets()));
                ingester = Some(started);
                None
            }
            Err(signal) => Some(signal),
        },
        (early, _, _) => early,
    };
    let signal = match early_signal {
        Some(signal) => signal,
        None => {
            info!(open_ms = opening.elapsed().as_millis(), "strata is ready");
            signals.recv().await
        }
    };

    info!(signal, "shutting down: no new connections, finishing in-flight requests");
    state.begin_stopping();
    // Fails only if the server task has already ended, and then there is nothing to stop.
    let _ = stop_serving.send(());
    until_signal(&mut signals, server).await??.map_err(RunError::Serve)?;
    if let Some(ingester) = ingester {
        until_signal(&mut signals, ingester.stop()).await?.map_err(RunError::LogOffsets)?;
    }

    let db = match state.db() {
        Some(db) => Arc::clone(db),
        None => {
            // Db::open cannot be interrupted; let it finish so it can be closed properly.
            info!("waiting for the database to finish opening before closing it");
            let opened = until_signal(&mut signals, open).await??;
            Arc::new(opened.map_err(|source| RunError::Open { dir, source })?)
        }
    };
    info!("closing the database (syncing the WAL, flushing the head)");
    let closing = tokio::task::spawn_blocking(move || db.close());
    until_signal(&mut signals, closing).await??.map_err(RunError::Close)?;
    info!("strata stopped");
    Ok(())
}

/// `--role distributor`: serves writes into the log until SIGTERM/SIGINT; no database.
async fn run_distributor(
    state: Arc<AppState>,
    settings: Option<crate::log::LogSettings>,
    mut signals: Signals,
    stop_serving: oneshot::Sender<()>,
    server: JoinHandle<io::Result<()>>,
) -> Result<(), RunError> {
    let early_signal = match settings {
        Some(settings) => match connect_log(settings.jetstream.clone(), &mut signals).await {
            Ok(log) => {
                let ha = settings.ha.clone().map(|c| HaTracker::new(c, &settings.jetstream.prefix));
                state.set_distributor(Arc::new(
                    Distributor::new(log).with_ha(ha).with_future_window(settings.future_window_ms),
                ));
                info!("strata is ready");
                None
            }
            Err(signal) => Some(signal),
        },
        None => None,
    };
    let signal = match early_signal {
        Some(signal) => signal,
        None => signals.recv().await,
    };
    info!(signal, "shutting down: no new connections, finishing in-flight requests");
    state.begin_stopping();
    let _ = stop_serving.send(());
    until_signal(&mut signals, server).await??.map_err(RunError::Serve)?;
    info!("strata stopped");
    Ok(())
}

/// Connects to the ingest log, retrying every second while it cannot be reached (writes are
/// answered 503 meanwhile); `Err` with the signal that arrived first.
async fn connect_log(settings: JetStreamConfig, signals: &mut Signals) -> Result<Arc<dyn Log>, &'static str> {
    loop {
        tokio::select! {
            opened = JetStreamLog::open(settings.clone()) => match opened {
                Ok(log) => return Ok(Arc::new(log)),
                Err(e) => warn!("{e}; retrying in 1 s"),
            },
            signal = signals.recv() => return Err(signal),
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            signal = signals.recv() => return Err(signal),
        }
    }
}

/// The bound socket, serving plain HTTP or HTTPS.
enum Bound {
    Plain(TcpListener),
    Tls(TlsListener),
}

fn local_addr(listener: &TcpListener, listen: &str) -> Result<SocketAddr, RunError> {
    listener.local_addr().map_err(|source| RunError::Bind { addr: listen.to_owned(), source })
}

/// Serves `app` on `listener` in its own task until the returned sender fires (or is dropped);
/// then stops accepting and waits for in-flight requests.
fn spawn_server<L>(
    listener: L,
    app: Router,
    read_timeout: std::time::Duration,
) -> (oneshot::Sender<()>, JoinHandle<io::Result<()>>)
where
    L: axum::serve::Listener,
{
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let stopped = async move {
        // Err means the sender was dropped, which also means "stop".
        let _ = stop_rx.await;
    };
    let task = tokio::spawn(serve::serve(listener, app, stopped, read_timeout));
    (stop_tx, task)
}

/// Awaits `work`, unless another signal arrives first.
async fn until_signal<T>(signals: &mut Signals, work: impl Future<Output = T>) -> Result<T, RunError> {
    tokio::select! {
        done = work => Ok(done),
        signal = signals.recv() => Err(RunError::Interrupted(signal)),
    }
}

mod drain;
mod serve;

#[cfg(test)]
mod tests;
