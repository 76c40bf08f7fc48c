//! Routing decisions, pure: which deployment an attempt goes to, whether it may wait in
//! the queue, and what a failed attempt leads to — a retry on the same deployment, a
//! fallback whose `when` conditions match, degradation to a cheaper deployment, or the end.
//!
//! A [`Plan`] is one request's routing state (the shape of tower's `retry::Policy`): it
//! reads no clock, calls no store and sleeps nowhere. What it needs of the world comes as
//! arguments — whether the primary's breaker is open, the time spent so far, the random
//! source of the backoff's jitter, the deployment's retry budget — so every decision is
//! tested without HTTP. It imports no other step ([`Mode`] is the road's shared value).

use std::time::Duration;

use rand::Rng;
use sluice_config::When;
use sluice_provider::{ErrorClass, Phase};

use super::context::Mode;
use crate::error::GatewayError;
use crate::state::Profile;
use sluice_quota::retry::backoff;

/// How many attempts one deployment gets, and within how long (the caller's class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryLimits {
    /// Attempts per deployment, the first included.
    pub attempts: u32,
    /// The time after which no retry starts.
    pub within: Duration,
    /// What is left of the request's wait deadline at its first attempt: a retry that waits
    /// for capacity (after a provider 429) must start within it, so that waits on the
    /// primary, on retries and on fallbacks add up to no more than the deadline.
    pub deadline: Duration,
}

/// What comes after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// The same deployment again after `wait`; `class` is why (for the retry metric).
    Retry { wait: Duration, class: ErrorClass },
    /// A fallback deployment (now [`Plan::target`]), with a fresh retry count.
    Fallback,
    /// The degradation target (now [`Plan::target`]), waiting as a primary would.
    Degrade,
    /// Another member of the profile's pool, at once: the one that failed is left out
    /// of the request's placements ([`Plan::candidates`]).
    Replace,
    /// Nothing else may be tried: the failure goes to the client.
    GiveUp,
}

/// One request's routing state through its attempts.
#[derive(Debug)]
pub struct Plan<'p> {
    profile: &'p Profile,
    limits: RetryLimits,
    target: usize,
    mode: Mode,
    retries: u32,
    next_fallback: usize,
    reason: Option<&'static str>,
    /// The pool's members the request failed on.
    failed: Vec<usize>,
}

/// Where the next attempt may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidates {
    /// One deployment.
    One(usize),
    /// The profile's pool: these members (deployment indices), placed by quota.
    Pool(Vec<usize>),
}

impl<'p> Plan<'p> {
    /// Starts on the profile's primary; a `degradable` request does not wait there (it has
    /// somewhere else to go when the primary has no capacity now).
    #[must_use]
    pub fn new(profile: &'p Profile, limits: RetryLimits, degradable: bool) -> Self {
        let mode = if degradable && profile.degrade.is_some() { Mode::NoWait } else { Mode::Wait };
        Self {
            profile,
            limits,
            target: profile.deployment,
            mode,
            retries: 0,
            next_fallback: 0,
            reason: None,
            failed: Vec::new(),
        }
    }

    /// Where the next attempt may go: while the request is on its profile's pool (not yet
    /// rerouted), every member it has not failed on; else [`Plan::target`].
    #[must_use]
    pub fn candidates(&self) -> Candidates {
        match self.pool_left() {
            Some(left) if !left.is_empty() => Candidates::Pool(left),
            _ => Candidates::One(self.target),
        }
    }

    /// The pool placed the attempt on `deployment`: retries and failures are its.
    pub fn placed(&mut self, deployment: usize) {
        if self.on_pool() {
            self.target = deployment;
        }
    }

    fn on_pool(&self) -> bool {
        self.profile.pool.is_some() && self.reason.is_none()
    }

    /// The pool's members not failed on, while on the pool.
    fn pool_left(&self) -> Option<Vec<usize>> {
        let pool = self.profile.pool.as_ref().filter(|_| self.on_pool())?;
        Some(pool.members.iter().map(|m| m.deployment).filter(|d| !self.failed.contains(d)).collect())
    }

    /// The deployment the next attempt goes to.
    #[must_use]
    pub fn target(&self) -> usize {
        self.target
    }

