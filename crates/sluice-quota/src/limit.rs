//! What a scope may consume: dimensions, rates, bursts and concurrency caps.

use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

use crate::budget::Budget;
use crate::clock::duration_ns;

/// A quantity a request consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    /// One per request.
    Requests,
    /// Prompt tokens (providers that count them apart, e.g. Anthropic ITPM).
    InputTokens,
    /// Completion tokens (e.g. Anthropic OTPM).
    OutputTokens,
    /// Input plus output tokens (e.g. OpenAI TPM).
    TotalTokens,
}

impl Dimension {
    /// Every dimension, in a fixed order.
    pub const ALL: [Self; 4] = [Self::Requests, Self::InputTokens, Self::OutputTokens, Self::TotalTokens];

    /// The short name used in limiter names, metrics and config.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::InputTokens => "input_tokens",
            Self::OutputTokens => "output_tokens",
            Self::TotalTokens => "tokens",
        }
    }
}

/// What one request costs, per dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cost {
    /// Requests, normally 1.
    pub requests: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Money, in micro-units of the price tables' currency (what budgets count; 0 for a
    /// deployment without a price).
    pub money: u64,
}

impl Cost {
    /// One request with the given token counts.
    #[must_use]
    pub fn request(input_tokens: u64, output_tokens: u64) -> Self {
        Self { requests: 1, input_tokens, output_tokens, money: 0 }
    }

    /// This cost and `other` together (saturating).
    #[must_use]
    pub fn plus(self, other: Self) -> Self {
        Self {
            requests: self.requests.saturating_add(other.requests),
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            money: self.money.saturating_add(other.money),
        }
    }

    /// This cost priced at `money` micro-units.
    #[must_use]
    pub fn with_money(self, money: u64) -> Self {
        Self { money, ..self }
    }

    /// This cost with each output token counted `weight` times: a provider that burns its
    /// output faster than its input against one token quota (Bedrock burns Claude 3.7+
    /// output 5×) is mirrored exactly, at admission and at settlement.
    #[must_use]
    pub fn with_output_weight(self, weight: u64) -> Self {
        Self { output_tokens: self.output_tokens.saturating_mul(weight), ..self }
    }

    /// The amount of `dimension` this cost uses.
    #[must_use]
    pub fn of(&self, dimension: Dimension) -> u64 {
        match dimension {
            Dimension::Requests => self.requests,
            Dimension::InputTokens => self.input_tokens,
            Dimension::OutputTokens => self.output_tokens,
            Dimension::TotalTokens => self.input_tokens.saturating_add(self.output_tokens),
        }
    }
}

/// What a finished call really used, as the gateway's own scopes and the provider count it.
///
/// Providers differ in what they keep: OpenAI charges `max_tokens` on arrival and never
/// gives it back, Anthropic counts generated tokens only. `upstream` applies to
/// [`crate::ScopeKind::Deployment`] scopes and mirrors the provider's rule, so local state
/// never believes in capacity the provider does not have; `used` applies to every other
/// scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settlement {
    /// What the call used, for the gateway's own scopes.
    pub used: Cost,
    /// What the provider charged, for deployment scopes.
    pub upstream: Cost,
}

impl Settlement {
    /// The same figure for every scope.
    #[must_use]
    pub fn exact(used: Cost) -> Self {
        Self { used, upstream: used }
    }
}

/// A continuously refilling rate: `amount` per `period`, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// What it counts.
    pub dimension: Dimension,
    /// How much per period.
    pub amount: NonZeroU64,
    /// The period (a minute, a day, ...).
    pub period: Duration,
    /// The most that may be taken at once from a full bucket. Requests larger than the
    /// burst (but not than `amount`) pass only when the bucket is full and leave it in debt.
    pub burst: NonZeroU64,
    /// The bucket mirrors a provider's short window (a deployment's per-minute limits): it
    /// keeps a send guard of its burst unspent (see [`crate::bucket::need`]).
    pub guard: bool,
}

/// The default burst, as a share of the period: one second of a per-minute rate.
///
/// Providers enforce per-minute limits over much shorter windows: OpenAI documents that
/// a per-minute limit "may be quantized" (60,000 RPM enforced as 1,000 requests per
/// second). No major provider's documented enforcement is shorter than a second, so a
/// bucket releasing one second's worth at a time earns no 429s from its own bursts.
pub const DEFAULT_BURST_SECONDS: u64 = 1;

impl RateLimit {
    /// A limit whose burst is [`DEFAULT_BURST_SECONDS`] worth of the rate (at least 1).
    #[must_use]
    pub fn new(dimension: Dimension, amount: NonZeroU64, period: Duration) -> Self {
        let burst = Self::burst_for(amount, period, Duration::from_secs(DEFAULT_BURST_SECONDS));
        Self { dimension, amount, period, burst, guard: false }
    }

    /// The same limit keeping a send guard when it is per minute or shorter (the provider's
    /// short window mirrored); longer ones (per day) are no one's short window.
    #[must_use]
    pub fn guarded(mut self) -> Self {
        self.guard = self.period <= Duration::from_secs(60);
        self
    }

    /// Per-minute shorthand for [`RateLimit::new`]; `None` for a zero amount.
    #[must_use]
    pub fn per_minute(dimension: Dimension, amount: u64) -> Option<Self> {
        NonZeroU64::new(amount).map(|a| Self::new(dimension, a, Duration::from_secs(60)))
    }

