//! Cross-provider translation between OpenAI chat completions and Anthropic messages, both
//! directions, so that a fallback from one provider to the other is invisible to the
//! client's SDK. Pure: bytes and JSON in, bytes and JSON out, no IO, no clock.
//!
//! - Requests: [`openai_to_anthropic_request`], [`anthropic_to_openai_request`] take a
//!   [`ParsedRequest`](crate::ParsedRequest) and return the body for the other protocol.
//!   A feature the target lacks is a [`TranslateError::Unsupported`] naming the field: the
//!   gateway then keeps the request on its own protocol (no cross-provider fallback).
//! - Responses: [`anthropic_to_openai_response`], [`openai_to_anthropic_response`] rewrite a
//!   non-stream success body for the client, `model` being the name the client asked for.
//! - Streams: [`AnthropicToOpenAiStream`], [`OpenAiToAnthropicStream`] rewrite SSE bytes as
//!   they arrive (any chunking), ending with the client protocol's interruption event when
//!   the upstream stops short; `usage()` reports what the upstream counted, for settling.
//!
//! What carries over, what is dropped and what is refused is documented on each function.
//! The guiding rule: drop what only tunes sampling, caching or billing (`seed`,
//! `frequency_penalty`, `top_k`, `cache_control`, `detail`...), refuse what would change the
//! shape or meaning of the answer (`n > 1`, `logprobs`, JSON modes, audio, server tools,
//! documents, prefills, Anthropic's thinking toward OpenAI...). Extended thinking crosses
//! from OpenAI chat to Anthropic: `reasoning_effort` as a thinking budget, the signed blocks
//! handed out as `thinking_blocks` and replayed from them (LiteLLM's convention,
//! <https://docs.litellm.ai/docs/reasoning_content>).
//!
//! Layout: `request/` (top-level fields, refusals, and one message converter per
//! direction), `tools` (definitions, choice, calls), `image`, `mapping` (stop reasons, ids,
//! usage), `response`, `stream/` (framing and one state machine per direction), `json`
//! (typed readers).
//!
//! Failure semantics: a request [`TranslateError`] means "no cross-provider fallback for
//! this request"; a response one means the upstream body broke its protocol (map it like
//! any malformed upstream answer). Streams never fail: what they cannot read is skipped,
//! and a stream that stops short ends with the client's interruption event.

mod converse;
mod error;
mod gemini;
mod image;
mod json;
mod mapping;
mod request;
mod response;
mod responses_messages;
mod stream;
mod tools;

pub use converse::{
    AnthropicToConverseStream, BEDROCK_ANTHROPIC_VERSION, ConverseToAnthropicStream, anthropic_event_to_invoke,
    anthropic_to_converse_request, anthropic_to_converse_response, anthropic_to_invoke_request, bedrock_beta_flags,
    converse_error_to_anthropic, converse_frame, converse_to_anthropic_request, converse_to_anthropic_response,
    count_tokens_to_anthropic_request, invoke_to_anthropic_request,
};
pub use error::TranslateError;
pub use gemini::{gemini_error_to_openai, gemini_to_openai_response, openai_error_type, openai_to_gemini_request};
// The inverse direction: Gemini-shaped clients in front of any deployment.
pub use gemini::{
    gemini_count_to_openai_request, gemini_to_openai_request, google_status, openai_error_to_gemini,
    openai_to_gemini_response,
};
pub use request::{ChatUpstream, anthropic_max_tokens, anthropic_to_openai_request, openai_to_anthropic_request};
pub use response::{anthropic_to_openai_response, openai_to_anthropic_response};
pub use responses_messages::{anthropic_to_responses_response, responses_to_anthropic_request};
pub use stream::{AnthropicToOpenAiStream, AnthropicToResponsesStream, GeminiToOpenAiStream, OpenAiToAnthropicStream};
pub use stream::{GeminiFraming, OpenAiToGeminiStream};
