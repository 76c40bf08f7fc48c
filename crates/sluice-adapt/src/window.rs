//! The learned short window of a deployment: how much of a per-minute rate may go at once.
//!
//! Providers enforce per-minute limits over shorter windows than the minute (OpenAI's
//! "quantized" limits: 60,000 RPM as 1,000 requests per second). A provider 429 while the
//! provider still reports per-minute capacity left means the burst sluice releases is
//! larger than the provider's window: the window shrinks (by `shrink`, down to `floor`). It
//! stays there for `hold` after the last such 429 (every instance sharing the deployment
//! keeps it as long), then grows back linearly to the configured window over `regrow`;
//! the next short-window 429 shrinks it again.

use std::time::Duration;

use sluice_quota::Nanos;

/// How the learned window moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowSettings {
    /// Learn at all; off, the window stays the configured one and every 429 is the
    /// minute's (the rate comes down instead).
    pub enabled: bool,
    /// Multiplier on each shrink, in (0, 1).
    pub shrink: f64,
    /// The shortest window.
    pub floor: Duration,
    /// How long a shrunk window is kept after the last short-window 429.
    pub hold: Duration,
    /// Time to grow back from the floor to the configured window, once the hold is over.
    pub regrow: Duration,
    /// Shortest time between two shrinks (one burst of 429s counts once).
    pub min_interval: Duration,
}

impl WindowSettings {
    /// The default floor: a quarter of the shortest window a major provider documents.
    pub const FLOOR: Duration = Duration::from_millis(250);
}

impl Default for WindowSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            shrink: 0.5,
            floor: Self::FLOOR,
            hold: Duration::from_secs(60),
            regrow: Duration::from_secs(600),
            min_interval: Duration::from_secs(1),
        }
    }
}

/// A deployment's window: configured, and as learned. See the module docs.
#[derive(Debug, Clone)]
pub struct LearnedWindow {
    settings: WindowSettings,
    configured: Duration,
    /// The window after the last shrink (or adoption), and when.
    shrunk: Option<(Duration, Nanos)>,
}

impl LearnedWindow {
    /// The configured window, nothing learned yet.
    #[must_use]
    pub fn new(configured: Duration, settings: WindowSettings) -> Self {
        let settings = WindowSettings { shrink: settings.shrink.clamp(0.05, 0.95), ..settings };
        Self { settings, configured, shrunk: None }
    }

    /// The configured window.
    #[must_use]
    pub fn configured(&self) -> Duration {
        self.configured
    }

    /// The window in force at `now`: the shrunk one during the hold, then growing back.
    #[must_use]
    pub fn current(&self, now: Nanos) -> Duration {
        let Some((window, at)) = self.shrunk else { return self.configured };
        let since = now.since(at);
        let growing = since.saturating_sub(self.settings.hold).as_secs_f64();
        let span = self.configured.saturating_sub(self.settings.floor).as_secs_f64();
        let slope = span / self.settings.regrow.as_secs_f64().max(1e-3);
        Duration::from_secs_f64(window.as_secs_f64() + growing * slope).min(self.configured)
    }

    /// Whether a short-window 429 at `now` could still shrink the window (it is above its
    /// floor).
    #[must_use]
    pub fn can_shrink(&self, now: Nanos) -> bool {
        self.settings.enabled && self.current(now) > self.settings.floor.min(self.configured)
    }

    /// The settings it learns by.
    #[must_use]
    pub fn settings(&self) -> &WindowSettings {
        &self.settings
    }

    /// A provider 429 for a short window at `now`: shrinks (unless it did within the
    /// interval). Returns the new window when it changed.
    pub fn on_short_window_429(&mut self, now: Nanos) -> Option<Duration> {
        if !self.settings.enabled {
            return None;
        }
        if let Some((_, at)) = self.shrunk
            && now.since(at) < self.settings.min_interval
        {
            return None;
        }
        let floor = self.settings.floor.min(self.configured);
        let before = self.current(now);
        let window = before.mul_f64(self.settings.shrink).max(floor);
        // At the floor the hold still starts again: the provider still refuses.
        self.shrunk = Some((window, now));
        (window < before).then_some(window)
    }