    /// Whether the next attempt may wait in its deployment's queue.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Why the request left its primary (the fallback metric's reason), once it has.
    #[must_use]
    pub fn rerouted(&self) -> Option<&'static str> {
        self.reason.filter(|_| self.target != self.profile.deployment)
    }

    /// Whether the primary is skipped without an attempt: its breaker is open and a
    /// fallback takes over when it is unavailable.
    #[must_use]
    pub fn skips_primary(&self, breaker_open: bool) -> bool {
        !self.on_pool()
            && self.mode == Mode::Wait
            && self.target == self.profile.deployment
            && breaker_open
            && self.profile.fallbacks.iter().any(|f| f.when.contains(&When::PrimaryUnavailable))
    }

    /// What follows a failed attempt. `class` is the upstream failure (`None`: refused
    /// before sending), `error` what the client would get, `elapsed` the time since the
    /// first attempt; `budget` withdraws from the deployment's retry budget and is asked
    /// only when everything else allows a retry.
    pub fn next(
        &mut self,
        class: Option<ErrorClass>,
        error: &GatewayError,
        elapsed: Duration,
        rng: &mut impl Rng,
        budget: impl FnOnce() -> bool,
    ) -> Next {
        if class.is_none() && self.mode == Mode::NoWait {
            return self.degrade();
        }
        if let Some(class) = class
            && self.on_pool()
            && another_member_may_serve(class)
        {
            // What failed is the member's: another takes the request at once (its breaker,
            // or the store's pause after a 429, keeps the failed one out for every request).
            self.failed.push(self.target);
            if self.pool_left().is_some_and(|left| !left.is_empty()) {
                self.retries = 0;
                return Next::Replace;
            }
        }
        if let Some(class) = class
            && self.retries + 1 < self.limits.attempts
            && may_retry(class)
        {
            let wait = backoff(self.retries, class.retry_after(), rng);
            let capacity = matches!(class, ErrorClass::RateLimited { .. });
            let in_time = elapsed + wait < self.limits.within && (!capacity || elapsed + wait <= self.limits.deadline);
            if in_time && budget() {
                self.retries += 1;
                return Next::Retry { wait, class };
            }
        }
        self.fallback(condition(class, error))
    }

    /// The primary has no capacity now: simple work goes to the degradation target.
    fn degrade(&mut self) -> Next {
        let Some(degrade) = &self.profile.degrade else { return Next::GiveUp };
        self.target = degrade.deployment;
        self.mode = Mode::Wait;
        self.reason = Some("degraded");
        Next::Degrade
    }

    /// The next fallback (after those already tried) whose conditions include `when`.
    fn fallback(&mut self, when: Option<When>) -> Next {
        let Some(when) = when else { return Next::GiveUp };
        while let Some(fallback) = self.profile.fallbacks.get(self.next_fallback) {
            self.next_fallback += 1;
            if fallback.when.contains(&when) {
                self.target = fallback.deployment;
                self.reason = Some(when.as_str());
                self.retries = 0;
                return Next::Fallback;
            }
        }
        Next::GiveUp
    }
}

/// Whether a request of class `class_index` with task `task` may be degraded on `profile`
/// (its class or task is listed).
#[must_use]
pub fn degradable(profile: &Profile, class_index: usize, task: Option<&str>) -> bool {
    let Some(degrade) = &profile.degrade else { return false };
    degrade.classes.contains(&class_index) || task.is_some_and(|t| degrade.tasks.iter().any(|d| d == t))
}

/// Whether a failed attempt may be tried again. A non-stream answer cut or stalled after
/// its headers never reached the client: as uncertain as a failure before the headers
/// (streams never come back here once their headers are in).
fn may_retry(failure: ErrorClass) -> bool {
    let after_headers = matches!(
        failure,
        ErrorClass::Timeout { phase: Phase::Streaming } | ErrorClass::ConnectionReset { phase: Phase::Streaming }
    );
    failure.may_retry(true) || after_headers
}

/// Whether a failure on one pool member is the member's, so another may serve the request:
/// its limits, its health, its credentials, its context window.
fn another_member_may_serve(failure: ErrorClass) -> bool {
    may_retry(failure) || matches!(failure, ErrorClass::Auth | ErrorClass::Permission | ErrorClass::ContextLength)
}

