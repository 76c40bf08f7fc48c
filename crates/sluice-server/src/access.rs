//! The access log: one line per proxied request, at info level on the target
//! `sluice::access` (a JSON object under `--log-json`), so a trace id a user reports can be
//! found. The steps of the request's road fill one [`Line`]; it is written when its last
//! holder lets go — the handler for a buffered answer, the settle guard once a stream ends —
//! so each request is written exactly once. Identifiers, decisions, times and token
//! counts only: never a key, a prompt or a provider's text.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_quota::{Clock, Nanos};

use std::borrow::Cow;

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

use crate::spans::{Anchor, Step, Summary};
use crate::state::{Caller, Gateway, Route as Deployment};
use crate::telemetry::Spans;
use crate::timing::Timing;
use crate::trace::Trace;
use sluice_adapt::labels::{Route, TenantTokens};
use sluice_jobs::usage::UsageCounts;

/// The target the lines are logged on (`SLUICE_LOG=sluice::access=off` silences them).
pub const TARGET: &str = "sluice::access";

/// One request's access-log line, filled as the request goes.
#[derive(Debug)]
pub struct Line {
    clock: Arc<dyn Clock>,
    started: Nanos,
    settings: sluice_config::AccessLog,
    fields: Mutex<Fields>,
    /// Where the request's spans go, when traces are exported.
    spans: Option<(Spans, Anchor)>,
    /// The latency histograms and in-flight gauges this line feeds.
    timing: Timing,
}

/// What the line says.
#[derive(Debug, Default)]
struct Fields {
    trace_id: String,
    /// The HTTP method and the route it matched (its template: `/v1/chat/completions`,
    /// `/openai/deployments/{deployment}/chat/completions`).
    method: String,
    route: Arc<str>,
    tenant: Option<Arc<str>>,
    team: Option<Arc<str>>,
    key_id: Option<Arc<str>>,
    class: Option<Arc<str>>,
    profile: Option<Arc<str>>,
    deployments: Vec<Arc<str>>,
    /// The provider of the last deployment tried.
    provider: Option<Arc<str>>,
    status: u16,
    decision: &'static str,
    limiter: Option<String>,
    /// The binding scope's kind, name and dimension of a refused or queued request.
    scope_kind: &'static str,
    scope: Option<Arc<str>>,
    dimension: &'static str,
    queue_wait_ms: u64,
    upstream_ms: Option<u64>,
    ttft_ms: Option<u64>,
    tokens_estimated: u64,
    tokens_used: Option<u64>,
    /// The settled usage as `/admin/usage` counts it: input (cached included), its cached
    /// part, output, and the cost in `currency`.
    usage: Option<UsageCounts>,
    currency: Arc<str>,
    /// The GenAI operation (`chat`, `embeddings`, `text_completion`).
    operation: &'static str,
    /// The convention name of the last deployment's provider and that deployment's model.
    answered_by: Option<(&'static str, Arc<str>)>,
    /// How a stream ended: `completed`, `client_cut`, `provider_cut`, `provider_stalled`,
    /// `shutdown`; empty for an answer that was not streamed.
    stream: &'static str,
    /// Why the model stopped, as the client was told (`stop`, `length`, `tool_calls`,
    /// `end_turn`, ...; one per choice).
    finish_reasons: Vec<String>,
    /// Where the settled figures came from: `reported`, `counted` or `estimated`.
    usage_source: &'static str,
    retries: u32,
    /// Why a pool's request went to its member (`headroom`, `affinity`, `spill`, ...;
    /// empty outside pools).
    placement: &'static str,
    /// The steps, for the trace (empty when traces are not exported).
    steps: Vec<Step>,
}

impl Line {
    /// A line for the request with `trace` on `gateway`, from `caller` when it was
    /// authenticated; its spans go where the gateway exports traces.
    #[must_use]
    pub fn new(gateway: &Gateway, trace: &Trace, caller: Option<&Caller>) -> Arc<Self> {
        let clock = Arc::clone(&gateway.services.clock);
        let started = clock.now();
        let anchor = || Anchor { trace: trace.clone(), started, unix_millis: clock.unix_millis() };
        let spans = gateway.services.spans.get().map(|spans| (spans.clone(), anchor()));
        let fields = Fields {
            trace_id: trace.id.clone(),
            tenant: caller.map(|c| Arc::clone(&c.tenant)),
            team: caller.and_then(|c| c.team.clone()),
            key_id: caller.map(|c| Arc::clone(&c.key_id)),
            class: caller.map(|c| Arc::clone(&c.class.name)),
            currency: Arc::clone(&gateway.currency),
            decision: "none",
            ..Fields::default()
        };
        let timing = gateway.services.metrics.timing.clone();
        timing.in_flight.inc();
        Arc::new(Self { started, clock, settings: gateway.access_log, fields: Mutex::new(fields), spans, timing })
    }

