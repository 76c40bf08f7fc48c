//! How connections to Redis are secured. TLS for `rediss://` URLs: the server is verified
//! against the system's roots, or against a configured CA file instead (a private CA is the
//! common case for a managed Redis); a client certificate and key may be added for servers
//! that require mutual TLS. Credentials ([`Auth`]): an ACL user and a password sent on
//! every connection of every topology, kept out of the URLs.

use std::path::{Path, PathBuf};

use redis::{ClientTlsConfig, ErrorKind, RedisError, RedisResult, TlsCertificates};

/// How connections to Redis are secured: certificates for TLS and the credentials sent.
/// The default (nothing set) verifies the server against the system's roots, sends no
/// client certificate and only the credentials a URL carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// PEM file with the CA certificate(s) that signed the server's; replaces the system
    /// roots for Redis connections.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain and private key (PEM files), for mutual TLS.
    pub client: Option<(PathBuf, PathBuf)>,
    /// The user and password sent to every server (over the URL's own).
    pub auth: Auth,
}

/// An ACL user and a password for Redis; never shown (`Debug` names only what is set).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// The ACL user (Redis 6+); none: the URL's, else `default`.
    pub username: Option<String>,
    /// The password; none: the URL's, if any.
    pub password: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

impl Auth {
    /// `info` with these credentials in place of its own (those left unset are kept).
    #[must_use]
    pub(crate) fn apply(&self, info: redis::ConnectionInfo) -> redis::ConnectionInfo {
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &self.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        info.set_redis_settings(settings)
    }
}

impl Tls {
    /// The certificates to build a client with, read from the files now (each connection
    /// the client opens uses them); `None` when nothing is configured.
    ///
    /// # Errors
    /// When a file cannot be read; the error names the file, never its content.
    pub(crate) fn certificates(&self) -> RedisResult<Option<TlsCertificates>> {
        if self.ca_file.is_none() && self.client.is_none() {
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
