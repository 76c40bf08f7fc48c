//! Time as the core sees it: a monotonic nanosecond counter behind a trait, and the wall
//! clock beside it for timestamps.
//!
//! Decision logic never reads the wall clock; it takes `now` as an argument. Stores and
//! the gateway read both from a [`Clock`], and wait on it ([`Clock::sleep_until`],
//! [`within`]), so tests swap in a [`FakeClock`] whose waits end when it is moved.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
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

/// A wait on a clock: resolves once the clock reaches the instant it was made for.
pub type Wait = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of monotonic time, of wall-clock time for timestamps, and of waits.
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

    /// A wait that ends once this clock reaches `deadline` (at once when it has).
    fn sleep_until(&self, deadline: Nanos) -> Wait;

    /// A wait that ends `d` from now on this clock.
    fn sleep(&self, d: Duration) -> Wait {
        self.sleep_until(self.now().after(d))
    }
}

/// `work`, unless `limit` passes on `clock` first (`None`). Work that is ready and the limit
/// that is reached in the same instant: the work wins.
pub async fn within<F: Future>(clock: &dyn Clock, limit: Duration, work: F) -> Option<F::Output> {
    first(work, clock.sleep(limit)).await
}

/// `work`, unless `clock` reaches `deadline` first (`None`).
pub async fn until<F: Future>(clock: &dyn Clock, deadline: Nanos, work: F) -> Option<F::Output> {
    first(work, clock.sleep_until(deadline)).await
}

/// `work`'s output, or `None` when `limit` ends first (polled after the work).
async fn first<F: Future>(work: F, mut limit: Wait) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx: &mut Context<'_>| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        limit.as_mut().poll(cx).map(|()| None)
    })
    .await
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

    fn sleep_until(&self, deadline: Nanos) -> Wait {
        let at = self.origin.checked_add(Duration::from_nanos(deadline.0));
        // A deadline past what the platform's clock can name is never reached.
        match at {
            Some(at) => Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(at))),
            None => Box::pin(std::future::pending()),
        }
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
/// [`FAKE_UNIX_ORIGIN_MS`] plus its monotonic time, so both move together. Its waits end
/// when it is moved to or past their deadline.
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    now: Arc<AtomicU64>,
    /// Waits not yet ended: their deadline and who to wake.
    waiting: Arc<parking_lot::Mutex<Vec<(u64, Waker)>>>,
}

impl FakeClock {
    /// A fake clock at `start`.
    #[must_use]
    pub fn at(start: Nanos) -> Self {
        Self { now: Arc::new(AtomicU64::new(start.0)), waiting: Arc::default() }
    }

    /// Moves time forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.now.fetch_add(duration_ns(d), Ordering::SeqCst);
        self.wake_due();
    }

    /// Sets the time; it may not go backwards.
    pub fn set(&self, t: Nanos) {
        self.now.fetch_max(t.0, Ordering::SeqCst);
        self.wake_due();
    }

    fn wake_due(&self) {
        let now = self.now.load(Ordering::SeqCst);
        let due: Vec<Waker> = {
            let mut waiting = self.waiting.lock();
            let (due, left): (Vec<_>, Vec<_>) = waiting.drain(..).partition(|(at, _)| *at <= now);
            *waiting = left;
            due.into_iter().map(|(_, waker)| waker).collect()
        };
        due.into_iter().for_each(Waker::wake);
    }
}

/// A wait on a [`FakeClock`].
struct FakeWait {
    clock: FakeClock,
    deadline: u64,
}

impl Future for FakeWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now.load(Ordering::SeqCst) >= self.deadline {
            return Poll::Ready(());
        }
        {
            // Polled again by the same task (beside other work): registered once.
            let mut waiting = self.clock.waiting.lock();
            let known = waiting.iter().any(|(at, waker)| *at == self.deadline && waker.will_wake(cx.waker()));
            if !known {
                waiting.push((self.deadline, cx.waker().clone()));
            }
        }
        // Moved between the check and the registration: the registration may be missed.
        if self.clock.now.load(Ordering::SeqCst) >= self.deadline {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Nanos {
        Nanos(self.now.load(Ordering::SeqCst))
    }

    fn sleep_until(&self, deadline: Nanos) -> Wait {
        Box::pin(FakeWait { clock: self.clone(), deadline: deadline.0 })
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

    #[tokio::test]
    async fn a_fake_wait_ends_when_the_clock_is_moved_to_its_deadline() {
        let clock = FakeClock::default();
        let waiting = tokio::spawn(clock.sleep(Duration::from_secs(10)));
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(9));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a second short");
        clock.advance(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        // A deadline already passed ends at once.
        clock.sleep_until(Nanos(0)).await;
    }

    #[tokio::test]
    async fn within_gives_the_work_or_none_when_the_limit_passes_first() {
        let clock = FakeClock::default();
        assert_eq!(within(&clock, Duration::from_secs(1), async { 7 }).await, Some(7));
        let never = std::future::pending::<()>();
        let limited = tokio::spawn({
            let clock = clock.clone();
            async move { within(&clock, Duration::from_secs(1), never).await }
        });
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(1));
        assert_eq!(tokio::time::timeout(Duration::from_secs(5), limited).await.unwrap().unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_system_wait_follows_the_timer() {
        let clock = SystemClock::new();
        let started = tokio::time::Instant::now();
        clock.sleep(Duration::from_secs(30)).await;
        assert!(started.elapsed() >= Duration::from_secs(30));
    }
}
