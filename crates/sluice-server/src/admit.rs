//! Admission: price a parsed request, build its quota path, reserve before sending.

use std::time::Duration;

use sluice_config::{OutputCounting, ProviderKind};
use sluice_provider::{MediaPricing, ParsedRequest, Protocol, Usage};
use std::sync::Arc;

use sluice_quota::{
    Cost, FairShare, Grant, LimiterName, Rejection, RejectionKind, ReservationId, ReserveError, ScopeId, Settlement,
    Share, StoreError,
};

use crate::error::{GatewayError, RateLimitInfo};
use crate::metrics::{Hit, QueueLabels};
use crate::queue::{Ask, WaitError};
use crate::shares::HeldBack;
use crate::state::{Caller, Gateway, Profile, Route};

/// A request whose capacity is reserved.
#[derive(Debug)]
pub struct Admitted {
    /// The reservation.
    pub grant_id: ReservationId,
    /// The client protocol.
    pub protocol: Protocol,
    /// Estimated input tokens.
    pub input: u64,
    /// Reserved output tokens.
    pub output: u64,
    /// The deployment's adaptive state, taught the usage when it is known.
    pub adaptive: std::sync::Arc<crate::adaptive::Adaptive>,
    /// The caller's own scopes right after the grant, when the store returned them with it
    /// (its rate-limit headers); see [`sluice_quota::Grant::after`].
    pub after: Vec<sluice_quota::ScopeSnapshot>,
    kind: ProviderKind,
    output_counting: OutputCounting,
    caller_tenant: String,
    caller_key: String,
    caller_class: String,
    profile: String,
}

impl Admitted {
    /// Settlement when the provider was called but its answer never arrived or carried no
    /// usage: the estimate stands for input, the reservation for output.
    #[must_use]
    pub fn sent_unanswered(&self) -> Settlement {
        Settlement::exact(Cost::request(self.input, self.output))
    }

    /// Settlement from the provider's reported usage (which also teaches the route's
    /// output and cache estimators).
    #[must_use]
    pub fn settlement(&self, usage: Usage) -> Settlement {
        self.adaptive.observe(&usage);
        let input = match self.kind {
            // Anthropic's input_tokens excludes cache reads, which do not count toward ITPM.
            ProviderKind::Anthropic => usage.input_tokens + usage.cache_creation_input_tokens,
            ProviderKind::OpenAi | ProviderKind::Ollama => usage.input_tokens,
        };
        let used = Cost::request(input, usage.output_tokens);
        let upstream = match self.output_counting {
            OutputCounting::Reserved => Cost::request(input, self.output.max(usage.output_tokens)),
            OutputCounting::Actual => used,
        };
        Settlement { used, upstream }
    }

    /// Settlement of a stream that ended without usage, after `generated` content events.
    #[must_use]
    pub fn partial(&self, generated: u64) -> Settlement {
        let used = Cost::request(self.input, generated.min(self.output));
        let upstream = match self.output_counting {
            OutputCounting::Reserved => Cost::request(self.input, self.output),
            OutputCounting::Actual => used,
        };
        Settlement { used, upstream }
    }

    /// The 429 details when the provider refused what the gateway admitted.
    #[must_use]
    pub fn provider_rejection(&self, route: &Route, wait: Option<Duration>) -> RateLimitInfo {
        RateLimitInfo {
            limiter: "provider".into(),
            scope: "deployment",
            provider: route.provider.to_string(),
            model_profile: self.profile.clone(),
            provider_model: route.model.clone(),
            retry_after: wait,
            tenant_id: self.caller_tenant.clone(),
            api_key_id: self.caller_key.clone(),
            request_class: self.caller_class.clone(),
            estimated_input_tokens: self.input,
            estimated_output_tokens: self.output,
            gateway_decision: "admitted_then_provider_rejected",
        }
    }
}

/// Whether a request may wait in the deployment's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Up to its class's `max_wait`.
    Wait,
    /// Not at all: it has somewhere else to go (degradation).
    NoWait,
}

