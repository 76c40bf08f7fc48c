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
    /// The context remembered of the response this one continues (`previous_response_id`,
    /// the caller's tenant's own: checked before any attempt); `None` when it continues
    /// none, or a response whose usage is not known yet, or a conversation.
    pub hidden_context: Option<u64>,
    /// When every wait of the request ends, by the gateway's clock: its arrival plus its
    /// class's `max_wait`, or the client's own deadline when that is sooner. Queues on the
    /// primary and on fallbacks, and retries waiting for capacity, share it.
    pub deadline: Nanos,
    /// Whether the client stated its deadline (then a wait predicted to outlast it is
    /// refused at once: the client would be gone).
    pub client_deadline: bool,
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
