//! What the configuration names outside itself: every environment variable and file it
//! reads (provider keys, Redis and Postgres passwords, certificates), with the field and
//! line that names it. `sluice check-config` and `sluice serve` both refuse a file whose
//! references are not all there, listing each missing one.

use std::path::PathBuf;

use toml::Spanned;

use crate::error::{ConfigError, Source};
use crate::model::Secret;
use crate::raw::{RawConfig, RawProvider};

/// A variable or file the configuration reads, and where it says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The field, as a dotted path (`providers[0].api_key_env`).
    pub field: String,
    /// 1-based line of the field.
    pub line: usize,
    /// The variable or file.
    pub target: Secret,
}

impl Reference {
    /// Why it cannot be used now (unset or empty variable, unreadable or empty file), as
    /// an error naming its field and line; `None` when it is there. Never names a value.
    #[must_use]
    pub fn unavailable(&self) -> Option<ConfigError> {
        let message = self.target.read().err()?;
        Some(ConfigError { field: self.field.clone(), line: Some(self.line), message })
    }
}

/// Every variable and file the configuration `text` reads, in the order written.
///
/// # Errors
/// When the text is not a configuration file at all (its syntax or shape).
pub fn references(text: &str) -> Result<Vec<Reference>, ConfigError> {
    let source = Source { text };
    let raw: RawConfig = toml::from_str(text).map_err(|e| crate::error::from_toml(source, &e))?;
    let mut found = Found { source, list: Vec::new() };
    found.file("server.tls_cert", raw.server.tls_cert.as_ref());
    found.file("server.tls_key", raw.server.tls_key.as_ref());
    found.file("server.upstream_ca_file", raw.server.upstream_ca_file.as_ref());
    let store = &raw.store;
    found.file("store.tls_ca_file", store.tls_ca_file.as_ref());
    found.file("store.tls_cert_file", store.tls_cert_file.as_ref());
    found.file("store.tls_key_file", store.tls_key_file.as_ref());
    found.env("store.password_env", store.password_env.as_ref());
    found.file("store.password_file", store.password_file.as_ref());
    if let Some(sentinel) = &store.sentinel {
        found.env("store.sentinel.password_env", sentinel.password_env.as_ref());
    }
    if let Some(ledger) = &raw.ledger {
        found.env("ledger.password_env", ledger.password_env.as_ref());
    }
    found.env("admin.metrics_token_env", raw.admin.metrics_token_env.as_ref());
    found.file("admin.metrics_token_file", raw.admin.metrics_token_file.as_ref());
    for (i, provider) in raw.providers.iter().enumerate() {
        found.provider(i, provider);
    }
    Ok(found.list)
}

/// Each reference of `text` that cannot be used now, as an error naming its field and
/// line (empty: all are there).
///
/// # Errors
/// When the text is not a configuration file at all.
pub fn unavailable(text: &str) -> Result<Vec<ConfigError>, ConfigError> {
    Ok(references(text)?.iter().filter_map(Reference::unavailable).collect())
}

/// The variables a Bedrock provider without `aws_credentials_file` signs with.
const AWS_VARIABLES: [&str; 2] = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];

struct Found<'a> {
    source: Source<'a>,
    list: Vec<Reference>,
}

impl Found<'_> {
    fn env(&mut self, field: &str, name: Option<&Spanned<String>>) {
        if let Some(name) = name {
            self.push(field, name.span().start, Secret::Env(name.get_ref().clone()));
        }
    }

    fn file(&mut self, field: &str, path: Option<&Spanned<String>>) {
        if let Some(path) = path {
            self.push(field, path.span().start, Secret::File(PathBuf::from(path.get_ref())));
        }
    }

    fn push(&mut self, field: &str, offset: usize, target: Secret) {
        self.list.push(Reference { field: field.to_owned(), line: self.source.line_of(offset), target });
    }

    fn provider(&mut self, i: usize, p: &RawProvider) {
        let field = |name: &str| format!("providers[{i}].{name}");
        self.env(&field("api_key_env"), p.api_key_env.as_ref());
        self.file(&field("api_key_file"), p.api_key_file.as_ref());
        self.file(&field("token_file"), p.token_file.as_ref());
        self.file(&field("service_account_file"), p.service_account_file.as_ref());
        self.file(&field("aws_credentials_file"), p.aws_credentials_file.as_ref());
        self.file(&field("ca_file"), p.ca_file.as_ref());
        // Bedrock signs with the AWS variables unless a credentials file is named.
        if p.kind.get_ref() == "bedrock" && p.aws_credentials_file.is_none() {
            for name in AWS_VARIABLES {
                self.push(&field("kind"), p.kind.span().start, Secret::Env(name.to_owned()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `*_env` and `*_file` field of the file as written is one this module reads: a
    /// new secret field cannot be forgotten by `check-config`.
    #[test]
    fn every_env_and_file_field_is_a_reference() {
        let raw = include_str!("raw.rs");
        let this = include_str!("references.rs");
        let fields: Vec<&str> = raw
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub ")?.split_once(':').map(|(name, _)| name))
            .filter(|name| name.ends_with("_env") || name.ends_with("_file"))
            .collect();
        assert!(fields.len() >= 10, "fields found: {fields:?}");
        for name in fields {
            assert!(
                this.contains(&format!("\"{name}\"")) || this.contains(&format!(".{name}\"")),
                "{name} is not read"
            );
        }
    }

    #[test]
    fn references_name_their_field_and_line() {
        let text = "[store]\nkind = \"redis\"\nurl = \"redis://r:6379\"\npassword_file = \"/run/redis/pw\"\n\n\
                    [[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"http://x\"\napi_key_env = \"OPENAI_KEY\"\n\n\
                    [[providers]]\nname = \"b\"\nkind = \"bedrock\"\nbase_url = \"https://b\"\nregion = \"us-east-1\"\n";
        let found = references(text).unwrap();
        let listed: Vec<(&str, usize)> = found.iter().map(|r| (r.field.as_str(), r.line)).collect();
        assert_eq!(
            listed,
            [
                ("store.password_file", 4),
                ("providers[0].api_key_env", 10),
                ("providers[1].kind", 14),
                ("providers[1].kind", 14)
            ]
        );
        assert_eq!(found[1].target, Secret::Env("OPENAI_KEY".into()));
        let missing = found[0].unavailable().unwrap();
        assert_eq!((missing.field.as_str(), missing.line), ("store.password_file", Some(4)));
        assert!(missing.message.contains("/run/redis/pw"), "{missing}");
    }
}
