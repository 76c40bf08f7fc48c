//! Parsing and validation of client request bodies.
//!
//! The body is parsed once into a JSON object and kept: validation reads it, estimation
//! walks it, and [`upstream_body`](crate::upstream_body) re-serializes it with the model
//! swapped. Unknown fields are kept untouched, since providers add fields all the time.

mod anthropic;
mod fields;
mod openai;
mod responses;

use serde_json::{Map, Value};

use crate::error::{RequestError, RequestErrorCode};
use crate::protocol::Protocol;

/// Deepest JSON nesting accepted. Real requests stay far below (a tool schema rarely passes
/// 10 levels); serde_json itself stops at 128, which is reported as invalid JSON.
pub const MAX_NESTING_DEPTH: usize = 64;

/// A validated client request, body kept as a JSON object for cheap rewriting.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRequest {
    /// The API shape the body follows.
    pub protocol: Protocol,
    /// The `model` the client asked for (a model profile name, resolved by the gateway).
    pub model: String,
    /// `stream: true` was set.
    pub stream: bool,
    /// `max_completion_tokens`, else `max_tokens` (OpenAI chat); `max_output_tokens`
    /// (OpenAI Responses); `max_tokens` (Anthropic, where it is required). `None` if
    /// absent, and always for embeddings.
    pub max_output_tokens: Option<u64>,
    /// OpenAI: `stream_options.include_usage` was set true by the client.
    pub client_wants_stream_usage: bool,
    /// `n` choices (OpenAI), default 1: the output reservation multiplies by it.
    pub choices: u32,
    /// The whole body as received, unknown fields included.
    pub body: Map<String, Value>,
}

/// The admission-relevant facts a protocol validator extracts.
pub(crate) struct Shape {
    pub(crate) stream: bool,
    pub(crate) max_output_tokens: Option<u64>,
    pub(crate) client_wants_stream_usage: bool,
    pub(crate) choices: u32,
}

/// Parses and validates a client request body.
///
/// Checks only what the gateway relies on or what is cheap to catch before spending quota:
/// JSON object, `model`, the message/input structure, `max_tokens`/`max_completion_tokens`,
/// `stream`, `n`, `stream_options`, `system`; nesting at most [`MAX_NESTING_DEPTH`].
/// Anything else is left for the provider to judge.
///
/// # Errors
/// A [`RequestError`] naming the offending field (`param`) for the first problem found.
///
/// # Examples
/// ```
/// use sluice_provider::{parse_request, Protocol};
///
/// let body = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"max_tokens":50}"#;
/// let req = parse_request(Protocol::OpenAiChat, body).unwrap();
/// assert_eq!(req.model, "gpt-4o");
/// assert_eq!(req.max_output_tokens, Some(50));
///
/// let err = parse_request(Protocol::OpenAiChat, br#"{"model":"gpt-4o","messages":[]}"#).unwrap_err();
/// assert_eq!(err.param.as_deref(), Some("messages"));
/// ```
pub fn parse_request(protocol: Protocol, body: &[u8]) -> Result<ParsedRequest, RequestError> {
    let body = parse_object(body)?;
    let model = fields::model(&body)?;
    let shape = match protocol {
        Protocol::OpenAiChat => openai::chat(&body)?,
        Protocol::OpenAiEmbeddings => openai::embeddings(&body)?,
        Protocol::OpenAiCompletions => openai::completions(&body)?,
        Protocol::OpenAiResponses => responses::responses(&body)?,
        Protocol::AnthropicMessages => anthropic::messages(&body)?,
    };
    Ok(ParsedRequest {
        protocol,
        model,
        stream: shape.stream,
        max_output_tokens: shape.max_output_tokens,
        client_wants_stream_usage: shape.client_wants_stream_usage,
        choices: shape.choices,
        body,
    })
}

impl ParsedRequest {
    /// A Responses request that continues earlier turns the provider adds to its input
    /// (`previous_response_id` or `conversation`): context the body does not show.
    #[must_use]
    pub fn continues_hidden_context(&self) -> bool {
        self.protocol == Protocol::OpenAiResponses
            && ["previous_response_id", "conversation"].iter().any(|key| fields::present(&self.body, key).is_some())
    }
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, RequestError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        RequestError::new(RequestErrorCode::InvalidJson, None, format!("request body is not valid JSON: {e}"))
    })?;
    let Value::Object(map) = value else {
        return Err(RequestError::new(
            RequestErrorCode::InvalidType,
            None,
            "request body must be a JSON object".to_owned(),
        ));
    };
    if map.values().any(|v| too_deep(v, 2)) {
        return Err(RequestError::new(
            RequestErrorCode::InvalidValue,
            None,
            format!("request body nests deeper than {MAX_NESTING_DEPTH} levels"),
        ));
    }
    Ok(map)
}

/// Whether `value`, sitting at nesting level `depth` (the body object is level 1), has a
/// container deeper than [`MAX_NESTING_DEPTH`]. Recursion is bounded by serde_json's own
/// limit of 128.
fn too_deep(value: &Value, depth: usize) -> bool {
    match value {
        Value::Array(items) => depth > MAX_NESTING_DEPTH || items.iter().any(|v| too_deep(v, depth + 1)),
        Value::Object(map) => depth > MAX_NESTING_DEPTH || map.values().any(|v| too_deep(v, depth + 1)),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
