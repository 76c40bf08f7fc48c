//! The road of a proxied request (`POST /v1/chat/completions`, `/v1/responses`,
//! `/v1/embeddings`, `/v1/completions`, `/v1/messages`): this file is its driver, the only
//! one that calls a step, and reads top to bottom as the request goes —
//! `accept → loop { plan → admit → send → answer } → settle`:
//!
//! 1. [`accept`]: the body, the parse, the profile, the task, the one deadline, the
//!    context a Responses request continues, the idempotency key ([`handle`] and
//!    [`forward`] below drive it; the caller was authenticated before the body, by the
//!    rate-limit header layer).
//! 2. [`plan`]: pure decisions — which deployment each attempt goes to, whether it may
//!    wait, what a failure leads to (a retry, a fallback, degradation, the end).
//! 3. [`admit`]: price ([`Quote`](context::Quote)), reserve or wait, or the refusal; an
//!    admission returns the [`Terms`](context::Terms) its reservation settles on.
//! 4. [`send`]: the upstream request (translated, keyed, traced) and the bounded send.
//! 5. [`answer`]: the provider's answer judged (errors classified, a provider 429, the
//!    breaker) and relayed to the client, a stream chunk by chunk.
//! 6. [`settle`]: how a reservation settles, and the guard that settles it exactly once;
//!    the driver opens it once admitted and hands it to the answer step as a
//!    [`Settle`](context::Settle), so the answer settles through it (a stream at its end)
//!    without knowing the settle step.
//!
//! Each step is one file that returns a value and imports no other step; [`context`] holds
//! the request's context and the plain values that travel between steps, and imports no
//! file of the road. `scripts/import-cycles --road-from docs/ARCHITECTURE.md` checks it,
//! from the road's list in that file's "The life of a request".

mod accept;
mod admit;
mod answer;
mod context;
mod plan;
mod send;
mod settle;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Response};
use axum::response::IntoResponse as _;
use sluice_provider::Protocol;
use sluice_quota::{Nanos, ScopeSnapshot, Settlement};

use self::accept::{Accepted, Once};
use self::admit::Admitted;
use self::context::Terms;
use self::context::{Attempt, Mode, Request, Served};
use self::plan::{Candidates, Next, Plan, RetryLimits};
use self::send::Sent;
use self::settle::SettleGuard;
use crate::access::Line;
use crate::auth::Authenticated;
use crate::crossing::Crossing;
use crate::error::{Envelope, ErrorResponse, GatewayError};
use crate::ratelimit_headers::Early;
use crate::state::{Caller, Gateway, Route};
use crate::trace::{self, Trace};

pub(crate) use accept::hidden_context;
pub use accept::{ModelFromPath, count, finished, named_by_path, read_body};
pub(crate) use admit::check_fits;
pub(crate) use admit::estimate_input;
pub(crate) use answer::pass_through;
pub use context::endpoint_path;

/// The time a response's request spent waiting in queues, in milliseconds (absent when it
/// did not queue).
const QUEUED_MS: &str = "x-sluice-queued-ms";
/// The wait predicted when the request joined its queues (their ETAs then), beside
/// [`QUEUED_MS`].
const PREDICTED_MS: &str = "x-sluice-predicted-ms";

/// Handles one OpenAI- or Anthropic-shaped request end to end, on the gateway its caller
/// was authenticated in (see [`Authenticated`]; `gateway` when nothing authenticated it).
pub async fn handle(gateway: Arc<Gateway>, protocol: Protocol, request: axum::extract::Request) -> Response<Body> {
    let (mut parts, body) = request.into_parts();
    let trace = Trace::from_headers(&parts.headers);
    let envelope = if protocol == Protocol::AnthropicMessages { Envelope::Anthropic } else { Envelope::OpenAi };
    let authenticated = match parts.extensions.remove::<Authenticated>() {
        Some(authenticated) => authenticated,
        None => Authenticated::of(gateway, &parts.headers),
    };
    let gateway = &authenticated.gateway;
    let early = parts.extensions.get::<Early>();
    let served = match authenticated.caller() {
        Ok(caller) => match read_body(body, gateway.max_body_bytes).await {
            Ok(bytes) => {
                let bytes = named_by_path(parts.extensions.get::<ModelFromPath>(), bytes);
                forward(gateway, caller, protocol, &parts.headers, &bytes, &trace, early).await
            }
            Err(error) => Served::refused(error),
        },
        Err(error) => Served::refused(error),
    };
    let access = served.access.unwrap_or_else(|| {
        let caller = authenticated.caller().ok();
        Line::new(gateway, &trace, caller)
    });
    let route = parts.extensions.get::<axum::extract::MatchedPath>().map_or(parts.uri.path(), |m| m.as_str());
    access.request(parts.method.as_str(), route);
    finished(&access, &served.result);
    let mut response = match served.result {
        Ok(response) => response,
        Err(error) => ErrorResponse { error, envelope, trace_id: trace.id.clone() }.into_response(),
    };
    trace::stamp(response.headers_mut(), &trace.id);
    count(gateway, served.deployment, response.status());
    response
}

