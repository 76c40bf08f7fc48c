//! The context every step of a request's road reads — who asks, what, for which profile,
//! and what of the client's request travels on — and the plain values that pass between
//! steps through the driver: [`Mode`] (plan to admit), [`Quote`] and [`Terms`] (admit to
//! send, answer and settle), [`Attempt`] and [`Served`] (what an attempt and the request
//! came to), [`Streamed`] (answer to settle), and [`Settle`], the one thing the answer
//! step knows of settlement. It imports nothing of the road.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Response};
use prometheus_client::metrics::counter::Counter;
use sluice_adapt::Adaptive;
use sluice_config::{OutputCounting, ProviderKind};
use sluice_provider::{ErrorClass, ParsedRequest, Protocol, Usage};
use sluice_quota::{Cost, Nanos, ReservationId, Settlement};
use sluice_recall::remembered::Memo;

use crate::access::Line;
use crate::deadline::ClientDeadline;
use crate::error::{GatewayError, RateLimitInfo};
use crate::metrics::{Bound, Hit};
use crate::ratelimit_headers::Early;
use crate::state::{Caller, Gateway, Profile, Route};
use crate::trace::Trace;
use crate::usage::{UsageBook, UsageTag};

/// One request's context through its attempts.
pub struct Request<'a> {
    /// The gateway.
    pub gateway: &'a Gateway,
    /// Who asks.
    pub caller: &'a Caller,
    /// What.
    pub request: &'a ParsedRequest,
    /// For which profile.
    pub profile: &'a Profile,
    /// The task name (`x-sluice-task` or `metadata.task`), if any.
    pub task: Option<&'a str>,
    /// Client headers (Anthropic version and beta pass through).
    pub headers: &'a HeaderMap,
    /// The trace.
    pub trace: &'a Trace,
    /// The client's rate-limit headers, told of each reservation made.
    pub early: Option<&'a Early>,
    /// The request's access-log line, which every step adds to.
    pub access: &'a Arc<Line>,
    /// The context remembered of the response this one continues (`previous_response_id`,
    /// the caller's tenant's own: checked before any attempt); `None` when it continues
    /// none, or a response whose usage is not known yet, or a conversation.
    pub hidden_context: Option<u64>,
    /// The deployment that created the response this one continues: on a pool, the only
    /// member that holds its stored state.
    pub continues_on: Option<Arc<str>>,
    /// When every wait of the request ends, by the gateway's clock: its arrival plus its
    /// class's `max_wait`, or the client's own deadline when that is sooner. Queues on the
    /// primary and on fallbacks, and retries waiting for capacity, share it.
    pub deadline: Nanos,
    /// What the client said of its deadline: whether a wait predicted to outlast the
    /// request's deadline is refused at once ([`ClientDeadline`]).
    pub client_deadline: ClientDeadline,
    /// The time the request spent in queues so far, over all its attempts, and the waits
    /// predicted when it joined them; `None` while it has not queued (its response's
    /// `x-sluice-queued-ms` and `x-sluice-predicted-ms`).
    pub queued: Mutex<Option<Queued>>,
}

/// A request's time in queues, over all its attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Queued {
    /// How long it waited.
    pub waited: Duration,
    /// The waits its queues predicted when it joined them (each queue's ETA then).
    pub predicted: Duration,
}

impl Request<'_> {
    /// Counts `waited` in a queue that predicted `predicted` when the request joined it.
    pub fn waited(&self, waited: Duration, predicted: Duration) {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let before = queued.unwrap_or_default();
        *queued = Some(Queued {
            waited: before.waited.saturating_add(waited),
            predicted: before.predicted.saturating_add(predicted),
        });
    }

    /// The time spent in queues, if the request queued at all.
    pub fn queued(&self) -> Option<Queued> {
        *self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The endpoint of `protocol`: where clients send it and where it goes upstream.
#[must_use]
pub fn endpoint_path(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenAiChat => "/v1/chat/completions",
        Protocol::OpenAiResponses => "/v1/responses",
        Protocol::OpenAiEmbeddings => "/v1/embeddings",
        Protocol::OpenAiCompletions => "/v1/completions",
        Protocol::AnthropicMessages => "/v1/messages",
    }
}

/// What a request came to, and the deployment it was last admitted on (none when it was
/// refused before any deployment was tried): the request metrics' labels.
pub struct Served {
    /// The deployment of the last admission asked.
    pub deployment: Option<usize>,
    /// The response, or the failure the client gets.
    pub result: Result<Response<Body>, GatewayError>,
    /// The request's access-log line (none before the caller was known).
    pub access: Option<Arc<Line>>,
}

impl Served {
    /// A request refused before any deployment was tried.
    #[must_use]
    pub fn refused(error: GatewayError) -> Self {
        Self { deployment: None, result: Err(error), access: None }
    }

    /// With its access-log line.
    #[must_use]
    pub fn logged(self, access: Arc<Line>) -> Self {
        Self { access: Some(access), ..self }
    }
}

/// What one attempt came to.
pub enum Attempt {
    /// A response for the client (success, or a provider error not worth retrying).
    Done(Response<Body>),
    /// Not admitted.
    Refused(GatewayError),
    /// The upstream call failed; `error` is what the client gets if nothing else works.
    Failed {
        /// How the failure is classed (what the plan decides on).
        class: ErrorClass,
        /// What the client gets if nothing else works.
        error: GatewayError,
    },
}

