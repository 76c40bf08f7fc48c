//! Raw → validated: every rule that a serde type cannot express, with its line.
//!
//! Here the whole configuration and the rules shared by every section (durations, limits,
//! unique names, references); the sections by concern in [`process`] (server, store,
//! jobs), [`routing`] (providers, deployments, models), [`tenancy`] (tenants, classes,
//! keys) and [`constraints`] (the deployments a tenant, team or key may be served by).

mod accounts;
mod bedrock;
mod budgets;
mod cloud;
mod constraints;
mod google;
mod pools;
mod pricing;
mod process;
mod routing;
mod tenancy;

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;
use sluice_quota::{Dimension, Limits, RateLimit, ScopeKind};
use toml::Spanned;

use crate::allowed::Allowed;
use crate::defaults;
use crate::error::{ConfigError, Source};
use crate::model::*;
use crate::raw::*;

type Result<T> = std::result::Result<T, ConfigError>;

pub(crate) struct Validator<'a> {
    pub source: Source<'a>,
}

impl Validator<'_> {
    fn err(&self, field: &str, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        self.source.error(field, span, message)
    }

    pub fn config(&self, raw: RawConfig) -> Result<Config> {
        let server = self.server(&raw.server)?;
        let store = self.store(&raw.store)?;
        let org_name = raw.org.name.as_ref().map_or("org", |n| n.get_ref().as_str());
        let org = (Arc::from(org_name), self.limits(ScopeKind::Org, "org.limits", &raw.org.limits)?);
        let providers = self.providers(&raw.providers)?;
        let accounts = self.accounts(&raw.accounts)?;
        let mut deployments = self.deployments(&raw.deployments, &providers)?;
        self.deployment_accounts(&raw.deployments, &accounts, &mut deployments)?;
        let classes = self.classes(&raw.classes)?;
        // Prices before the profiles: a pool placed by cost needs every member priced.
        let pricing = self.pricing(&raw.pricing)?;
        self.prices(&raw.deployments, &pricing, &mut deployments)?;
        let models = self.models(&raw.models, &deployments, &classes)?;
        let tenants = self.tenants(&raw.tenants, &deployments)?;
        let keys = self.keys(&raw.keys, &tenants, &classes, &deployments)?;
        let jobs = self.jobs(&raw.jobs)?;
        let admin = self.admin(&raw.admin)?;
        let telemetry = self.telemetry(&raw.telemetry)?;
        let budgets = self.budgets(&raw.budgets)?;
        let usage = self.usage(&raw.usage)?;
        let ledger = raw.ledger.as_ref().map(|l| self.ledger(l, &store)).transpose()?;
        Ok(Config {
            budgets,
            server,
            store,
            org,
            providers,
            deployments,
            accounts,
            models,
            tenants,
            keys,
            classes,
            jobs,
            admin,
            telemetry,
            pricing,
            usage,
            ledger,
            metrics: MetricsSettings { legacy_aliases: raw.metrics.legacy_aliases.unwrap_or(false) },
        })
    }

    pub(crate) fn duration(&self, field: &str, raw: &Option<Spanned<String>>, default: Duration) -> Result<Duration> {
        let Some(s) = raw else { return Ok(default) };
        let d = humantime::parse_duration(s.get_ref()).map_err(|e| {
            self.err(field, s.span(), format!("`{}` is not a duration like 2s or 10m: {e}", s.get_ref()))
        })?;
        if d.is_zero() {
            return Err(self.err(field, s.span(), "must be longer than zero"));
        }
        Ok(d)
    }

    /// A deployment's `stream_drain_timeout`: a duration up to
    /// [`defaults::MAX_STREAM_DRAIN_TIMEOUT`], where zero turns draining off.
    pub(crate) fn drain_timeout(&self, field: &str, raw: &Option<Spanned<String>>) -> Result<Duration> {
        let Some(s) = raw else { return Ok(defaults::STREAM_DRAIN_TIMEOUT) };
        let d = humantime::parse_duration(s.get_ref()).map_err(|e| {
            self.err(field, s.span(), format!("`{}` is not a duration like 0s or 30s: {e}", s.get_ref()))
        })?;
        if d > defaults::MAX_STREAM_DRAIN_TIMEOUT {
            return Err(self.err(field, s.span(), "must be at most 10m"));
        }
        Ok(d)
    }

    /// A scope's limits of `kind`: provider-facing scopes (deployments, accounts) default to
    /// the short [`defaults::PROVIDER_BURST`] and keep a send guard, caller scopes to the
    /// whole window ([`defaults::CALLER_BURST`]); `burst_seconds` overrides either.
    pub fn limits(&self, kind: ScopeKind, field: &str, raw: &RawLimits) -> Result<Limits> {
        let minute = Duration::from_secs(60);
        let day = Duration::from_secs(86_400);
        let burst = match &raw.burst_seconds {
            None if kind.is_upstream() => defaults::PROVIDER_BURST,
            None => defaults::CALLER_BURST,
            Some(b) if b.get_ref().is_finite() && *b.get_ref() > 0.0 && *b.get_ref() <= 86_400.0 => {
                Duration::from_secs_f64(*b.get_ref())
            }
            Some(b) => {
                return Err(self.err(&format!("{field}.burst_seconds"), b.span(), "must be between 0 and 86400"));
            }
        };
        let entries = [
            ("rpm", &raw.rpm, Dimension::Requests, minute),
            ("tpm", &raw.tpm, Dimension::TotalTokens, minute),
            ("input_tpm", &raw.input_tpm, Dimension::InputTokens, minute),
            ("output_tpm", &raw.output_tpm, Dimension::OutputTokens, minute),
            ("rpd", &raw.rpd, Dimension::Requests, day),
            ("tpd", &raw.tpd, Dimension::TotalTokens, day),
        ];
        let mut limits = Limits::unlimited();
        for (name, value, dimension, period) in entries {
            let Some(value) = value else { continue };
            let amount = self.positive(&format!("{field}.{name}"), value)?;
            let window = if period == day { Duration::from_secs(86_400) } else { burst };
            limits = limits.with_rate(RateLimit::new(dimension, amount, period).with_burst_window(window));
        }
        if let Some(c) = &raw.concurrency {
            limits = limits.with_concurrency(self.positive(&format!("{field}.concurrency"), c)?);
        }
        if let Some(budget) = &raw.budget {
            limits.budgets = self.budget(&format!("{field}.budget"), budget)?;
        }
        // A provider-facing scope mirrors the provider's short window: with a send guard.
        Ok(if kind.is_upstream() { limits.guarded() } else { limits })
    }

    fn positive(&self, field: &str, value: &Spanned<u64>) -> Result<NonZeroU64> {
        NonZeroU64::new(*value.get_ref())
            .ok_or_else(|| self.err(field, value.span(), "must be a positive number (leave it out for no limit)"))
    }

    fn unique<'n>(
        &self,
        what: &str,
        names: impl Iterator<Item = &'n Spanned<String>>,
    ) -> Result<HashMap<String, usize>> {
        let mut seen = HashMap::new();
        for (i, name) in names.enumerate() {
            let n = name.get_ref();
            if n.is_empty() || n.len() > 128 || n.chars().any(|c| c.is_control() || c == '{' || c == '}') {
                return Err(self.err(
                    &format!("{what}[{i}].name"),
                    name.span(),
                    "names are 1-128 printable characters without braces",
                ));
            }
            if seen.insert(n.clone(), i).is_some() {
                return Err(self.err(&format!("{what}[{i}].name"), name.span(), format!("`{n}` is defined twice")));
            }
        }
        Ok(seen)
    }

    fn reference(
        &self,
        field: &str,
        name: &Spanned<String>,
        known: &HashMap<String, usize>,
        what: &str,
    ) -> Result<usize> {
        known.get(name.get_ref()).copied().ok_or_else(|| {
            let mut names: Vec<&str> = known.keys().map(String::as_str).collect();
            names.sort_unstable();
            self.err(field, name.span(), format!("no {what} named `{}` (known: {})", name.get_ref(), names.join(", ")))
        })
    }

    /// `raw` (or `default`) when it is between 1 and `most`.
    fn bounded(&self, field: &str, raw: Option<&Spanned<u64>>, default: u64, most: u64) -> Result<usize> {
        let Some(n) = raw else { return Ok(usize::try_from(default).unwrap_or(usize::MAX)) };
        let value = *n.get_ref();
        if (1..=most).contains(&value) {
            return Ok(usize::try_from(value).unwrap_or(usize::MAX));
        }
        Err(self.err(field, n.span(), format!("between 1 and {most}")))
    }
}

/// Each item's position by its name: what references by name resolve against.
fn by_name<T>(items: &[T], name: impl Fn(&T) -> &str) -> HashMap<String, usize> {
    items.iter().enumerate().map(|(i, item)| (name(item).to_owned(), i)).collect()
}

/// SHA-256 of a gateway API key, as stored in the config.
#[must_use]
pub fn hash_key(key: &str) -> [u8; 32] {
    sha2::Sha256::digest(key.as_bytes()).into()
}
