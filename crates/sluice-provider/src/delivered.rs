//! [`DeliveredCount`]: the output a stream carried to its client, counted in tokens, so
//! that a stream which ends without the provider's final usage (the client left, the
//! provider broke off or stalled) is charged for what it delivered.
//!
//! It reads the events in the client's protocol, as the gateway sends them (after any
//! translation), and counts the generated text they carry: message text, refusals,
//! reasoning, tool-call names and arguments. The text is tokenized with the deployment's
//! tokenizer a few kilobytes at a time, cut at whitespace, so memory stays small however
//! long the answer. Each content event with text counts at least one token, which covers a
//! tokenizer that counts the provider's text lower than the provider does.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::estimate::{Estimator, TokenizerKind};
use crate::finish::FinishReasons;
use crate::protocol::Protocol;
use crate::sse::{self, Event};
use crate::tap::MAX_HELD_EVENT_BYTES;

/// Text gathered before it is tokenized (then cut at its last whitespace).
const BATCH_BYTES: usize = 4096;

/// Counts the output tokens of the events a stream delivered.
pub struct DeliveredCount {
    protocol: Protocol,
    estimator: Arc<Estimator>,
    kind: TokenizerKind,
    /// Bytes of an event whose end has not been seen.
    held: Vec<u8>,
    /// Text not tokenized yet.
    pending: String,
    /// Tokens of the text tokenized so far.
    tokens: u64,
    /// Content events that carried text.
    events: u64,
    /// Why the model stopped, as the events said.
    finish: FinishReasons,
}

impl std::fmt::Debug for DeliveredCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveredCount")
            .field("protocol", &self.protocol)
            .field("tokens", &self.tokens())
            .finish_non_exhaustive()
    }
}

impl DeliveredCount {
    /// Counts `protocol` events (the client's) with `kind`.
    #[must_use]
    pub fn new(protocol: Protocol, estimator: Arc<Estimator>, kind: TokenizerKind) -> Self {
        Self {
            protocol,
            estimator,
            kind,
            held: Vec::new(),
            pending: String::new(),
            tokens: 0,
            events: 0,
            finish: FinishReasons::default(),
        }
    }

