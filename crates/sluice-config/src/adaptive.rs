//! Adaptive-limit settings of a deployment and provider presets: validation.
//!
//! A preset fills the limits a deployment leaves out (explicit `limits` always win); the
//! figures are examples from the providers' published tables, which change over time —
//! see `docs/adaptive.md`.

use std::time::Duration;

use toml::Spanned;

use crate::error::ConfigError;
use crate::model::{Adaptive, OutputCounting, OutputEstimate, ProviderKind, WindowLearning};
use crate::raw::{RawDeployment, RawLimits};
use crate::validate::Validator;

/// Observations of a route's output before its p95 is trusted, by default.
pub const OUTPUT_WARMUP: u64 = 100;
/// Multiplier of the effective limit on an unexpected provider 429, by default.
pub const DECREASE: f64 = 0.7;
/// Time for the effective limit to recover from 0 to 1, by default.
pub const RECOVERY: Duration = Duration::from_secs(60);
/// The lowest effective-limit factor, by default.
pub const MIN_FACTOR: f64 = 0.1;
/// The shortest learned window, by default: a quarter of the shortest window a major
/// provider documents (one second).
pub const WINDOW_FLOOR: Duration = Duration::from_millis(250);
/// How long a learned window is kept after the last short-window 429, by default.
pub const WINDOW_HOLD: Duration = Duration::from_secs(60);
/// Time for a learned window to grow back to the configured one, by default.
pub const WINDOW_REGROW: Duration = Duration::from_secs(600);
/// The shortest floor accepted: below it the send guard (a quarter of the burst at most)
/// no longer covers scheduling jitter.
pub const WINDOW_FLOOR_MIN: Duration = Duration::from_millis(20);

/// The known presets: name, (rpm, tpm, input_tpm, output_tpm) or an Azure RPM-per-TPM ratio.
enum Preset {
    Fixed {
        rpm: u64,
        tpm: Option<u64>,
        input_tpm: Option<u64>,
        output_tpm: Option<u64>,
    },
    /// Azure derives RPM from the deployment's TPM: `rpm` per `per_tpm` tokens per minute.
    AzureRatio {
        rpm: u64,
        per_tpm: u64,
    },
    /// The Gemini API's tiers: RPM, TPM counting input tokens only, RPD.
    Gemini {
        rpm: u64,
        input_tpm: u64,
        rpd: u64,
    },
}

const PRESETS: &[(&str, Preset)] = &[
    ("openai-tier-1", Preset::Fixed { rpm: 500, tpm: Some(30_000), input_tpm: None, output_tpm: None }),
    ("openai-tier-2", Preset::Fixed { rpm: 5_000, tpm: Some(450_000), input_tpm: None, output_tpm: None }),
    ("azure", Preset::AzureRatio { rpm: 6, per_tpm: 1_000 }),
    ("azure-o1", Preset::AzureRatio { rpm: 1, per_tpm: 6_000 }),
    ("azure-o3", Preset::AzureRatio { rpm: 1, per_tpm: 1_000 }),
    ("azure-o3-mini", Preset::AzureRatio { rpm: 1, per_tpm: 10_000 }),
    ("anthropic-start", Preset::Fixed { rpm: 1_000, tpm: None, input_tpm: Some(2_000_000), output_tpm: Some(400_000) }),
    (
        "anthropic-scale",
        Preset::Fixed { rpm: 10_000, tpm: None, input_tpm: Some(10_000_000), output_tpm: Some(2_000_000) },
    ),
    ("anthropic-tier-1-legacy", Preset::Fixed { rpm: 50, tpm: None, input_tpm: Some(40_000), output_tpm: Some(8_000) }),
    ("gemini-free-flash", Preset::Gemini { rpm: 10, input_tpm: 250_000, rpd: 250 }),
    ("gemini-tier-1-flash", Preset::Gemini { rpm: 1_000, input_tpm: 1_000_000, rpd: 10_000 }),
    ("gemini-tier-1-pro", Preset::Gemini { rpm: 150, input_tpm: 2_000_000, rpd: 10_000 }),
];

/// The names of every preset, for errors and docs.
#[must_use]
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

fn fill(slot: &mut Option<Spanned<u64>>, value: Option<u64>, span: &std::ops::Range<usize>) {
    if slot.is_none() {
        *slot = value.map(|v| Spanned::new(span.clone(), v));
    }
}

