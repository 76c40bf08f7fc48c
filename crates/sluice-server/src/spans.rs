//! A request's spans, as its access-log line saw them: the steps are recorded with their
//! times on the gateway's clock and turned into OpenTelemetry spans when the line is let
//! go (see [`crate::telemetry`]). Wall-clock times are the line's start (read once from
//! the clock's Unix time) plus monotonic offsets, so a clock step does not bend a span.
//!
//! They follow OpenTelemetry's semantic conventions: the request's span is an HTTP server
//! span named `{method} {route}` (`http.request.method`, `http.route`,
//! `http.response.status_code`, an error status from 500 on) carrying the GenAI attributes
//! of what it asked and used (`gen_ai.operation.name`, `gen_ai.provider.name`,
//! `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.usage.*`,
//! `gen_ai.response.finish_reasons` as the client was told them); each call to a
//! provider is a GenAI client span named `{operation} {model}` with the provider's
//! `server.address` and `server.port`. A request admission refused gets the event
//! `sluice.admission.refused` with its binding scope, and no client span: nothing was sent.
//! <https://opentelemetry.io/docs/specs/semconv/http/http-spans/>,
//! <https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/>.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use sluice_quota::Nanos;

use crate::trace::Trace;

/// One step of a request: a span within its request's span.
#[derive(Debug, Clone)]
pub struct Step {
    /// `admission`, `queue_wait`, `settlement`, or a provider call's `{operation} {model}`.
    pub name: Cow<'static, str>,
    /// `Client` for a call to a provider, `Internal` for the gateway's own steps.
    pub kind: SpanKind,
    /// When it began, on the gateway's clock.
    pub start: Nanos,
    /// When it ended; `None` while open (closed at the request's end).
    pub end: Option<Nanos>,
    /// What it is about (deployment, tokens): names from the config and numbers only.
    pub attributes: Vec<KeyValue>,
}

/// What the request's own span says of it, from its access-log line.
#[derive(Debug, Default)]
pub struct Summary<'a> {
    /// The HTTP method and the route template it matched.
    pub method: &'a str,
    /// The route template (`/v1/chat/completions`).
    pub route: &'a str,
    /// The status the client got.
    pub status: u16,
    /// `chat`, `embeddings` or `text_completion`; empty when the request never got as far.
    pub operation: &'static str,
    /// The model the client asked for (the profile's name).
    pub request_model: &'a str,
    /// The provider's convention name and the model of the deployment that answered.
    pub answered_by: Option<(&'static str, &'a str)>,
    /// Input (cached included), its cached part and output, as settled.
    pub usage: Option<(u64, u64, u64)>,
    /// Why the model stopped, one reason per choice, as the client was told.
    pub finish_reasons: &'a [String],
    /// A refusal's decision, limiter and binding scope (kind, name, dimension).
    pub refusal: Option<[&'a str; 5]>,
}

/// Where a request's spans are anchored: its trace, its start on the gateway's clock and
/// that start in Unix milliseconds.
#[derive(Debug, Clone)]
pub struct Anchor {
    /// The request's trace (its id, the gateway's span id, the client's parent).
    pub trace: Trace,
    /// The start on the gateway's clock.
    pub started: Nanos,
    /// The same instant in milliseconds since the Unix epoch.
    pub unix_millis: u64,
}

impl Anchor {
    fn wall(&self, at: Nanos) -> SystemTime {
        let offset = Duration::from_nanos(at.0.saturating_sub(self.started.0));
        SystemTime::UNIX_EPOCH + Duration::from_millis(self.unix_millis) + offset
    }

    fn context(&self, span: u64) -> SpanContext {
        let trace = TraceId::from_hex(&self.trace.id).unwrap_or(TraceId::INVALID);
        SpanContext::new(trace, SpanId::from(span), TraceFlags::SAMPLED, false, TraceState::NONE)
    }

    /// The request's span (ended at `end`, as `summary` says) and one span per step under
    /// it.
    #[must_use]
    pub fn spans(&self, steps: &[Step], end: Nanos, summary: &Summary<'_>) -> Vec<SpanData> {
        let parent = self.trace.parent.map_or(SpanId::INVALID, SpanId::from);
        let name = if summary.route.is_empty() {
            Cow::Borrowed("request")
        } else {
            Cow::Owned(format!("{} {}", summary.method, summary.route))
        };
        let mut root = self.span(name, self.trace.span, parent, (self.started, end));
        root.span_kind = SpanKind::Server;
        root.parent_span_is_remote = self.trace.parent.is_some();
        root.attributes = request_attributes(summary);
        if summary.status >= 500 {
            root.status = Status::error(format!("answered {}", summary.status));
        }
        if let Some([decision, limiter, kind, scope, dimension]) = summary.refusal {
            let attributes = [
                ("sluice.decision", decision),
                ("sluice.limiter", limiter),
                ("sluice.scope_kind", kind),
                ("sluice.scope", scope),
                ("sluice.dimension", dimension),
            ];
            let attributes = attributes
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| KeyValue::new(k, v.to_owned()))
                .chain([KeyValue::new("http.response.status_code", i64::from(summary.status))])
                .collect();
            root.events.events.push(opentelemetry::trace::Event::new(
                "sluice.admission.refused",
                self.wall(end),
                attributes,
                0,
            ));
        }
        let mut spans = vec![root];
        for step in steps {
            let mut span = self.span(
                step.name.clone(),
                rand::random(),
                SpanId::from(self.trace.span),
                (step.start, step.end.unwrap_or(end)),
            );
            span.span_kind = step.kind.clone();
            span.attributes.clone_from(&step.attributes);
            spans.push(span);
        }
        spans
    }

    fn span(&self, name: Cow<'static, str>, id: u64, parent: SpanId, (start, end): (Nanos, Nanos)) -> SpanData {
        SpanData {
            span_context: self.context(id),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name,
            start_time: self.wall(start),
            end_time: self.wall(end.max(start)),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder("sluice").build(),
        }
    }
}

