//! Why the model stopped, as the client was told: OpenAI's `finish_reason` of each choice,
//! Anthropic's `stop_reason`, a Responses answer's `status` (or, when it is `incomplete`,
//! `incomplete_details.reason`). Read from a whole answer ([`finish_reasons`]) or from a
//! stream's events one at a time ([`FinishReasons::event`]), in the client's protocol, for
//! traces' `gen_ai.response.finish_reasons` and the access log. The provider's own words
//! are kept (they are what the client saw); only their count is bounded.

use serde::Deserialize;

use crate::protocol::Protocol;

/// The most reasons kept (one per choice; a client asking for more choices than this is
/// described by the first ones).
const MAX_REASONS: usize = 8;
/// The longest reason kept, in bytes (a provider's reason is a short word).
const MAX_REASON_BYTES: usize = 64;

/// The finish reasons of a whole answer `body` in `protocol`, in choice order; none for a
/// body that is not an answer. (The gateway reads them with the usage, in one pass:
/// [`crate::read_answer`].)
#[must_use]
pub fn finish_reasons(protocol: Protocol, body: &[u8]) -> Vec<String> {
    serde_json::from_slice::<Stopped>(body).map(|s| s.reasons(protocol)).unwrap_or_default()
}

/// The members of a whole answer that say why it stopped, in every protocol (their union).
#[derive(Default, Deserialize)]
pub(crate) struct Stopped {
    #[serde(default)]
    pub(crate) choices: Vec<Choice>,
    #[serde(default)]
    pub(crate) stop_reason: Option<String>,
    #[serde(default)]
    pub(crate) status: Option<String>,
    #[serde(default)]
    pub(crate) incomplete_details: Option<Incomplete>,
}

impl Stopped {
    /// The reasons, as `protocol` words them.
    pub(crate) fn reasons(self, protocol: Protocol) -> Vec<String> {
        let mut reasons = FinishReasons::default();
        match protocol {
            Protocol::OpenAiChat | Protocol::OpenAiCompletions => reasons.choices(self.choices),
            Protocol::AnthropicMessages => reasons.add(self.stop_reason.as_deref()),
            Protocol::OpenAiResponses => {
                reasons.response(Response { status: self.status, incomplete_details: self.incomplete_details });
            }
            Protocol::OpenAiEmbeddings => {}
        }
        reasons.0
    }
}

/// The finish reasons a stream has shown so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinishReasons(Vec<String>);

impl FinishReasons {
    /// Reads one event's `data` (its `event:` name, if it had one) in `protocol`.
    pub fn event(&mut self, protocol: Protocol, name: Option<&str>, data: &str) {
        match protocol {
            Protocol::OpenAiChat | Protocol::OpenAiCompletions => {
                // Most chunks carry no reason (`"finish_reason":null`): not parsed.
                let named = data.contains("\"finish_reason\":\"") || data.contains("\"finish_reason\": \"");
                if named && let Ok(chunk) = serde_json::from_str::<Choices>(data) {
                    self.choices(chunk.choices);
                }
            }
            Protocol::AnthropicMessages => {
                if name.is_none_or(|n| n == "message_delta")
                    && data.contains("\"stop_reason\"")
                    && let Ok(event) = serde_json::from_str::<MessageDelta>(data)
                {
                    self.add(event.delta.and_then(|d| d.stop_reason).as_deref());
                }
            }
            Protocol::OpenAiResponses => {
                let ends = ["response.completed", "response.incomplete", "response.failed"];
                let named_end = name.is_some_and(|n| ends.contains(&n));
                if (named_end || (name.is_none() && ends.iter().any(|e| data.contains(e))))
                    && let Ok(ResponseEvent { response: Some(response) }) = serde_json::from_str(data)
                {
                    self.response(response);
                }
            }
            Protocol::OpenAiEmbeddings => {}
        }
    }

    /// The reasons seen, in order.
    #[must_use]
    pub fn reasons(&self) -> &[String] {
        &self.0
    }

    fn choices(&mut self, choices: Vec<Choice>) {
        for choice in choices {
            self.add(choice.finish_reason.as_deref());
        }
    }

    fn response(&mut self, response: Response) {
        let incomplete = response.incomplete_details.and_then(|d| d.reason);
        self.add(incomplete.as_deref().or(response.status.as_deref()));
    }

    fn add(&mut self, reason: Option<&str>) {
        let Some(reason) = reason.filter(|r| !r.is_empty()) else { return };
        if self.0.len() < MAX_REASONS {
            let mut end = reason.len().min(MAX_REASON_BYTES);
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            self.0.push(reason[..end].to_owned());
        }
    }
}

#[derive(Deserialize)]
struct Choices {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: Option<Message>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
}

#[derive(Deserialize)]
pub(crate) struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseEvent {
    #[serde(default)]
    response: Option<Response>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_answers_name_their_reasons_in_the_clients_words() {
        let chat = br#"{"choices":[{"index":0,"finish_reason":"stop"},{"index":1,"finish_reason":"length"}]}"#;
        assert_eq!(finish_reasons(Protocol::OpenAiChat, chat), ["stop", "length"]);
        let messages = br#"{"type":"message","stop_reason":"tool_use","content":[]}"#;
        assert_eq!(finish_reasons(Protocol::AnthropicMessages, messages), ["tool_use"]);
        let done = br#"{"object":"response","status":"completed"}"#;
        assert_eq!(finish_reasons(Protocol::OpenAiResponses, done), ["completed"]);
        let cut = br#"{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}"#;
        assert_eq!(finish_reasons(Protocol::OpenAiResponses, cut), ["max_output_tokens"]);
        assert!(finish_reasons(Protocol::OpenAiChat, b"not json").is_empty());
        assert!(finish_reasons(Protocol::OpenAiEmbeddings, br#"{"data":[]}"#).is_empty());
    }

    #[test]
    fn a_stream_shows_its_reason_in_its_last_events() {
        let mut chat = FinishReasons::default();
        chat.event(Protocol::OpenAiChat, None, r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}"#);
        assert!(chat.reasons().is_empty());
        chat.event(Protocol::OpenAiChat, None, r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#);
        chat.event(Protocol::OpenAiChat, None, "[DONE]");
        assert_eq!(chat.reasons(), ["tool_calls"]);

        let mut messages = FinishReasons::default();
        let delta = r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":5}}"#;
        messages.event(Protocol::AnthropicMessages, Some("message_delta"), delta);
        messages.event(Protocol::AnthropicMessages, Some("message_stop"), r#"{"type":"message_stop"}"#);
        assert_eq!(messages.reasons(), ["max_tokens"]);

        let mut responses = FinishReasons::default();
        let done = r#"{"type":"response.completed","response":{"status":"completed"}}"#;
        responses.event(Protocol::OpenAiResponses, Some("response.completed"), done);
        assert_eq!(responses.reasons(), ["completed"]);
    }

    #[test]
    fn a_hostile_answer_cannot_make_the_list_long() {
        let many = format!(r#"{{"choices":[{}]}}"#, vec![r#"{"finish_reason":"stop"}"#; 100].join(","));
        assert_eq!(finish_reasons(Protocol::OpenAiChat, many.as_bytes()).len(), MAX_REASONS);
        let long = format!(r#"{{"stop_reason":"{}"}}"#, "é".repeat(100));
        let reasons = finish_reasons(Protocol::AnthropicMessages, long.as_bytes());
        assert!(reasons[0].len() <= MAX_REASON_BYTES, "{}", reasons[0].len());
    }
}