/// Which `when` condition a final failure meets.
fn condition(failure: Option<ErrorClass>, error: &GatewayError) -> Option<When> {
    match failure {
        Some(ErrorClass::ServerError | ErrorClass::Overloaded) => Some(When::Provider5xx),
        Some(ErrorClass::RateLimited { .. }) => Some(When::RateLimitAfterRetryBudget),
        Some(ErrorClass::ContextLength) => Some(When::ContextLengthNeeded),
        Some(ErrorClass::Timeout { .. } | ErrorClass::ConnectionReset { .. }) => Some(When::PrimaryUnavailable),
        Some(_) => None,
        None => match error {
            GatewayError::UpstreamUnreachable(_) | GatewayError::ProviderUnavailable { .. } => {
                Some(When::PrimaryUnavailable)
            }
            GatewayError::RateLimited(_) => Some(When::QueueWaitExceeded),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;
    use rand::rngs::StdRng;
    use sluice_config::{Degrade, Fallback};
    use sluice_quota::ScopeId;

    use super::*;

    const LIMITS: RetryLimits =
        RetryLimits { attempts: 3, within: Duration::from_secs(30), deadline: Duration::from_secs(30) };

    fn profile(fallbacks: Vec<(usize, Vec<When>)>, degrade: Option<usize>) -> Profile {
        Profile {
            name: "p".into(),
            scope: ScopeId(0),
            deployment: 0,
            default_max_tokens: 16,
            context_reserve_tokens: 0,
            passthrough: Vec::new(),
            fallbacks: fallbacks.into_iter().map(|(deployment, when)| Fallback { deployment, when }).collect(),
            degrade: degrade.map(|deployment| Degrade { deployment, classes: vec![1], tasks: vec!["tag".into()] }),
            pool: None,
        }
    }

    /// A profile served by a pool of `members` (deployment indices 0..members), with a
    /// fallback to deployment `members` for 5xx.
    fn pooled(members: usize) -> Profile {
        use sluice_config::Member;
        use sluice_quota::placement::Strategy;
        let store: std::sync::Arc<dyn sluice_quota::QuotaStore> = std::sync::Arc::new(sluice_quota::MemoryStore::new(
            std::sync::Arc::new(sluice_quota::FakeClock::default()),
        ));
        let clock: std::sync::Arc<dyn sluice_quota::Clock> = std::sync::Arc::new(sluice_quota::FakeClock::default());
        let queue = sluice_quota::queue::DeploymentQueue::new(store, clock);
        let pool = (0..members).map(|deployment| Member { deployment, weight: 1, tier: 0 }).collect();
        Profile {
            pool: Some(std::sync::Arc::new(crate::pool::Pool::new(pool, Strategy::Headroom, queue))),
            ..profile(vec![(members, vec![When::Provider5xx])], None)
        }
    }

    #[test]
    fn a_pool_member_that_fails_is_left_for_another_at_once_then_the_fallback() {
        let profile = pooled(3);
        let mut plan = Plan::new(&profile, LIMITS, false);
        assert_eq!(plan.candidates(), Candidates::Pool(vec![0, 1, 2]));
        plan.placed(1);
        let (e, server) = (unreachable(), Some(ErrorClass::ServerError));
        assert_eq!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Replace);
        assert_eq!(plan.candidates(), Candidates::Pool(vec![0, 2]), "the failed member is left out");
        plan.placed(2);
        let limited = Some(ErrorClass::RateLimited { retry_after: None, daily: false });
        assert_eq!(plan.next(limited, &e, Duration::ZERO, &mut rng(), || true), Next::Replace);
        plan.placed(0);
        // Refused credentials are the member's too.
        let auth = Some(ErrorClass::Auth);
        let next = plan.next(auth, &e, Duration::ZERO, &mut rng(), || true);
        assert_eq!(next, Next::GiveUp, "auth is no 5xx: no fallback condition meets it");
        assert_eq!(plan.rerouted(), None, "a member of the pool is not a fallback");
    }

    #[test]
    fn when_every_member_failed_the_last_is_retried_then_the_fallback_takes_over() {
        let profile = pooled(2);
        let mut plan = Plan::new(&profile, LIMITS, false);
        let (e, server) = (unreachable(), Some(ErrorClass::ServerError));
        plan.placed(0);
        assert_eq!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Replace);
        plan.placed(1);
        assert!(matches!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Retry { .. }));
        assert_eq!(plan.candidates(), Candidates::One(1));
        assert!(matches!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Retry { .. }));
        assert_eq!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Fallback);
        assert_eq!(plan.target(), 2);
        assert_eq!(plan.candidates(), Candidates::One(2), "off the pool");
        assert_eq!(plan.rerouted(), Some("provider_5xx"));
    }

    #[test]
    fn a_refused_admission_on_the_pool_goes_to_the_fallbacks() {
        let profile = pooled(2);
        let mut plan = Plan::new(&profile, LIMITS, false);
        let refused = GatewayError::UpstreamUnreachable("p".into());
        assert!(!plan.skips_primary(true), "a pool places around open breakers itself");
        assert_eq!(plan.next(None, &refused, Duration::ZERO, &mut rng(), || true), Next::GiveUp);
    }

    fn rng() -> StdRng {
        StdRng::seed_from_u64(7)
    }

    fn unreachable() -> GatewayError {
        GatewayError::UpstreamUnreachable("p".into())
    }

    #[test]
    fn a_retryable_failure_is_retried_until_the_class_attempts_are_spent_then_falls_back() {
        let profile = profile(vec![(1, vec![When::Provider5xx])], None);
        let mut plan = Plan::new(&profile, LIMITS, false);
        let e = unreachable();
        let server = Some(ErrorClass::ServerError);
        let next = plan.next(server, &e, Duration::ZERO, &mut rng(), || true);
        assert!(matches!(next, Next::Retry { class: ErrorClass::ServerError, wait } if wait <= Duration::from_secs(4)));
        assert!(matches!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Retry { .. }));
        assert_eq!(plan.target(), 0);
        // The third attempt was the last: the 5xx fallback takes over, with a fresh count.
        assert_eq!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Fallback);
        assert_eq!((plan.target(), plan.rerouted()), (1, Some("provider_5xx")));
        assert!(matches!(plan.next(server, &e, Duration::ZERO, &mut rng(), || true), Next::Retry { .. }));
    }

    #[test]
    fn no_retry_without_budget_or_time_left_and_none_for_a_client_error() {
        let profile = profile(vec![], None);
        let e = unreachable();
        let server = Some(ErrorClass::ServerError);
        let mut plan = Plan::new(&profile, LIMITS, false);
        assert_eq!(plan.next(server, &e, Duration::ZERO, &mut rng(), || false), Next::GiveUp);
        let late = LIMITS.within;
        let mut asked = false;
        let mut plan = Plan::new(&profile, LIMITS, false);
        assert_eq!(
            plan.next(server, &e, late, &mut rng(), || {
                asked = true;
                true
            }),
            Next::GiveUp
        );
        assert!(!asked, "the budget is not spent on a retry that cannot start in time");
        let mut plan = Plan::new(&profile, LIMITS, false);
        assert_eq!(plan.next(Some(ErrorClass::Validation), &e, Duration::ZERO, &mut rng(), || true), Next::GiveUp);
    }

    #[test]
    fn the_provider_hint_is_the_floor_of_the_wait() {
        let profile = profile(vec![], None);
        let mut plan = Plan::new(&profile, LIMITS, false);
        let limited = ErrorClass::RateLimited { retry_after: Some(Duration::from_secs(9)), daily: false };
        let next = plan.next(Some(limited), &unreachable(), Duration::ZERO, &mut rng(), || true);
        assert!(matches!(next, Next::Retry { wait, .. } if wait >= Duration::from_secs(9)));
    }

    #[test]
    fn a_retry_waiting_for_capacity_starts_within_the_deadline_or_the_fallback_takes_over() {
        let profile = profile(vec![(1, vec![When::RateLimitAfterRetryBudget])], None);
        let limits = RetryLimits { deadline: Duration::from_secs(2), ..LIMITS };
        let limited = Some(ErrorClass::RateLimited { retry_after: Some(Duration::from_secs(3)), daily: false });
        let mut plan = Plan::new(&profile, limits, false);
        assert_eq!(plan.next(limited, &unreachable(), Duration::ZERO, &mut rng(), || true), Next::Fallback);
        // A 5xx retry does not wait for capacity: only `within` bounds it.
        let mut plan = Plan::new(&profile, limits, false);
        let server = Some(ErrorClass::ServerError);
        assert!(matches!(
            plan.next(server, &unreachable(), Duration::from_secs(5), &mut rng(), || true),
            Next::Retry { .. }
        ));
    }

    #[test]
    fn a_fallback_is_taken_only_for_its_conditions_in_order() {
        let fallbacks = vec![
            (1, vec![When::ContextLengthNeeded]),
            (2, vec![When::QueueWaitExceeded]),
            (3, vec![When::QueueWaitExceeded]),
        ];
        let profile = profile(fallbacks, None);
        let mut plan = Plan::new(&profile, LIMITS, false);
        let queued = GatewayError::StoreUnavailable;
        // A refusal that meets no condition ends the request.
        assert_eq!(plan.next(None, &queued, Duration::ZERO, &mut rng(), || true), Next::GiveUp);
        let mut plan = Plan::new(&profile, LIMITS, false);
        let limited = GatewayError::RateLimited(Box::new(crate::error::RateLimitInfo {
            limiter: "queue_wait".into(),
            scope: "deployment",
            scope_name: "d".into(),
            dimension: "none",
            binding: String::new(),
            provider: "p".into(),
            model_profile: "p".into(),
            provider_model: "m".into(),
            retry_after: None,
            tenant_id: "t".into(),
            api_key_id: "k".into(),
            request_class: "c".into(),
            estimated_input_tokens: 1,
            estimated_output_tokens: 1,
            gateway_decision: "rejected_before_send",
        }));
        assert_eq!(plan.next(None, &limited, Duration::ZERO, &mut rng(), || true), Next::Fallback);
        assert_eq!((plan.target(), plan.rerouted()), (2, Some("queue_wait_exceeded")));
        assert_eq!(plan.next(None, &limited, Duration::ZERO, &mut rng(), || true), Next::Fallback);
        assert_eq!(plan.target(), 3);
        assert_eq!(plan.next(None, &limited, Duration::ZERO, &mut rng(), || true), Next::GiveUp);
    }

    #[test]
    fn degradable_work_does_not_wait_on_the_primary_and_degrades_when_refused() {
        let profile = profile(vec![], Some(4));
        assert!(degradable(&profile, 1, None));
        assert!(degradable(&profile, 0, Some("tag")));
        assert!(!degradable(&profile, 0, Some("other")));
        let mut plan = Plan::new(&profile, LIMITS, true);
        assert_eq!(plan.mode(), Mode::NoWait);
        assert_eq!(
            plan.next(None, &GatewayError::StoreUnavailable, Duration::ZERO, &mut rng(), || true),
            Next::Degrade
        );
        assert_eq!((plan.target(), plan.mode(), plan.rerouted()), (4, Mode::Wait, Some("degraded")));
        assert_eq!(Plan::new(&profile, LIMITS, false).mode(), Mode::Wait);
    }

    #[test]
    fn an_open_breaker_skips_the_primary_only_when_a_fallback_covers_unavailability() {
        let covered = profile(vec![(1, vec![When::PrimaryUnavailable])], None);
        let plan = Plan::new(&covered, LIMITS, false);
        assert!(plan.skips_primary(true));
        assert!(!plan.skips_primary(false));
        let uncovered = profile(vec![(1, vec![When::Provider5xx])], None);
        assert!(!Plan::new(&uncovered, LIMITS, false).skips_primary(true));
    }

    #[test]
    fn a_non_stream_answer_cut_after_its_headers_may_be_retried() {
        assert!(may_retry(ErrorClass::Timeout { phase: Phase::Streaming }));
        assert!(may_retry(ErrorClass::ConnectionReset { phase: Phase::Streaming }));
        assert!(!may_retry(ErrorClass::Auth));
    }
}
