//! Admission: price a parsed request on a deployment ([`Quote`]), build its quota path,
//! reserve before sending (or wait in the deployment's queue), and turn a refusal into
//! the error the client gets. Returns the [`Admitted`] request and the [`Terms`] its
//! reservation settles on; imports no other step.

use std::sync::Arc;
use std::time::Duration;

use sluice_config::ProviderKind;
use sluice_provider::{MediaPricing, ParsedRequest, Protocol, TokenizerKind};
use sluice_quota::{
    Claimer, Cost, FairShare, Grant, LimiterName, Nanos, Rejection, RejectionKind, ReserveError, ScopeId,
    ScopeSnapshot, Share, StoreError,
};

use super::context::{Mode, Quote, Request, Terms, hit_labels, refusal_info};
use crate::error::{GatewayError, RateLimitInfo};
use crate::metrics::{Bound, Hit, QueueLabels, WaitLabels};
use crate::pool::Pool;
use crate::state::{Caller, Gateway, Profile, Route};
use crate::usage::UsageTag;
use sluice_quota::guarantee::HeldBack;
use sluice_quota::placement::{self, Candidate, Strategy};
use sluice_quota::queue::{Alternative, Ask, DeploymentQueue, WaitError, Withdrawal};
use sluice_recall::remembered::Memo;

/// A request whose capacity is reserved.
#[derive(Debug)]
pub struct Admitted {
    /// The reservation and what it is settled on.
    pub terms: Terms,
    /// The caller's own scopes right after the grant, when the store returned them with it
    /// (its rate-limit headers); see [`sluice_quota::Grant::after`].
    pub after: Vec<ScopeSnapshot>,
    /// When it was granted (by the queue's dispatcher, when it waited), by the gateway's
    /// clock: its time to the wire counts from here.
    pub granted: Nanos,
    /// The deployment it is admitted on (a pool's member, placed).
    pub deployment: usize,
}

/// Admits `req` on `deployment` (the profile's primary, a fallback or its degradation
/// target): prices it and reserves it on every scope from the org to the deployment.
///
/// # Errors
/// Wrong endpoint for the model, a refusing limit, or a failing store.
pub async fn admit(req: &Request<'_>, deployment: usize, mode: Mode) -> Result<Admitted, GatewayError> {
    let gateway = req.gateway;
    let route = &gateway.deployments[deployment];
    check_endpoint(req.request, route)?;
    let estimate = estimate_input(gateway, req.request, route);
    may_serve(req, route, estimate)?;
    let quote = quote_from(estimate, req.request, req.profile, route, req.hidden_context);
    let ask = ask(req, route, quote);
    req.access.estimated(quote.input.saturating_add(quote.output));
    match reserve_or_wait(req, route, &route.queue, ask, mode).await {
        Ok((_, grant, at)) => {
            req.access.admitted(quote.input.saturating_add(quote.output));
            Ok(granted(req, deployment, quote, grant, at))
        }
        Err(refusal) => Err(refused(req, route, quote, refusal).await),
    }
}

/// Admits `req` on one of `members` of its profile's `pool` (deployment indices; those it
/// has not failed on): places it ([`place`]: the members it may go to, in the order to
/// try), then reserves on the first that admits it, in one store step, or waits once in
/// the pool's queue for the first grant from any of them.
///
/// # Errors
/// No member may take it (none fits its context window, none is allowed for the caller,
/// every breaker is open), a refusing limit on every member, or a failing store.
pub async fn admit_pooled(
    req: &Request<'_>,
    pool: &Pool,
    members: &[usize],
    mode: Mode,
) -> Result<Admitted, GatewayError> {
    let gateway = req.gateway;
    let placed = place(req, pool, members).await?;
    let Some(&(first, first_quote)) = placed.order.first() else {
        return Err(GatewayError::StoreUnavailable);
    };
    let route = &gateway.deployments[first];
    let mut ask = ask(req, route, first_quote);
    ask.others = placed.order[1..]
        .iter()
        .map(|&(d, quote)| {
            let route = &gateway.deployments[d];
            let path = req.caller.scopes.iter().copied().chain(upstream_path(req.profile, route)).collect();
            Alternative { path, cost: quote.cost() }
        })
        .collect();
    req.access.estimated(first_quote.input.saturating_add(first_quote.output));
    match reserve_or_wait(req, route, &pool.queue, ask, mode).await {
        Ok((at_index, grant, at)) => {
            let (deployment, quote) = placed.order.get(at_index).copied().unwrap_or((first, first_quote));
            let member = pool.members.iter().position(|m| m.deployment == deployment).unwrap_or_default();
            pool.took(member, quote.cost());
            let now = gateway.services.clock.now();
            // The session keeps its member: a request that spilled off it (full for the
            // moment) does not move the session, or each clump would scatter sessions and
            // their prompt caches over the pool.
            if let Some(session) = &placed.session
                && placed.affinity.is_none_or(|preferred| preferred == deployment)
            {
                pool.served(session, deployment, now);
            }
            let reason = placed.reason(at_index, deployment, req.queued().is_some(), pool.strategy);
            let chosen = &gateway.deployments[deployment];
            req.access.placed(chosen, reason);
            gateway.services.metrics.placed(&req.profile.name, &chosen.name, reason);
            req.access.admitted(quote.input.saturating_add(quote.output));
            Ok(granted(req, deployment, quote, grant, at))
        }
        Err(refusal) => Err(refused(req, route, first_quote, refusal).await),
    }
}

