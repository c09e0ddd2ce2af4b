//! HTTPS with rustls (the `ring` provider), and certificate reload without a restart.
//!
//! The served certificate lives in a [`ReloadingCert`], which rustls asks for the certificate
//! at every handshake. [`reload`] replaces it when the certificate or key file changes (checked
//! every `--tls.reload-interval`) or on SIGHUP; a pair that does not load (unreadable, not PEM,
//! key not matching the certificate, a half-written update) is logged and the old pair keeps
//! being served. Connections already open keep the certificate they started with.
//!
//! [`listener::TlsListener`] plugs into `axum::serve` like a `TcpListener`, so HTTP/1.1, HTTP/2
//! (by ALPN) and graceful shutdown work the same with and without TLS.

pub mod listener;
pub mod reload;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The `--tls.*` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM private key of the leaf certificate.
    pub key_file: PathBuf,
    /// How often the two files are checked for changes.
    pub reload_interval: Duration,
}

/// The certificate rustls serves, replaceable while the server runs.
pub struct ReloadingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key is never printed; the chain length is enough to tell instances apart.
        f.debug_struct("ReloadingCert").field("chain_len", &self.get().cert.len()).finish()
    }
}

impl ReloadingCert {
    /// Serves `key` until [`ReloadingCert::replace`].
    pub fn new(key: CertifiedKey) -> ReloadingCert {
        ReloadingCert { current: RwLock::new(Arc::new(key)) }
    }

    /// The certificate new handshakes get.
    pub fn get(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a complete Arc (replacing it cannot panic half-way).
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Serves `key` from the next handshake on.
    pub fn replace(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

/// The crypto provider strata uses: `ring` (aws-lc-rs, rustls' default, needs cmake to build).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads the certificate chain and key named in `settings`, checking that the key belongs to
/// the leaf certificate. The error names the file and what is wrong with it.
pub fn load_certified_key(settings: &TlsSettings, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain = load_chain(&settings.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file)
        .map_err(|e| format!("--tls.key-file {}: {e}", settings.key_file.display()))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        format!(
            "--tls.key-file {} does not fit --tls.cert-file {}: {e}",
            settings.key_file.display(),
            settings.cert_file.display()
        )
    })
}

fn load_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let describe = |e: &dyn fmt::Display| format!("--tls.cert-file {}: {e}", path.display());
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| describe(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| describe(&e))?;
    if chain.is_empty() {
        return Err(describe(&"no PEM certificate in it"));
    }
    Ok(chain)
}

/// A rustls server configuration serving `cert` over TLS 1.2 and 1.3 with HTTP/2 and HTTP/1.1
/// offered by ALPN.
pub fn server_config(
    cert: Arc<ReloadingCert>,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ServerConfig, String> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