    /// The same limit with its burst set to `window` worth of the rate.
    #[must_use]
    pub fn with_burst_window(mut self, window: Duration) -> Self {
        self.burst = Self::burst_for(self.amount, self.period, window);
        self
    }

    /// The same limit with an explicit burst, capped at `amount`.
    #[must_use]
    pub fn with_burst(mut self, burst: NonZeroU64) -> Self {
        self.burst = burst.min(self.amount);
        self
    }

    fn burst_for(amount: NonZeroU64, period: Duration, window: Duration) -> NonZeroU64 {
        let period_ns = u128::from(duration_ns(period)).max(1);
        let scaled = u128::from(amount.get()) * u128::from(duration_ns(window)) / period_ns;
        let capped = u64::try_from(scaled).unwrap_or(u64::MAX).min(amount.get());
        NonZeroU64::new(capped).unwrap_or(NonZeroU64::MIN)
    }

    /// The name of this limiter in errors and metrics, e.g. `rpm`, `output_tpm`, `tpd`.
    #[must_use]
    pub fn name(&self) -> LimiterName {
        LimiterName::Rate { dimension: self.dimension, period: self.period }
    }
}

/// Which limiter refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimiterName {
    /// A rate limit of a dimension over a period.
    Rate {
        /// The dimension.
        dimension: Dimension,
        /// The period.
        period: Duration,
    },
    /// The cap on requests in flight.
    Concurrency,
    /// The provider asked everyone to wait (a 429 or reset hint seen by any instance).
    ProviderCooldown,
    /// The tenant is ahead of its fair share while other tenants wait.
    FairShare,
    /// An operator paused the scope (tenant) or the request's traffic class.
    Paused,
    /// A money budget of the scope is spent for the current day or month.
    Budget,
}

impl fmt::Display for LimiterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (dimension, period) = match self {
            Self::Rate { dimension, period } => (dimension, period),
            Self::Concurrency => return f.write_str("concurrency"),
            Self::ProviderCooldown => return f.write_str("provider_cooldown"),
            Self::FairShare => return f.write_str("fair_share"),
            Self::Paused => return f.write_str("paused"),
            Self::Budget => return f.write_str("budget"),
        };
        let unit = match period.as_secs() {
            60 => "m",
            86_400 => "d",
            1 => "s",
            3_600 => "h",
            _ => "",
        };
        let prefix = match dimension {
            Dimension::Requests => "rp",
            Dimension::InputTokens => "input_tp",
            Dimension::OutputTokens => "output_tp",
            Dimension::TotalTokens => "tp",
        };
        if unit.is_empty() {
            write!(f, "{}_per_{}s", dimension.as_str(), period.as_secs_f64())
        } else {
            write!(f, "{prefix}{unit}")
        }
    }
}

/// Everything one scope limits. Any subset of dimensions; several periods per dimension.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Limits {
    /// Rate limits, each its own bucket.
    pub rates: Vec<RateLimit>,
    /// Maximum requests in flight, if capped.
    pub concurrency: Option<NonZeroU64>,
    /// Money budgets per calendar period, each its own counter.
    pub budgets: Vec<Budget>,
}

impl Limits {
    /// No limits at all: the scope is only a label on the path.
    #[must_use]
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Adds a rate limit.
    #[must_use]
    pub fn with_rate(mut self, rate: RateLimit) -> Self {
        self.rates.push(rate);
        self
    }

    /// Adds a money budget.
    #[must_use]
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budgets.push(budget);
        self
    }

    /// Sets the concurrency cap.
    #[must_use]
    pub fn with_concurrency(mut self, max: NonZeroU64) -> Self {
        self.concurrency = Some(max);
        self
    }

    /// The same limits keeping a send guard on every per-minute (or shorter) rate: the
    /// limits of a deployment, which mirror the provider's short window.
    #[must_use]
    pub fn guarded(mut self) -> Self {
        self.rates = self.rates.into_iter().map(RateLimit::guarded).collect();
        self
    }

    /// Whether the scope limits nothing.
    #[must_use]
    pub fn is_unlimited(&self) -> bool {
        self.rates.is_empty() && self.concurrency.is_none() && self.budgets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    #[test]
    fn limiter_names_follow_the_error_vocabulary() {
        let minute = Duration::from_secs(60);
        let day = Duration::from_secs(86_400);
        let name = |d, p| RateLimit::new(d, nz(10), p).name().to_string();
        assert_eq!(name(Dimension::Requests, minute), "rpm");
        assert_eq!(name(Dimension::OutputTokens, minute), "output_tpm");
        assert_eq!(name(Dimension::InputTokens, minute), "input_tpm");
        assert_eq!(name(Dimension::TotalTokens, day), "tpd");
        assert_eq!(name(Dimension::Requests, Duration::from_secs(10)), "requests_per_10s");
        assert_eq!(LimiterName::Concurrency.to_string(), "concurrency");
    }

    #[test]
    fn default_burst_is_one_second_and_never_zero() {
        let tpm = RateLimit::per_minute(Dimension::TotalTokens, 30_000).unwrap();
        assert_eq!(tpm.burst.get(), 500);
        let tiny = RateLimit::per_minute(Dimension::Requests, 3).unwrap();
        assert_eq!(tiny.burst.get(), 1);
        let capped = tpm.with_burst(nz(1_000_000));
        assert_eq!(capped.burst.get(), 30_000);
    }
}