    /// The `deployment` and `class` labels: the last deployment tried and the caller's class.
    fn route(f: &Fields) -> Route {
        static NONE: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from("none"));
        let name = |v: Option<&Arc<str>>| Arc::clone(v.unwrap_or(&NONE));
        Route { deployment: name(f.deployments.last()), class: name(f.class.as_ref()) }
    }

    /// Records a step for the trace, when traces are exported (its attributes are made
    /// only then).
    fn step(
        &self,
        f: &mut Fields,
        name: &'static str,
        start: Nanos,
        attributes: impl FnOnce() -> Vec<opentelemetry::KeyValue>,
    ) {
        if self.spans.is_some() {
            let end = Some(self.clock.now());
            let (name, kind) = (Cow::Borrowed(name), SpanKind::Internal);
            f.steps.push(Step { name, kind, start, end, attributes: attributes() });
        }
    }

    /// When the last provider call began (the line's start before any).
    fn attempt_started(f: &Fields, or: Nanos) -> Nanos {
        f.steps.iter().rev().find(|s| s.kind == SpanKind::Client).map_or(or, |s| s.start)
    }

    /// The model profile the request named.
    pub fn profile(&self, name: &Arc<str>) {
        self.fields.lock().profile = Some(Arc::clone(name));
    }

    /// The request's HTTP `method` and the `route` (template) it matched.
    pub fn request(&self, method: &str, route: &str) {
        let mut f = self.fields.lock();
        method.clone_into(&mut f.method);
        if f.route.as_ref() != route {
            f.route = Arc::from(route);
        }
    }

    /// The GenAI `operation` the request asks for (`chat`, `embeddings`,
    /// `text_completion`).
    pub fn operation(&self, operation: &'static str) {
        self.fields.lock().operation = operation;
    }

    /// An attempt on `deployment` begins; every one after the first is a retry or fallback.
    pub fn attempt(&self, deployment: &Deployment) {
        let mut f = self.fields.lock();
        if !f.deployments.is_empty() {
            f.retries = f.retries.saturating_add(1);
        }
        f.provider = Some(Arc::clone(&deployment.provider));
        f.deployments.push(Arc::clone(&deployment.name));
        let now = self.clock.now();
        if let Some(open) = f.steps.iter_mut().rev().find(|s| s.kind == SpanKind::Client && s.end.is_none()) {
            open.end = Some(now);
        }
    }

    /// The attempt's request goes to `deployment`'s provider now: a client span, open until
    /// the next attempt or the request's end. An attempt refused before it was sent has
    /// none.
    pub fn sending(&self, deployment: &Deployment) {
        // What it says is for the trace only: nothing to do when traces are not exported.
        if self.spans.is_none() {
            return;
        }
        let mut f = self.fields.lock();
        let target = &deployment.target;
        let provider = crate::spans::provider_name(target.kind, &target.api);
        f.answered_by = Some((provider, Arc::from(target.model.as_str())));
        let operation = if f.operation.is_empty() { "chat" } else { f.operation };
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", operation),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new("gen_ai.request.model", target.model.clone()),
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("sluice.deployment", deployment.name.to_string()),
        ];
        if let Some((host, port)) = crate::spans::server_of(&target.base_url) {
            attributes.push(KeyValue::new("server.address", host));
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        let name = Cow::Owned(format!("{operation} {}", target.model));
        f.steps.push(Step { name, kind: SpanKind::Client, start: self.clock.now(), end: None, attributes });
    }

    /// The attempt's pool placed it on `deployment` (named in place of the pool's first
    /// candidate the attempt began with), for `reason`.
    pub fn placed(&self, deployment: &Deployment, reason: &'static str) {
        let mut f = self.fields.lock();
        if let Some(last) = f.deployments.last_mut() {
            *last = Arc::clone(&deployment.name);
        }
        f.provider = Some(Arc::clone(&deployment.provider));
        f.placement = reason;
    }

