//! Validation of a [`SimConfig`]: every rule here has a bad-config test.

use std::collections::HashSet;

use crate::config::{Limits, ModelConfig, Shape, SimConfig};
pub use crate::config_error::ConfigError;

fn fail<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

impl SimConfig {
    /// Parses and validates a TOML document.
    ///
    /// # Errors
    /// On TOML syntax errors, unknown fields and values [`SimConfig::validate`] rejects.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the rules a parsed config must satisfy.
    ///
    /// # Errors
    /// On the first violated rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return fail(format!("time_scale must be a positive number, got {}", self.time_scale));
        }
        if self.models.is_empty() {
            return fail("at least one model is required");
        }
        self.latency.validate("latency")?;
        self.faults.validate("faults")?;
        let mut names = HashSet::new();
        for model in &self.models {
            if !names.insert(model.name.as_str()) {
                return fail(format!("model `{}` is defined twice", model.name));
            }
            model.validate()?;
        }
        Ok(())
    }
}

impl ModelConfig {
    /// Checks one model.
    ///
    /// # Errors
    /// On the first violated rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at = format!("model `{}`", self.name);
        if self.name.is_empty() {
            return fail("a model name must not be empty");
        }
        let flavor_shape = match self.flavor() {
            crate::config::Flavor::Anthropic | crate::config::Flavor::Bedrock => Shape::Anthropic,
            _ => Shape::Openai,
        };
        if flavor_shape != self.shape {
            return fail(format!("{at}: flavor {:?} does not fit shape {:?}", self.flavor(), self.shape));
        }
        self.limits.validate(&at, self.quota_shape())?;
        if self.output_weight == 0 {
            return fail(format!("{at}: output_weight must be positive"));
        }
        self.completion.validate(&at)?;
        if !(0.0..=1.0).contains(&self.cached_input_fraction) {
            return fail(format!("{at}: cached_input_fraction must be within 0..=1"));
        }
        if self.prompt_cache && self.cached_input_fraction > 0.0 {
            return fail(format!("{at}: prompt_cache and cached_input_fraction exclude each other"));
        }
        if self.default_max_tokens == 0 || self.embedding_dims == 0 {
            return fail(format!("{at}: default_max_tokens and embedding_dims must be positive"));
        }
        if let Some(latency) = &self.latency {
            latency.validate(&at)?;
        }
        if let Some(faults) = &self.faults {
            faults.validate(&at)?;
        }
        Ok(())
    }
}

impl Limits {
    /// Checks limits of a model of the given shape.
    ///
    /// # Errors
    /// On zero limits, limits of the other shape, or a bad window or concurrency status.
    pub fn validate(&self, at: &str, shape: Shape) -> Result<(), ConfigError> {
        let all = [
            ("rpm", self.rpm),
            ("tpm", self.tpm),
            ("itpm", self.itpm),
            ("otpm", self.otpm),
            ("rpd", self.rpd),
            ("tpd", self.tpd),
        ];
        if let Some((name, _)) = all.iter().find(|(_, v)| *v == Some(0)) {
            return fail(format!("{at}: {name} must be positive (omit it for no limit)"));
        }
        match shape {
            Shape::Openai if self.itpm.is_some() || self.otpm.is_some() => {
                return fail(format!("{at}: itpm/otpm apply to the anthropic shape; use tpm"));
            }
            Shape::Anthropic if self.tpm.is_some() => {
                return fail(format!("{at}: tpm applies to the openai shape; use itpm/otpm"));
            }
            _ => {}
        }
        if self.max_concurrency == Some(0) {
            return fail(format!("{at}: max_concurrency must be positive"));
        }
        if !matches!(self.concurrency_status, 429 | 529) {
            return fail(format!("{at}: concurrency_status must be 429 or 529"));
        }
        if !(self.window_ms.is_finite() && self.window_ms > 0.0) {
            return fail(format!("{at}: window_ms must be positive"));
        }
        if !(self.window_fraction > 0.0 && self.window_fraction <= 1.0) {
            return fail(format!("{at}: window_fraction must be within (0, 1]"));
        }
        Ok(())
    }
}
