//! SIGTERM and SIGINT, the two ways an operator asks strata to stop.
//!
//! The handlers are installed before anything else starts, so a signal that arrives during a
//! long WAL replay is seen (and not turned into the default abrupt exit). The first signal starts
//! a graceful shutdown; `server::run` treats a second one as "stop waiting, exit now".

use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The installed signal streams.
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Installs handlers for SIGTERM and SIGINT. From here on those signals no longer kill the
    /// process; they are delivered to [`Signals::recv`].
    pub fn install() -> io::Result<Signals> {
        Ok(Signals { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// Waits for the next SIGTERM or SIGINT and returns its name for the log.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            Some(()) = self.term.recv() => "SIGTERM",
            Some(()) = self.int.recv() => "SIGINT",
            // Both streams ended (the runtime is going away): no signal will ever come.
            else => std::future::pending().await,
        }
    }
}
