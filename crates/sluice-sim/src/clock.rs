//! Where the simulator reads time: a [`Clock`] trait so tests can fake it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// A source of monotonic time plus the wall-clock time of its origin.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Monotonic time elapsed since the clock's origin.
    fn elapsed(&self) -> Duration;
    /// Wall-clock time of the origin, as a duration since the UNIX epoch.
    fn unix_origin(&self) -> Duration;
    /// Current wall-clock time as a duration since the UNIX epoch.
    fn unix_now(&self) -> Duration {
        self.unix_origin() + self.elapsed()
    }
}

/// The real clock: `Instant` for elapsed time, `SystemTime` read once at creation.
#[derive(Debug)]
pub struct RealClock {
    origin: Instant,
    unix_origin: Duration,
}

impl RealClock {
    /// A clock whose origin is now.
    #[must_use]
    pub fn new() -> Self {
        let (origin, wall) = read_real_time();
        let unix_origin = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        Self { origin, unix_origin }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

#[expect(clippy::disallowed_methods, reason = "the one real clock")]
fn read_real_time() -> (Instant, SystemTime) {
    (Instant::now(), SystemTime::now())
}

impl Clock for RealClock {
    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }
    fn unix_origin(&self) -> Duration {
        self.unix_origin
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Default)]
pub struct FakeClock {
    now: Mutex<Duration>,
    unix_origin: Duration,
}

impl FakeClock {
    /// A fake clock at elapsed zero whose origin is `unix_origin` after the epoch.
    #[must_use]
    pub fn new(unix_origin: Duration) -> Self {
        Self { now: Mutex::new(Duration::ZERO), unix_origin }
    }
    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }
}

impl Clock for FakeClock {
    fn elapsed(&self) -> Duration {
        *self.now.lock()
    }
    fn unix_origin(&self) -> Duration {
        self.unix_origin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_advanced() {
        let clock = FakeClock::new(Duration::from_secs(1_700_000_000));
        assert_eq!(clock.elapsed(), Duration::ZERO);
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.elapsed(), Duration::from_millis(1500));
        assert_eq!(clock.unix_now(), Duration::from_millis(1_700_000_001_500));
    }

    #[test]
    fn real_clock_is_monotonic() {
        let clock = RealClock::new();
        let a = clock.elapsed();
        let b = clock.elapsed();
        assert!(b >= a);
        assert!(clock.unix_origin() > Duration::from_secs(1_600_000_000));
    }
}