/// Whether a request may wait in the deployment's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Up to its class's `max_wait`.
    Wait,
    /// Not at all: it has somewhere else to go (degradation).
    NoWait,
}

/// What a request costs on one deployment, as admission reserves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    /// Estimated input tokens (the deployment's tokenizer and cache estimator).
    pub input: u64,
    /// Reserved output tokens.
    pub output: u64,
    /// How many quota tokens each output token burns on the deployment (1 but on Bedrock's
    /// recent Claude models).
    pub output_weight: u64,
    /// What the input and output cost at the deployment's price, in micro-units (0 without
    /// one): what money budgets reserve.
    pub money: u64,
}

impl Quote {
    /// The quote as the cost reserved.
    #[must_use]
    pub fn cost(self) -> Cost {
        Cost::request(self.input, self.output).with_output_weight(self.output_weight).with_money(self.money)
    }
}

/// A reservation admission made, and the terms it is settled on (how, the settle step
/// says).
#[derive(Debug)]
pub struct Terms {
    /// The reservation.
    pub id: ReservationId,
    /// The client protocol.
    pub protocol: Protocol,
    /// Estimated input tokens.
    pub input: u64,
    /// Reserved output tokens.
    pub output: u64,
    /// Quota tokens each output token burns on the deployment (see [`Cost::with_output_weight`]).
    pub output_weight: u64,
    /// The deployment's adaptive state, taught the usage when it is known.
    pub adaptive: Arc<Adaptive>,
    /// The deployment's provider (how its usage reports input).
    pub kind: ProviderKind,
    /// How the deployment's provider counts output against its limits.
    pub output_counting: OutputCounting,
    /// Responses API: remembers what the answer leaves behind for continuations.
    pub memo: Option<Memo>,
    /// The deployment's prices and the tenant's spend counter, when priced.
    pub spend: Option<(sluice_config::Price, Counter<f64, std::sync::atomic::AtomicU64>)>,
    /// What admission reserved of money budgets, micro-units (the estimate's price).
    pub money: u64,
    /// The usage book the provider's usage is counted in, and under which group.
    pub usage: (Arc<UsageBook>, UsageTag),
}

/// What a stream showed by the time it was settled.
#[derive(Debug, Clone, Copy, Default)]
pub struct Streamed {
    /// The usage it carried, in the upstream's terms.
    pub usage: Option<Usage>,
    /// That usage is the provider's final count.
    pub usage_final: bool,
    /// Output tokens counted in what passed (see [`sluice_provider::DeliveredCount`]).
    pub counted: u64,
}

/// What settles an attempt's reservation, as the answer step sees it: the driver hands it
/// the settle step's guard, so the answer says what it saw and never how that is settled.
/// Each way of settling takes it by value (a reservation settles once); one dropped
/// unsettled settles on its fallback (the estimate stands).
pub trait Settle: Send + 'static {
    /// Settles now on `settlement` as given (its usage counted by whoever computed it).
    fn settle(self, settlement: Settlement);
    /// Settles a non-stream answer on the provider's reported `usage`, or, without one,
    /// on the estimate.
    fn answered(self, terms: &Terms, usage: Option<Usage>);
    /// Settles a stream on what it showed, however it ended.
    fn streamed(self, terms: &Terms, seen: Streamed);
    /// The request's access-log line the settlement reports to, if any.
    fn access(&self) -> Option<&Line>;
}

/// The refusal of a request the deployment's protocol cannot carry (translation failed).
pub fn untranslatable(route: &Route, e: &sluice_provider::TranslateError) -> GatewayError {
    let message = format!("this request cannot be served by deployment `{}`: {e}", route.name);
    let code = sluice_provider::RequestErrorCode::InvalidValue;
    GatewayError::BadRequest(sluice_provider::RequestError { param: e.field().map(str::to_owned), message, code })
}

/// What a rate-limit refusal of `caller`'s request on `route` names, refused before it
/// was sent by the deployment (its queue, or the provider); the refusing limiter, scope,
/// figures and wait are set by whoever refused.
pub fn refusal_info(caller: &Caller, profile: &Profile, route: &Route, quote: Quote) -> RateLimitInfo {
    RateLimitInfo {
        limiter: String::new(),
        scope: "deployment",
        scope_name: route.name.to_string(),
        dimension: crate::binding::NONE,
        binding: String::new(),
        provider: route.provider.to_string(),
        model_profile: profile.name.to_string(),
        provider_model: route.target.model.clone(),
        retry_after: None,
        tenant_id: caller.tenant.to_string(),
        api_key_id: caller.key_id.to_string(),
        request_class: caller.class.name.to_string(),
        estimated_input_tokens: quote.input,
        estimated_output_tokens: quote.output,
        gateway_decision: "rejected_before_send",
    }
}

/// `provider`, `model` labels of a route, for a rate-limit hit.
pub fn hit_labels(route: &Route) -> Hit {
    let labels = &route.counters.labels;
    let Bound { scope_kind, dimension } = Bound::NONE;
    Hit {
        provider: labels.provider.clone(),
        model: labels.model.clone(),
        limit_type: String::new(),
        scope_kind,
        dimension,
    }
}