    /// Waited `waited` in a deployment's queue, admitted (`admitted`) or not: the wait
    /// counts either way; only an admission makes the request `queued`.
    pub fn waited(&self, waited: Duration, admitted: bool) {
        let mut f = self.fields.lock();
        if admitted {
            f.decision = "queued";
        }
        f.queue_wait_ms = f.queue_wait_ms.saturating_add(millis(waited));
        let start = Nanos(self.clock.now().0.saturating_sub(u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX)));
        self.step(&mut f, "queue_wait", start, Vec::new);
    }

    /// The scope (`kind`, `name`) and `dimension` that bound the request: what refused it,
    /// or what it waited for (the latest attempt's wins); `none` and no name when no limit
    /// refusal is on record.
    pub fn bound(&self, kind: &'static str, name: Option<&Arc<str>>, dimension: &'static str) {
        let mut f = self.fields.lock();
        (f.scope_kind, f.dimension) = (kind, dimension);
        f.scope = name.cloned();
    }

    /// Priced at `tokens` (input estimate and output reservation), admitted or not.
    pub fn estimated(&self, tokens: u64) {
        self.fields.lock().tokens_estimated = tokens;
    }

    /// Admitted (at once, or out of the queue), reserving `tokens`.
    pub fn admitted(&self, tokens: u64) {
        let mut f = self.fields.lock();
        if f.decision != "queued" {
            f.decision = "admitted";
        }
        f.tokens_estimated = tokens;
        let start = Self::attempt_started(&f, self.started);
        let reserved =
            || vec![opentelemetry::KeyValue::new("sluice.tokens_reserved", i64::try_from(tokens).unwrap_or(i64::MAX))];
        self.step(&mut f, "admission", start, reserved);
    }

    /// The provider's response headers came after `latency`.
    pub fn answered(&self, latency: Duration) {
        let mut f = self.fields.lock();
        f.upstream_ms = Some(millis(latency));
        Timing::observe(&self.timing.upstream, &Self::route(&f), latency);
    }

    /// A stream's first piece went to the client (kept once: the time to first token).
    pub fn first_piece(&self) {
        let mut f = self.fields.lock();
        if f.ttft_ms.is_none() {
            let ttft = self.clock.now().since(self.started);
            f.ttft_ms = Some(millis(ttft));
            Timing::observe(&self.timing.ttft, &Self::route(&f), ttft);
            self.timing.streams_open.inc();
        }
    }

    /// The settled figures came from `source` (`reported`, `counted`, `estimated`: the
    /// last settlement's, after retries).
    pub fn usage_source(&self, source: &'static str) {
        self.fields.lock().usage_source = source;
    }

    /// A reservation was settled with `input` and `output` tokens used.
    pub fn used(&self, input: u64, output: u64) {
        let tokens = input.saturating_add(output);
        let mut f = self.fields.lock();
        if let Some(tenant) = &f.tenant {
            for (direction, n) in [("input", input), ("output", output)] {
                let labels = TenantTokens { tenant: Arc::clone(tenant), direction };
                self.timing.tokens.get_or_create(&labels).inc_by(n);
            }
        }
        f.tokens_used = Some(f.tokens_used.unwrap_or(0).saturating_add(tokens));
        let used =
            || vec![opentelemetry::KeyValue::new("sluice.tokens_used", i64::try_from(tokens).unwrap_or(i64::MAX))];
        self.step(&mut f, "settlement", self.clock.now(), used);
    }

    /// The settled usage, as the usage rollups count it (the last settlement's, after
    /// retries).
    pub fn usage(&self, counts: &UsageCounts) {
        self.fields.lock().usage = Some(*counts);
    }

    /// Why the model stopped, as the answer the client got says.
    pub fn finish_reasons(&self, reasons: &[String]) {
        if !reasons.is_empty() {
            reasons.clone_into(&mut self.fields.lock().finish_reasons);
        }
    }

    /// The stream ended `how` (`completed`, `client_cut`, `provider_cut`,
    /// `provider_stalled`, `shutdown`); the first report stands.
    pub fn stream_ended(&self, how: &'static str) {
        let mut f = self.fields.lock();
        if f.stream.is_empty() {
            f.stream = how;
        }
    }

    /// The status the client got, and the refusing limiter when it was a rate limit.
    pub fn finished(&self, status: u16, refusal: Option<(&'static str, &str)>) {
        let mut f = self.fields.lock();
        f.status = status;
        if let Some((decision, limiter)) = refusal {
            f.decision = decision;
            f.limiter = Some(limiter.to_owned());
        }
    }

    /// Whether this line is written: refusals and errors always, successes when the access
    /// log is on and the sample draws them.
    fn sampled(&self, status: u16) -> bool {
        if status >= 400 || status == 0 {
            return true;
        }
        let sample = self.settings.sample;
        self.settings.enabled && (sample >= 1.0 || rand::random::<f64>() < sample)
    }
}

