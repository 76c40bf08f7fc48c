//! sluice's configuration, in two phases: the file as written ([`raw`], strict serde
//! with unknown fields refused), then the validated [`Config`] with references resolved
//! and limits typed. Every error names the field and the line ([`ConfigError`]).
//!
//! Process settings (`[server]`) are apart from policy (providers, deployments, models,
//! tenants, keys, classes), which a reload may replace.

pub mod adaptive;
mod allowed;
mod defaults;
mod error;
mod model;
mod prices;
pub mod raw;
mod references;
mod validate;

/// The class of a key that names none.
pub use allowed::Allowed;
pub use defaults::CLASS as DEFAULT_CLASS;
pub use defaults::{CALLER_BURST, LOWER_CLASS_SHARE_PERMILLE, PROVIDER_BURST};
pub use error::ConfigError;
pub use model::*;
pub use prices::preset_price;
pub use references::{Reference, references, unavailable};
pub use validate::hash_key;

use error::Source;

/// Parses and validates the limits of a scope of `kind` written as TOML
/// (`rpm = 500\ntpm = 30000`), by the same rules as the file: the burst default of its kind
/// ([`PROVIDER_BURST`] and a send guard for deployments and accounts, [`CALLER_BURST`] for
/// the rest); errors name `field.<limit>` (the admin API's limit changes and runtime
/// tenants, teams and keys use it).
///
/// # Errors
/// An unknown limit, a wrong type or a zero amount, naming the limit.
pub fn parse_limits(
    kind: sluice_quota::ScopeKind,
    field: &str,
    text: &str,
) -> Result<sluice_quota::Limits, ConfigError> {
    let source = Source { text };
    let raw: raw::RawLimits = toml::from_str(text).map_err(|e| {
        let mut error = error::from_toml(source, &e);
        error.line = None;
        error.field = if error.field.is_empty() { field.to_owned() } else { format!("{field}.{}", error.field) };
        error
    })?;
    validate::Validator { source }.limits(kind, field, &raw).map_err(|e| ConfigError { line: None, ..e })
}

/// Parses and validates a configuration text.
///
/// # Errors
/// The first problem found, with its field and line.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let source = Source { text };
    let raw: raw::RawConfig = toml::from_str(text).map_err(|e| error::from_toml(source, &e))?;
    validate::Validator { source }.config(raw)
}
