//! Retry delays: exponential backoff with full jitter, never shorter than the provider's
//! own hint. Pure: the randomness comes in as an RNG. The one backoff of sluice: jobs use
//! [`Backoff::JOBS`], the gateway's live retries the same function with shorter settings.

use std::time::Duration;

use rand::Rng;

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first attempt's ceiling.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
}

impl Backoff {
    /// 1 s doubling to at most 5 min (batch work can wait).
    pub const JOBS: Self = Self { base: Duration::from_secs(1), cap: Duration::from_secs(300) };

    /// The delay before retrying after `attempts` failed attempts (1 = the first failed):
    /// uniform in `[0, min(cap, base · 2^(attempts-1))]`, raised to `floor` (the provider's
    /// `Retry-After`) when that is longer.
    pub fn delay(&self, attempts: u32, floor: Option<Duration>, rng: &mut impl Rng) -> Duration {
        let exponent = attempts.saturating_sub(1).min(32);
        let ceiling = self.base.saturating_mul(1u32 << exponent.min(31)).min(self.cap);
        let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        let jittered = Duration::from_millis(rng.random_range(0..=ceiling_ms));
        floor.map_or(jittered, |f| jittered.max(f))
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn full_jitter_stays_under_the_doubling_ceiling_and_the_cap() {
        let mut rng = StdRng::seed_from_u64(1);
        let backoff = Backoff { base: Duration::from_millis(100), cap: Duration::from_secs(1) };
        for attempts in 1..40 {
            let ceiling = Duration::from_millis(100 * (1u64 << (attempts - 1).min(20))).min(Duration::from_secs(1));
            let delays: Vec<Duration> = (0..200).map(|_| backoff.delay(attempts, None, &mut rng)).collect();
            assert!(delays.iter().all(|d| *d <= ceiling), "attempt {attempts}");
            // Full jitter: some delays fall in the lower half.
            assert!(delays.iter().any(|d| *d < ceiling / 2), "attempt {attempts}");
        }
    }

    #[test]
    fn the_provider_hint_is_a_floor() {
        let mut rng = StdRng::seed_from_u64(2);
        let floor = Some(Duration::from_secs(7));
        for attempts in 1..10 {
            assert!(Backoff::JOBS.delay(attempts, floor, &mut rng) >= Duration::from_secs(7));
        }
    }
}