/// Admits `request` of `profile` on `deployment` (the profile's primary, a fallback or its
/// degradation target): prices it and reserves it on every scope from the org to the
/// deployment. `routed` is set to the deployment, for the request metrics.
///
/// # Errors
/// Wrong endpoint for the model, a refusing limit, or a failing store.
pub async fn admit(
    gateway: &Gateway,
    caller: &Caller,
    request: &ParsedRequest,
    profile: &Profile,
    deployment: usize,
    mode: Mode,
    routed: &mut Option<usize>,
) -> Result<Admitted, GatewayError> {
    let route = &gateway.deployments[deployment];
    *routed = Some(deployment);
    check_endpoint(request, route)?;
    let admitted = quote(gateway, caller, request, profile, route);
    let (input, output) = (admitted.input, admitted.output);
    let mut path = Vec::with_capacity(caller.scopes.len() + 2);
    path.extend_from_slice(&caller.scopes);
    path.extend([profile.scope, route.scope]);
    let fair = FairShare {
        tenant: Arc::clone(&caller.tenant),
        weight: caller.weight,
        cost: input.saturating_add(output).max(1),
        slack: route.fair_slack.unwrap_or_else(|| input.saturating_add(output).saturating_mul(8)),
        queued_behind: false,
    };
    let ask = Ask {
        fair: Some(fair),
        path,
        cost: Cost::request(input, output),
        share: Share::permille(caller.class.share_permille),
        lease: gateway.lease,
        tenant: caller.tenant_index,
        lane: caller.key_index,
        weight: caller.weight,
        priority: caller.class.priority,
    };
    let outcome = reserve_or_wait(gateway, route, caller, ask, mode).await;
    let metrics = &gateway.metrics;
    let (rejection, wait) = match outcome {
        Ok(grant) => {
            metrics.decision("admitted", "");
            let cost = Cost::request(input, output);
            if let Some(split) = route.guarantee.split(gateway.clock.now(), caller.tenant_index, caller.weight, cost) {
                metrics.shares.admitted(&route.name, &caller.tenant, split);
            }
            route.adaptive.on_admitted(Cost::request(input, output));
            route.counters.reserved.inc_by(input.saturating_add(output));
            return Ok(Admitted { grant_id: grant.id, after: grant.after, ..admitted });
        }
        Err(Refusal::Store(e)) => {
            tracing::debug!(error = %e, "quota store failed");
            metrics.decision("store_error", "");
            return Err(GatewayError::StoreUnavailable);
        }
        Err(Refusal::Queue { full, eta }) => {
            let limiter = if full { "queue_full" } else { "queue_wait" };
            metrics.decision("rejected", limiter);
            let hit = Hit { limit_type: limiter.into(), ..hit_labels(route) };
            metrics.rate_limit_hits.get_or_create(&hit).inc();
            let info = RateLimitInfo {
                limiter: limiter.into(),
                scope: "deployment",
                retry_after: Some(eta),
                gateway_decision: "rejected_before_send",
                ..admitted.provider_rejection(route, None)
            };
            return Err(GatewayError::RateLimited(Box::new(info)));
        }
        Err(Refusal::Rejected(rejection, wait)) => (rejection, wait),
    };
    if rejection.limiter == LimiterName::ProviderCooldown && route.breaker.is_open(gateway.clock.now()) {
        // The hold is this instance's breaker, not a provider 429: an outage, not a limit.
        metrics.decision("rejected", "breaker_open");
        let retry_after =
            wait.or(rejection.retry_after()).unwrap_or_else(|| route.breaker.remaining(gateway.clock.now()));
        return Err(GatewayError::ProviderUnavailable { deployment: route.name.to_string(), retry_after });
    }
    let limiter = rejection.limiter.to_string();
    let never = matches!(rejection.kind, RejectionKind::NeverFits { .. });
    metrics.decision(if never { "never_fits" } else { "rejected" }, &limiter);
    if !never {
        let hit = Hit { limit_type: limiter.clone(), ..hit_labels(route) };
        metrics.rate_limit_hits.get_or_create(&hit).inc();
    }
    let info = RateLimitInfo {
        limiter,
        scope: rejection.scope.kind.as_str(),
        retry_after: wait.or(rejection.retry_after()),
        gateway_decision: "rejected_before_send",
        ..admitted.provider_rejection(route, None)
    };
    Err(match rejection.kind {
        RejectionKind::NeverFits { cost, capacity } => {
            GatewayError::NeverFits { info: Box::new(info), needed: cost, capacity }
        }
        RejectionKind::RetryAfter(_) => GatewayError::RateLimited(Box::new(info)),
        RejectionKind::SlotsBusy => {
            GatewayError::RateLimited(Box::new(RateLimitInfo { retry_after: Some(wait.unwrap_or(SLOT_RETRY)), ..info }))
        }
    })
}