    /// Reads `bytes` the client was sent (whole events, or pieces of them).
    pub fn observe(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let rest = buf.get(start..).unwrap_or_default();
            let blank = sse::leading_blank_len(rest);
            if blank > 0 {
                start += blank;
                continue;
            }
            let Some(len) = sse::event_len(rest, 0) else { break };
            self.event(&rest[..len]);
            start += len;
        }
        buf.drain(..start);
        if buf.len() > MAX_HELD_EVENT_BYTES {
            // An event this long is no content delta; dropping it keeps memory bounded.
            buf.clear();
        }
        self.held = buf;
    }

    /// Output tokens delivered so far: the text's tokens, at least one per content event.
    #[must_use]
    pub fn tokens(&self) -> u64 {
        let mut tokens = self.tokens;
        if !self.pending.is_empty() {
            tokens = tokens.saturating_add(self.estimator.text_tokens(&self.kind, &self.pending));
        }
        if let Ok(held) = std::str::from_utf8(&self.held)
            && !held.trim().is_empty()
        {
            let mut tail = Self::new(self.protocol, Arc::clone(&self.estimator), self.kind);
            tail.event(held.as_bytes());
            tokens = tokens.saturating_add(tail.tokens());
        }
        tokens.max(self.events)
    }

    /// The finish reasons the stream's events gave so far (see [`crate::finish`]).
    #[must_use]
    pub fn finish_reasons(&self) -> &[String] {
        self.finish.reasons()
    }

    fn event(&mut self, event: &[u8]) {
        let Ok(text) = std::str::from_utf8(event) else { return };
        let event = Event::parse(text);
        let Some(data) = event.data.as_deref() else { return };
        self.finish.event(self.protocol, event.name, data);
        let before = self.pending.len();
        let mut pieces = 0;
        match self.protocol {
            Protocol::OpenAiChat | Protocol::OpenAiCompletions => pieces = self.openai(data),
            Protocol::AnthropicMessages => {
                let name = event.name.or_else(|| type_of(data));
                if matches!(name, Some("content_block_delta" | "content_block_start")) {
                    pieces = self.anthropic(data);
                }
            }
            Protocol::OpenAiResponses => {
                let name = event.name.or_else(|| type_of(data)).unwrap_or_default();
                // Audio deltas are base64 audio, not text.
                if name.ends_with(".delta") && name != "response.audio.delta" {
                    pieces = self.responses(data);
                }
            }
            Protocol::OpenAiEmbeddings => {}
        }
        if pieces > 0 && self.pending.len() > before {
            self.events = self.events.saturating_add(1);
        }
        if self.pending.len() >= BATCH_BYTES {
            self.tokenize_head();
        }
    }

    /// Adds `text` to what is counted; returns whether it held any.
    fn add(&mut self, text: Option<&str>) -> usize {
        match text {
            Some(t) if !t.is_empty() => {
                self.pending.push_str(t);
                1
            }
            _ => 0,
        }
    }

    fn openai(&mut self, data: &str) -> usize {
        if data.trim() == "[DONE]" || !CONTENT_KEYS.iter().any(|key| data.contains(key)) {
            return 0;
        }
        let Ok(chunk) = serde_json::from_str::<ChatChunk<'_>>(data) else { return 0 };
        let mut n = 0;
        for choice in chunk.choices {
            n += self.add(choice.text.0.as_deref());
            let Some(delta) = choice.delta else { continue };
            for text in [delta.content, delta.refusal, delta.reasoning_content, delta.reasoning] {
                n += self.add(text.0.as_deref());
            }
            for call in delta.tool_calls.unwrap_or_default() {
                if let Some(function) = call.function {
                    n += self.add(function.name.0.as_deref());
                    n += self.add(function.arguments.0.as_deref());
                }
            }
        }
        n
    }

    fn anthropic(&mut self, data: &str) -> usize {
        let Ok(event) = serde_json::from_str::<AnthropicEvent<'_>>(data) else { return 0 };
        let mut n = 0;
        if let Some(delta) = event.delta {
            for text in [delta.text, delta.partial_json, delta.thinking] {
                n += self.add(text.0.as_deref());
            }
        }
        if let Some(block) = event.content_block {
            n += self.add(block.name.0.as_deref());
        }
        n
    }

    fn responses(&mut self, data: &str) -> usize {
        let Ok(event) = serde_json::from_str::<ResponsesDelta<'_>>(data) else { return 0 };
        self.add(event.delta.0.as_deref())
    }

    /// Tokenizes the pending text up to its last whitespace (all of it if it has none).
    fn tokenize_head(&mut self) {
        let cut = self.pending.rfind(char::is_whitespace).filter(|&at| at > 0).unwrap_or(self.pending.len());
        let head: String = self.pending.drain(..cut).collect();
        self.tokens = self.tokens.saturating_add(self.estimator.text_tokens(&self.kind, &head));
    }
}

/// Keys whose presence means an OpenAI chunk may carry generated text.
const CONTENT_KEYS: [&str; 7] =
    ["\"content\"", "\"refusal\"", "\"reasoning_content\"", "\"reasoning\"", "\"text\"", "\"arguments\"", "\"name\""];

/// The data's `"type"` string, for streams without `event:` lines.
fn type_of(data: &str) -> Option<&str> {
    let value = sse::value_of(data, "\"type\"")?.strip_prefix('"')?;
    value.split('"').next()
}

/// A string member, or nothing when the member holds anything else (some providers send
/// `reasoning` as an object): a chunk is never dropped for one odd member.
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Loose;
        impl<'de> Visitor<'de> for Loose {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        deserializer.deserialize_any(Loose).map(Text)
    }
}

#[derive(Deserialize)]
struct ChatChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<ChatDelta<'a>>,
    /// Legacy completions.
    #[serde(borrow, default)]
    text: Text<'a>,
}

