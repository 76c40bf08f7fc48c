//! One deployment's adaptive state: configured limits, limits adopted from the provider,
//! the AIMD factor and the ramp-up cap, combined into the limits to apply to the store.
//!
//! The controller only decides; the caller applies its [`Reaction`] (tighten buckets,
//! re-register the deployment's limits, log and count tier changes). Decreases apply at
//! once; recovery and ramp steps at most every [`APPLY_EVERY`] and only when the factor
//! moved by at least [`MIN_STEP`], so the store is not re-registered on every request.

use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, Nanos};

use crate::aimd::{Aimd, AimdSettings};
use crate::provider::{self, ProviderWindow, TierChange, Tighten};
use crate::ramp::{Ramp, RampSettings};

/// Shortest time between two re-registrations that loosen.
pub const APPLY_EVERY: Duration = Duration::from_millis(200);
/// Smallest change of the factor worth re-registering.
pub const MIN_STEP: f64 = 0.01;

/// A deployment's adaptive settings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ControllerSettings {
    /// Decrease on unexpected 429s and recovery.
    pub aimd: AimdSettings,
    /// The ramp-up guard, for providers with acceleration limits.
    pub ramp: Option<RampSettings>,
    /// Follow the limits the provider reports, up or down.
    pub adopt_provider_limits: bool,
}

/// What the caller should do after a response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reaction {
    /// Buckets to hold to the provider's counts.
    pub tighten: Vec<Tighten>,
    /// Limits that differ from configuration, each reported once per new value.
    pub tier_changes: Vec<TierChange>,
    /// New limits for the deployment's scope.
    pub apply: Option<Limits>,
    /// The factor was decreased by this response.
    pub decreased: bool,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Controller {
    settings: ControllerSettings,
    configured: Limits,
    base: Limits,
    aimd: Aimd,
    ramp: Option<Ramp>,
    reported: [Option<u64>; 4],
    applied: (f64, Nanos),
}

fn slot(d: Dimension) -> usize {
    match d {
        Dimension::Requests => 0,
        Dimension::InputTokens => 1,
        Dimension::OutputTokens => 2,
        Dimension::TotalTokens => 3,
    }
}

impl Controller {
    /// A controller for a deployment configured with `configured`, at factor 1.
    #[must_use]
    pub fn new(configured: Limits, settings: ControllerSettings, now: Nanos) -> Self {
        let ramp = settings.ramp.map(|r| Ramp::new(r, now));
        let mut controller = Self {
            aimd: Aimd::new(settings.aimd, now),
            base: configured.clone(),
            configured,
            settings,
            ramp,
            reported: [None; 4],
            applied: (1.0, now),
        };
        controller.applied.0 = controller.factor(now);
        controller
    }

    /// The limits in force before the factor: configured, or adopted from the provider.
    #[must_use]
    pub fn base(&self) -> &Limits {
        &self.base
    }

    /// The limits the store should hold at `now`.
    #[must_use]
    pub fn effective(&self, now: Nanos) -> Limits {
        provider::scaled(&self.base, self.factor(now))
    }

    /// The current factor: the smaller of the AIMD factor and the ramp cap, in `(0, 1]`.
    #[must_use]
    pub fn factor(&self, now: Nanos) -> f64 {
        let ramp = self.ramp.as_ref().map_or(1.0, |r| r.cap(now, &self.base));
        self.aimd.factor(now).min(ramp)
    }

    /// The AIMD factor alone (for metrics).
    #[must_use]
    pub fn aimd_factor(&self, now: Nanos) -> f64 {
        self.aimd.factor(now)
    }

    /// A provider response: its rate-limit windows and whether it was a 429 for a request
    /// sluice admitted (an unexpected rejection).
    pub fn on_response(&mut self, now: Nanos, windows: &[ProviderWindow], unexpected_429: bool) -> Reaction {
        let mut reaction =
            Reaction { tighten: provider::tightenings(windows, &self.effective(now)), ..Reaction::default() };
        let mut base_changed = false;
        for window in windows {
            let Some(reported) = window.limit.and_then(std::num::NonZeroU64::new) else { continue };
            let Some(configured) = provider::per_minute(&self.configured, window.dimension) else { continue };
            let seen = &mut self.reported[slot(window.dimension)];
            if *seen != Some(reported.get()) {
                *seen = Some(reported.get());
                if reported != configured.amount {
                    let change = TierChange {
                        dimension: window.dimension,
                        configured: configured.amount.get(),
                        reported: reported.get(),
                    };
                    reaction.tier_changes.push(change);
                }
            }
            let in_force = provider::per_minute(&self.base, window.dimension).map(|r| r.amount);
            let target = if self.settings.adopt_provider_limits { reported } else { configured.amount };
            if in_force != Some(target) {
                self.base = provider::with_amount(&self.base, window.dimension, target);
                base_changed = true;
            }
        }
        if unexpected_429 {
            reaction.decreased = self.aimd.on_rejection(now);
        }
        reaction.apply = self.maybe_apply(now, base_changed);
        reaction
    }