/// The request path after authentication: accept, then attempts (admission, upstream
/// call, retries, fallbacks). Async jobs run through here too, with the job's caller and
/// stored body. `early` learns of each reservation made (a client's rate-limit headers;
/// jobs have none). The result comes back with the deployment last tried.
pub async fn forward(
    gateway: &Gateway,
    caller: &Caller,
    protocol: Protocol,
    headers: &HeaderMap,
    bytes: &[u8],
    trace: &Trace,
    early: Option<&Early>,
) -> Served {
    let access = Line::new(gateway, trace, Some(caller));
    // What an async job's line says; a request over HTTP names its own (in `handle`).
    access.request("POST", endpoint_path(protocol));
    access.operation(match protocol {
        Protocol::OpenAiEmbeddings => "embeddings",
        Protocol::OpenAiCompletions => "text_completion",
        _ => "chat",
    });
    let accepted = match accept::accept(gateway, caller, protocol, headers, bytes, &access).await {
        Ok(accepted) => accepted,
        Err(error) => return Served::refused(error).logged(access),
    };
    let Accepted { request, profile, task, deadline, client_deadline, hidden_context, continues_on } = accepted;
    let attempt = Request {
        gateway,
        caller,
        request: &request,
        profile,
        task: task.as_deref(),
        headers,
        trace,
        early,
        access: &access,
        hidden_context,
        continues_on,
        deadline,
        client_deadline,
        queued: Mutex::new(None),
    };
    once_only(&attempt, protocol).await.unwrap_or_else(Served::refused).logged(Arc::clone(&access))
}

/// The attempts of `req`, at most once per idempotency key: a repeat gets the stored
/// answer (a replay, no deployment tried).
///
/// # Errors
/// A malformed key, a key in use by a different request or still in flight.
async fn once_only(req: &Request<'_>, protocol: Protocol) -> Result<Served, GatewayError> {
    match accept::once(req, protocol).await? {
        Once::Unkeyed => Ok(run(req).await),
        Once::Replay(served) => Ok(served),
        Once::Keyed(op, fingerprint) => {
            let served = run(req).await;
            let result =
                accept::record(&req.gateway.services.oplog, &op, &fingerprint, req.request.stream, served.result).await;
            Ok(Served { result, ..served })
        }
    }
}

