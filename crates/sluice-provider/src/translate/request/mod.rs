//! Request bodies: OpenAI chat ⇄ Anthropic messages.
//!
//! Translation is by allow-list: the fields below are carried over, fields with no
//! counterpart that only tune sampling or billing are dropped, and fields whose absence
//! would change what the client gets back are refused with a [`TranslateError`] naming the
//! field (see the tables in [`refusals`]). Unknown fields are dropped: they are meaningful
//! only to the protocol they were written for.
//!
//! The returned object is a complete body for the target protocol, `model` still being the
//! client's model name (the gateway swaps in the deployment's model as for any request).

mod gemini_thinking;
mod refusals;
mod thinking;
mod to_anthropic;
mod to_openai;

use serde_json::{Map, Value};

use super::error::TranslateError;
use super::json::{self, Object, object};
use super::tools;
use crate::protocol::Protocol;
use crate::request::ParsedRequest;

/// Most stop sequences OpenAI accepts.
const OPENAI_MAX_STOP_SEQUENCES: usize = 4;
/// Anthropic's highest `temperature`; OpenAI's scale goes to 2.
const ANTHROPIC_MAX_TEMPERATURE: f64 = 1.0;

/// Translates an OpenAI chat-completions request into an Anthropic messages body.
///
/// `system`/`developer` messages (wherever they appear) become the top-level `system`;
/// `tool` messages become `tool_result` blocks of a user turn; consecutive turns of the same
/// role are merged (Anthropic wants alternation); `max_completion_tokens`/`max_tokens`
/// become `max_tokens`, `default_max_tokens` when absent (Anthropic requires it);
/// `temperature` is clamped to Anthropic's maximum of 1; `stop` → `stop_sequences`; `user`
/// → `metadata.user_id`; `stream_options` is dropped (Anthropic streams always carry
/// usage); `frequency_penalty`, `presence_penalty`, `seed`, `service_tier`, `store`,
/// `metadata`, `prediction` and `name` are dropped.
///
/// Extended thinking: `reasoning_effort` (`minimal`/`low` → 1,024 tokens, `medium` → 2,048,
/// `high` → 4,096, `none` → off) becomes `thinking: {type: "enabled", budget_tokens}` under
/// Anthropic's rules (see `thinking`); an assistant message's `thinking_blocks` (what
/// [`anthropic_to_openai_response`](crate::anthropic_to_openai_response) and the stream hand
/// out) are replayed unchanged, signatures verbatim, first in its turn; its
/// `reasoning_content` is dropped (the blocks carry the same text, signed).
///
/// # Errors
/// [`TranslateError::WrongProtocol`] for a non-chat request; [`TranslateError::Unsupported`]
/// for `n > 1`, `logprobs`, `top_logprobs`, `logit_bias`, a JSON `response_format`, audio,
/// legacy `functions`/`function_call`, `web_search_options`, non-function tools, audio/file
/// content parts, images other than JPEG/PNG/GIF/WebP, an unknown `reasoning_effort`, and,
/// with thinking on, a `temperature` other than 1, a `top_p` below 0.95 or a forced
/// `tool_choice`; [`TranslateError::Invalid`] for malformed messages (e.g. tool-call
/// arguments that are not a JSON object, a thinking block without its signature) and a
/// `max_tokens` at or below the thinking budget.
pub fn openai_to_anthropic_request(
    req: &ParsedRequest,
    default_max_tokens: u64,
) -> Result<Map<String, Value>, TranslateError> {
    expect_protocol(req, Protocol::OpenAiChat)?;
    let body = &req.body;
    refusals::check(body, refusals::OPENAI_ONLY, Protocol::AnthropicMessages, req.choices)?;
    let converted = to_anthropic::messages(json::opt_array(body, "messages", "")?)?;
    let mut out = object([("model", Value::from(req.model.as_str()))]);
    if let Some(system) = converted.system {
        out.insert("system".to_owned(), system);
    }
    out.insert("messages".to_owned(), Value::Array(converted.messages));
    match thinking::from_effort(body, req.max_output_tokens, default_max_tokens)? {
        Some((thinking, max_tokens)) => {
            out.insert("max_tokens".to_owned(), Value::from(max_tokens));
            out.insert("thinking".to_owned(), thinking);
        }
        None => {
            out.insert("max_tokens".to_owned(), Value::from(req.max_output_tokens.unwrap_or(default_max_tokens)));
        }
    }
    if let Some(t) = json::present(body, "temperature").and_then(Value::as_f64) {
        out.insert("temperature".to_owned(), Value::from(t.min(ANTHROPIC_MAX_TEMPERATURE)));
    }
    copy(body, "top_p", &mut out, "top_p");
    if let Some(stop) = stop_to_anthropic(body)? {
        out.insert("stop_sequences".to_owned(), stop);
    }
    if req.stream {
        out.insert("stream".to_owned(), Value::Bool(true));
    }
    if let Some(user) = json::opt_str(body, "user", "")? {
        out.insert("metadata".to_owned(), Value::Object(object([("user_id", Value::from(user))])));
    }
    tools_to_anthropic(body, &mut out)?;
    Ok(out)
}

