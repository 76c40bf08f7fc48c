//! AIMD on the effective limit: a provider 429 that sluice did not expect multiplies the
//! factor by `decrease` (at most once per `min_interval`, so one burst of 429s from
//! requests already in flight counts once); without 429s it recovers linearly to 1.

use std::time::Duration;

use sluice_quota::Nanos;

/// How the factor moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AimdSettings {
    /// Multiplier on each decrease, in (0, 1).
    pub decrease: f64,
    /// Shortest time between two decreases.
    pub min_interval: Duration,
    /// Time to recover from 0 to 1 (the additive slope is `1 / recovery` per second).
    pub recovery: Duration,
    /// The lowest factor, in (0, 1].
    pub floor: f64,
}

impl Default for AimdSettings {
    fn default() -> Self {
        Self { decrease: 0.7, min_interval: Duration::from_secs(1), recovery: Duration::from_secs(60), floor: 0.1 }
    }
}

/// The factor and when it last changed.
#[derive(Debug, Clone)]
pub struct Aimd {
    settings: AimdSettings,
    factor: f64,
    at: Nanos,
    last_decrease: Option<Nanos>,
}

impl Aimd {
    /// A factor of 1 at `now`. Settings out of range are clamped.
    #[must_use]
    pub fn new(settings: AimdSettings, now: Nanos) -> Self {
        let settings = AimdSettings {
            decrease: finite_or(settings.decrease, 0.7).clamp(0.01, 0.99),
            floor: finite_or(settings.floor, 0.1).clamp(0.01, 1.0),
            recovery: settings.recovery.max(Duration::from_millis(1)),
            ..settings
        };
        Self { settings, factor: 1.0, at: now, last_decrease: None }
    }

    /// The settings in force.
    #[must_use]
    pub fn settings(&self) -> AimdSettings {
        self.settings
    }

    /// The factor at `now`, with recovery since the last change applied.
    #[must_use]
    pub fn factor(&self, now: Nanos) -> f64 {
        let elapsed = now.since(self.at).as_secs_f64();
        let slope = 1.0 / self.settings.recovery.as_secs_f64();
        (self.factor + elapsed * slope).clamp(self.settings.floor, 1.0)
    }

    /// An unexpected provider 429 at `now`: decreases unless one did within the interval.
    /// Returns whether the factor changed.
    pub fn on_rejection(&mut self, now: Nanos) -> bool {
        if self.last_decrease.is_some_and(|last| now.since(last) < self.settings.min_interval) {
            return false;
        }
        let current = self.factor(now);
        self.factor = (current * self.settings.decrease).max(self.settings.floor);
        self.at = now;
        self.last_decrease = Some(now);
        true
    }
}

fn finite_or(v: f64, default: f64) -> f64 {
    if v.is_finite() { v } else { default }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn decreases_once_per_interval_and_recovers_linearly() {
        let mut aimd = Aimd::new(AimdSettings::default(), Nanos(0));
        assert!(aimd.on_rejection(Nanos(0)));
        assert!((aimd.factor(Nanos(0)) - 0.7).abs() < 1e-9);
        // A second 429 from the same burst does not count.
        assert!(!aimd.on_rejection(Nanos(SEC / 2)));
        assert!(aimd.on_rejection(Nanos(SEC)));
        let after = aimd.factor(Nanos(SEC));
        assert!((after - (0.7 + 1.0 / 60.0) * 0.7).abs() < 1e-9, "{after}");
        // 15 s later a quarter of the range came back; 60 s later all of it.
        assert!((aimd.factor(Nanos(16 * SEC)) - (after + 0.25)).abs() < 1e-9);
        assert_eq!(aimd.factor(Nanos(61 * SEC)), 1.0);
    }

    #[test]
    fn never_below_the_floor() {
        let mut aimd = Aimd::new(AimdSettings { floor: 0.25, ..AimdSettings::default() }, Nanos(0));
        for s in 0..20 {
            aimd.on_rejection(Nanos(s * SEC));
        }
        assert!((aimd.factor(Nanos(19 * SEC)) - 0.25).abs() < 1e-9);
    }
}