/// Runs the request to a response: primary, retries, fallbacks, degradation, as its
/// routing [`Plan`] decides. Nothing is retried once response bytes went to the client; a
/// non-stream answer cut or stalled after its headers is (none of it reached the client).
/// Every attempt is bounded: headers and a non-stream body by `attempt_timeout`, a
/// stream's gaps by its idle timeout. The result is the last failure when every allowed
/// attempt failed, or the admission refusal.
async fn run(req: &Request<'_>) -> Served {
    let gateway = req.gateway;
    let class = &req.caller.class;
    let started = gateway.services.clock.now();
    let deadline = req.deadline.since(started);
    let limits = RetryLimits { attempts: class.retry_attempts, within: class.retry_within, deadline };
    let degradable = plan::degradable(req.profile, req.caller.class_index, req.task);
    let mut plan = Plan::new(req.profile, limits, degradable);
    let mut deployment = None;
    gateway.deployments[plan.target()].retry_budget.deposit();
    loop {
        let candidates = plan.candidates();
        let target = &gateway.deployments[plan.target()];
        let outcome = if plan.skips_primary(target.breaker.is_open(gateway.services.clock.now())) {
            Attempt::Refused(unavailable(target, gateway))
        } else {
            let (placed, outcome) = once(req, &candidates, plan.mode()).await;
            plan.placed(placed);
            deployment = Some(placed);
            outcome
        };
        let route = &gateway.deployments[plan.target()];
        let (class, error) = match outcome {
            Attempt::Done(mut response) => {
                if let Some(reason) = plan.rerouted() {
                    let from = &gateway.deployments[req.profile.deployment].counters.labels;
                    gateway.services.metrics.fallback(from, &route.counters.labels, reason);
                }
                if let Some(queued) = req.queued() {
                    let ms = |d: Duration| http::HeaderValue::from(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                    response.headers_mut().insert(QUEUED_MS, ms(queued.waited));
                    response.headers_mut().insert(PREDICTED_MS, ms(queued.predicted));
                }
                return Served { deployment, result: Ok(response), access: None };
            }
            Attempt::Refused(error) => (None, error),
            Attempt::Failed { class, error } => (Some(class), error),
        };
        let elapsed = gateway.services.clock.now().since(started);
        // Decided before any wait: the random source is not held across it.
        let next = plan.next(class, &error, elapsed, &mut rand::rng(), || route.retry_budget.withdraw());
        match next {
            Next::Retry { wait, class } => {
                gateway.services.metrics.retry(&route.counters.labels, class.as_str());
                gateway.services.clock.sleep(wait).await;
            }
            Next::Fallback => gateway.deployments[plan.target()].retry_budget.deposit(),
            Next::Degrade | Next::Replace => {}
            Next::GiveUp => return Served { deployment, result: Err(error), access: None },
        }
    }
}

/// The refusal of a deployment whose breaker is open.
fn unavailable(route: &Route, gateway: &Gateway) -> GatewayError {
    let retry_after = route.breaker.remaining(gateway.services.clock.now());
    GatewayError::ProviderUnavailable { deployment: route.name.to_string(), retry_after }
}

/// One attempt on `candidates` (one deployment, or the pool's members it may be placed
/// on): admitted, its settlement opened, sent, its answer read. Comes back with the
/// deployment it went to (the first candidate when none admitted it).
async fn once(req: &Request<'_>, candidates: &Candidates, mode: Mode) -> (usize, Attempt) {
    let gateway = req.gateway;
    let first = match candidates {
        Candidates::One(deployment) => *deployment,
        Candidates::Pool(members) => members.first().copied().unwrap_or(req.profile.deployment),
    };
    req.access.attempt(&gateway.deployments[first]);
    let admitted = match (candidates, &req.profile.pool) {
        (Candidates::Pool(members), Some(pool)) => admit::admit_pooled(req, pool, members, mode).await,
        _ => admit::admit(req, first, mode).await,
    };
    let Admitted { terms, after, granted, deployment } = match admitted {
        Ok(admitted) => admitted,
        Err(error) => return (first, Attempt::Refused(error)),
    };
    (deployment, sent(req, deployment, (terms, after, granted)).await)
}

/// The admitted attempt on `deployment`: its settlement opened, sent, its answer read.
async fn sent(req: &Request<'_>, deployment: usize, admitted: (Terms, Vec<ScopeSnapshot>, Nanos)) -> Attempt {
    let (terms, after, granted) = admitted;
    let gateway = req.gateway;
    let route = &gateway.deployments[deployment];
    let request = req.request;
    if let Some(early) = req.early {
        early.admitted(after);
    }
    let crossing = Crossing::of(request.protocol, &route.target);
    let upstream_protocol = crossing.upstream(request.protocol);
    let force_usage = request.stream && upstream_protocol.is_openai_chunks() && !request.client_wants_stream_usage;
    let guard = SettleGuard::new(
        Arc::clone(&gateway.services.store),
        terms.id,
        terms.sent_unanswered(),
        route.counters.used.clone(),
        Arc::clone(&route.queue),
        gateway.services.background.clone(),
    )
    .reporting_to(Arc::clone(req.access))
    .reserving(route.counters.reserved.clone(), terms.input.saturating_add(terms.output))
    .counting_unanswered(terms.unanswered_usage());
    let outgoing = match send::prepare(req, route, crossing, force_usage).await {
        Ok(outgoing) => outgoing,
        Err(end) => {
            // Never reached the provider: everything comes back.
            guard.settle(Settlement::default());
            return end;
        }
    };
    req.access.sending(route);
    let sent_at = gateway.services.clock.now();
    let upstream = terms.sent_unanswered().upstream;
    let Sent { response, deadline } = send::send(gateway, route, outgoing, (upstream, granted)).await;
    let took = gateway.services.clock.now().since(sent_at);
    req.access.answered(took);
    if response.is_ok() {
        route.latency.observe(took);
    }
    answer::answer(req, route, (terms, guard), crossing, (response, deadline), force_usage).await
}