/// The request span's attributes: HTTP server and GenAI conventions.
fn request_attributes(summary: &Summary<'_>) -> Vec<KeyValue> {
    let text = |k: &'static str, v: &str| (!v.is_empty()).then(|| KeyValue::new(k, v.to_owned()));
    let mut attributes: Vec<KeyValue> = [
        text("http.request.method", summary.method),
        text("http.route", summary.route),
        Some(KeyValue::new("http.response.status_code", i64::from(summary.status))),
        text("gen_ai.operation.name", summary.operation),
        text("gen_ai.request.model", summary.request_model),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some((provider, model)) = summary.answered_by {
        attributes.push(KeyValue::new("gen_ai.provider.name", provider));
        attributes.push(KeyValue::new("gen_ai.response.model", model.to_owned()));
    }
    if let Some((input, cached, output)) = summary.usage {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        attributes.push(KeyValue::new("gen_ai.usage.input_tokens", n(input)));
        attributes.push(KeyValue::new("gen_ai.usage.output_tokens", n(output)));
        attributes.push(KeyValue::new("gen_ai.usage.cache_read.input_tokens", n(cached)));
    }
    if !summary.finish_reasons.is_empty() {
        let reasons = summary.finish_reasons.iter().map(|r| opentelemetry::StringValue::from(r.clone())).collect();
        attributes.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(opentelemetry::Array::String(reasons)),
        ));
    }
    if summary.status >= 500 {
        attributes.push(KeyValue::new("error.type", summary.status.to_string()));
    }
    attributes
}

/// The `gen_ai.provider.name` of a provider reached through `api` speaking `kind`: the
/// conventions' well-known names (`ollama` is not one of them and stands for itself).
#[must_use]
pub fn provider_name(kind: sluice_config::ProviderKind, api: &sluice_config::ProviderApi) -> &'static str {
    use sluice_config::{ProviderApi, ProviderKind};
    match (api, kind) {
        (ProviderApi::Bedrock { .. }, _) => "aws.bedrock",
        (ProviderApi::Azure(_), _) => "azure.ai.openai",
        (ProviderApi::GeminiOpenAi | ProviderApi::GeminiNative, _) => "gcp.gemini",
        (ProviderApi::Vertex(_), _) => "gcp.vertex_ai",
        (ProviderApi::Plain, ProviderKind::Anthropic) => "anthropic",
        (ProviderApi::Plain, ProviderKind::Ollama) => "ollama",
        (ProviderApi::Plain, ProviderKind::OpenAi) => "openai",
    }
}

/// A provider's host and port, from its base URL (`server.address`, `server.port`).
#[must_use]
pub fn server_of(base_url: &str) -> Option<(String, u16)> {
    let uri = base_url.parse::<http::Uri>().ok()?;
    let default = if uri.scheme_str() == Some("http") { 80 } else { 443 };
    Some((uri.host()?.trim_matches(['[', ']']).to_owned(), uri.port_u16().unwrap_or(default)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_providers_address_comes_from_its_base_url() {
        assert_eq!(server_of("https://api.openai.com"), Some(("api.openai.com".into(), 443)));
        assert_eq!(server_of("http://127.0.0.1:8081/v1"), Some(("127.0.0.1".into(), 8081)));
        assert_eq!(server_of("http://[::1]:9000"), Some(("::1".into(), 9000)));
        assert_eq!(server_of("not a url"), None);
    }

    #[test]
    fn a_refusal_is_an_event_and_a_server_error_an_error_status() {
        let anchor = Anchor { trace: Trace::from_headers(&http::HeaderMap::new()), started: Nanos(0), unix_millis: 0 };
        let refused = Summary {
            method: "POST",
            route: "/v1/messages",
            status: 429,
            refusal: Some(["rejected_before_send", "rate_limit", "tenant", "acme", "requests"]),
            ..Summary::default()
        };
        let root = anchor.spans(&[], Nanos(1), &refused).remove(0);
        assert_eq!(root.name, "POST /v1/messages");
        assert_eq!(root.status, Status::Unset, "a 4xx is the client's");
        let event = &root.events.events[0];
        assert_eq!(event.name, "sluice.admission.refused");
        assert!(event.attributes.contains(&KeyValue::new("sluice.scope", "acme")));
        let failed = Summary { status: 502, ..Summary::default() };
        let root = anchor.spans(&[], Nanos(1), &failed).remove(0);
        assert!(matches!(root.status, Status::Error { .. }));
        assert!(root.events.events.is_empty());
        assert!(root.attributes.contains(&KeyValue::new("error.type", "502")));
    }
}