impl Validator<'_> {
    /// The deployment's limits with its preset's defaults filled in.
    pub(crate) fn preset_limits(&self, i: usize, d: &RawDeployment) -> Result<RawLimits, ConfigError> {
        let mut limits = d.limits.clone();
        let Some(name) = &d.preset else { return Ok(limits) };
        let field = format!("deployments[{i}].preset");
        let span = name.span();
        let Some((_, preset)) = PRESETS.iter().find(|(n, _)| n == name.get_ref()) else {
            let message = format!("unknown preset `{}` (known: {})", name.get_ref(), preset_names().join(", "));
            return Err(self.source.error(field, span, message));
        };
        match preset {
            Preset::Fixed { rpm, tpm, input_tpm, output_tpm } => {
                fill(&mut limits.rpm, Some(*rpm), &span);
                fill(&mut limits.tpm, *tpm, &span);
                fill(&mut limits.input_tpm, *input_tpm, &span);
                fill(&mut limits.output_tpm, *output_tpm, &span);
            }
            Preset::AzureRatio { rpm, per_tpm } => {
                let Some(tpm) = limits.tpm.as_ref().map(|t| *t.get_ref()) else {
                    let message = "an Azure preset derives rpm from the deployment's quota: set `limits.tpm`";
                    return Err(self.source.error(field, span, message));
                };
                fill(&mut limits.rpm, Some((tpm.saturating_mul(*rpm) / per_tpm).max(1)), &span);
            }
            Preset::Gemini { rpm, input_tpm, rpd } => {
                // Gemini's TPM counts input tokens: an explicit `tpm` stands in for it.
                fill(&mut limits.rpm, Some(*rpm), &span);
                if limits.tpm.is_none() {
                    fill(&mut limits.input_tpm, Some(*input_tpm), &span);
                }
                fill(&mut limits.rpd, Some(*rpd), &span);
            }
        }
        Ok(limits)
    }

    /// The deployment's adaptive settings.
    pub(crate) fn adaptive(
        &self,
        i: usize,
        d: &RawDeployment,
        kind: ProviderKind,
        counting: OutputCounting,
    ) -> Result<Adaptive, ConfigError> {
        let field = |f: &str| format!("deployments[{i}].{f}");
        let warmup = match &d.output_warmup {
            None => OUTPUT_WARMUP,
            Some(w) if (1..=1_000_000).contains(w.get_ref()) => *w.get_ref(),
            Some(w) => return Err(self.source.error(field("output_warmup"), w.span(), "between 1 and 1000000")),
        };
        let output_estimate = match d.output_estimate.as_ref().map(|o| (o.get_ref().as_str(), o.span())) {
            None | Some(("strict", _)) => OutputEstimate::Strict,
            Some(("p95", span)) if counting == OutputCounting::Reserved => {
                let message = "p95 needs `output_counting = \"actual\"`: a provider that charges max_tokens on \
                               arrival would see more than sluice reserved";
                return Err(self.source.error(field("output_estimate"), span, message));
            }
            Some(("p95", _)) => OutputEstimate::P95 { warmup },
            Some((_, span)) => return Err(self.source.error(field("output_estimate"), span, "strict or p95")),
        };
        let cache_aware_input = d.cache_aware_input.as_ref().is_some_and(|c| *c.get_ref());
        if let Some(c) = d.cache_aware_input.as_ref().filter(|c| *c.get_ref() && kind != ProviderKind::Anthropic) {
            let message = "only Anthropic deployments exclude cache reads from input limits";
            return Err(self.source.error(field("cache_aware_input"), c.span(), message));
        }
        let fraction = |name: &str, raw: &Option<Spanned<f64>>, default: f64, max: f64| match raw {
            None => Ok(default),
            Some(v) if *v.get_ref() > 0.0 && *v.get_ref() <= max => Ok(*v.get_ref()),
            Some(v) => Err(self.source.error(field(name), v.span(), format!("between 0 (exclusive) and {max}"))),
        };
        let decrease = fraction("decrease_factor", &d.decrease_factor, DECREASE, 0.99)?;
        let min_factor = fraction("min_factor", &d.min_factor, MIN_FACTOR, 1.0)?;
        let ramp_up = match &d.ramp_up_per_second {
            None => None,
            Some(_) => Some(fraction("ramp_up_per_second", &d.ramp_up_per_second, 1.0, 1.0)?),
        };
        let recovery = self.duration(&field("recovery"), &d.recovery, RECOVERY)?;
        let adopt_provider_limits = d.adopt_provider_limits.as_ref().is_some_and(|a| *a.get_ref());
        let window = self.window_learning(i, d)?;
        Ok(Adaptive {
            adopt_provider_limits,
            decrease,
            recovery,
            min_factor,
            ramp_up,
            output_estimate,
            cache_aware_input,
            window,
        })
    }

    /// The deployment's short-window learning: a floor between [`WINDOW_FLOOR_MIN`] and the
    /// minute, positive hold and regrowth.
    fn window_learning(&self, i: usize, d: &RawDeployment) -> Result<WindowLearning, ConfigError> {
        let field = |f: &str| format!("deployments[{i}].{f}");
        let floor = self.duration(&field("window_floor"), &d.window_floor, WINDOW_FLOOR)?;
        if let Some(raw) = d.window_floor.as_ref().filter(|_| !(WINDOW_FLOOR_MIN..=MINUTE).contains(&floor)) {
            let message = format!("between {}ms and 60s", WINDOW_FLOOR_MIN.as_millis());
            return Err(self.source.error(field("window_floor"), raw.span(), message));
        }
        Ok(WindowLearning {
            enabled: d.learn_window.as_ref().is_none_or(|l| *l.get_ref()),
            floor,
            hold: self.duration(&field("window_hold"), &d.window_hold, WINDOW_HOLD)?,
            regrow: self.duration(&field("window_regrow"), &d.window_regrow, WINDOW_REGROW)?,
        })
    }
}

const MINUTE: Duration = Duration::from_secs(60);
