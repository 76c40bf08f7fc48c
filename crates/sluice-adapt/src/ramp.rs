//! The ramp-up guard, for providers with acceleration limits: the admitted rate may rise
//! by at most `slope` (a fraction of the limit) per second.
//!
//! The recent admitted rate per dimension is an exponentially weighted average over
//! `window`; the cap is that rate (as a fraction of the limit) plus `slope × window`. When
//! demand jumps, admissions at the cap lift the average by about `slope` per second, so
//! the cap climbs at the configured slope; idle, the cap rests at `slope × window`.

use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, Nanos};

/// How fast admissions may grow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RampSettings {
    /// Growth allowed per second, as a fraction of the limit (0.05: idle to full in 20 s).
    pub slope: f64,
    /// Averaging window of the recent rate.
    pub window: Duration,
}

impl RampSettings {
    /// The default averaging window.
    pub const WINDOW: Duration = Duration::from_secs(5);
}

/// Recent admitted rates and the cap they allow.
#[derive(Debug, Clone)]
pub struct Ramp {
    settings: RampSettings,
    rates: [f64; 4],
    at: Nanos,
}

fn index(d: Dimension) -> usize {
    match d {
        Dimension::Requests => 0,
        Dimension::InputTokens => 1,
        Dimension::OutputTokens => 2,
        Dimension::TotalTokens => 3,
    }
}

impl Ramp {
    /// A guard that has seen no traffic at `now`.
    #[must_use]
    pub fn new(settings: RampSettings, now: Nanos) -> Self {
        let slope = if settings.slope.is_finite() { settings.slope.clamp(1e-6, 1.0) } else { 1.0 };
        let window = settings.window.max(Duration::from_millis(100));
        Self { settings: RampSettings { slope, window }, rates: [0.0; 4], at: now }
    }

    fn decay(&mut self, now: Nanos) {
        let dt = now.since(self.at).as_secs_f64();
        if dt > 0.0 {
            let keep = (-dt / self.settings.window.as_secs_f64()).exp();
            self.rates.iter_mut().for_each(|r| *r *= keep);
            self.at = now;
        }
    }

    /// Records an admission of `cost` at `now`.
    pub fn on_admitted(&mut self, now: Nanos, cost: Cost) {
        self.decay(now);
        let window = self.settings.window.as_secs_f64();
        for d in Dimension::ALL {
            self.rates[index(d)] += cost.of(d) as f64 / window;
        }
    }

    /// The largest factor of `limits` that may be admitted at `now`, in `(0, 1]`.
    #[must_use]
    pub fn cap(&self, now: Nanos, limits: &Limits) -> f64 {
        let dt = now.since(self.at).as_secs_f64();
        let keep = (-dt / self.settings.window.as_secs_f64()).exp();
        let used = limits
            .rates
            .iter()
            .filter(|r| !r.period.is_zero())
            .map(|r| self.rates[index(r.dimension)] * keep / (r.amount.get() as f64 / r.period.as_secs_f64()))
            .fold(0.0, f64::max);
        let headroom = self.settings.slope * self.settings.window.as_secs_f64();
        (used + headroom).clamp(headroom.min(1.0), 1.0)
    }
}

#[cfg(test)]
mod tests {
    use sluice_quota::RateLimit;

    use super::*;

    #[test]
    fn a_jump_in_demand_is_admitted_at_the_slope() {
        // 600 RPM = 10/s; 5 % of the limit per second.
        let limits = Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::Requests, 600).unwrap_or_else(|| unreachable!()));
        let settings = RampSettings { slope: 0.05, window: RampSettings::WINDOW };
        let mut ramp = Ramp::new(settings, Nanos(0));
        assert!((ramp.cap(Nanos(0), &limits) - 0.25).abs() < 1e-9);
        // A client that takes everything the cap allows, in 10 ms steps, for 10 s.
        let mut admitted = 0.0;
        let step = 10_000_000;
        for i in 0..1_000u64 {
            let now = Nanos(i * step);
            let cap = ramp.cap(now, &limits);
            admitted += cap * 10.0 * 0.01;
            while admitted >= 1.0 {
                ramp.on_admitted(now, Cost::request(0, 0));
                admitted -= 1.0;
            }
        }
        let cap = ramp.cap(Nanos(10_000_000_000), &limits);
        // From 0.25, about 0.05 a second for 10 s (the average lags a little).
        assert!((0.6..=0.8).contains(&cap), "cap after 10 s: {cap}");
    }
}
