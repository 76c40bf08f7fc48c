//! A request's spans, as its access-log line saw them: the steps are recorded with their
//! times on the gateway's clock and turned into OpenTelemetry spans when the line is let
//! go (see [`crate::telemetry`]). Wall-clock times are the line's start (read once from
//! the clock's Unix time) plus monotonic offsets, so a clock step does not bend a span.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use sluice_quota::Nanos;

use crate::trace::Trace;

/// One step of a request: a span within its `request` span.
#[derive(Debug, Clone)]
pub struct Step {
    /// `admission`, `queue_wait`, `upstream_attempt` or `settlement`.
    pub name: &'static str,
    /// When it began, on the gateway's clock.
    pub start: Nanos,
    /// When it ended; `None` while open (closed at the request's end).
    pub end: Option<Nanos>,
    /// What it is about (deployment, tokens): names from the config and numbers only.
    pub attributes: Vec<KeyValue>,
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

    /// The `request` span (ended at `end`, with `status`) and one span per step under it.
    #[must_use]
    pub fn spans(&self, steps: &[Step], end: Nanos, status: u16) -> Vec<SpanData> {
        let parent = self.trace.parent.map_or(SpanId::INVALID, SpanId::from);
        let mut root = self.span("request", self.trace.span, parent, (self.started, end));
        root.span_kind = SpanKind::Server;
        root.parent_span_is_remote = self.trace.parent.is_some();
        root.attributes.push(KeyValue::new("http.response.status_code", i64::from(status)));
        if status >= 500 {
            root.status = Status::error("");
        }
        let mut spans = vec![root];
        for step in steps {
            let mut span = self.span(
                step.name,
                rand::random(),
                SpanId::from(self.trace.span),
                (step.start, step.end.unwrap_or(end)),
            );
            span.attributes.clone_from(&step.attributes);
            spans.push(span);
        }
        spans
    }

    fn span(&self, name: &'static str, id: u64, parent: SpanId, (start, end): (Nanos, Nanos)) -> SpanData {
        SpanData {
            span_context: self.context(id),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed(name),
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
