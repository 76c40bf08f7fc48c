//! Time as the core sees it: a monotonic nanosecond counter behind a trait, and the wall
//! clock beside it for timestamps.
//!
//! Decision logic never reads the wall clock; it takes `now` as an argument. Stores and
//! the gateway read both from a [`Clock`], so tests swap in a [`FakeClock`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A point on a clock's monotonic timeline, in nanoseconds since the clock's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub u64);

impl Nanos {
    /// The instant `d` after `self`, saturating.
    #[must_use]
    pub fn after(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_ns(d)))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    #[must_use]
    pub fn since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// A duration as whole nanoseconds, saturating at `u64::MAX` (584 years).
#[must_use]
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A source of monotonic time, and of wall-clock time for timestamps.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time on this clock.
    fn now(&self) -> Nanos;

    /// Milliseconds since the Unix epoch: for timestamps in responses (`created`) and for
    /// reading provider headers that name a date, never for decisions (it may jump).
    fn unix_millis(&self) -> u64;

    /// Whole seconds since the Unix epoch (see [`Clock::unix_millis`]).
    fn unix_seconds(&self) -> u64 {
        self.unix_millis() / 1000
    }
}

/// The process's monotonic clock. The one place in sluice that reads real time.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl SystemClock {
    /// A clock whose origin is the moment of creation.
    #[must_use]
    #[expect(clippy::disallowed_methods, reason = "the one real clock of sluice")]
    pub fn new() -> Self {
        Self { origin: std::time::Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Nanos {
        Nanos(duration_ns(self.origin.elapsed()))
    }

    #[expect(clippy::disallowed_methods, reason = "the one wall clock of sluice, for timestamps")]
    fn unix_millis(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }
}

/// The wall-clock time of a [`FakeClock`] at its origin, in ms since the Unix epoch
/// (2023-11-14T22:13:20Z): a plausible date, so timestamps in tests look real.
pub const FAKE_UNIX_ORIGIN_MS: u64 = 1_700_000_000_000;

/// A clock that moves only when told to; clones share the same time. Its wall clock is
/// [`FAKE_UNIX_ORIGIN_MS`] plus its monotonic time, so both move together.
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    now: Arc<AtomicU64>,
}

impl FakeClock {
    /// A fake clock at `start`.
    #[must_use]
    pub fn at(start: Nanos) -> Self {
        Self { now: Arc::new(AtomicU64::new(start.0)) }
    }

    /// Moves time forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.now.fetch_add(duration_ns(d), Ordering::SeqCst);
    }

    /// Sets the time; it may not go backwards.
    pub fn set(&self, t: Nanos) {
        self.now.fetch_max(t.0, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Nanos {
        Nanos(self.now.load(Ordering::SeqCst))
    }

    fn unix_millis(&self) -> u64 {
        FAKE_UNIX_ORIGIN_MS.saturating_add(self.now().0 / 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_wall_clock_moves_with_the_fake_time() {
        let clock = FakeClock::default();
        assert_eq!(clock.unix_millis(), FAKE_UNIX_ORIGIN_MS);
        clock.advance(Duration::from_millis(2_500));
        assert_eq!(clock.unix_millis(), FAKE_UNIX_ORIGIN_MS + 2_500);
        assert_eq!(clock.unix_seconds(), FAKE_UNIX_ORIGIN_MS / 1000 + 2);
    }

    #[test]
    fn the_system_wall_clock_is_after_2020() {
        assert!(SystemClock::new().unix_seconds() > 1_577_836_800);
    }
}