/// Where a pool's request may go, in the order to try.
struct Placed {
    /// The members (deployment, the request's quote there), in order.
    order: Vec<(usize, Quote)>,
    /// The member the request's session prefers, when it has one.
    affinity: Option<usize>,
    /// The session's key, when the request names one.
    session: Option<String>,
}

impl Placed {
    /// Why the member at `index` of the order took it.
    fn reason(&self, index: usize, deployment: usize, queued: bool, strategy: Strategy) -> &'static str {
        if queued {
            "queued"
        } else if self.order.len() == 1 {
            "only"
        } else if self.affinity == Some(deployment) {
            "affinity"
        } else if index > 0 {
            "spill"
        } else {
            strategy.name()
        }
    }
}

/// Places a pool's request: prices it on each member (each has its own tokenizer and
/// learned estimates), keeps those it may go to — the right endpoint, a closed breaker,
/// a context window it fits, allowed for the caller — and orders them
/// ([`sluice_quota::placement::order`]) by tier, what each admits now (the pool's view of
/// the shared buckets, read again when stale), the session's member, then the strategy.
///
/// # Errors
/// When no member may take it: the first member's endpoint error, 400 when it fits no
/// member's context window, 503 when every member's breaker is open.
async fn place(req: &Request<'_>, pool: &Pool, members: &[usize]) -> Result<Placed, GatewayError> {
    let gateway = req.gateway;
    let now = gateway.services.clock.now();
    if pool.due(now) {
        let paths: Vec<Vec<ScopeId>> = pool
            .members
            .iter()
            .map(|m| {
                let route = &gateway.deployments[m.deployment];
                upstream_path(req.profile, route).collect::<Vec<_>>()
            })
            .collect();
        let flat: Vec<ScopeId> = paths.iter().flatten().copied().collect();
        let read = gateway.services.store.snapshots(&flat).await.ok().map(|snapshots| {
            let mut snapshots = snapshots.into_iter();
            paths.iter().map(|p| snapshots.by_ref().take(p.len()).flatten().collect()).collect()
        });
        pool.seen(gateway.services.clock.now(), read);
    }
    let mut refusal = None;
    // The largest window of a member the request was too long for (the 400 names it).
    let mut largest = 0;
    let mut quotes = Vec::with_capacity(pool.members.len());
    let mut eligible = Vec::with_capacity(pool.members.len());
    // Members counting input alike share one estimate (tokenizing is the costly part).
    let mut estimates: Vec<(TokenizerKind, MediaPricing, f64, u64)> = Vec::with_capacity(2);
    // A continued response lives on one member: when the pool has it, only it may serve.
    let pinned_to = req
        .continues_on
        .as_ref()
        .filter(|on| pool.members.iter().any(|m| gateway.deployments[m.deployment].name.as_ref() == on.as_ref()));
    for member in &pool.members {
        let route = &gateway.deployments[member.deployment];
        let media = media_pricing(route);
        let known = estimates
            .iter()
            .find(|(t, m, f, _)| {
                *t == route.tokenizer && *m == media && f.to_bits() == route.input_safety_factor.to_bits()
            })
            .map(|e| e.3);
        let estimate = known.unwrap_or_else(|| {
            let estimate = estimate_input(gateway, req.request, route);
            estimates.push((route.tokenizer, media, route.input_safety_factor, estimate));
            estimate
        });
        let quote = quote_from(estimate, req.request, req.profile, route, req.hidden_context);
        let serves = may_serve(req, route, estimate);
        if let (Err(GatewayError::ContextTooLong { .. }), Some(window)) = (&serves, route.context_window) {
            largest = largest.max(window.get());
        }
        let pinned = pinned_to.is_some_and(|on| *on != route.name);
        let allowed = if !members.contains(&member.deployment) || pinned {
            false
        } else if let Err(e) = check_endpoint(req.request, route).and(serves) {
            // Too long for a member the caller may use says more than one it may not.
            let better = matches!(e, GatewayError::ContextTooLong { .. })
                && matches!(refusal, Some(GatewayError::NoAllowedDeployment { .. }));
            if better {
                refusal = Some(e);
            } else {
                refusal.get_or_insert(e);
            }
            false
        } else if route.breaker.is_open(now) {
            refusal.get_or_insert_with(|| GatewayError::ProviderUnavailable {
                deployment: route.name.to_string(),
                retry_after: route.breaker.remaining(now),
            });
            false
        } else {
            true
        };
        quotes.push(quote);
        eligible.push(allowed);
    }
    let costs: Vec<Cost> = quotes.iter().map(|q| q.cost()).collect();
    let room = pool.room(&costs);
    let candidates: Vec<Candidate> = pool
        .members
        .iter()
        .enumerate()
        .map(|(i, member)| {
            let route = &gateway.deployments[member.deployment];
            let price = route.price.map(|_| quotes[i].money as f64);
            Candidate {
                tier: member.tier,
                weight: member.weight,
                headroom: room[i].headroom,
                full_in: room[i].full_in,
                latency_ms: route.latency.mean_ms(),
                price,
                eligible: eligible[i],
            }
        })
        .collect();
    let session = session_of(req, pool.affinity_header.as_deref());
    let eligible_deployments: Vec<(usize, f64)> = (pool.members.iter().zip(&pool.capacities).zip(&eligible))
        .filter(|(_, e)| **e)
        .map(|((m, capacity), _)| (m.deployment, *capacity))
        .collect();
    let affinity = session.as_deref().and_then(|key| {
        let recorded = pool.session(key, now).filter(|d| eligible_deployments.iter().any(|(e, _)| e == d));
        recorded.or_else(|| Pool::home(key, &eligible_deployments))
    });
    let affinity_member = affinity.and_then(|d| pool.members.iter().position(|m| m.deployment == d));
    let ask = placement::Ask { members: &candidates, strategy: pool.strategy, affinity: affinity_member };
    let order: Vec<(usize, Quote)> =
        placement::order(ask, &mut rand::rng()).into_iter().map(|i| (pool.members[i].deployment, quotes[i])).collect();
    if order.is_empty() {
        let refusal = match refusal {
            Some(GatewayError::ContextTooLong { model, needed, .. }) => {
                GatewayError::ContextTooLong { model, needed, largest }
            }
            Some(refusal) => refusal,
            None => GatewayError::ProviderUnavailable {
                deployment: req.profile.name.to_string(),
                retry_after: std::time::Duration::from_secs(1),
            },
        };
        return Err(refusal);
    }
    Ok(Placed { order, affinity, session })
}

