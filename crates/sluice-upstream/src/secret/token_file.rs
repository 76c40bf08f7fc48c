//! Credentials that change while the gateway runs: a bearer token (an Entra ID access
//! token) that an external agent refreshes in a file, re-read when the file changes.

use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use sluice_config::SecretSource;
use tokio::time::Instant;

use super::{ProviderKey, SecretError, load};

/// How often, at most, a token file's modification time is looked at: a busy gateway does
/// not stat it for every request, and a refreshed token is in use within this bound.
pub const RECHECK: Duration = Duration::from_secs(1);

/// A provider's credential as the request path reads it.
#[derive(Debug)]
pub enum Credential {
    /// No key (a local model server).
    None,
    /// A key read once at start (or reload).
    Fixed(ProviderKey),
    /// A bearer token kept fresh in a file.
    Refreshed(TokenFile),
    /// OAuth access tokens minted from a Google service-account key.
    Minted(Box<super::google::ServiceAccount>),
    /// AWS keys to sign requests with (Bedrock): no header of their own.
    Aws(super::aws::AwsSource),
}

impl Credential {
    /// Loads the credential `source` names; `bearer` formats a fixed key as `Bearer …`.
    ///
    /// # Errors
    /// When the variable or file is missing, empty or not a header value.
    pub fn load(provider: &str, source: &SecretSource, bearer: bool) -> Result<Self, SecretError> {
        match source {
            SecretSource::TokenFile(path) => TokenFile::open(provider, path).map(Self::Refreshed),
            SecretSource::ServiceAccount(path) => {
                super::google::ServiceAccount::open(provider, path).map(|account| Self::Minted(Box::new(account)))
            }
            SecretSource::Aws { file } => super::aws::AwsSource::load(provider, file.as_deref()).map(Self::Aws),
            _ => Ok(load(provider, source, bearer)?.map_or(Self::None, Self::Fixed)),
        }
    }

    /// The credential to send now.
    #[must_use]
    pub fn current(&self) -> Option<ProviderKey> {
        match self {
            Self::None | Self::Aws(_) => None,
            Self::Fixed(key) => Some(key.clone()),
            Self::Refreshed(file) => Some(file.current()),
            Self::Minted(account) => account.current(),
        }
    }

    /// Makes sure a minted credential holds a token good at `now_unix` (a no-op for the
    /// others).
    ///
    /// # Errors
    /// When a token was due and could not be minted.
    pub async fn refresh(
        &self,
        upstream: &crate::client::Upstream,
        now_unix: u64,
    ) -> Result<(), super::google::MintError> {
        match self {
            Self::Minted(account) => account.refresh(upstream, now_unix).await,
            _ => Ok(()),
        }
    }
}

/// A bearer token in a file, re-read when its modification time changes (looked at no
/// more than once per [`RECHECK`]). A file that turns unreadable or empty keeps the last
/// good token in use (the provider's 401 then says it expired), with a warning.
pub type TokenFile = Reread<ProviderKey>;

/// A credential in a file, re-read when the file's modification time changes (looked at
/// no more than once per [`RECHECK`]); a file that turns unreadable keeps the last good
/// credential. A bearer token ([`TokenFile`]) or AWS keys are read this way.
pub struct Reread<T> {
    provider: String,
    path: String,
    read: fn(&str, &str) -> Result<T, SecretError>,
    state: Mutex<Held<T>>,
}

struct Held<T> {
    key: T,
    modified: Option<SystemTime>,
    checked: Instant,
}

impl<T> std::fmt::Debug for Reread<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reread").field("path", &self.path).finish_non_exhaustive()
    }
}

impl TokenFile {
    /// Reads the token now.
    ///
    /// # Errors
    /// When the file is missing, empty or not a header value.
    pub fn open(provider: &str, path: &str) -> Result<Self, SecretError> {
        Reread::with(provider, path, read)
    }
}

impl<T: Clone> Reread<T> {
    /// Reads the file now with `read` (given the provider and the path).
    ///
    /// # Errors
    /// What `read` answers for the file as it is now.
    pub fn with(
        provider: &str,
        path: &str,
        read: fn(&str, &str) -> Result<T, SecretError>,
    ) -> Result<Self, SecretError> {
        let modified = modified(path);
        let key = read(provider, path)?;
        let state = Mutex::new(Held { key, modified, checked: Instant::now() });
        Ok(Self { provider: provider.to_owned(), path: path.to_owned(), read, state })
    }

    /// The credential: the file's current one once its modification time changed (a
    /// token file's as `Bearer …`).
    #[must_use]
    pub fn current(&self) -> T {
        let mut held = self.state.lock();
        let now = Instant::now();
        if now.duration_since(held.checked) < RECHECK {
            return held.key.clone();
        }
        held.checked = now;
        let modified = modified(&self.path);
        if modified != held.modified {
            match (self.read)(&self.provider, &self.path) {
                Ok(key) => (held.key, held.modified) = (key, modified),
                Err(error) => tracing::warn!(%error, "keeping the last token read"),
            }
        }
        held.key.clone()
    }
}

fn modified(path: &str) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read(provider: &str, path: &str) -> Result<ProviderKey, SecretError> {
    let source = SecretSource::File(path.to_owned());
    load(provider, &source, true)?.ok_or_else(|| SecretError::BadFile { provider: provider.into(), path: path.into() })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;

    fn write(path: &std::path::Path, token: &str, at_secs: u64) {
        std::fs::write(path, token).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(at_secs)).unwrap();
    }

    fn bearer(file: &TokenFile) -> String {
        file.current().header().to_str().unwrap().to_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_refreshed_token_is_used_after_the_recheck_interval_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        write(&path, "first\n", 1_000);
        let file = TokenFile::open("azure", path.to_str().unwrap()).unwrap();
        assert_eq!(bearer(&file), "Bearer first");
        write(&path, "second", 2_000);
        assert_eq!(bearer(&file), "Bearer first", "not looked at again within RECHECK");
        tokio::time::advance(RECHECK).await;
        assert_eq!(bearer(&file), "Bearer second", "a new modification time is re-read");
        std::fs::write(&path, "").unwrap();
        tokio::time::advance(RECHECK).await;
        assert_eq!(bearer(&file), "Bearer second", "an emptied file keeps the last good token");
    }

    #[test]
    fn a_missing_token_file_is_refused_at_start_naming_the_path() {
        let err = TokenFile::open("azure", "/nonexistent/sluice-token").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/sluice-token"), "{err}");
    }
}
