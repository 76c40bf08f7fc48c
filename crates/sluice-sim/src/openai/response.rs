//! OpenAI response bodies (non-streamed) and usage.

use serde::Serialize;

/// `usage` of a chat completion.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChatUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Sum.
    pub total_tokens: u64,
    /// Prompt details.
    pub prompt_tokens_details: PromptDetails,
    /// Completion details.
    pub completion_tokens_details: CompletionDetails,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PromptDetails {
    /// Cached prompt tokens (0 unless the model keeps a prompt cache).
    pub cached_tokens: u64,
    /// Audio tokens (always 0).
    pub audio_tokens: u64,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CompletionDetails {
    /// Reasoning tokens (always 0).
    pub reasoning_tokens: u64,
    /// Audio tokens (always 0).
    pub audio_tokens: u64,
    /// Accepted prediction tokens (always 0).
    pub accepted_prediction_tokens: u64,
    /// Rejected prediction tokens (always 0).
    pub rejected_prediction_tokens: u64,
}

impl ChatUsage {
    /// Usage of `prompt` in and `completion` out.
    #[must_use]
    pub fn new(prompt: u64, completion: u64) -> Self {
        Self {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptDetails::default(),
            completion_tokens_details: CompletionDetails::default(),
        }
    }

    /// This usage with `cached` of the prompt tokens read from the prompt cache.
    #[must_use]
    pub fn with_cached(mut self, cached: u64) -> Self {
        self.prompt_tokens_details.cached_tokens = cached;
        self
    }
}

/// `chat.completion`.
#[derive(Debug, Serialize)]
pub struct Completion<'a> {
    /// `chatcmpl-...`.
    pub id: &'a str,
    /// `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// Model name.
    pub model: &'a str,
    /// One choice.
    pub choices: [Choice<'a>; 1],
    /// Usage.
    pub usage: ChatUsage,
    /// Service tier.
    pub service_tier: &'static str,
    /// Fingerprint.
    pub system_fingerprint: &'static str,
}

/// A choice.
#[derive(Debug, Serialize)]
pub struct Choice<'a> {
    /// 0.
    pub index: u32,
    /// The assistant message.
    pub message: AssistantMessage<'a>,
    /// Always null.
    pub logprobs: Option<()>,
    /// `stop` or `length`.
    pub finish_reason: &'static str,
}

/// The generated message.
#[derive(Debug, Serialize)]
pub struct AssistantMessage<'a> {
    /// `assistant`.
    pub role: &'static str,
    /// Generated text.
    pub content: &'a str,
    /// Always null.
    pub refusal: Option<()>,
    /// Always empty.
    pub annotations: [(); 0],
}

/// Fingerprint reported by the simulator.
pub const FINGERPRINT: &str = "fp_sluice_sim";

/// `stop` when the completion ended by itself, `length` when `max_tokens` cut it.
#[must_use]
pub fn finish_reason(output: u64, cap: u64) -> &'static str {
    if output >= cap { "length" } else { "stop" }
}
