//! TLS for `rediss://` URLs: the server is verified against the system's roots, or against
//! a configured CA file instead (a private CA is the common case for a managed Redis); a
//! client certificate and key may be added for servers that require mutual TLS.

use std::path::{Path, PathBuf};

use redis::{ClientTlsConfig, ErrorKind, RedisError, RedisResult, TlsCertificates};

/// Certificates for a TLS connection to Redis. The default (nothing set) verifies the
/// server against the system's roots and sends no client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// PEM file with the CA certificate(s) that signed the server's; replaces the system
    /// roots for Redis connections.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain and private key (PEM files), for mutual TLS.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl Tls {
    /// The certificates to build a client with, read from the files now (each connection
    /// the client opens uses them); `None` when nothing is configured.
    ///
    /// # Errors
    /// When a file cannot be read; the error names the file, never its content.
    pub(crate) fn certificates(&self) -> RedisResult<Option<TlsCertificates>> {
        if self == &Self::default() {
            return Ok(None);
        }
        let root_cert = self.ca_file.as_deref().map(read).transpose()?;
        let client_tls = match &self.client {
            Some((cert, key)) => Some(ClientTlsConfig { client_cert: read(cert)?, client_key: read(key)? }),
            None => None,
        };
        Ok(Some(TlsCertificates { client_tls, root_cert }))
    }
}

fn read(path: &Path) -> RedisResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        RedisError::from((ErrorKind::InvalidClientConfig, "TLS file unreadable", format!("{}: {e}", path.display())))
    })
}
