//! The accept loop. axum's `serve` sets no timeouts, so a client that sends its request a byte
//! a minute, or opens connections and never speaks, would hold them forever. This loop serves
//! each connection with hyper-util's builder, with `--web.read-timeout` as the limit for
//! receiving a request's headers, which on a kept-alive connection also bounds how long it may
//! sit idle between requests (the body read is bounded by a layer on the router, see
//! `secured_router`). On stop it stops accepting and lets in-flight requests finish, as axum's
//! graceful shutdown does.

use std::future::Future;
use std::io;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

/// Serves `app` on `listener` until `stop` completes, then waits for open connections to
/// finish their in-flight requests.
pub(super) async fn serve<L>(
    mut listener: L,
    app: Router,
    stop: impl Future<Output = ()>,
    read_timeout: Duration,
) -> io::Result<()>
where
    L: axum::serve::Listener,
{
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(read_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (io, _) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service).into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A client that goes away or times out ends its connection; nothing to report.
            if let Err(e) = conn.await {
                tracing::trace!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