/// Whether `route` may serve `req`: one the caller's `regions` and `labels` allow, with a
/// context window (when stated) that holds the request's input `estimate` and the output
/// it asks for. A deployment a caller may not use is never sent its data.
///
/// # Errors
/// 403 `no_allowed_deployment`, or 400 `context_length_exceeded` naming the window.
fn may_serve(req: &Request<'_>, route: &Route, estimate: u64) -> Result<(), GatewayError> {
    let model = || req.profile.name.to_string();
    if !req.caller.allowed.admits(route.region.as_deref(), &route.labels) {
        return Err(GatewayError::NoAllowedDeployment { model: model(), allowed: req.caller.allowed.to_string() });
    }
    if let Some(window) = route.context_window {
        let output = req.request.max_output_tokens.unwrap_or(0).saturating_mul(u64::from(req.request.choices));
        let needed = estimate.saturating_add(output);
        if needed > window.get() {
            return Err(GatewayError::ContextTooLong { model: model(), needed, largest: window.get() });
        }
    }
    Ok(())
}

/// The session a request names, whose member it prefers: the Responses response it
/// continues (`previous_response_id`, whose stored state lives on one deployment), the
/// pool's affinity `header`, `prompt_cache_key`, `user`, or Anthropic's `metadata.user_id`.
fn session_of(req: &Request<'_>, header: Option<&str>) -> Option<String> {
    let body = &req.request.body;
    let text = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_str).map(str::to_owned);
    let named = header.and_then(|h| req.headers.get(h)).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty());
    text(body.get("previous_response_id"))
        .map(|id| format!("response:{id}"))
        .or_else(|| named.map(|v| format!("header:{v}")))
        .or_else(|| text(body.get("prompt_cache_key")).map(|k| format!("cache:{k}")))
        .or_else(|| text(body.get("user")).map(|u| format!("user:{u}")))
        .or_else(|| text(body.get("metadata").and_then(|m| m.get("user_id"))).map(|u| format!("user:{u}")))
}

