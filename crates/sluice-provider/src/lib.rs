//! The protocol layer of sluice: everything the gateway needs to know about an OpenAI- or
//! Anthropic-shaped request and its response, with no network IO.
//!
//! The life of a request through this crate:
//! 1. [`parse_request`] validates the client body into a [`ParsedRequest`] (400-worthy
//!    problems come back as a [`RequestError`] naming the field);
//! 2. [`Estimator::input_tokens`] prices it before sending (with the
//!    [`tokenizer_for_model`] of the target model and the [`MediaPricing`] of its
//!    provider), `max_output_tokens × choices` being the output side of the reservation;
//! 3. [`upstream_body`] rewrites it for the chosen deployment;
//! 4. [`usage_from_response`] reads the real usage from a non-stream body, or a
//!    [`StreamTap`] reads it from the stream while passing the stream through.
//!
//! Layout: `protocol` (the [`Protocol`] enum), `request/` (parsing and validation, one
//! file per provider), `estimate/` (token counting, one file per provider; `media/` reads
//! image sizes, PDF pages and audio durations from base64 parts), `rewrite`
//! (upstream body), `usage` (response usage), `sse` (event framing and cheap JSON
//! peeking), `tap/` (the stream watcher, one file per provider), `translate/`
//! (OpenAI ⇄ Anthropic bodies and streams, for cross-provider fallback), `error`.
//!
//! Failure semantics: only [`parse_request`] and [`Estimator::new`] fail. Estimation never
//! fails (unknown part types count 0, media whose size cannot be read count a conservative
//! default, all settled later); usage extraction returns `None` rather than guessing; the
//! tap forwards what it cannot parse unchanged.

mod classify;
mod delivered;
mod error;
mod estimate;
mod finish;
mod hints;
mod protocol;
mod request;
mod rewrite;
mod sse;
mod tap;
mod translate;
mod usage;

pub use classify::{
    ErrorClass, Phase, ProviderFlavor, TransportFailure, classify, classify_transport, classify_with_hints,
};
pub use delivered::DeliveredCount;
pub use error::{EstimatorError, RequestError, RequestErrorCode};
pub use estimate::{Estimator, MediaPricing, TokenizerKind, tokenizer_for_model};
pub use finish::{FinishReasons, finish_reasons};
pub use hints::{
    MAX_HINT_BODY_BYTES, MAX_HINT_DURATION, RateLimitHints, Window, parse_go_duration, parse_hints,
    parse_rfc3339_unix_ms,
};
pub use protocol::Protocol;
pub use request::{MAX_NESTING_DEPTH, ParsedRequest, parse_request};
pub use rewrite::{upstream_body, without_extra_body, without_gemini_thinking};
pub use tap::{MAX_HELD_EVENT_BYTES, StreamOutcome, StreamTap};
pub use translate::{
    AnthropicToConverseStream, AnthropicToOpenAiStream, AnthropicToResponsesStream, BEDROCK_ANTHROPIC_VERSION,
    ChatUpstream, ConverseToAnthropicStream, GeminiToOpenAiStream, OpenAiToAnthropicStream, TranslateError,
    anthropic_event_to_invoke, anthropic_max_tokens, anthropic_to_converse_request, anthropic_to_converse_response,
    anthropic_to_invoke_request, anthropic_to_openai_request, anthropic_to_openai_response,
    anthropic_to_responses_response, bedrock_beta_flags, converse_error_to_anthropic, converse_frame,
    converse_to_anthropic_request, converse_to_anthropic_response, count_tokens_to_anthropic_request,
    gemini_error_to_openai, gemini_to_openai_response, invoke_to_anthropic_request, openai_error_type,
    openai_to_anthropic_request, openai_to_anthropic_response, openai_to_gemini_request,
    responses_to_anthropic_request,
};
// Gemini-shaped clients: their requests translated to the road's OpenAI chat shape and its
// answers back.
pub use translate::{
    GeminiFraming, OpenAiToGeminiStream, gemini_count_to_openai_request, gemini_to_openai_request, google_status,
    openai_error_to_gemini, openai_to_gemini_response,
};
pub use usage::{Answered, Usage, read_answer, usage_from_response};
