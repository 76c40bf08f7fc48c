//! The context every step of a request's road reads: who asks, what, for which profile,
//! and what of the client's request travels on. It imports nothing of the road.

use std::sync::Arc;

use axum::http::HeaderMap;
use sluice_provider::ParsedRequest;

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
}