/// The reservation `req` asks of the store: its cost on every scope of its path, with its
/// fair-share and queueing identity (and whether its client retries it).
fn ask(req: &Request<'_>, route: &Route, quote: Quote) -> Ask {
    let (gateway, caller, profile) = (req.gateway, req.caller, req.profile);
    let mut path = Vec::with_capacity(caller.scopes.len() + 2);
    path.extend_from_slice(&caller.scopes);
    path.extend(upstream_path(profile, route));
    let total = quote.input.saturating_add(quote.output);
    let fair = FairShare {
        tenant: Arc::clone(&caller.tenant),
        weight: caller.weight,
        cost: total.max(1),
        slack: route.fair_slack.unwrap_or_else(|| total.saturating_mul(8)),
        queued_behind: false,
    };
    Ask {
        fair: Some(fair),
        path,
        cost: quote.cost(),
        share: Share::permille(caller.class.share_permille),
        lease: gateway.lease,
        tenant: caller.tenant_index,
        lane: caller.key_index,
        weight: caller.weight,
        priority: caller.class.priority,
        calendar: gateway.calendar(),
        deadline: None,
        claimer: Claimer::new(rand::random()),
        others: Vec::new(),
        retries: crate::deadline::retries(req.headers),
    }
}

/// The scopes after the caller's: the profile, the provider account the deployment shares
/// (if any), the deployment; reserved all-or-nothing with the caller's.
fn upstream_path(profile: &Profile, route: &Route) -> impl Iterator<Item = ScopeId> {
    [Some(profile.scope), route.account, Some(route.scope)].into_iter().flatten()
}

/// Counts an admission (metrics, guaranteed shares, adaptive accounting) and keeps the
/// terms its reservation is settled on.
fn granted(req: &Request<'_>, deployment: usize, quote: Quote, grant: Grant, at: Nanos) -> Admitted {
    let (gateway, caller) = (req.gateway, req.caller);
    let route = &gateway.deployments[deployment];
    let metrics = &gateway.services.metrics;
    metrics.admitted();
    if let Some(split) =
        route.guarantee.split(gateway.services.clock.now(), caller.tenant_index, caller.weight, quote.cost())
    {
        metrics.shares.admitted(&route.name, &caller.tenant, split);
    }
    route.adaptive.on_admitted(quote.cost());
    let terms = Terms {
        id: grant.id,
        protocol: req.request.protocol,
        input: quote.input,
        output: quote.output,
        output_weight: quote.output_weight,
        adaptive: Arc::clone(&route.adaptive),
        kind: route.target.kind,
        output_counting: route.output_counting,
        memo: memo(req, route),
        money: quote.money,
        spend: route.price.map(|price| (price, metrics.spend.of(&caller.tenant, &gateway.currency))),
        usage: (Arc::clone(&gateway.services.usage), usage_tag(req, route)),
    };
    Admitted { terms, after: grant.after, granted: at, deployment }
}

/// The group the request's usage counts in.
fn usage_tag(req: &Request<'_>, route: &Route) -> UsageTag {
    let caller = req.caller;
    UsageTag {
        tenant: Arc::clone(&caller.tenant),
        team: caller.team.clone().unwrap_or_default(),
        key: Arc::clone(&caller.key_id),
        profile: Arc::clone(&req.profile.name),
        deployment: Arc::clone(&route.name),
    }
}

