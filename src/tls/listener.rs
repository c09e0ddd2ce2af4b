//! A TLS listener for `axum::serve`.
//!
//! Handshakes run in their own tasks, so a client that opens a connection and never finishes
//! its handshake holds neither the accept loop nor other clients; it is dropped after
//! [`HANDSHAKE_TIMEOUT`]. Finished handshakes are handed to `axum::serve` through a channel.
//! Dropping the listener (which `axum::serve` does when graceful shutdown begins) aborts the
//! accept loop, closing the listening socket, and the certificate reloader.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::debug;

use super::reload::Reloader;
use super::{ReloadingCert, TlsSettings, load_certified_key, provider, server_config};

/// Longest a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections whose handshake finished, waiting for `axum::serve` to take them.
const READY_QUEUE: usize = 64;

/// Accepts TCP connections, completes their TLS handshakes and yields the encrypted streams.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
    /// The accept loop and the reloader; held only so that dropping the listener stops them.
    _tasks: [AbortOnDrop; 2],
}

impl TlsListener {
    /// Loads the certificate of `settings` (failing if it does not load), then serves TLS on
    /// `tcp` and watches the files and SIGHUP for a new certificate.
    pub fn start(tcp: TcpListener, settings: &TlsSettings) -> Result<TlsListener, String> {
        let provider = provider();
        let cert = Arc::new(ReloadingCert::new(load_certified_key(settings, &provider)?));
        let config = server_config(Arc::clone(&cert), Arc::clone(&provider))?;
        let reloader = Reloader::new(settings.clone(), provider, cert)
            .map_err(|e| format!("cannot install the SIGHUP handler for certificate reload: {e}"))?;
        let local_addr = tcp.local_addr().map_err(|e| format!("cannot read the listening address: {e}"))?;
        let (ready_tx, ready) = mpsc::channel(READY_QUEUE);
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let accepting = tokio::spawn(accept_loop(tcp, acceptor, ready_tx));
        let reloading = tokio::spawn(reloader.run());
        Ok(TlsListener { ready, local_addr, _tasks: [AbortOnDrop(accepting), AbortOnDrop(reloading)] })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop ended, which it does only when aborted, i.e. after this listener
            // is dropped: unreachable while `self` exists. Wait rather than panic.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

async fn accept_loop(
    mut tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        // axum's own accept: retries transient errors and backs off on EMFILE.
        let (stream, peer) = axum::serve::Listener::accept(&mut tcp).await;
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    // Fails only when the server is shutting down; the connection is dropped.
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(err)) => debug!(%peer, "TLS handshake failed: {err}"),
                Err(_) => debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
