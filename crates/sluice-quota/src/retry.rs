//! When to try again: backoff with full jitter, a retry budget per deployment, and a
//! breaker that holds a failing deployment back for every instance.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::backoff::Backoff;
use crate::clock::Nanos;
use parking_lot::Mutex;
use rand::Rng;

/// First backoff ceiling.
pub const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Largest backoff ceiling.
pub const BACKOFF_CAP: Duration = Duration::from_secs(4);
/// The live path's backoff: short, since a client is waiting (jobs use [`Backoff::JOBS`]).
pub const LIVE: Backoff = Backoff { base: BACKOFF_BASE, cap: BACKOFF_CAP };

/// Full-jitter backoff before attempt `attempt + 1` (0-based retries): uniform in
/// `[0, min(cap, base · 2^attempt)]`, but never less than the provider's hint. The one
/// backoff of sluice ([`Backoff::delay`]) with the live settings.
pub fn backoff(attempt: u32, floor: Option<Duration>, rng: &mut impl Rng) -> Duration {
    LIVE.delay(attempt.saturating_add(1), floor, rng)
}

/// Retries allowed to a deployment: each request earns half a retry, each retry spends
/// one, so retries stay below half the traffic even when every call fails (no retry
/// storms), with a reserve for quiet periods.
#[derive(Debug)]
pub struct RetryBudget {
    tokens: Mutex<f64>,
}

/// Retries a deployment may bank.
const BUDGET_CAP: f64 = 50.0;
/// Retries earned per request.
const BUDGET_PER_REQUEST: f64 = 0.5;

impl Default for RetryBudget {
    fn default() -> Self {
        Self { tokens: Mutex::new(BUDGET_CAP) }
    }
}

impl RetryBudget {
    /// A request went upstream.
    pub fn deposit(&self) {
        let mut tokens = self.tokens.lock();
        *tokens = (*tokens + BUDGET_PER_REQUEST).min(BUDGET_CAP);
    }

    /// Takes a retry, if the budget has one.
    pub fn withdraw(&self) -> bool {
        let mut tokens = self.tokens.lock();
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            return true;
        }
        false
    }
}

/// Consecutive failures of a deployment; after `threshold` of them it opens for a
/// cooldown that doubles each time a half-open probe fails (up to 5 minutes).
#[derive(Debug)]
pub struct Breaker {
    threshold: u32,
    cooldown: Duration,
    failures: AtomicU32,
    opened: AtomicU32,
    open_until: AtomicU64,
}

/// The longest cooldown.
const MAX_COOLDOWN: Duration = Duration::from_secs(300);

impl Breaker {
    /// A closed breaker.
    #[must_use]
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold: threshold.max(1),
            cooldown,
            failures: AtomicU32::new(0),
            opened: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
        }
    }

    /// Whether the deployment is held back at `now` (as this instance knows it).
    #[must_use]
    pub fn is_open(&self, now: Nanos) -> bool {
        self.open_until.load(Ordering::Relaxed) > now.0
    }

    /// How long the deployment stays held back from `now` (at least a second, the
    /// shortest `Retry-After`).
    #[must_use]
    pub fn remaining(&self, now: Nanos) -> Duration {
        let until = self.open_until.load(Ordering::Relaxed);
        Duration::from_nanos(until.saturating_sub(now.0)).max(Duration::from_secs(1))
    }

    /// Consecutive failures counted toward the next opening (0 after a success or an
    /// opening).
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    /// A call succeeded: the breaker closes.
    pub fn success(&self) {
        self.failures.store(0, Ordering::Relaxed);
        self.opened.store(0, Ordering::Relaxed);
    }

    /// A call failed in a way that counts against health (5xx, overload, unreachable).
    /// Returns the cooldown to apply when this failure opens (or re-opens) the breaker.
    pub fn failure(&self, now: Nanos, hint: Option<Duration>) -> Option<Duration> {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.threshold {
            return None;
        }
        self.failures.store(0, Ordering::Relaxed);
        let times = self.opened.fetch_add(1, Ordering::Relaxed).min(16);
        let cooldown = self.cooldown.saturating_mul(1u32 << times).min(MAX_COOLDOWN);
        let cooldown = hint.map_or(cooldown, |h| cooldown.max(h));
        self.open_until.store(now.after(cooldown).0, Ordering::Relaxed);
        Some(cooldown)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;

    use super::*;

    #[test]
    fn backoff_is_jittered_under_a_growing_cap_and_honours_the_floor() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for attempt in 0..8 {
            let ceiling = BACKOFF_BASE.saturating_mul(1 << attempt).min(BACKOFF_CAP);
            for _ in 0..100 {
                assert!(backoff(attempt, None, &mut rng) <= ceiling);
            }
        }
        assert!(backoff(0, Some(Duration::from_secs(2)), &mut rng) >= Duration::from_secs(2));
        let spread: Vec<Duration> = (0..50).map(|_| backoff(3, None, &mut rng)).collect();
        assert!(
            spread.iter().any(|d| *d < Duration::from_millis(500))
                && spread.iter().any(|d| *d > Duration::from_millis(1000))
        );
    }

    #[test]
    fn the_budget_keeps_retries_below_half_the_traffic() {
        let budget = RetryBudget::default();
        let mut retries = 0;
        for _ in 0..1_000 {
            budget.deposit();
            if budget.withdraw() {
                retries += 1;
            }
            if budget.withdraw() {
                retries += 1;
            }
        }
        assert!(retries <= 500 + 51, "{retries}");
        assert!(retries >= 500, "{retries}");
    }

    #[test]
    fn the_breaker_opens_after_the_threshold_and_backs_off_further_each_time() {
        let breaker = Breaker::new(3, Duration::from_secs(10));
        let now = Nanos(0);
        assert_eq!(breaker.failure(now, None), None);
        assert_eq!(breaker.failure(now, None), None);
        assert_eq!(breaker.failures(), 2, "a run of two so far");
        assert_eq!(breaker.failure(now, None), Some(Duration::from_secs(10)));
        assert_eq!(breaker.failures(), 0, "the opening starts a new run");
        assert!(breaker.is_open(now));
        let later = now.after(Duration::from_secs(11));
        assert!(!breaker.is_open(later));
        for _ in 0..2 {
            assert_eq!(breaker.failure(later, None), None);
        }
        // The half-open probe failed again: twice as long, or the provider's hint if longer.
        assert_eq!(breaker.failure(later, Some(Duration::from_secs(60))), Some(Duration::from_secs(60)));
        breaker.success();
        assert_eq!(breaker.failure(later, None), None);
    }
}