/// Prices `request` on `route` as admission does: the input estimate (by the route's
/// tokenizer and cache estimator) and the output reservation. Reserves nothing.
fn quote(gateway: &Gateway, caller: &Caller, request: &ParsedRequest, profile: &Profile, route: &Route) -> Admitted {
    let estimate = estimate_input(gateway, request, route);
    let input = route.adaptive.input_reservation(estimate);
    let output = match request.protocol {
        Protocol::OpenAiEmbeddings => 0,
        _ => {
            let allowed = request.max_output_tokens.unwrap_or(profile.default_max_tokens);
            route.adaptive.output_reservation(allowed.saturating_mul(u64::from(request.choices)))
        }
    };
    Admitted {
        grant_id: ReservationId(0),
        adaptive: std::sync::Arc::clone(&route.adaptive),
        after: Vec::new(),
        protocol: request.protocol,
        input,
        output,
        kind: route.kind,
        output_counting: route.output_counting,
        caller_tenant: caller.tenant.to_string(),
        caller_key: caller.key_id.to_string(),
        caller_class: caller.class.name.to_string(),
        profile: profile.name.to_string(),
    }
}

/// The input estimate of `request` on `route`: its tokenizer and safety factor for text,
/// its provider's rules for images, documents and audio.
pub(crate) fn estimate_input(gateway: &Gateway, request: &ParsedRequest, route: &Route) -> u64 {
    let media = match route.kind {
        ProviderKind::Anthropic => MediaPricing::Anthropic,
        ProviderKind::OpenAi | ProviderKind::Ollama => MediaPricing::OpenAi,
    };
    gateway.estimator.input_tokens(&route.tokenizer, media, request, route.input_safety_factor)
}

/// Refuses, as admission would, a request that can never fit on `deployment`: its cost
/// in some dimension exceeds a whole period of a limit on its path (the 400
/// `request_exceeds_limit` the live endpoints answer). Reads the limits in force from
/// the store (one snapshot per scope, in parallel) and reserves nothing; for requests
/// accepted now and admitted later (async jobs). Scopes the store cannot read are skipped.
///
/// # Errors
/// [`GatewayError::NeverFits`] naming the limiter and scope; a wrong endpoint.
pub(crate) async fn check_fits(
    gateway: &Gateway,
    caller: &Caller,
    request: &ParsedRequest,
    profile: &Profile,
    deployment: usize,
) -> Result<(), GatewayError> {
    let route = &gateway.deployments[deployment];
    check_endpoint(request, route)?;
    let quoted = quote(gateway, caller, request, profile, route);
    let cost = Cost::request(quoted.input, quoted.output);
    let path: Vec<ScopeId> = caller.scopes.iter().copied().chain([profile.scope, route.scope]).collect();
    // One store read for the whole path; if it fails, admission judges the request later.
    let reads = gateway.store.snapshots(&path).await.unwrap_or_default();
    for snapshot in reads.into_iter().flatten() {
        for rate in &snapshot.rates {
            let LimiterName::Rate { dimension, .. } = rate.limiter else { continue };
            let needed = cost.of(dimension);
            if needed > rate.limit {
                gateway.metrics.decision("never_fits", &rate.limiter.to_string());
                let info = RateLimitInfo {
                    limiter: rate.limiter.to_string(),
                    scope: snapshot.key.kind.as_str(),
                    gateway_decision: "rejected_before_send",
                    ..quoted.provider_rejection(route, None)
                };
                return Err(GatewayError::NeverFits { info: Box::new(info), needed, capacity: rate.limit });
            }
        }
    }
    Ok(())
}

/// Why a request was not admitted, before it becomes an HTTP error.
enum Refusal {
    /// A limit refused; with the queue's estimate when the request waited in vain.
    Rejected(Rejection, Option<Duration>),
    /// The class's queue was full, or the wait ran out without any refusal on record.
    Queue { full: bool, eta: Duration },
    /// The store failed.
    Store(StoreError),
}

