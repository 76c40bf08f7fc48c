//! AWS Bedrock's Converse API, to and from the Anthropic Messages shape. The gateway reaches
//! a Bedrock deployment through the Anthropic shape (an OpenAI client's request is first
//! translated to it) and then to Converse, so every client protocol that reaches Anthropic
//! reaches Bedrock; the simulated provider uses the reverse direction to serve Converse.
//!
//! - Requests: [`anthropic_to_converse_request`] (gateway), [`converse_to_anthropic_request`]
//!   (simulator): `system`, text, base64 images, tool definitions, `tool_use` and
//!   `tool_result` blocks, `thinking` and `redacted_thinking` blocks (as `reasoningContent`,
//!   signature kept, in their place), `cache_control` breakpoints (as `cachePoint` blocks
//!   after the system block, content block or tool they mark), `max_tokens`, `temperature`,
//!   `top_p`, `stop_sequences`; `top_k`, `thinking` and the client's `anthropic-beta` flags
//!   (`anthropic_beta`) go in `additionalModelRequestFields`. InvokeModel
//!   ([`anthropic_to_invoke_request`]) takes Anthropic's body with the flags as
//!   `anthropic_beta`.
//! - Responses: [`converse_to_anthropic_response`], [`anthropic_to_converse_response`]: the
//!   content (reasoning with its signature, redacted reasoning), the stop reason and the
//!   usage (`inputTokens`, `outputTokens`, `cacheReadInputTokens` →
//!   `cache_read_input_tokens`, `cacheWriteInputTokens` → `cache_creation_input_tokens`).
//! - Streams: [`ConverseToAnthropicStream`] reads AWS event-stream frames (`messageStart`,
//!   `contentBlockStart`/`Delta`/`Stop`, `messageStop`, `metadata`, and exceptions) and
//!   writes Anthropic SSE, a `reasoningContent` delta's `text` as `thinking_delta`, its
//!   `signature` as `signature_delta` and its `redactedContent` as a `redacted_thinking`
//!   block (`ContentBlockDelta`, `ReasoningContentBlockDelta`:
//!   <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ReasoningContentBlockDelta.html>);
//!   [`AnthropicToConverseStream`] is the reverse (the simulator's Bedrock, and the
//!   gateway's answers to Bedrock clients).
//! - Bedrock's own clients: [`converse_to_anthropic_request`] and
//!   [`invoke_to_anthropic_request`] read a Converse or InvokeModel body as Anthropic's,
//!   [`bedrock_beta_flags`] its beta flags, [`anthropic_to_converse_response`] answers it;
//!   the simulator serves Bedrock through them and the gateway's Bedrock routes take
//!   Bedrock clients in through them.
//! - Errors: [`converse_error_to_anthropic`] turns Bedrock's `{"message": …}` and its
//!   `x-amzn-ErrorType` into an Anthropic error body.

mod names;
mod request;
mod response;
mod stream;

pub use request::{
    BEDROCK_ANTHROPIC_VERSION, anthropic_to_converse_request, anthropic_to_invoke_request, bedrock_beta_flags,
    converse_to_anthropic_request, count_tokens_to_anthropic_request, invoke_to_anthropic_request,
};
pub use response::{anthropic_to_converse_response, converse_error_to_anthropic, converse_to_anthropic_response};
pub use stream::{AnthropicToConverseStream, ConverseToAnthropicStream, anthropic_event_to_invoke, converse_frame};
