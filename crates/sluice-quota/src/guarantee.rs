//! Guaranteed, borrowed, reclaimed: how each tenant's admissions relate to its fair share
//! of a deployment, measured for metrics (the gateway counts them: `sluice_fair_tokens`,
//! `sluice_fair_reclaims`).
//!
//! A tenant's *guaranteed share* of a deployment is its weight over the weights of all
//! configured tenants, applied to each of the deployment's token limits (rate and burst).
//! [`Guarantee`] keeps one bucket per tenant and token limit at that share and, for every
//! admission, splits the tokens reserved into the part its guaranteed buckets cover
//! (`guaranteed`) and the rest (`borrowed`: idle capacity beyond its share). It only
//! measures: admission itself is decided by the store and the fair queue.
//!
//! A request is *reclaimed* ([`HeldBack`]) when it was held back at least once so that
//! another tenant's or a higher class's request could go: the store's fair-share check
//! refused it (limiter `fair_share`, across instances), or, waiting in the deployment's
//! queue, a request that arrived later went before it.
//!
//! Per instance: each instance measures the admissions it makes against the whole share.

use std::collections::HashMap;
use std::num::{NonZeroU32, NonZeroU64};
use std::sync::{Mutex, PoisonError};

use crate::bucket::{self, Tat};
use crate::clock::Nanos;
use crate::limit::{Cost, Dimension, Limits, RateLimit};

/// Why a request was held back for others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldBack {
    /// Another tenant, further behind its fair share, went first.
    Tenant,
    /// A request of a higher class went first.
    Class,
}

impl HeldBack {
    /// The `by` label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Class => "class",
        }
    }
}

/// The tenants' guaranteed buckets on one deployment.
#[derive(Debug)]
pub struct Guarantee {
    rates: Vec<RateLimit>,
    total_weight: u64,
    tats: Mutex<HashMap<u32, Vec<Tat>>>,
}

impl Guarantee {
    /// Guarantees on the token limits of `limits` (a deployment's) for tenants whose
    /// weights add up to `total_weight`.
    #[must_use]
    pub fn new(limits: &Limits, total_weight: u64) -> Self {
        let rates = limits.rates.iter().filter(|r| r.dimension != Dimension::Requests).copied().collect();
        Self { rates, total_weight: total_weight.max(1), tats: Mutex::new(HashMap::new()) }
    }

    /// Splits the tokens of `cost`, admitted at `now` for `tenant` of `weight`, into
    /// (guaranteed, borrowed), and takes the guaranteed part from the tenant's buckets.
    /// `None` when the deployment has no token limit (nothing to share).
    pub fn split(&self, now: Nanos, tenant: u32, weight: NonZeroU32, cost: Cost) -> Option<(u64, u64)> {
        if self.rates.is_empty() {
            return None;
        }
        let limits: Vec<RateLimit> = self.rates.iter().map(|r| self.scaled(r, weight)).collect();
        let mut tats = self.tats.lock().unwrap_or_else(PoisonError::into_inner);
        let tats = tats.entry(tenant).or_insert_with(|| vec![Tat::default(); limits.len()]);
        // The largest fraction of the request every guaranteed bucket can cover now.
        let fraction = limits
            .iter()
            .zip(tats.iter())
            .filter(|(limit, _)| cost.of(limit.dimension) > 0)
            .map(|(limit, tat)| bucket::remaining(limit, *tat, now) as f64 / cost.of(limit.dimension) as f64)
            .fold(1.0_f64, f64::min);
        for (limit, tat) in limits.iter().zip(tats.iter_mut()) {
            let units = (cost.of(limit.dimension) as f64 * fraction) as u64;
            *tat = bucket::adjust(limit, *tat, now, 0, units);
        }
        let total = cost.input_tokens.saturating_add(cost.output_tokens);
        let guaranteed = ((total as f64 * fraction) as u64).min(total);
        Some((guaranteed, total - guaranteed))
    }

    /// `rate` at the share of `weight`.
    fn scaled(&self, rate: &RateLimit, weight: NonZeroU32) -> RateLimit {
        let share = |n: NonZeroU64| {
            let scaled = u128::from(n.get()) * u128::from(weight.get()) / u128::from(self.total_weight);
            NonZeroU64::new(u64::try_from(scaled).unwrap_or(u64::MAX)).unwrap_or(NonZeroU64::MIN)
        };
        RateLimit { amount: share(rate.amount), burst: share(rate.burst), ..*rate }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// 60,000 TPM (1,000 tokens/s) with a one-second burst, shared by weights 1 + 1.
    fn guarantee() -> Guarantee {
        let tpm = RateLimit {
            dimension: Dimension::TotalTokens,
            amount: NonZeroU64::new(60_000).unwrap_or(NonZeroU64::MIN),
            period: Duration::from_secs(60),
            burst: NonZeroU64::new(1_000).unwrap_or(NonZeroU64::MIN),
            guard: false,
        };
        Guarantee::new(&Limits { rates: vec![tpm], ..Limits::default() }, 2)
    }

    /// `tenant` takes `per_second` tokens a second for `seconds`, in 10 requests a second.
    fn run(g: &Guarantee, tenant: u32, per_second: u64, from: u64, seconds: u64) -> (u64, u64) {
        let mut sum = (0, 0);
        for tick in from * 10..(from + seconds) * 10 {
            let now = Nanos(tick * 100_000_000);
            let cost = Cost::request(per_second / 20, per_second / 20);
            let (g, b) = g.split(now, tenant, NonZeroU32::MIN, cost).unwrap_or((0, 0));
            sum = (sum.0 + g, sum.1 + b);
        }
        sum
    }

    #[test]
    fn a_tenant_alone_at_full_rate_borrows_the_half_beyond_its_share() {
        let g = guarantee();
        let (guaranteed, borrowed) = run(&g, 0, 1_000, 0, 20);
        // Its share: 500 tokens/s and a 500-token burst, of the 20,000 it took.
        assert!((10_000..=10_600).contains(&guaranteed), "{guaranteed}");
        assert_eq!(guaranteed + borrowed, 20_000);
    }

    #[test]
    fn tenants_within_their_share_borrow_nothing_and_shares_follow_weights() {
        let g = guarantee();
        for tenant in [0, 1] {
            assert_eq!(run(&g, tenant, 500, 0, 20), (10_000, 0), "tenant {tenant}");
        }
        // Weight 3 of 4 (the other tenant weighs 1): 750 tokens/s are guaranteed.
        let heavy = Guarantee { total_weight: 4, ..guarantee() };
        let mut sum = (0, 0);
        for tick in 0..200 {
            let cost = Cost::request(50, 50);
            let split = heavy.split(Nanos(tick * 100_000_000), 0, NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN), cost);
            let (g, b) = split.unwrap_or((0, 0));
            sum = (sum.0 + g, sum.1 + b);
        }
        assert!((15_000..=15_800).contains(&sum.0), "{sum:?}");
    }

    #[test]
    fn no_token_limit_means_no_split() {
        let g = Guarantee::new(&Limits::default(), 1);
        assert_eq!(g.split(Nanos(0), 0, NonZeroU32::MIN, Cost::request(10, 10)), None);
    }
}