/// What remembers a Responses API answer served by `route` (its own protocol: Responses
/// translated for another provider have no id the provider keeps).
fn memo(req: &Request<'_>, route: &Route) -> Option<Memo> {
    let served = req.request.protocol == Protocol::OpenAiResponses && route.target.kind != ProviderKind::Anthropic;
    served.then(|| Memo {
        responses: Arc::clone(&req.gateway.services.responses),
        tenant: Arc::clone(&req.caller.tenant),
        deployment: Arc::clone(&route.name),
    })
}

/// The error a refused admission answers, counted.
async fn refused(req: &Request<'_>, route: &Route, quote: Quote, refusal: Refusal) -> GatewayError {
    let metrics = &req.gateway.services.metrics;
    match refusal {
        Refusal::Store(e) => {
            tracing::debug!(error = %e, "quota store failed");
            metrics.decision("store_error", "");
            GatewayError::StoreUnavailable
        }
        Refusal::Queue { full, eta } => {
            // No limit refused while it waited: the deployment's queue itself is named.
            let limiter = if full { "queue_full" } else { "queue_wait" };
            metrics.bound_decision("rejected", limiter, Bound::NONE);
            let hit = Hit { limit_type: limiter.into(), ..hit_labels(route) };
            metrics.rate_limit_hits.get_or_create(&hit).inc();
            req.access.bound(crate::binding::NONE, None, crate::binding::NONE);
            let info = RateLimitInfo {
                limiter: limiter.into(),
                retry_after: Some(eta),
                ..refusal_info(req.caller, req.profile, route, quote)
            };
            GatewayError::RateLimited(Box::new(info))
        }
        Refusal::Rejected(rejection, wait) => {
            let binding = describe(req, route, &rejection).await;
            rejected(req, route, quote, &rejection, wait, binding)
        }
    }
}

/// `rejection` in words with its scope's figures, read from the request's path (the
/// refusing scope is on it).
async fn describe(req: &Request<'_>, route: &Route, rejection: &Rejection) -> String {
    let path: Vec<ScopeId> = req.caller.scopes.iter().copied().chain(upstream_path(req.profile, route)).collect();
    crate::binding::read_and_describe(req.gateway.services.store.as_ref(), req.gateway.calendar(), &path, rejection)
        .await
}

/// The error a limit's refusal answers: the breaker's hold is an outage (503), a request
/// that can never fit a 400, any other a 429 with its wait, naming the refusing scope
/// (`binding`: the refusal in words).
fn rejected(
    req: &Request<'_>,
    route: &Route,
    quote: Quote,
    rejection: &Rejection,
    wait: Option<Duration>,
    binding: String,
) -> GatewayError {
    let gateway = req.gateway;
    let metrics = &gateway.services.metrics;
    if rejection.limiter == LimiterName::ProviderCooldown && route.breaker.is_open(gateway.services.clock.now()) {
        // The hold is this instance's breaker, not a provider 429: an outage, not a limit.
        metrics.decision("rejected", "breaker_open");
        let retry_after =
            wait.or(rejection.retry_after()).unwrap_or_else(|| route.breaker.remaining(gateway.services.clock.now()));
        return GatewayError::ProviderUnavailable { deployment: route.name.to_string(), retry_after };
    }
    let limiter = rejection.limiter.to_string();
    let never = matches!(rejection.kind, RejectionKind::NeverFits { .. });
    let bound = Bound::of(rejection);
    metrics.bound_decision(if never { "never_fits" } else { "rejected" }, &limiter, bound);
    if !never {
        let hit = Hit {
            limit_type: limiter.clone(),
            scope_kind: bound.scope_kind,
            dimension: bound.dimension,
            ..hit_labels(route)
        };
        metrics.rate_limit_hits.get_or_create(&hit).inc();
    }
    req.access.bound(bound.scope_kind, Some(&rejection.scope.name), bound.dimension);
    let info = RateLimitInfo {
        limiter,
        scope: bound.scope_kind,
        scope_name: rejection.scope.name.to_string(),
        dimension: bound.dimension,
        binding,
        retry_after: wait.or(rejection.retry_after()),
        ..refusal_info(req.caller, req.profile, route, quote)
    };
    match rejection.kind {
        RejectionKind::NeverFits { cost, capacity } if rejection.limiter == LimiterName::Budget => {
            let (needed, capacity) = (crate::budgets::units(cost), crate::budgets::units(capacity));
            GatewayError::OverBudget { info: Box::new(info), needed, capacity }
        }
        RejectionKind::NeverFits { cost, capacity } => {
            GatewayError::NeverFits { info: Box::new(info), needed: cost, capacity }
        }
        RejectionKind::RetryAfter(_) | RejectionKind::InFlight(_) => GatewayError::RateLimited(Box::new(info)),
        RejectionKind::SlotsBusy => {
            GatewayError::RateLimited(Box::new(RateLimitInfo { retry_after: Some(wait.unwrap_or(SLOT_RETRY)), ..info }))
        }
    }
}

