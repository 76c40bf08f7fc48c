//! Token usage as reported by the provider, read from non-stream response bodies (the
//! stream side lives in [`tap`](crate::tap)).

use serde::Deserialize;

use crate::finish::{Choice, Incomplete, Stopped};
use crate::protocol::Protocol;

/// Tokens a provider reports having processed for one call.
///
/// Field meanings follow each provider's report, which differ on cache accounting:
/// OpenAI's `prompt_tokens` *includes* the cached part (`cache_read_input_tokens` is a
/// subset of `input_tokens`), while Anthropic's `input_tokens` *excludes* both cache reads
/// and cache writes (total input = all three). [`Usage::total_input_tokens`] gives the
/// comparable figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// OpenAI `prompt_tokens`; Anthropic `input_tokens` (uncached input only).
    pub input_tokens: u64,
    /// OpenAI `completion_tokens`; Anthropic `output_tokens`.
    pub output_tokens: u64,
    /// OpenAI `prompt_tokens_details.cached_tokens`; Anthropic `cache_read_input_tokens`.
    pub cache_read_input_tokens: u64,
    /// Anthropic `cache_creation_input_tokens` (OpenAI has none: 0).
    pub cache_creation_input_tokens: u64,
    /// The part of `output_tokens` spent reasoning, where the provider reports it apart:
    /// OpenAI `completion_tokens_details.reasoning_tokens` (Responses:
    /// `output_tokens_details.reasoning_tokens`); 0 otherwise.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// All input tokens the model read, cached or not, whichever way `protocol` reports them.
    #[must_use]
    pub const fn total_input_tokens(&self, protocol: Protocol) -> u64 {
        match protocol {
            Protocol::AnthropicMessages => self
                .input_tokens
                .saturating_add(self.cache_read_input_tokens)
                .saturating_add(self.cache_creation_input_tokens),
            Protocol::OpenAiChat
            | Protocol::OpenAiResponses
            | Protocol::OpenAiEmbeddings
            | Protocol::OpenAiCompletions => self.input_tokens,
        }
    }
}

/// Reads the usage from a non-stream success body.
///
/// OpenAI chat: `usage.prompt_tokens` / `completion_tokens` /
/// `prompt_tokens_details.cached_tokens`; Responses: `usage.input_tokens` / `output_tokens`
/// (reasoning included) / `input_tokens_details.cached_tokens`; embeddings:
/// `usage.prompt_tokens`; Anthropic:
/// `usage.input_tokens` / `output_tokens` / `cache_read_input_tokens` /
/// `cache_creation_input_tokens`. Missing counters read as 0. `None` when the body is not
/// JSON or carries no `usage` object (an error body, a provider that omits it).
#[must_use]
pub fn usage_from_response(protocol: Protocol, body: &[u8]) -> Option<Usage> {
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    envelope.usage.map(|raw| raw.into_usage(protocol))
}

/// What a non-stream success body in `protocol` says of itself, read in one pass: its
/// usage ([`usage_from_response`]) and why it stopped ([`crate::finish_reasons`]).
#[must_use]
pub fn read_answer(protocol: Protocol, body: &[u8]) -> Answered {
    let Ok(answer) = serde_json::from_slice::<Answer>(body) else { return Answered::default() };
    let Answer { usage, choices, stop_reason, status, incomplete_details } = answer;
    let stopped = Stopped { choices, stop_reason, status, incomplete_details };
    Answered { usage: usage.map(|raw| raw.into_usage(protocol)), finish_reasons: stopped.reasons(protocol) }
}

/// What [`read_answer`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answered {
    /// The usage, when the body reports one.
    pub usage: Option<Usage>,
    /// The finish reasons, in choice order.
    pub finish_reasons: Vec<String>,
}

/// Only the `usage` member of a response; everything else is skipped without allocating.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    usage: Option<RawUsage>,
}

/// The `usage` member and the members that say why it stopped ([`Stopped`]'s, spelled out:
/// a flattened member would make serde buffer the whole body first).
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
}