#[derive(Deserialize)]
struct ChatDelta<'a> {
    #[serde(borrow, default)]
    content: Text<'a>,
    #[serde(borrow, default)]
    refusal: Text<'a>,
    #[serde(borrow, default)]
    reasoning_content: Text<'a>,
    #[serde(borrow, default)]
    reasoning: Text<'a>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Text<'a>,
    #[serde(borrow, default)]
    arguments: Text<'a>,
}

#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(borrow, default)]
    delta: Option<AnthropicDelta<'a>>,
    #[serde(borrow, default)]
    content_block: Option<AnthropicBlock<'a>>,
}

#[derive(Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(borrow, default)]
    text: Text<'a>,
    #[serde(borrow, default)]
    partial_json: Text<'a>,
    #[serde(borrow, default)]
    thinking: Text<'a>,
}

/// A block's start: a tool call's name is generated output.
#[derive(Deserialize)]
struct AnthropicBlock<'a> {
    #[serde(borrow, default)]
    name: Text<'a>,
}

#[derive(Deserialize)]
struct ResponsesDelta<'a> {
    #[serde(borrow, default)]
    delta: Text<'a>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(protocol: Protocol, stream: &str, cut_every: usize) -> u64 {
        let estimator = Arc::new(Estimator::new().unwrap());
        let mut count = DeliveredCount::new(protocol, estimator, TokenizerKind::Cl100k);
        for piece in stream.as_bytes().chunks(cut_every) {
            count.observe(piece);
        }
        count.tokens()
    }

    #[test]
    fn openai_text_reasoning_and_tool_calls_count_however_the_bytes_are_cut() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the quick\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" brown fox\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":{\"summary\":\"x\"}}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"lookup\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"q\\\": 1}\"}}]}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9}}\n\n",
            "data: [DONE]\n\n",
        );
        let whole = count(Protocol::OpenAiChat, stream, stream.len());
        // The text, reasoning, tool name and arguments, as one text; the object-valued
        // `reasoning` and the usage chunk add nothing.
        let estimator = Estimator::new().unwrap();
        let text = " the quick brown foxlookup{\"q\": 1}";
        assert_eq!(whole, estimator.text_tokens(&TokenizerKind::Cl100k, text));
        assert!(whole >= 8, "{whole}");
        for cut in [1, 7, 64] {
            assert_eq!(count(Protocol::OpenAiChat, stream, cut), whole, "cut every {cut}");
        }
    }

    #[test]
    fn anthropic_and_responses_deltas_count_and_other_events_do_not() {
        let anthropic = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the quick brown\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\" fox\"}}\n\n",
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        );
        assert_eq!(count(Protocol::AnthropicMessages, anthropic, 5), 4);
        let responses = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\" the quick\"}\n\n",
            "event: response.audio.delta\ndata: {\"type\":\"response.audio.delta\",\"delta\":\"QUJD\"}\n\n",
            "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\" jumps\"}\n\n",
        );
        assert_eq!(count(Protocol::OpenAiResponses, responses, 3), 3);
    }

    #[test]
    fn a_long_answer_counts_like_its_whole_text_and_each_event_is_at_least_one_token() {
        let words = " the quick brown fox".repeat(2_000);
        let mut stream = String::new();
        for piece in words.as_bytes().chunks(20) {
            let text = std::str::from_utf8(piece).unwrap();
            stream.push_str(&format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"));
        }
        assert_eq!(count(Protocol::OpenAiChat, &stream, 1_000), 8_000);
        // Ten one-character pieces of one word: ten events, so at least ten tokens.
        let mut tiny = String::new();
        for c in "abcdefghij".chars() {
            tiny.push_str(&format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{c}\"}}}}]}}\n\n"));
        }
        assert_eq!(count(Protocol::OpenAiChat, &tiny, 9), 10);
    }

    #[test]
    fn an_unfinished_last_event_still_counts() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\" the quick\"}}]}";
        assert_eq!(count(Protocol::OpenAiChat, stream, 4), 2);
    }
}