/// Prices `request` on `route` as admission does: the input estimate (by the route's
/// tokenizer and cache estimator) and the output reservation. Reserves nothing.
/// `hidden` is the context remembered of the response the request continues.
fn quote(gateway: &Gateway, request: &ParsedRequest, profile: &Profile, route: &Route, hidden: Option<u64>) -> Quote {
    quote_from(estimate_input(gateway, request, route), request, profile, route, hidden)
}

/// [`quote`] from the input `estimate` already made by `route`'s tokenizer and rules.
fn quote_from(
    mut estimate: u64,
    request: &ParsedRequest,
    profile: &Profile,
    route: &Route,
    hidden: Option<u64>,
) -> Quote {
    if request.continues_hidden_context() {
        // The earlier turns the provider adds are not in the body: what the continued
        // response left behind, else a conservative figure; settled from usage.
        estimate = estimate.saturating_add(hidden.unwrap_or(profile.context_reserve_tokens));
    }
    let input = route.adaptive.input_reservation(estimate);
    let output = match request.protocol {
        Protocol::OpenAiEmbeddings => 0,
        // An OpenAI chat request with a `reasoning_effort` and no limit asks Claude for the
        // default plus the thinking budget: that is what the deployment may generate.
        Protocol::OpenAiChat if route.target.kind == ProviderKind::Anthropic => route
            .adaptive
            .output_reservation(sluice_provider::anthropic_max_tokens(request, profile.default_max_tokens)),
        _ => {
            let allowed = request.max_output_tokens.unwrap_or(profile.default_max_tokens);
            route.adaptive.output_reservation(allowed.saturating_mul(u64::from(request.choices)))
        }
    };
    let money = crate::budgets::micros(route.price.as_ref(), route.target.kind, input, output);
    Quote { input, output, output_weight: route.output_weight, money }
}

/// The input estimate of `request` on `route`: its tokenizer and safety factor for text,
/// its provider's rules for images, documents and audio.
pub(crate) fn estimate_input(gateway: &Gateway, request: &ParsedRequest, route: &Route) -> u64 {
    let media = media_pricing(route);
    gateway.services.estimator.input_tokens(&route.tokenizer, media, request, route.input_safety_factor)
}

