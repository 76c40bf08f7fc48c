//! What a provider's rate-limit report means for local state.
//!
//! Providers report per-minute windows (limit, remaining, reset). Remaining below what the
//! local bucket believes is a reason to [`Tighten`]; a limit different from configuration
//! is a [`TierChange`], adopted only when the operator asked for it. Limits are scaled by
//! the adaptive factor with [`scaled`].

use std::num::NonZeroU64;
use std::time::Duration;

use sluice_quota::{Dimension, Limits, RateLimit};

/// One window of a provider's report, in sluice's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderWindow {
    /// What it counts.
    pub dimension: Dimension,
    /// The provider's limit per minute.
    pub limit: Option<u64>,
    /// What is left, plus the provider's rounding error (never undercut the provider by
    /// rounding alone).
    pub remaining: Option<u64>,
    /// Time until the window is full again.
    pub reset: Option<Duration>,
}

/// Hold the local buckets of `dimension` to `remaining` (see `QuotaStore::tighten`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tighten {
    /// Which buckets.
    pub dimension: Dimension,
    /// Units left, as the provider counts.
    pub remaining: u64,
    /// When the provider's window is full again.
    pub reset: Option<Duration>,
}

/// The provider reports a different limit than configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierChange {
    /// Which limit.
    pub dimension: Dimension,
    /// The configured per-minute amount.
    pub configured: u64,
    /// The provider's.
    pub reported: u64,
}

const MINUTE: Duration = Duration::from_secs(60);

/// The per-minute rate of `dimension` in `limits`.
#[must_use]
pub fn per_minute(limits: &Limits, dimension: Dimension) -> Option<&RateLimit> {
    limits.rates.iter().find(|r| r.dimension == dimension && r.period == MINUTE)
}

/// The windows whose remaining count is below the local bucket's burst: only those can
/// hold local state tighter than it already is.
#[must_use]
pub fn tightenings(windows: &[ProviderWindow], limits: &Limits) -> Vec<Tighten> {
    windows
        .iter()
        .filter_map(|w| {
            let remaining = w.remaining?;
            let rate = per_minute(limits, w.dimension)?;
            (remaining < rate.burst.get()).then_some(Tighten { dimension: w.dimension, remaining, reset: w.reset })
        })
        .collect()
}

/// `limits` with the per-minute amount of `dimension` set to `amount`; the burst keeps its
/// share of the amount (the same burst window).
#[must_use]
pub fn with_amount(limits: &Limits, dimension: Dimension, amount: NonZeroU64) -> Limits {
    let rates = limits
        .rates
        .iter()
        .map(|r| if r.dimension == dimension && r.period == MINUTE { rescaled(r, amount) } else { *r })
        .collect();
    Limits { rates, concurrency: limits.concurrency, budgets: limits.budgets.clone() }
}

fn rescaled(rate: &RateLimit, amount: NonZeroU64) -> RateLimit {
    let burst = u128::from(rate.burst.get()) * u128::from(amount.get()) / u128::from(rate.amount.get());
    let burst = NonZeroU64::new(u64::try_from(burst).unwrap_or(u64::MAX)).unwrap_or(NonZeroU64::MIN);
    RateLimit { amount, burst: burst.min(amount), ..*rate }
}

/// Every rate of `limits` at `factor` of its amount and burst (at least 1 each); the
/// concurrency cap is kept. A factor of 1 (or more) returns the limits unchanged.
#[must_use]
pub fn scaled(limits: &Limits, factor: f64) -> Limits {
    if factor.is_nan() || factor >= 1.0 {
        return limits.clone();
    }
    let factor = factor.max(0.0);
    let part = |v: NonZeroU64| NonZeroU64::new((v.get() as f64 * factor) as u64).unwrap_or(NonZeroU64::MIN);
    let rates = limits.rates.iter().map(|r| RateLimit { amount: part(r.amount), burst: part(r.burst), ..*r }).collect();
    Limits { rates, concurrency: limits.concurrency, budgets: limits.budgets.clone() }
}

/// The burst window of `limits`: the longest any per-minute rate releases at once (its
/// burst as time); `None` without per-minute rates.
#[must_use]
pub fn burst_window(limits: &Limits) -> Option<Duration> {
    let window = |r: &RateLimit| {
        let ns = u128::from(r.burst.get()) * r.period.as_nanos() / u128::from(r.amount.get());
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    };
    limits.rates.iter().filter(|r| r.period == MINUTE).map(window).max()
}

