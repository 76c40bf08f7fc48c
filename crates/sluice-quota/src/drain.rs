//! How fast a deployment's queue drains, and what that makes of a new request's wait.
//!
//! A queue's rate is only seen while it has a line: a grant counts when the waiter it went
//! to joined before the queue's previous grant (so somebody waited all along), and then the
//! gap since that grant is time the queue spent draining. Idle time, when nobody waited,
//! counts nowhere: a queue that clears a clump now and then and stands empty between
//! (arrivals at 80 % of a pool's sum) still knows how fast it drains.
//!
//! The line ahead is priced in the dimension that holds it: in requests behind a request
//! limit (or a concurrency cap), in tokens behind a token limit, and by whichever is
//! shorter when nothing says which. Tokens priced behind a request limit made one large
//! request behind a short line look like a long wait (requests of mixed sizes), and the
//! gateway refused at once what would have passed in a moment.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::{Nanos, duration_ns};
use crate::decision::Rejection;
use crate::limit::{Dimension, LimiterName};

/// How far back the rate is measured.
pub const WINDOW: Duration = Duration::from_secs(10);
/// The least draining time a rate is taken from: below it (a burst granted at one instant)
/// the rate says nothing yet.
const LEAST_MEASURED: Duration = Duration::from_millis(100);
/// The fewest grants a rate is taken from: one or two gaps are chance (a pool's queue on
/// one of three instances, under Poisson arrivals, saw one gap of 600 ms, priced a line of
/// four at 2.4 s and refused a first attempt at once that would have passed).
const FEWEST_GRANTS: usize = 4;
/// The wait assumed when neither a rate nor a refusal says anything.
const UNKNOWN: Duration = Duration::from_secs(1);

/// What waits ahead of a request, its own cost included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ahead {
    /// Requests, its own among them.
    pub requests: u64,
    /// Their cost in tokens.
    pub tokens: u64,
}

impl Ahead {
    /// The request alone.
    #[must_use]
    pub const fn own(tokens: u64) -> Self {
        Self { requests: 1, tokens }
    }

    /// This and `other` together.
    #[must_use]
    pub const fn plus(self, other: Self) -> Self {
        Self {
            requests: self.requests.saturating_add(other.requests),
            tokens: self.tokens.saturating_add(other.tokens),
        }
    }
}

/// The unit a line is priced in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pricing {
    /// Requests: a request limit or a concurrency cap holds the line.
    Requests,
    /// Tokens: a token limit holds it.
    Tokens,
    /// Nothing says which: the shorter of the two.
    Either,
    /// Nothing passes before the refusal's wait is over, whatever the line (the provider
    /// asked everyone to wait, an operator paused the scope, a money budget waits for its
    /// reservations in flight): at least that wait, and the line at the shorter rate after.
    Held,
}

