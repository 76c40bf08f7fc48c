//! AWS credentials for SigV4 signing (Bedrock): from the `AWS_*` environment variables, or
//! the `[default]` profile of a shared credentials file re-read when it changes. The keys
//! are never printed (their `Debug` is redacted) and never logged.

use std::fmt;

use aws_credential_types::Credentials;

use super::SecretError;
use super::token_file::Reread;

/// An access key, its secret and (a role's session) its token.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
}

impl fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AwsKeys([redacted])")
    }
}

impl AwsKeys {
    /// The keys as the signer takes them.
    #[must_use]
    pub fn credentials(&self) -> Credentials {
        Credentials::new(&self.access_key_id, &self.secret_access_key, self.session_token.clone(), None, "sluice")
    }

    /// Keys given directly, for tests.
    #[cfg(test)]
    #[must_use]
    pub fn for_tests(access_key_id: &str, secret_access_key: &str) -> Self {
        Self { access_key_id: access_key_id.into(), secret_access_key: secret_access_key.into(), session_token: None }
    }

    /// The secrets, to scrub them from provider text.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.secret_access_key.as_str()).chain(self.session_token.as_deref())
    }
}

/// Where a Bedrock provider's keys come from.
#[derive(Debug)]
pub enum AwsSource {
    /// Read once from the environment.
    Env(AwsKeys),
    /// A shared credentials file, re-read when it changes.
    File(Reread<AwsKeys>),
}

impl AwsSource {
    /// Loads the keys now: from `file` when given, else from the environment.
    ///
    /// # Errors
    /// A missing variable, or a file without `aws_access_key_id` and
    /// `aws_secret_access_key` in its `[default]` profile.
    pub fn load(provider: &str, file: Option<&str>) -> Result<Self, SecretError> {
        match file {
            Some(path) => Reread::with(provider, path, read_file).map(Self::File),
            None => from_env(provider, |name| std::env::var(name).ok()).map(Self::Env),
        }
    }

    /// The keys to sign with now.
    #[must_use]
    pub fn current(&self) -> AwsKeys {
        match self {
            Self::Env(keys) => keys.clone(),
            Self::File(file) => file.current(),
        }
    }
}

fn from_env(provider: &str, var: impl Fn(&str) -> Option<String>) -> Result<AwsKeys, SecretError> {
    let get = |name: &str| {
        var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| SecretError::MissingEnv { provider: provider.into(), var: name.into() })
    };
    Ok(AwsKeys {
        access_key_id: get("AWS_ACCESS_KEY_ID")?,
        secret_access_key: get("AWS_SECRET_ACCESS_KEY")?,
        session_token: get("AWS_SESSION_TOKEN").ok(),
    })
}

fn read_file(provider: &str, path: &str) -> Result<AwsKeys, SecretError> {
    let bad = || SecretError::BadFile { provider: provider.into(), path: path.into() };
    let text = std::fs::read_to_string(path).map_err(|_| bad())?;
    parse_profile(&text, "default").ok_or_else(bad)
}

/// The keys of `[profile]` in an AWS shared credentials file.
fn parse_profile(text: &str, profile: &str) -> Option<AwsKeys> {
    let mut section = String::new();
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_owned();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        if section != profile {
            continue;
        }
        let value = Some(value.trim().to_owned()).filter(|v| !v.is_empty());
        match key.trim() {
            "aws_access_key_id" => id = value,
            "aws_secret_access_key" => secret = value,
            "aws_session_token" => token = value,
            _ => {}
        }
    }
    Some(AwsKeys { access_key_id: id?, secret_access_key: secret?, session_token: token })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;

    #[test]
    fn the_default_profile_is_read_and_a_missing_secret_is_refused() {
        let text = "[other]\naws_access_key_id = X\n\n[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = s3cret\naws_session_token = tok\n";
        let keys = parse_profile(text, "default").unwrap();
        assert_eq!(keys.credentials().access_key_id(), "AKIDTEST");
        assert_eq!(keys.secrets().collect::<Vec<_>>(), ["s3cret", "tok"]);
        assert!(!format!("{keys:?}").contains("s3cret"), "never printed");
        assert_eq!(parse_profile("[default]\naws_access_key_id = A\n", "default"), None);
    }

    #[test]
    fn environment_keys_need_the_id_and_the_secret_and_take_a_session_token() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        let err = from_env("br", env(&[("AWS_ACCESS_KEY_ID", "A")])).unwrap_err();
        assert!(err.to_string().contains("AWS_SECRET_ACCESS_KEY"), "{err}");
        let keys = from_env(
            "br",
            env(&[("AWS_ACCESS_KEY_ID", "A"), ("AWS_SECRET_ACCESS_KEY", "S"), ("AWS_SESSION_TOKEN", "T")]),
        )
        .unwrap();
        assert_eq!(keys.credentials().session_token(), Some("T"));
    }
}