/// A field's text, or empty: borrowed, so writing the line allocates no copies.
fn text(v: &Option<Arc<str>>) -> &str {
    v.as_deref().unwrap_or("")
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Drop for Line {
    fn drop(&mut self) {
        let f = self.fields.get_mut();
        Timing::observe(&self.timing.request, &Self::route(f), self.clock.now().since(self.started));
        self.timing.in_flight.dec();
        if f.ttft_ms.is_some() {
            self.timing.streams_open.dec();
        }
        if let Some((spans, anchor)) = &self.spans {
            let f = self.fields.get_mut();
            let refused = f.status >= 400 && f.decision != "admitted" && f.decision != "queued";
            let summary = Summary {
                method: &f.method,
                route: &f.route,
                status: f.status,
                operation: f.operation,
                request_model: text(&f.profile),
                answered_by: f.answered_by.as_ref().map(|(p, m)| (*p, m.as_ref())),
                usage: f.usage.map(|u| (u.input_tokens, u.cached_input_tokens, u.output_tokens)),
                finish_reasons: &f.finish_reasons,
                refusal: refused.then(|| {
                    let limiter = f.limiter.as_deref().unwrap_or("");
                    [f.decision, limiter, f.scope_kind, text(&f.scope), f.dimension]
                }),
            };
            for span in anchor.spans(&f.steps, self.clock.now(), &summary) {
                spans.send(span);
            }
        }
        // Filtered out (`sluice::access=off`): nothing to format.
        if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            return;
        }
        let total_ms = millis(self.clock.now().since(self.started));
        let status = self.fields.get_mut().status;
        if !self.sampled(status) {
            return;
        }
        let f = self.fields.get_mut();
        let deployments = f.deployments.join(",");
        let usage = f.usage.as_ref();
        let cost = usage.filter(|u| u.cost_nanos > 0).map(|u| u.cost_nanos as f64 / 1e9);
        tracing::info!(
            target: TARGET,
            trace_id = %f.trace_id,
            method = %f.method,
            route = %f.route,
            tenant = %text(&f.tenant),
            team = %text(&f.team),
            key_id = %text(&f.key_id),
            class = %text(&f.class),
            model_profile = %text(&f.profile),
            deployments = %deployments,
            provider = %text(&f.provider),
            status = f.status,
            decision = f.decision,
            limiter = f.limiter.as_deref().unwrap_or(""),
            scope_kind = f.scope_kind,
            scope = %text(&f.scope),
            dimension = f.dimension,
            queue_wait_ms = f.queue_wait_ms,
            upstream_ms = f.upstream_ms,
            ttft_ms = f.ttft_ms,
            tokens_estimated = f.tokens_estimated,
            tokens_used = f.tokens_used,
            input_tokens = usage.map(|u| u.input_tokens),
            cached_tokens = usage.map(|u| u.cached_input_tokens),
            output_tokens = usage.map(|u| u.output_tokens),
            cost,
            currency = %cost.map_or("", |_| f.currency.as_ref()),
            stream = f.stream,
            finish_reasons = %f.finish_reasons.join(","),
            usage_source = f.usage_source,
            retries = f.retries,
            placement = f.placement,
            total_ms,
            "request"
        );
    }
}

/// The line of a request beside the proxied road (a stored response's calls, a passthrough
/// endpoint): its method and route, its caller when the key is good; the road's steps add
/// nothing to it.
#[must_use]
pub fn beside_the_road(gateway: &Gateway, trace: &Trace, request: &axum::extract::Request) -> Arc<Line> {
    let caller = crate::auth::authenticate(gateway, request.headers()).ok();
    let line = Line::new(gateway, trace, caller.as_ref());
    let route = request.extensions().get::<axum::extract::MatchedPath>();
    line.request(request.method().as_str(), route.map_or(request.uri().path(), |m| m.as_str()));
    line
}