    /// A window another instance learned (shared through the store): kept as if learned
    /// here at `now` when it is shorter than the current one. Returns whether it was.
    pub fn adopt(&mut self, window: Duration, now: Nanos) -> bool {
        let floor = self.settings.floor.min(self.configured);
        if !self.settings.enabled || window >= self.current(now) {
            return false;
        }
        self.shrunk = Some((window.max(floor), now));
        true
    }

    /// A reload changed the configured window or the settings: the learned one is kept
    /// below it (and forgotten when learning is switched off).
    pub fn reconfigure(&mut self, configured: Duration, settings: WindowSettings) {
        let kept = self.shrunk.filter(|_| settings.enabled);
        *self = Self::new(configured, settings);
        self.shrunk = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn shrinks_to_the_floor_once_per_interval() {
        let mut w = LearnedWindow::new(Duration::from_secs(3), WindowSettings::default());
        assert_eq!(w.current(Nanos(0)), Duration::from_secs(3));
        assert_eq!(w.on_short_window_429(Nanos(0)), Some(ms(1_500)));
        assert_eq!(w.on_short_window_429(Nanos(SEC / 2)), None, "the same burst of 429s");
        assert_eq!(w.on_short_window_429(Nanos(SEC)), Some(ms(750)));
        assert_eq!(w.on_short_window_429(Nanos(2 * SEC)), Some(ms(375)));
        assert_eq!(w.on_short_window_429(Nanos(3 * SEC)), Some(ms(250)));
        assert_eq!(w.on_short_window_429(Nanos(4 * SEC)), None, "at the floor");
        assert_eq!(w.current(Nanos(64 * SEC)), ms(250), "the hold started again");
    }

    #[test]
    fn holds_then_grows_back_linearly_to_the_configured_window() {
        let settings = WindowSettings { regrow: Duration::from_secs(100), ..WindowSettings::default() };
        let mut w = LearnedWindow::new(ms(1_250), settings);
        assert_eq!(w.on_short_window_429(Nanos(0)), Some(ms(625)));
        assert_eq!(w.current(Nanos(60 * SEC)), ms(625), "held for a minute");
        // 1 s of span over 100 s: 10 ms a second.
        assert_eq!(w.current(Nanos(70 * SEC)), ms(725));
        assert_eq!(w.current(Nanos(1_000 * SEC)), ms(1_250));
    }

    #[test]
    fn adopts_only_a_shorter_window_and_never_below_the_floor() {
        let mut w = LearnedWindow::new(Duration::from_secs(3), WindowSettings::default());
        assert!(!w.adopt(Duration::from_secs(4), Nanos(0)));
        assert!(w.adopt(ms(800), Nanos(0)));
        assert_eq!(w.current(Nanos(SEC)), ms(800));
        assert!(!w.adopt(ms(900), Nanos(SEC)));
        assert!(w.adopt(ms(10), Nanos(SEC)));
        assert_eq!(w.current(Nanos(SEC)), WindowSettings::FLOOR);
    }

    #[test]
    fn switched_off_it_neither_learns_nor_adopts() {
        let settings = WindowSettings { enabled: false, ..WindowSettings::default() };
        let mut w = LearnedWindow::new(Duration::from_secs(1), settings);
        assert!(!w.can_shrink(Nanos(0)));
        assert_eq!(w.on_short_window_429(Nanos(0)), None);
        assert!(!w.adopt(ms(500), Nanos(0)));
        assert_eq!(w.current(Nanos(SEC)), Duration::from_secs(1));
    }

    #[test]
    fn a_configured_window_below_the_floor_stays() {
        let mut w = LearnedWindow::new(ms(100), WindowSettings::default());
        assert_eq!(w.on_short_window_429(Nanos(0)), None);
        assert_eq!(w.current(Nanos(SEC)), ms(100));
    }
}