    /// An admission of `cost` through the deployment (feeds the ramp-up guard).
    pub fn on_admitted(&mut self, now: Nanos, cost: Cost) -> Option<Limits> {
        if let Some(ramp) = &mut self.ramp {
            ramp.on_admitted(now, cost);
        }
        self.maybe_apply(now, false)
    }

    /// Recovery over time: new limits when the factor moved enough since the last apply.
    pub fn poll(&mut self, now: Nanos) -> Option<Limits> {
        self.maybe_apply(now, false)
    }

    /// New configured limits and settings (a reload): adopted limits are dropped (the next
    /// provider report brings them back), the AIMD factor is kept.
    pub fn reconfigure(&mut self, configured: Limits, settings: ControllerSettings, now: Nanos) -> Limits {
        if settings.aimd != self.settings.aimd {
            let factor = self.aimd.factor(now);
            self.aimd = Aimd::new(settings.aimd, now);
            while self.aimd.factor(now) > factor + 1e-9 && self.aimd.on_rejection(now) {}
        }
        if settings.ramp != self.settings.ramp {
            self.ramp = settings.ramp.map(|r| Ramp::new(r, now));
        }
        self.settings = settings;
        self.base = configured.clone();
        self.configured = configured;
        self.reported = [None; 4];
        self.applied = (self.factor(now), now);
        self.effective(now)
    }

    fn maybe_apply(&mut self, now: Nanos, force: bool) -> Option<Limits> {
        let factor = self.factor(now);
        let (applied, at) = self.applied;
        let moved = (factor - applied).abs() >= MIN_STEP || (factor >= 1.0 && applied < 1.0);
        let due = factor < applied || now.since(at) >= APPLY_EVERY;
        if force || (moved && due) {
            self.applied = (factor, now);
            return Some(provider::scaled(&self.base, factor));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use sluice_quota::RateLimit;

    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn tpm(amount: u64) -> Limits {
        Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::TotalTokens, amount).unwrap_or_else(|| unreachable!()))
    }

    fn amount(limits: &Limits) -> u64 {
        limits.rates[0].amount.get()
    }

    fn window(limit: u64, remaining: u64) -> ProviderWindow {
        ProviderWindow {
            dimension: Dimension::TotalTokens,
            limit: Some(limit),
            remaining: Some(remaining),
            reset: None,
        }
    }

    #[test]
    fn a_429_shrinks_at_once_and_recovery_is_applied_in_steps() {
        let mut c = Controller::new(tpm(60_000), ControllerSettings::default(), Nanos(0));
        let reaction = c.on_response(Nanos(0), &[], true);
        assert!(reaction.decreased);
        assert_eq!(reaction.apply.as_ref().map(amount), Some(42_000));
        assert_eq!(c.poll(Nanos(SEC / 10)), None, "too soon and too small");
        let recovered = c.poll(Nanos(SEC)).map(|l| amount(&l)).unwrap_or_default();
        assert!((42_900..=43_100).contains(&recovered), "{recovered}");
        assert_eq!(c.poll(Nanos(60 * SEC)).map(|l| amount(&l)), Some(60_000));
        assert_eq!(c.poll(Nanos(61 * SEC)), None);
    }

    #[test]
    fn a_tier_change_is_reported_once_and_adopted_only_when_asked() {
        let mut keep = Controller::new(tpm(60_000), ControllerSettings::default(), Nanos(0));
        let first = keep.on_response(Nanos(0), &[window(30_000, 29_000)], false);
        assert_eq!(
            first.tier_changes,
            [TierChange { dimension: Dimension::TotalTokens, configured: 60_000, reported: 30_000 }]
        );
        assert_eq!(first.apply, None, "not adopted");
        assert!(keep.on_response(Nanos(1), &[window(30_000, 29_000)], false).tier_changes.is_empty());

        let settings = ControllerSettings { adopt_provider_limits: true, ..ControllerSettings::default() };
        let mut adopt = Controller::new(tpm(60_000), settings, Nanos(0));
        let down = adopt.on_response(Nanos(0), &[window(30_000, 29_000)], false);
        assert_eq!(down.apply.as_ref().map(amount), Some(30_000));
        let up = adopt.on_response(Nanos(SEC), &[window(90_000, 89_000)], false);
        assert_eq!(up.apply.as_ref().map(amount), Some(90_000), "adopt follows up, beyond config");
        assert_eq!(up.tier_changes.len(), 1);
    }

    #[test]
    fn a_low_remaining_count_asks_to_tighten() {
        let mut c = Controller::new(tpm(60_000), ControllerSettings::default(), Nanos(0));
        let reaction = c.on_response(Nanos(0), &[window(60_000, 200)], false);
        assert_eq!(reaction.tighten, [Tighten { dimension: Dimension::TotalTokens, remaining: 200, reset: None }]);
        assert!(reaction.tier_changes.is_empty());
    }
}