/// `limits` with every per-minute burst held to `window` worth of its rate (bursts already
/// shorter are kept).
#[must_use]
pub fn windowed(limits: &Limits, window: Duration) -> Limits {
    let rates = limits
        .rates
        .iter()
        .map(|r| {
            let held = r.with_burst_window(window);
            if r.period == MINUTE && held.burst < r.burst { held } else { *r }
        })
        .collect();
    Limits { rates, concurrency: limits.concurrency, budgets: limits.budgets.clone() }
}

/// Whether a 429 came from a window shorter than the minute: the provider reported its
/// per-minute windows and each still had at least `limits`' burst left (the most sluice
/// releases at once), so the minute was not what refused. `false` without a report.
#[must_use]
pub fn short_window_refusal(windows: &[ProviderWindow], limits: &Limits) -> bool {
    let mut reported = false;
    for w in windows {
        let (Some(remaining), Some(rate)) = (w.remaining, per_minute(limits, w.dimension)) else { continue };
        if remaining < rate.burst.get() {
            return false;
        }
        reported = true;
    }
    reported
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `amount` tokens a minute with a three-second burst.
    fn tpm(amount: u64) -> Limits {
        let rate = RateLimit::per_minute(Dimension::TotalTokens, amount).unwrap_or_else(|| unreachable!());
        Limits::unlimited().with_rate(rate.with_burst_window(Duration::from_secs(3)))
    }

    #[test]
    fn only_reports_below_the_burst_tighten() {
        let limits = tpm(60_000); // burst 3,000
        let window = |remaining| ProviderWindow {
            dimension: Dimension::TotalTokens,
            limit: Some(60_000),
            remaining: Some(remaining),
            reset: None,
        };
        assert!(tightenings(&[window(30_000)], &limits).is_empty());
        assert_eq!(tightenings(&[window(1_000)], &limits)[0].remaining, 1_000);
        let other = ProviderWindow { dimension: Dimension::Requests, ..window(0) };
        assert!(tightenings(&[other], &limits).is_empty(), "no local request limit to tighten");
    }

    #[test]
    fn adopting_keeps_the_burst_window_and_scaling_keeps_at_least_one() {
        let adopted =
            with_amount(&tpm(60_000), Dimension::TotalTokens, NonZeroU64::new(30_000).unwrap_or(NonZeroU64::MIN));
        assert_eq!(adopted.rates[0].amount.get(), 30_000);
        assert_eq!(adopted.rates[0].burst.get(), 1_500);
        let small = scaled(&tpm(60_000), 0.5);
        assert_eq!((small.rates[0].amount.get(), small.rates[0].burst.get()), (30_000, 1_500));
        assert_eq!(scaled(&tpm(1), 0.1).rates[0].amount.get(), 1);
        assert_eq!(scaled(&tpm(10), f64::NAN), tpm(10));
    }

    fn report(remaining: u64) -> ProviderWindow {
        ProviderWindow {
            dimension: Dimension::TotalTokens,
            limit: Some(60_000),
            remaining: Some(remaining),
            reset: None,
        }
    }

    #[test]
    fn a_429_with_the_minute_left_is_a_short_window_refusal() {
        let limits = tpm(60_000); // burst 3,000
        assert!(short_window_refusal(&[report(50_000)], &limits));
        assert!(!short_window_refusal(&[report(2_000)], &limits), "the minute is nearly spent");
        assert!(!short_window_refusal(&[], &limits), "no report, nothing known");
    }

    #[test]
    fn burst_windows_are_read_and_only_ever_shortened() {
        let limits =
            tpm(60_000).with_rate(RateLimit::per_minute(Dimension::Requests, 60).unwrap_or_else(|| unreachable!()));
        assert_eq!(burst_window(&limits), Some(Duration::from_secs(3)), "the longest");
        assert_eq!(windowed(&limits, Duration::from_secs(5)), limits, "never lengthened");
        let held = windowed(&limits, Duration::from_millis(500));
        assert_eq!(held.rates[0].burst.get(), 500);
        assert_eq!(held.rates[1].burst.get(), 1, "never below one");
        assert_eq!(burst_window(&held), Some(Duration::from_secs(1)), "the request rate's one unit");
    }
}