/// Whose rules price media parts sent to `route`.
fn media_pricing(route: &Route) -> MediaPricing {
    match route.target.kind {
        ProviderKind::Anthropic => MediaPricing::Anthropic,
        ProviderKind::OpenAi | ProviderKind::Ollama => MediaPricing::OpenAi,
    }
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
    let quoted = quote(gateway, request, profile, route, None);
    let cost = quoted.cost();
    let path: Vec<ScopeId> = caller.scopes.iter().copied().chain(upstream_path(profile, route)).collect();
    // One store read for the whole path; if it fails, admission judges the request later.
    let reads = gateway.services.store.snapshots(&path).await.unwrap_or_default();
    for snapshot in reads.into_iter().flatten() {
        for rate in &snapshot.rates {
            let LimiterName::Rate { dimension, .. } = rate.limiter else { continue };
            let needed = cost.of(dimension);
            if needed > rate.limit {
                let bound = Bound { scope_kind: snapshot.key.kind.as_str(), dimension: dimension.as_str() };
                gateway.services.metrics.bound_decision("never_fits", &rate.limiter.to_string(), bound);
                let info = RateLimitInfo {
                    limiter: rate.limiter.to_string(),
                    scope: bound.scope_kind,
                    scope_name: snapshot.key.name.to_string(),
                    dimension: bound.dimension,
                    ..refusal_info(caller, profile, route, quoted)
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
/// of its class or higher is already waiting there. Every wait gets only what is left of
/// the request's deadline; when the client stated a deadline, a wait predicted to outlast
/// the request's is refused at once with the prediction (but a retry's, when the class's
/// `max_wait` binds: [`ClientDeadline`](crate::deadline::ClientDeadline)).
/// Returns the grant and when it came.
async fn reserve_or_wait(
    req: &Request<'_>,
    route: &Route,
    queue: &Arc<DeploymentQueue>,
    mut ask: Ask,
    mode: Mode,
) -> Result<(usize, Grant, Nanos), Refusal> {
    let (gateway, caller) = (req.gateway, req.caller);
    let class = &caller.class;
    let now = gateway.services.clock.now();
    let left = req.deadline.since(now);
    // How long it may wait bounds the claims its refusals record: one that will not wait
    // claims no idle window.
    ask.deadline = Some(if mode == Mode::Wait { req.deadline } else { now });
    // A request that may wait may claim an idle window; unless it ends in a grant or waits
    // its deadline out (its claims lapse then), it withdraws them when it goes: refused
    // on a prediction, or its client hung up while it waited.
    let withdrawal = (mode == Mode::Wait && !left.is_zero()).then(|| Withdrawal::of(&gateway.services.store, &ask));
    let refusal = if mode == Mode::Wait && queue.must_queue(class.priority) {
        None
    } else {
        match ask.admit(gateway.services.store.as_ref(), now).await {
            Ok((member, grant)) => {
                if let Some(withdrawal) = withdrawal {
                    withdrawal.disarm();
                }
                return Ok((member, grant, gateway.services.clock.now()));
            }
            Err(ReserveError::Rejected(r)) => {
                if r.limiter == LimiterName::FairShare {
                    reclaimed(gateway, route, caller, HeldBack::Tenant);
                }
                if mode != Mode::Wait || !may_wait(&r, left) {
                    return Err(Refusal::Rejected(r, None));
                }
                Some(r)
            }
            Err(ReserveError::Store(e)) => return Err(Refusal::Store(e)),
        }
    };
    if left.is_zero() || req.client_deadline.refuses_on_prediction(ask.retries) {
        let eta = queue.predict(&ask, refusal.as_ref());
        if left.is_zero() || with_margin(eta) > left {
            return Err(predicted(refusal, eta));
        }
    }
    let held_before = refusal.as_ref().is_some_and(|r| r.limiter == LimiterName::FairShare);
    let labels = QueueLabels { priority: class.name.to_string(), task_type: TASK_TYPE.into() };
    let depth = gateway.services.metrics.queue_depth.get_or_create(&labels).clone();
    depth.inc();
    let started = gateway.services.clock.now();
    let (result, report) = queue.wait(ask, left, class.max_queue, refusal).await;
    depth.dec();
    let waited = gateway.services.clock.now().since(started);
    waited_for(req, &report, waited, result.is_ok());
    req.waited(waited, report.eta);
    if let Some(by) = report.held.filter(|_| !held_before) {
        reclaimed(gateway, route, caller, by);
    }
    if result.is_ok() {
        gateway.services.metrics.eta_error(&class.name, "request", report.eta, waited);
    }
    if matches!(result, Ok(_) | Err(WaitError::TimedOut { .. }))
        && let Some(withdrawal) = withdrawal
    {
        withdrawal.disarm();
    }
    match result {
        Ok(grant) => Ok((report.member, grant, report.granted.unwrap_or_else(|| gateway.services.clock.now()))),
        Err(WaitError::QueueFull) => Err(Refusal::Queue { full: true, eta: Duration::from_secs(1) }),
        Err(WaitError::TimedOut { rejection: Some(r), eta }) => Err(Refusal::Rejected(r, Some(eta))),
        Err(WaitError::TimedOut { rejection: None, eta }) => Err(Refusal::Queue { full: false, eta }),
        Err(WaitError::Store(ReserveError::Rejected(r))) => Err(Refusal::Rejected(r, None)),
        Err(WaitError::Store(ReserveError::Store(e))) => Err(Refusal::Store(e)),
    }
}

/// Counts a wait in a deployment's queue (admitted or not) by the scope and dimension that held
/// it, and logs it with them.
fn waited_for(req: &Request<'_>, report: &sluice_quota::queue::Waited, waited: Duration, admitted: bool) {
    let bound = report.bound_by.as_ref().map_or(Bound::NONE, Bound::of);
    let Bound { scope_kind, dimension } = bound;
    let labels =
        WaitLabels { priority: req.caller.class.name.to_string(), task_type: TASK_TYPE.into(), scope_kind, dimension };
    req.gateway.services.metrics.queue_wait.get_or_create(&labels).observe(waited.as_secs_f64());
    req.access.waited(waited, admitted);
    req.access.bound(scope_kind, report.bound_by.as_ref().map(|r| &r.scope.name), dimension);
}

/// A predicted wait with the prediction's error margin: the queue's ETA misses the actual
/// grant by up to a seventh of the wait (p90, `sluice bench deadlines`), so a client whose
/// deadline falls within a fifth of the prediction is refused at once, with the prediction,
/// rather than at its deadline after a wait that was in vain.
fn with_margin(eta: Duration) -> Duration {
    eta.saturating_add(eta / 5)
}

/// The refusal of a request that will not wait (nothing is left of its deadline, or its
/// grant is predicted after it): the last refusal, or the queue's, with the prediction as
/// its retry hint.
fn predicted(refusal: Option<Rejection>, eta: Duration) -> Refusal {
    match refusal {
        Some(r) => Refusal::Rejected(r, Some(eta)),
        None => Refusal::Queue { full: false, eta },
    }
}

/// Counts a request of `caller` held back on `route` so that others could go first.
fn reclaimed(gateway: &Gateway, route: &Route, caller: &Caller, by: HeldBack) {
    gateway.services.metrics.shares.reclaimed(&route.name, &caller.tenant, &caller.class.name, by);
}

/// The `task_type` label until task rules classify requests.
const TASK_TYPE: &str = crate::metrics::DEFAULT_TASK_TYPE;

/// Whether waiting can help: not for a request that never fits or whose own wait is
/// longer than what is left of its deadline.
fn may_wait(rejection: &Rejection, max_wait: Duration) -> bool {
    !max_wait.is_zero()
        && match rejection.kind {
            // A spent budget waits for the next day or month, never in a queue.
            RejectionKind::RetryAfter(_) if rejection.limiter == LimiterName::Budget => false,
            // One that reservations in flight hold waits for them to settle, like a rate.
            RejectionKind::RetryAfter(wait) | RejectionKind::InFlight(wait) => wait <= max_wait,
            RejectionKind::SlotsBusy => true,
            RejectionKind::NeverFits { .. } => false,
        }
}

/// Suggested wait when every concurrency slot is busy (no bucket can say when one frees).
const SLOT_RETRY: Duration = Duration::from_secs(1);

/// Chat, Responses and messages requests cross between OpenAI and Anthropic deployments
/// (translated; what cannot be is refused by the translation, naming the field);
/// embeddings and legacy completions have no Anthropic counterpart.
fn check_endpoint(request: &ParsedRequest, route: &Route) -> Result<(), GatewayError> {
    if route.target.kind != ProviderKind::Anthropic {
        return Ok(());
    }
    match request.protocol {
        Protocol::OpenAiEmbeddings | Protocol::OpenAiCompletions => {
            Err(GatewayError::WrongEndpoint { model: request.model.clone(), endpoint: "/v1/messages" })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use sluice_quota::{ScopeKey, ScopeKind};

    use super::*;

    #[test]
    fn a_spent_budget_never_waits_in_a_queue() {
        let refusal = |limiter| Rejection {
            scope: ScopeKey::new(ScopeKind::Tenant, "acme"),
            limiter,
            kind: RejectionKind::RetryAfter(Duration::from_secs(1)),
        };
        let max_wait = Duration::from_secs(30);
        assert!(may_wait(&refusal(LimiterName::Concurrency), max_wait), "a short wait is worth queueing");
        assert!(!may_wait(&refusal(LimiterName::Budget), max_wait), "not for a budget, however short");
    }

    #[test]
    fn a_budget_held_by_reservations_in_flight_waits_like_a_rate() {
        let held = Rejection {
            scope: ScopeKey::new(ScopeKind::Tenant, "acme"),
            limiter: LimiterName::Budget,
            kind: RejectionKind::InFlight(sluice_quota::IN_FLIGHT_RETRY),
        };
        assert!(may_wait(&held, Duration::from_secs(30)), "the holds settle within the wait");
        assert!(!may_wait(&held, Duration::from_millis(1)), "a class that does not wait is refused");
    }
}