/// The union of OpenAI's and Anthropic's usage fields.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RawUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    input_tokens: Option<u64>,
    input_tokens_details: Option<PromptDetails>,
    output_tokens: Option<u64>,
    completion_tokens_details: Option<OutputDetails>,
    output_tokens_details: Option<OutputDetails>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl RawUsage {
    pub(crate) fn into_usage(self, protocol: Protocol) -> Usage {
        match protocol {
            Protocol::OpenAiChat | Protocol::OpenAiEmbeddings | Protocol::OpenAiCompletions => Usage {
                input_tokens: self.prompt_tokens.unwrap_or(0),
                output_tokens: self.completion_tokens.unwrap_or(0),
                cache_read_input_tokens: self.prompt_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0),
                cache_creation_input_tokens: 0,
                reasoning_tokens: self.completion_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
            },
            // Reasoning tokens are part of `output_tokens` already.
            Protocol::OpenAiResponses => Usage {
                input_tokens: self.input_tokens.unwrap_or(0),
                output_tokens: self.output_tokens.unwrap_or(0),
                cache_read_input_tokens: self.input_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0),
                cache_creation_input_tokens: 0,
                reasoning_tokens: self.output_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
            },
            Protocol::AnthropicMessages => Usage {
                input_tokens: self.input_tokens.unwrap_or(0),
                output_tokens: self.output_tokens.unwrap_or(0),
                cache_read_input_tokens: self.cache_read_input_tokens.unwrap_or(0),
                cache_creation_input_tokens: self.cache_creation_input_tokens.unwrap_or(0),
                reasoning_tokens: 0,
            },
        }
    }

    /// Anthropic `message_delta` usage: counters present there override the running usage
    /// (they are cumulative); absent ones keep what `message_start` reported.
    pub(crate) fn merge_anthropic(&self, into: &mut Usage) {
        let set = |slot: &mut u64, value: Option<u64>| {
            if let Some(v) = value {
                *slot = v;
            }
        };
        set(&mut into.input_tokens, self.input_tokens);
        set(&mut into.output_tokens, self.output_tokens);
        set(&mut into.cache_read_input_tokens, self.cache_read_input_tokens);
        set(&mut into.cache_creation_input_tokens, self.cache_creation_input_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_usage_reads_input_output_and_cached() {
        let body = br#"{"object":"response","usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1000},
            "output_tokens":50,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":1250}}"#;
        let usage = usage_from_response(Protocol::OpenAiResponses, body).unwrap();
        assert_eq!(
            usage,
            Usage {
                input_tokens: 1200,
                output_tokens: 50,
                cache_read_input_tokens: 1000,
                cache_creation_input_tokens: 0,
                reasoning_tokens: 20,
            }
        );
        assert_eq!(usage.total_input_tokens(Protocol::OpenAiResponses), 1200);
    }

    #[test]
    fn openai_chat_reasoning_tokens_are_read_apart_from_the_output_they_are_part_of() {
        let body = br#"{"object":"chat.completion","usage":{"prompt_tokens":10,"completion_tokens":300,
            "completion_tokens_details":{"reasoning_tokens":256}}}"#;
        let usage = usage_from_response(Protocol::OpenAiChat, body).unwrap();
        assert_eq!((usage.output_tokens, usage.reasoning_tokens), (300, 256));
        let anthropic = br#"{"type":"message","usage":{"input_tokens":10,"output_tokens":300}}"#;
        assert_eq!(usage_from_response(Protocol::AnthropicMessages, anthropic).unwrap().reasoning_tokens, 0);
    }

    #[test]
    fn one_read_of_an_answer_gives_its_usage_and_finish_reasons_as_the_two_readers_do() {
        let bodies: [(Protocol, &[u8]); 3] = [
            (
                Protocol::OpenAiChat,
                br#"{"choices":[{"message":{"content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            ),
            (Protocol::AnthropicMessages, br#"{"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}"#),
            (Protocol::OpenAiResponses, br#"{"status":"completed","usage":{"input_tokens":3,"output_tokens":2}}"#),
        ];
        for (protocol, body) in bodies {
            let answered = read_answer(protocol, body);
            assert_eq!(answered.usage, usage_from_response(protocol, body), "{protocol:?}");
            assert_eq!(answered.finish_reasons, crate::finish_reasons(protocol, body), "{protocol:?}");
            assert_eq!(answered.finish_reasons.len(), 1, "{protocol:?}");
        }
        assert_eq!(read_answer(Protocol::OpenAiChat, b"not json"), Answered::default());
    }

    #[test]
    fn openai_chat_usage_with_cache() {
        let body = br#"{"id":"chatcmpl-9x","object":"chat.completion","created":1730000000,"model":"gpt-4o-2024-08-06",
            "choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","refusal":null},"logprobs":null,"finish_reason":"stop"}],
            "usage":{"prompt_tokens":1200,"completion_tokens":12,"total_tokens":1212,
              "prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},
              "completion_tokens_details":{"reasoning_tokens":0}},"system_fingerprint":"fp_1"}"#;
        let usage = usage_from_response(Protocol::OpenAiChat, body).unwrap();
        assert_eq!(
            usage,
            Usage {
                input_tokens: 1200,
                output_tokens: 12,
                cache_read_input_tokens: 1024,
                cache_creation_input_tokens: 0,
                reasoning_tokens: 0,
            }
        );
        assert_eq!(usage.total_input_tokens(Protocol::OpenAiChat), 1200);
    }

    #[test]
    fn openai_embeddings_usage() {
        let body = br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]}],
            "model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}"#;
        let usage = usage_from_response(Protocol::OpenAiEmbeddings, body).unwrap();
        assert_eq!(usage, Usage { input_tokens: 8, ..Usage::default() });
    }

    #[test]
    fn anthropic_usage_with_cache() {
        let body = br#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",
            "content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,
            "usage":{"input_tokens":50,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":7,
              "service_tier":"standard"}}"#;
        let usage = usage_from_response(Protocol::AnthropicMessages, body).unwrap();
        assert_eq!(
            usage,
            Usage {
                input_tokens: 50,
                output_tokens: 7,
                cache_read_input_tokens: 1000,
                cache_creation_input_tokens: 200,
                reasoning_tokens: 0,
            }
        );
        assert_eq!(usage.total_input_tokens(Protocol::AnthropicMessages), 1250);
    }

    #[test]
    fn no_usage_in_error_or_garbage() {
        let err = br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert_eq!(usage_from_response(Protocol::OpenAiChat, err), None);
        assert_eq!(usage_from_response(Protocol::OpenAiChat, br#"{"usage":null}"#), None);
        assert_eq!(usage_from_response(Protocol::AnthropicMessages, b"<html>502</html>"), None);
    }
}