impl Pricing {
    /// The unit that `refusal`'s limit counts in.
    #[must_use]
    pub fn of(refusal: Option<&Rejection>) -> Self {
        match refusal.map(|r| &r.limiter) {
            Some(LimiterName::Rate { dimension: Dimension::Requests, .. } | LimiterName::Concurrency) => Self::Requests,
            Some(LimiterName::Rate { .. }) => Self::Tokens,
            Some(LimiterName::ProviderCooldown | LimiterName::Paused | LimiterName::Budget) => Self::Held,
            Some(LimiterName::FairShare) | None => Self::Either,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Drained {
    at: Nanos,
    gap: Duration,
    tokens: u64,
}

/// The queue's recent grants made while it had a line.
#[derive(Debug, Default)]
pub struct DrainRate {
    drained: VecDeque<Drained>,
    last_grant: Option<Nanos>,
}

impl DrainRate {
    /// Records a grant at `now` of `tokens` to a waiter that joined at `joined`.
    pub fn granted(&mut self, now: Nanos, joined: Nanos, tokens: u64) {
        if let Some(previous) = self.last_grant.filter(|previous| joined <= *previous) {
            self.drained.push_back(Drained { at: now, gap: now.since(previous), tokens });
        }
        self.last_grant = Some(self.last_grant.map_or(now, |last| last.max(now)));
        let horizon = Nanos(now.0.saturating_sub(duration_ns(WINDOW)));
        while self.drained.front().is_some_and(|d| d.at < horizon) {
            self.drained.pop_front();
        }
    }

    /// Requests and tokens a second while the queue had a line, if it had one long enough
    /// lately.
    fn rates(&self) -> Option<(f64, f64)> {
        let span: Duration = self.drained.iter().map(|d| d.gap).sum();
        if span < LEAST_MEASURED || self.drained.len() < FEWEST_GRANTS {
            return None;
        }
        let tokens: u64 = self.drained.iter().map(|d| d.tokens).sum();
        let seconds = span.as_secs_f64();
        Some((self.drained.len() as f64 / seconds, tokens as f64 / seconds))
    }

    /// The wait of a request with `ahead` before it (itself included), priced as `pricing`
    /// says; `refused` is the wait its last refusal named, if any.
    ///
    /// Alone in the line, it waits for the next free capacity: the refusal knows that
    /// exactly for the member that refused, the rate for the queue as a whole (a pool's
    /// other members), and the shorter counts. Behind others, the line drains at the rate;
    /// without one, the refusal's wait is the best known. A hold ([`Pricing::Held`]) is
    /// waited out first, whatever the rate.
    #[must_use]
    pub fn eta(&self, ahead: Ahead, pricing: Pricing, refused: Option<Duration>) -> Duration {
        let by_rate = self.rates().map(|(requests, tokens)| {
            let by_requests = ahead.requests as f64 / requests;
            let by_tokens = if tokens > 0.0 { ahead.tokens as f64 / tokens } else { by_requests };
            let seconds = match pricing {
                Pricing::Requests => by_requests,
                Pricing::Tokens => by_tokens,
                Pricing::Either | Pricing::Held => by_requests.min(by_tokens),
            };
            Duration::try_from_secs_f64(seconds).unwrap_or(WINDOW)
        });
        if pricing == Pricing::Held {
            return match (by_rate, refused) {
                (Some(rate), Some(refused)) => rate.max(refused),
                (rate, refused) => refused.or(rate).unwrap_or(UNKNOWN),
            };
        }
        match (by_rate, refused) {
            (Some(rate), Some(refused)) if ahead.requests <= 1 => rate.min(refused),
            (Some(rate), _) => rate,
            (None, Some(refused)) => refused,
            (None, None) => UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::RejectionKind;
    use crate::scope::{ScopeKey, ScopeKind};

    fn at(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }

    fn refusal(limiter: LimiterName) -> Rejection {
        Rejection {
            scope: ScopeKey::new(ScopeKind::Deployment, "d"),
            limiter,
            kind: RejectionKind::RetryAfter(Duration::from_millis(300)),
        }
    }

    /// A line drained ten a second, sizes mixed from 10 to 1,000 tokens.
    fn drained_ten_a_second() -> DrainRate {
        let mut rate = DrainRate::default();
        for i in 0..=10_u64 {
            rate.granted(at(100 * i), at(0), if i % 2 == 0 { 10 } else { 1_000 });
        }
        rate
    }

    #[test]
    fn idle_time_between_clumps_is_not_draining_time() {
        let mut rate = drained_ten_a_second();
        // Five idle seconds, then one waiter joins and is granted 100 ms later.
        rate.granted(at(6_100), at(6_000), 10);
        let eta = rate.eta(Ahead::own(10), Pricing::Requests, None);
        assert!(eta <= Duration::from_millis(100), "{eta:?}");
    }

    #[test]
    fn a_request_limit_prices_the_line_in_requests_a_token_limit_in_tokens() {
        let rate = drained_ten_a_second();
        let requests = LimiterName::Rate { dimension: Dimension::Requests, period: Duration::from_secs(60) };
        let tokens = LimiterName::Rate { dimension: Dimension::TotalTokens, period: Duration::from_secs(60) };
        assert_eq!(Pricing::of(Some(&refusal(requests))), Pricing::Requests);
        assert_eq!(Pricing::of(Some(&refusal(tokens))), Pricing::Tokens);
        assert_eq!(Pricing::of(Some(&refusal(LimiterName::Concurrency))), Pricing::Requests);
        assert_eq!(Pricing::of(None), Pricing::Either);
        assert_eq!(Pricing::of(Some(&refusal(LimiterName::FairShare))), Pricing::Either);
        assert_eq!(Pricing::of(Some(&refusal(LimiterName::ProviderCooldown))), Pricing::Held);
        // Five small requests and one big one ahead: half a second behind a request limit;
        // behind a token limit, 5,050 tokens at 5,050 a second.
        let ahead = Ahead { requests: 6, tokens: 5 * 10 + 5_000 };
        let by_requests = rate.eta(ahead, Pricing::Requests, None);
        let by_tokens = rate.eta(ahead, Pricing::Tokens, None);
        assert!((550..=650).contains(&by_requests.as_millis()), "{by_requests:?}");
        assert!((900..=1_100).contains(&by_tokens.as_millis()), "{by_tokens:?}");
        assert_eq!(rate.eta(ahead, Pricing::Either, None), by_requests.min(by_tokens));
    }

    #[test]
    fn alone_the_shorter_of_the_refusal_and_the_rate_behind_others_the_rate() {
        let rate = drained_ten_a_second();
        let refused = Some(Duration::from_secs(3));
        assert!(rate.eta(Ahead::own(10), Pricing::Requests, refused) <= Duration::from_millis(100));
        let two = Ahead::own(10).plus(Ahead::own(10));
        assert!(rate.eta(two, Pricing::Requests, Some(Duration::from_millis(10))) >= Duration::from_millis(190));
    }

    #[test]
    fn a_hold_is_waited_out_however_fast_the_line_drained() {
        let rate = drained_ten_a_second();
        let cooldown = Some(Duration::from_secs(30));
        assert_eq!(rate.eta(Ahead::own(10), Pricing::Held, cooldown), Duration::from_secs(30));
        let long_line = Ahead { requests: 400, tokens: 400_000 };
        assert!(rate.eta(long_line, Pricing::Held, cooldown) >= Duration::from_secs(39));
        assert_eq!(DrainRate::default().eta(Ahead::own(10), Pricing::Held, cooldown), Duration::from_secs(30));
    }

    #[test]
    fn without_a_line_there_is_no_rate() {
        let mut rate = DrainRate::default();
        // Grants to waiters that each joined after the one before was granted.
        for i in 0..10_u64 {
            rate.granted(at(1_000 * i + 500), at(1_000 * i), 10);
        }
        assert_eq!(
            rate.eta(Ahead::own(10), Pricing::Requests, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(rate.eta(Ahead::own(10), Pricing::Requests, None), UNKNOWN);
        // Nor do a few grants, however long their gaps.
        let mut few = DrainRate::default();
        for i in 0..FEWEST_GRANTS as u64 {
            few.granted(at(600 * i), at(0), 10);
        }
        assert_eq!(few.eta(Ahead::own(10), Pricing::Requests, None), UNKNOWN, "three gaps");
        few.granted(at(600 * FEWEST_GRANTS as u64), at(0), 10);
        assert!(few.eta(Ahead::own(10), Pricing::Requests, None) <= Duration::from_millis(600), "four gaps");
        // A burst at one instant measures nothing either.
        let mut burst = DrainRate::default();
        for _ in 0..5 {
            burst.granted(at(10), at(0), 10);
        }
        assert_eq!(burst.eta(Ahead::own(10), Pricing::Requests, None), UNKNOWN);
    }

    #[test]
    fn grants_older_than_the_window_are_forgotten() {
        let mut rate = drained_ten_a_second();
        rate.granted(at(20_000), at(19_000), 10);
        assert_eq!(rate.eta(Ahead::own(10), Pricing::Requests, None), UNKNOWN);
    }
}
