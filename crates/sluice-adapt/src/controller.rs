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
use crate::window::{LearnedWindow, WindowSettings};

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
    /// Learning the provider's short window.
    pub window: WindowSettings,
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
    /// A 429 from a window shorter than the minute (not a reason to decrease the factor).
    pub short_window: bool,
    /// The burst window shrank to this.
    pub shrunk: Option<Duration>,
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
    window: LearnedWindow,
    applied: (f64, Duration, Nanos),
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
        let window = LearnedWindow::new(provider::burst_window(&configured).unwrap_or_default(), settings.window);
        let mut controller = Self {
            aimd: Aimd::new(settings.aimd, now),
            base: configured.clone(),
            configured,
            settings,
            ramp,
            reported: [None; 4],
            applied: (1.0, window.configured(), now),
            window,
        };
        controller.applied.0 = controller.factor(now);
        controller
    }

    /// The limits in force before the factor: configured, or adopted from the provider.
    #[must_use]
    pub fn base(&self) -> &Limits {
        &self.base
    }

    /// The limits the store should hold at `now`: scaled by the factor, bursts held to
    /// the learned window.
    #[must_use]
    pub fn effective(&self, now: Nanos) -> Limits {
        self.limits_at(self.factor(now), self.burst_window(now))
    }

    fn limits_at(&self, factor: f64, window: Duration) -> Limits {
        let scaled = provider::scaled(&self.base, factor);
        if window < self.window.configured() { provider::windowed(&scaled, window) } else { scaled }
    }

    /// The burst window in force: configured, or shorter as learned from the provider.
    #[must_use]
    pub fn burst_window(&self, now: Nanos) -> Duration {
        self.window.current(now)
    }

    /// How the burst window is learned.
    #[must_use]
    pub fn window_settings(&self) -> &WindowSettings {
        self.window.settings()
    }

    /// A window learned by another instance (see [`LearnedWindow::adopt`]): new limits
    /// when it is shorter than this one's.
    pub fn adopt_window(&mut self, window: Duration, now: Nanos) -> Option<Limits> {
        let shorter = self.window.adopt(window, now);
        self.maybe_apply(now, shorter)
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
            self.on_429(now, windows, &mut reaction);
        }
        let shrunk = reaction.shrunk.is_some();
        reaction.apply = self.maybe_apply(now, base_changed || shrunk);
        reaction
    }

    /// A 429 for a request sluice admitted: from a short window while the minute has room
    /// (the burst shrinks, the rate stays), else from the minute (the factor decreases).
    fn on_429(&mut self, now: Nanos, windows: &[ProviderWindow], reaction: &mut Reaction) {
        let short = self.settings.window.enabled && provider::short_window_refusal(windows, &self.effective(now));
        self.refused(now, short, reaction);
    }

    fn refused(&mut self, now: Nanos, short_window: bool, reaction: &mut Reaction) {
        if short_window {
            reaction.short_window = true;
            reaction.shrunk = self.window.on_short_window_429(now);
        } else {
            reaction.decreased = self.aimd.on_rejection(now);
        }
    }

    /// A 429 for a request sluice admitted that reported no per-minute window, while
    /// sluice's own buckets for the deployment still had per-minute capacity (so the minute,
    /// as sluice paces it, was not what refused): a short window refused, the burst shrinks
    /// and the rate stays. Once the window is at its floor (or learning is off) a shorter
    /// burst no longer helps and the rate comes down instead.
    /// `windows` are the response's other hints (limits without remaining counts).
    pub fn on_unreported_429(&mut self, now: Nanos, windows: &[ProviderWindow]) -> Reaction {
        let mut reaction = self.on_response(now, windows, false);
        self.refused(now, self.window.can_shrink(now), &mut reaction);
        if let Some(limits) = self.maybe_apply(now, reaction.shrunk.is_some()) {
            reaction.apply = Some(limits);
        }
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
        self.window.reconfigure(provider::burst_window(&configured).unwrap_or_default(), settings.window);
        self.base = configured.clone();
        self.configured = configured;
        self.reported = [None; 4];
        self.applied = (self.factor(now), self.burst_window(now), now);
        self.effective(now)
    }

    fn maybe_apply(&mut self, now: Nanos, force: bool) -> Option<Limits> {
        let (factor, window) = (self.factor(now), self.burst_window(now));
        let (applied, applied_window, at) = self.applied;
        let moved = (factor - applied).abs() >= MIN_STEP || (factor >= 1.0 && applied < 1.0);
        let widened = window.as_secs_f64() >= applied_window.as_secs_f64() * (1.0 + MIN_STEP)
            || (window >= self.window.configured() && applied_window < window);
        let due = factor < applied || now.since(at) >= APPLY_EVERY;
        if force || ((moved || widened) && due) {
            self.applied = (factor, window, now);
            return Some(self.limits_at(factor, window));
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

    #[test]
    fn a_429_with_the_minute_left_shrinks_the_burst_not_the_rate() {
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap_or_else(|| unreachable!());
        let configured = Limits::unlimited().with_rate(rate.with_burst_window(Duration::from_secs(3)));
        let mut c = Controller::new(configured, ControllerSettings::default(), Nanos(0));
        let short = c.on_response(Nanos(0), &[window(60_000, 50_000)], true);
        assert!(short.short_window && !short.decreased);
        assert_eq!(short.shrunk, Some(Duration::from_millis(1_500)));
        let applied = short.apply.unwrap_or_default();
        assert_eq!((applied.rates[0].amount.get(), applied.rates[0].burst.get()), (60_000, 1_500));
        assert_eq!(c.factor(Nanos(0)), 1.0);
        // The minute itself spent: the rate comes down, the window stays.
        let minute = c.on_response(Nanos(2 * SEC), &[window(60_000, 100)], true);
        assert!(minute.decreased && !minute.short_window);
        assert_eq!(minute.apply.map(|l| l.rates[0].burst.get()), Some(1_050));
        // Held for a minute, then back to the configured window within the regrowth.
        assert_eq!(c.burst_window(Nanos(60 * SEC)), Duration::from_millis(1_500));
        let back = c.poll(Nanos(3_600 * SEC)).unwrap_or_default();
        assert_eq!((back.rates[0].amount.get(), back.rates[0].burst.get()), (60_000, 3_000));
    }

    #[test]
    fn an_unreported_429_shrinks_the_burst_until_the_floor_then_the_rate() {
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap_or_else(|| unreachable!());
        let configured = Limits::unlimited().with_rate(rate.with_burst_window(Duration::from_millis(500)));
        let mut c = Controller::new(configured, ControllerSettings::default(), Nanos(0));
        let short = c.on_unreported_429(Nanos(0), &[]);
        assert!(short.short_window && !short.decreased);
        assert_eq!(short.apply.map(|l| l.rates[0].burst.get()), Some(250), "at the floor");
        assert_eq!(c.factor(Nanos(0)), 1.0);
        // A shorter burst no longer helps: the rate comes down.
        let minute = c.on_unreported_429(Nanos(2 * SEC), &[]);
        assert!(minute.decreased && !minute.short_window);
        assert_eq!(minute.apply.map(|l| l.rates[0].amount.get()), Some(42_000));
    }

    #[test]
    fn a_window_learned_elsewhere_is_applied_here() {
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap_or_else(|| unreachable!());
        let configured = Limits::unlimited().with_rate(rate.with_burst_window(Duration::from_secs(3)));
        let mut c = Controller::new(configured, ControllerSettings::default(), Nanos(0));
        let applied = c.adopt_window(Duration::from_millis(750), Nanos(0)).unwrap_or_default();
        assert_eq!(applied.rates[0].burst.get(), 750);
        assert_eq!(c.adopt_window(Duration::from_secs(1), Nanos(SEC)), None, "longer than ours");
    }
}