/// Reserves now, or waits in the deployment's queue when the class may wait and nothing
/// of its class or higher is already waiting there.
async fn reserve_or_wait(
    gateway: &Gateway,
    route: &Route,
    caller: &Caller,
    ask: Ask,
    mode: Mode,
) -> Result<Grant, Refusal> {
    let class = &caller.class;
    let refusal = if mode == Mode::Wait && route.queue.must_queue(class.priority) {
        None
    } else {
        match gateway.store.admit(ask.demand()).await {
            Ok(grant) => return Ok(grant),
            Err(ReserveError::Rejected(r)) => {
                if r.limiter == LimiterName::FairShare {
                    reclaimed(gateway, route, caller, HeldBack::Tenant);
                }
                if mode != Mode::Wait || !may_wait(&r, class.max_wait) {
                    return Err(Refusal::Rejected(r, None));
                }
                Some(r)
            }
            Err(ReserveError::Store(e)) => return Err(Refusal::Store(e)),
        }
    };
    let held_before = refusal.as_ref().is_some_and(|r| r.limiter == LimiterName::FairShare);
    let labels = QueueLabels { priority: class.name.to_string(), task_type: TASK_TYPE.into() };
    let depth = gateway.metrics.queue_depth.get_or_create(&labels).clone();
    depth.inc();
    let started = gateway.clock.now();
    let (result, report) = route.queue.wait(ask, class.max_wait, class.max_queue, refusal).await;
    depth.dec();
    let waited = gateway.clock.now().since(started);
    gateway.metrics.queue_wait.get_or_create(&labels).observe(waited.as_secs_f64());
    if let Some(by) = report.held.filter(|_| !held_before) {
        reclaimed(gateway, route, caller, by);
    }
    if result.is_ok() {
        gateway.metrics.eta_error(&class.name, "request", report.eta, waited);
    }
    match result {
        Ok(grant) => Ok(grant),
        Err(WaitError::QueueFull) => Err(Refusal::Queue { full: true, eta: Duration::from_secs(1) }),
        Err(WaitError::TimedOut { rejection: Some(r), eta }) => Err(Refusal::Rejected(r, Some(eta))),
        Err(WaitError::TimedOut { rejection: None, eta }) => Err(Refusal::Queue { full: false, eta }),
        Err(WaitError::Store(ReserveError::Rejected(r))) => Err(Refusal::Rejected(r, None)),
        Err(WaitError::Store(ReserveError::Store(e))) => Err(Refusal::Store(e)),
    }
}

/// Counts a request of `caller` held back on `route` so that others could go first.
fn reclaimed(gateway: &Gateway, route: &Route, caller: &Caller, by: HeldBack) {
    gateway.metrics.shares.reclaimed(&route.name, &caller.tenant, &caller.class.name, by);
}

/// The `task_type` label until task rules classify requests.
const TASK_TYPE: &str = "default";

/// Whether waiting can help: not for a request that never fits or whose own wait is
/// longer than its class allows.
fn may_wait(rejection: &Rejection, max_wait: Duration) -> bool {
    !max_wait.is_zero()
        && match rejection.kind {
            RejectionKind::RetryAfter(wait) => wait <= max_wait,
            RejectionKind::SlotsBusy => true,
            RejectionKind::NeverFits { .. } => false,
        }
}

/// `provider`, `model` labels of a route, for a rate-limit hit.
pub fn hit_labels(route: &Route) -> Hit {
    let labels = &route.counters.labels;
    Hit { provider: labels.provider.clone(), model: labels.model.clone(), limit_type: String::new() }
}

/// Suggested wait when every concurrency slot is busy (no bucket can say when one frees).
const SLOT_RETRY: Duration = Duration::from_secs(1);

/// Chat and messages requests cross between OpenAI and Anthropic deployments (translated);
/// embeddings have no Anthropic counterpart.
fn check_endpoint(request: &ParsedRequest, route: &Route) -> Result<(), GatewayError> {
    if request.protocol == Protocol::OpenAiEmbeddings && route.kind == ProviderKind::Anthropic {
        return Err(GatewayError::WrongEndpoint { model: request.model.clone(), endpoint: "/v1/messages" });
    }
    Ok(())
}
