//! Replacing the served certificate when its files change or on SIGHUP.
//!
//! The files are compared by content (a SHA-256 of certificate and key together), not by
//! modification time: tools that rotate certificates by swapping a symlink (Kubernetes secret
//! volumes) or that preserve timestamps are still noticed, and the files are small. A pair
//! that fails to load is remembered too, so a broken update is logged once, not every interval;
//! the next change (the missing half of an update arriving) is tried again.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use sha2::{Digest, Sha256};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::MissedTickBehavior;
use tracing::{error, info};

use super::{ReloadingCert, TlsSettings, load_certified_key};

/// Watches the certificate files of `settings` and SIGHUP, replacing `cert`'s contents when a
/// new pair loads. Runs until its task is aborted.
pub struct Reloader {
    settings: TlsSettings,
    provider: Arc<CryptoProvider>,
    cert: Arc<ReloadingCert>,
    hangup: Signal,
    /// Digest of the pair last tried (loaded or refused).
    last: Option<[u8; 32]>,
}

impl Reloader {
    /// Installs the SIGHUP handler (from here on SIGHUP no longer ends the process) and records
    /// the files' current content as served.
    pub fn new(
        settings: TlsSettings,
        provider: Arc<CryptoProvider>,
        cert: Arc<ReloadingCert>,
    ) -> std::io::Result<Reloader> {
        let hangup = signal(SignalKind::hangup())?;
        let mut reloader = Reloader { settings, provider, cert, hangup, last: None };
        reloader.last = reloader.fingerprint();
        Ok(reloader)
    }

    /// Checks every `reload_interval`, and at once on SIGHUP.
    pub async fn run(mut self) {
        let mut ticks = tokio::time::interval(self.settings.reload_interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks.tick().await; // The first tick is immediate; the files were just loaded.
        loop {
            let forced = tokio::select! {
                _ = ticks.tick() => false,
                Some(()) = self.hangup.recv() => true,
            };
            self.check(forced);
        }
    }

    /// Reloads if the files changed, or unconditionally when `forced` (SIGHUP).
    fn check(&mut self, forced: bool) {
        let now = self.fingerprint();
        if !forced && now == self.last {
            return;
        }
        self.last = now;
        match load_certified_key(&self.settings, &self.provider) {
            Ok(key) => {
                self.cert.replace(key);
                info!(cert_file = %self.settings.cert_file.display(), forced, "TLS certificate reloaded");
            }
            Err(err) => {
                error!(forced, "TLS certificate not reloaded, still serving the previous one: {err}");
            }
        }
    }

    /// A digest of both files' content, or `None` if either cannot be read right now.
    fn fingerprint(&self) -> Option<[u8; 32]> {
        let cert = std::fs::read(&self.settings.cert_file).ok()?;
        let key = std::fs::read(&self.settings.key_file).ok()?;
        let mut hash = Sha256::new();
        hash.update((cert.len() as u64).to_le_bytes());
        hash.update(&cert);
        hash.update(&key);
        Some(hash.finalize().into())
    }
}
