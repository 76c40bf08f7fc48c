//! Google's Gemini `generateContent` wire shape (the Gemini API and Vertex AI speak the
//! same body) under the OpenAI chat shape: a deployment on a Gemini native upstream is
//! treated as OpenAI-speaking by the rest of the gateway, and this layer rewrites the
//! OpenAI chat body on its way up and the answer on its way back. An Anthropic client
//! reaches Gemini through both layers (messages → chat → Gemini, and back).
//!
//! | OpenAI chat | Gemini |
//! |---|---|
//! | `system`/`developer` messages | `systemInstruction.parts[].text` |
//! | `user` / `assistant` messages | `contents[]` with role `user` / `model` |
//! | text and `image_url` (`data:` URL) parts | `text` and `inlineData` parts |
//! | `assistant.tool_calls[]` | `functionCall` parts |
//! | `tool` messages | `functionResponse` parts of a `user` turn |
//! | `tools[].function` | `tools[0].functionDeclarations[]` (`parametersJsonSchema`) |
//! | `tool_choice` | `toolConfig.functionCallingConfig` (`AUTO`, `NONE`, `ANY`) |
//! | `max_tokens`, `temperature`, `top_p`, `stop`, `seed`, penalties, JSON `response_format` | `generationConfig` |
//! | `finish_reason` | `finishReason` (`STOP`, `MAX_TOKENS`, safety reasons → `content_filter`) |
//! | `usage` | `usageMetadata` (thinking tokens count as output, cached tokens as cached input) |
//! | `reasoning_effort` | `generationConfig.thinkingConfig` (`thinkingBudget` for 2.5, `thinkingLevel` for 3) |
//! | `extra_body.google.thinking_config` (Google's compatibility layer's) | `generationConfig.thinkingConfig`, as given |
//! | `reasoning_content` (message, delta) | thought summaries (`thought: true` parts, asked for with `include_thoughts`) |
//! | `extra_content.google.thought_signature` (tool call, message) | `thoughtSignature` (the `functionCall` part, the text part) |
//!
//! The same tables serve the other direction, for Gemini-shaped clients in front of any
//! deployment (`inbound`: a `generateContent` body → the OpenAI chat body the road serves;
//! `answer` and the `OpenAiToGeminiStream`: the road's OpenAI answer → Gemini's shapes).
//!
//! Refused with the field named: `n > 1`, `logprobs`, `logit_bias`, audio, http(s) image
//! URLs (Gemini takes inline bytes or its own file URIs), legacy `functions`, a
//! `reasoning_effort` the model has no thinking setting for.

mod answer;
mod inbound;
mod request;
mod response;
mod thinking;

pub use answer::openai_to_gemini_response;
pub(crate) use answer::{function_call_part, text_part};
pub use inbound::{gemini_count_to_openai_request, gemini_to_openai_request};
pub use request::openai_to_gemini_request;
pub(crate) use response::{
    finish_reason, gemini_finish_reason, gemini_usage_of, is_thought, openai_usage_of, tool_call,
};
pub use response::{
    gemini_error_to_openai, gemini_to_openai_response, google_status, openai_error_to_gemini, openai_error_type,
};
pub(crate) use thinking::{
    anthropic_signature, block_signature, extra_content, extra_content_signature, from_anthropic_signature,
    google_extra_body, object_signature, part_signature,
};
