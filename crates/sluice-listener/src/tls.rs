//! Optional HTTPS: a rustls acceptor (ring provider, TLS 1.2 and 1.3, HTTP/2 or HTTP/1.1 by ALPN)
//! from PEM files named in `[server] tls_cert` / `tls_key`.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;

/// Why TLS could not be set up. Names files, never their content.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is missing, unreadable or holds no certificate.
    #[error("TLS certificate `{0}` could not be read (PEM, one or more certificates)")]
    Certificate(String),
    /// The key file is missing, unreadable or holds no private key.
    #[error("TLS key `{0}` could not be read (PEM private key)")]
    Key(String),
    /// The pair was refused (e.g. the key does not match the certificate).
    #[error("TLS certificate and key do not form a usable pair: {0}")]
    Config(String),
}

/// A TLS acceptor for the listener.
#[derive(Clone)]
pub struct Tls(pub TlsAcceptor);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(rustls)")
    }
}

/// An acceptor for the certificate chain at `cert` and the private key at `key`.
///
/// # Errors
/// When a file cannot be read or the pair is refused.
pub fn acceptor(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect)
        .map_err(|_| TlsError::Certificate(cert.display().to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Certificate(cert.display().to_string()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|_| TlsError::Key(key.display().to_string()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    // HTTP/2 first for the clients that offer it; the connection is served as agreed.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls(TlsAcceptor::from(Arc::new(config))))
}