/// The `max_tokens` [`openai_to_anthropic_request`] asks an Anthropic-shaped deployment
/// for: the client's limit, else `default_max_tokens`, plus the thinking budget of its
/// `reasoning_effort` when the client set no limit (thinking counts within Anthropic's
/// `max_tokens`). What admission reserves as the output of such a request. A request the
/// translation would refuse gets its plain limit (it is never sent).
#[must_use]
pub fn anthropic_max_tokens(req: &ParsedRequest, default_max_tokens: u64) -> u64 {
    let plain = req.max_output_tokens.unwrap_or(default_max_tokens);
    if req.protocol != Protocol::OpenAiChat {
        return plain;
    }
    match thinking::from_effort(&req.body, req.max_output_tokens, default_max_tokens) {
        Ok(Some((_, max_tokens))) => max_tokens,
        _ => plain,
    }
}

/// What serves the OpenAI chat body an Anthropic request is translated into; it decides
/// what becomes of extended thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatUpstream {
    /// An OpenAI-compatible deployment: no thinking blocks come back, so enabled `thinking`
    /// is refused.
    OpenAi,
    /// A Gemini deployment (through the Gemini layer): `thinking` becomes a thinking budget
    /// with thought summaries, and Gemini's thought signatures travel in `thinking` blocks
    /// (see `gemini_thinking`).
    Gemini,
}

/// Translates an Anthropic messages request into an OpenAI chat-completions body.
///
/// `system` becomes a leading `system` message; `tool_result` blocks become `tool` messages
/// placed before the rest of their user turn; `tool_use` blocks become `tool_calls` (input
/// serialized as the `arguments` string); `thinking` blocks in past assistant turns are
/// dropped (only Anthropic can read them back); `max_tokens` → `max_completion_tokens`
/// (OpenAI's current name, required by its reasoning models); `stop_sequences` → `stop`;
/// `metadata.user_id` → `user`; a stream gets `stream_options.include_usage` (the Anthropic
/// client always receives usage); `top_k`, `service_tier`, `cache_control` and a
/// `tool_result`'s `is_error` flag are dropped.
///
/// Toward a Gemini deployment ([`ChatUpstream::Gemini`]), enabled `thinking` becomes
/// `extra_body.google.thinking_config` (the budget, thoughts included), and the `thinking`
/// blocks sluice handed out for Gemini's thought signatures give them back to the tool call
/// or text that follows them.
///
/// # Errors
/// [`TranslateError::WrongProtocol`] for a non-Anthropic request;
/// [`TranslateError::Unsupported`] for enabled `thinking` (toward OpenAI), `mcp_servers`, `container`, more
/// than 4 stop sequences, server tools, document and other non-text/image blocks, images
/// inside tool results, and a conversation ending on an assistant turn (a prefill, which
/// OpenAI cannot continue); [`TranslateError::Invalid`] for malformed messages.
pub fn anthropic_to_openai_request(
    req: &ParsedRequest,
    upstream: ChatUpstream,
) -> Result<Map<String, Value>, TranslateError> {
    expect_protocol(req, Protocol::AnthropicMessages)?;
    let body = &req.body;
    let refused = match upstream {
        ChatUpstream::OpenAi => refusals::ANTHROPIC_ONLY,
        ChatUpstream::Gemini => refusals::ANTHROPIC_ONLY_BUT_THINKING,
    };
    refusals::check(body, refused, Protocol::OpenAiChat, 1)?;
    let mut messages: Vec<Value> = to_openai::system(body)?.into_iter().collect();
    messages.extend(to_openai::messages(json::opt_array(body, "messages", "")?, upstream)?);
    let mut out = object([("model", Value::from(req.model.as_str())), ("messages", Value::Array(messages))]);
    if upstream == ChatUpstream::Gemini
        && let Some(extra) = gemini_thinking::extra_body(body)?
    {
        out.insert("extra_body".to_owned(), extra);
    }
    if let Some(max) = req.max_output_tokens {
        out.insert("max_completion_tokens".to_owned(), Value::from(max));
    }
    copy(body, "temperature", &mut out, "temperature");
    copy(body, "top_p", &mut out, "top_p");
    if let Some(stop) = stop_to_openai(body)? {
        out.insert("stop".to_owned(), stop);
    }
    if req.stream {
        out.insert("stream".to_owned(), Value::Bool(true));
        let options = object([("include_usage", Value::Bool(true))]);
        out.insert("stream_options".to_owned(), Value::Object(options));
    }
    if let Some(metadata) = json::present(body, "metadata").and_then(Value::as_object)
        && let Some(user) = json::opt_str(metadata, "user_id", "metadata")?
    {
        out.insert("user".to_owned(), Value::from(user));
    }
    tools_to_openai(body, &mut out)?;
    Ok(out)
}

