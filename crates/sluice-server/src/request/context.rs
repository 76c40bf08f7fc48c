//! The context every step of a request's road reads: who asks, what, for which profile,
//! and what of the client's request travels on. It imports nothing of the road.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::http::HeaderMap;
use sluice_provider::ParsedRequest;
use sluice_quota::Nanos;

use crate::access::Line;
use crate::ratelimit_headers::Early;
use crate::state::{Caller, Gateway, Profile};
use crate::trace::Trace;

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
    /// The context remembered of the response this one continues (`previous_response_id`);
    /// `None` when it continues none or one sluice does not know.
    pub hidden_context: Option<u64>,
    /// When every wait of the request ends, by the gateway's clock: its arrival plus its
    /// class's `max_wait`, or the client's own deadline when that is sooner. Queues on the
    /// primary and on fallbacks, and retries waiting for capacity, share it.
    pub deadline: Nanos,
    /// Whether the client stated its deadline (then a wait predicted to outlast it is
    /// refused at once: the client would be gone).
    pub client_deadline: bool,
    /// The time the request spent in queues so far, over all its attempts; `None` while it
    /// has not queued (its response's `x-sluice-queued-ms`).
    pub queued: Mutex<Option<Duration>>,
}

impl Request<'_> {
    /// Counts `waited` in a queue.
    pub fn waited(&self, waited: Duration) {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        *queued = Some(queued.unwrap_or_default().saturating_add(waited));
    }

    /// The time spent in queues, if the request queued at all.
    pub fn queued(&self) -> Option<Duration> {
        *self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
