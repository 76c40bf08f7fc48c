//! Provider keys: read from the environment or a file, held as sensitive header values,
//! never printed.

use std::fmt;

mod aws;
pub mod google;
mod token_file;

pub use aws::AwsKeys;
pub use token_file::Credential;

use http::HeaderValue;
use sluice_config::SecretSource;

/// A provider credential, ready to put on an upstream request.
#[derive(Clone)]
pub struct ProviderKey(HeaderValue);

impl fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProviderKey([redacted])")
    }
}

impl ProviderKey {
    /// The header value (marked sensitive, so HTTP tooling does not log it).
    #[must_use]
    pub fn header(&self) -> &HeaderValue {
        &self.0
    }

    /// The key itself (without `Bearer `), to scrub it from provider text.
    #[must_use]
    pub fn secret(&self) -> Option<&str> {
        let text = self.0.to_str().ok()?;
        Some(text.strip_prefix("Bearer ").unwrap_or(text))
    }
}

/// Why a key could not be loaded. Names where it was looked for, never its content.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The variable is unset or empty.
    #[error("provider `{provider}`: environment variable `{var}` is not set")]
    MissingEnv {
        /// The provider.
        provider: String,
        /// The variable.
        var: String,
    },
    /// The file could not be read or is empty.
    #[error("provider `{provider}`: key file `{path}` could not be read or is empty")]
    BadFile {
        /// The provider.
        provider: String,
        /// The file.
        path: String,
    },
    /// A service-account key file that cannot be used.
    #[error("provider `{provider}`: service-account key `{path}` is unusable: {reason}")]
    BadServiceAccount {
        /// The provider.
        provider: String,
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Loads a provider's key, formatted for its auth header (`Bearer …` when `bearer`).
///
/// # Errors
/// When the variable or file is missing or empty, or the key is not a valid header value.
pub fn load(provider: &str, source: &SecretSource, bearer: bool) -> Result<Option<ProviderKey>, SecretError> {
    let raw = match source {
        SecretSource::None | SecretSource::ServiceAccount(_) | SecretSource::Aws { .. } => return Ok(None),
        SecretSource::Env(var) => std::env::var(var)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| SecretError::MissingEnv { provider: provider.into(), var: var.clone() })?,
        SecretSource::File(path) | SecretSource::TokenFile(path) => read_file(provider, path)?,
    };
    let text = if bearer { format!("Bearer {}", raw.trim()) } else { raw.trim().to_owned() };
    let mut value = HeaderValue::from_str(&text).map_err(|_| match source {
        SecretSource::File(path) | SecretSource::TokenFile(path) => {
            SecretError::BadFile { provider: provider.into(), path: path.clone() }
        }
        _ => SecretError::MissingEnv { provider: provider.into(), var: String::from("(invalid characters)") },
    })?;
    value.set_sensitive(true);
    Ok(Some(ProviderKey(value)))
}

fn read_file(provider: &str, path: &str) -> Result<String, SecretError> {
    std::fs::read_to_string(path)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| SecretError::BadFile { provider: provider.into(), path: path.to_owned() })
}