fn expect_protocol(req: &ParsedRequest, expected: Protocol) -> Result<(), TranslateError> {
    if req.protocol == expected { Ok(()) } else { Err(TranslateError::WrongProtocol { expected, found: req.protocol }) }
}

/// Copies `from[key]` to `to[as_key]` when present.
fn copy(from: &Object, key: &str, to: &mut Object, as_key: &str) {
    if let Some(value) = json::present(from, key) {
        to.insert(as_key.to_owned(), value.clone());
    }
}

/// OpenAI `stop` (a string or an array of strings) as `stop_sequences`.
fn stop_to_anthropic(body: &Object) -> Result<Option<Value>, TranslateError> {
    match json::present(body, "stop") {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(Value::Array(vec![Value::from(s.as_str())]))),
        Some(Value::Array(list)) if list.is_empty() => Ok(None),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => Ok(Some(Value::Array(list.clone()))),
        Some(_) => Err(TranslateError::invalid("stop", "must be a string or an array of strings")),
    }
}

/// Anthropic `stop_sequences` as OpenAI `stop` (at most 4 there).
fn stop_to_openai(body: &Object) -> Result<Option<Value>, TranslateError> {
    let list = json::opt_array(body, "stop_sequences", "")?;
    if list.len() > OPENAI_MAX_STOP_SEQUENCES {
        let reason = "OpenAI accepts at most 4 stop sequences";
        return Err(TranslateError::unsupported("stop_sequences", Protocol::OpenAiChat, reason));
    }
    Ok((!list.is_empty()).then(|| Value::Array(list.to_vec())))
}

fn tools_to_anthropic(body: &Object, out: &mut Object) -> Result<(), TranslateError> {
    let defs = tools::defs_to_anthropic(json::opt_array(body, "tools", "")?)?;
    if !defs.is_empty() {
        out.insert("tools".to_owned(), Value::Array(defs));
    }
    let choice =
        tools::choice_to_anthropic(json::present(body, "tool_choice"), json::present(body, "parallel_tool_calls"))?;
    if let Some(choice) = choice {
        out.insert("tool_choice".to_owned(), choice);
    }
    Ok(())
}

fn tools_to_openai(body: &Object, out: &mut Object) -> Result<(), TranslateError> {
    let defs = tools::defs_to_openai(json::opt_array(body, "tools", "")?)?;
    let has_tools = !defs.is_empty();
    if has_tools {
        out.insert("tools".to_owned(), Value::Array(defs));
    }
    if let Some(choice) = json::present(body, "tool_choice") {
        let (choice, parallel) = tools::choice_to_openai(choice)?;
        out.insert("tool_choice".to_owned(), choice);
        // OpenAI refuses `parallel_tool_calls` on a request without tools.
        if let Some(parallel) = parallel.filter(|_| has_tools) {
            out.insert("parallel_tool_calls".to_owned(), Value::Bool(parallel));
        }
    }
    Ok(())
}
