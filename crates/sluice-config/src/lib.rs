//! sluice's configuration, in two phases: the file as written ([`raw`], strict serde
//! with unknown fields refused), then the validated [`Config`] with references resolved
//! and limits typed. Every error names the field and the line ([`ConfigError`]).
//!
//! Process settings (`[server]`) are apart from policy (providers, deployments, models,
//! tenants, keys, classes), which a reload may replace.

mod defaults;
mod error;
mod model;
pub mod raw;
mod validate;

pub use error::ConfigError;
pub use model::*;
pub use validate::hash_key;

use error::Source;

/// Parses and validates a configuration text.
///
/// # Errors
/// The first problem found, with its field and line.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let source = Source { text };
    let raw: raw::RawConfig = toml::from_str(text).map_err(|e| error::from_toml(source, &e))?;
    validate::Validator { source }.config(raw)
}
