//! Time as the core sees it: a monotonic nanosecond counter behind a trait.
//!
//! Decision logic never reads the wall clock; it takes `now` as an argument. Stores and
//! the gateway read it from a [`Clock`], so tests swap in a [`FakeClock`].

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

/// A source of monotonic time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time on this clock.
    fn now(&self) -> Nanos;
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
}

/// A clock that moves only when told to; clones share the same time.
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
}

/// Seconds since the Unix epoch, for timestamps in responses (`created`), never for
/// decisions. The one place sluice reads the wall clock.
#[must_use]
#[expect(clippy::disallowed_methods, reason = "wall-clock timestamps for response bodies")]
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
