//! AWS Bedrock's Converse API, to and from the Anthropic Messages shape. The gateway reaches
//! a Bedrock deployment through the Anthropic shape (an OpenAI client's request is first
//! translated to it) and then to Converse, so every client protocol that reaches Anthropic
//! reaches Bedrock; the simulated provider uses the reverse direction to serve Converse.
//!
//! - Requests: [`anthropic_to_converse_request`] (gateway), [`converse_to_anthropic_request`]
//!   (simulator): `system`, text, base64 images, tool definitions, `tool_use` and
//!   `tool_result` blocks, `max_tokens`, `temperature`, `top_p`, `stop_sequences`;
//!   `top_k` and `thinking` go in `additionalModelRequestFields`.
//! - Responses: [`converse_to_anthropic_response`], [`anthropic_to_converse_response`]: the
//!   content, the stop reason and the usage (`inputTokens`, `outputTokens`,
//!   `cacheReadInputTokens`, `cacheWriteInputTokens`).
//! - Streams: [`ConverseToAnthropicStream`] reads AWS event-stream frames (`messageStart`,
//!   `contentBlockStart`/`Delta`/`Stop`, `messageStop`, `metadata`, and exceptions) and
//!   writes Anthropic SSE; [`anthropic_event_to_converse`] is the simulator's reverse.
//! - Errors: [`converse_error_to_anthropic`] turns Bedrock's `{"message": …}` and its
//!   `x-amzn-ErrorType` into an Anthropic error body.

mod names;
mod request;
mod response;
mod stream;

pub use request::{
    BEDROCK_ANTHROPIC_VERSION, anthropic_to_converse_request, anthropic_to_invoke_request,
    converse_to_anthropic_request,
};
pub use response::{anthropic_to_converse_response, converse_error_to_anthropic, converse_to_anthropic_response};
pub use stream::{ConverseToAnthropicStream, anthropic_event_to_converse, anthropic_event_to_invoke, converse_frame};
