//! [`AnthropicToOpenAiStream`]: an Anthropic messages stream as OpenAI chat chunks.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::pipe::{Pipe, Translator, data_object, write_event};
use crate::protocol::Protocol;
use crate::sse::Event;
use crate::translate::json::{self, Object, object};
use crate::translate::mapping;
use crate::usage::{RawUsage, Usage};

/// What a client gets when the upstream stream breaks off (the gateway relay's wording).
pub(super) const INTERRUPTION: &[u8] = b"data: {\"error\":{\"message\":\"the provider's stream was interrupted\",\"type\":\"stream_interrupted\",\"code\":\"upstream_stream_interrupted\"}}\n\n";
/// The id used if the upstream never sent `message_start`.
const FALLBACK_ID: &str = "chatcmpl-sluice";

/// Translates an Anthropic messages SSE stream into OpenAI chat-completion chunks.
///
/// `message_start` → a first chunk with `delta.role = "assistant"`; text deltas →
/// `delta.content`; a `tool_use` block → a `delta.tool_calls[{index, id, type, function:
/// {name, arguments: ""}}]` chunk, its `input_json_delta` fragments → `function.arguments`
/// fragments of the same index; `message_delta.stop_reason` → a chunk with
/// `finish_reason`; `message_stop` → (when the client set `stream_options.include_usage`)
/// a usage chunk with `choices: []`, then `data: [DONE]`. An upstream `error` event becomes
/// an OpenAI error chunk `data: {"error": {..}}` and ends the stream. `ping` events and
/// server-tool blocks are dropped.
///
/// Thinking, as LiteLLM streams it to OpenAI-shaped clients of Claude
/// (<https://docs.litellm.ai/docs/reasoning_content>): each `thinking_delta` → a
/// `delta.reasoning_content` fragment; when a thinking block's `signature_delta` arrives, a
/// chunk with `delta.thinking_blocks: [{type: "thinking", thinking, signature}]` carrying the
/// whole block (its text so far and its signature, verbatim), which the client sends back
/// on the assistant message to replay it; a `redacted_thinking` block → a chunk with
/// `delta.thinking_blocks: [{type: "redacted_thinking", data}]` as it starts.
///
/// ```
/// use sluice_provider::AnthropicToOpenAiStream;
///
/// let mut stream = AnthropicToOpenAiStream::new("gpt-4o", false, 1_730_000_000);
/// let out = stream.push(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n");
/// assert!(std::str::from_utf8(&out).unwrap().contains("\"role\":\"assistant\""));
/// let tail = stream.finish(); // no message_stop came: the client is told
/// assert!(std::str::from_utf8(&tail).unwrap().starts_with("data: {\"error\""));
/// ```
#[derive(Debug)]
pub struct AnthropicToOpenAiStream {
    pipe: Pipe<State>,
}

impl AnthropicToOpenAiStream {
    /// A translator answering as `model` (the name the client asked for). `include_usage`:
    /// the client set `stream_options.include_usage`. `created`: the Unix time to report
    /// in every chunk (injected: this crate reads no clock).
    #[must_use]
    pub fn new(model: &str, include_usage: bool, created: u64) -> Self {
        let state = State {
            model: model.to_owned(),
            include_usage,
            created,
            id: None,
            blocks: Vec::new(),
            thoughts: Vec::new(),
            tool_calls: 0,
            usage: None,
            ended: false,
            completed: false,
        };
        Self { pipe: Pipe::new(state) }
    }

    /// Feeds upstream bytes; returns the client bytes for every event they completed.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.pipe.push(chunk)
    }

    /// Ends the stream: translates a last unterminated event, then, if the upstream never
    /// sent `message_stop` (nor an error), appends the OpenAI interruption error chunk.
    pub fn finish(&mut self) -> Bytes {
        self.pipe.finish()
    }

    /// The usage seen so far, as Anthropic reported it (`message_start` updated by
    /// `message_delta`): what the gateway settles against the upstream deployment.
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        self.pipe.inner.usage
    }

    /// Whether the upstream's `message_stop` arrived.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.pipe.inner.completed
    }
}

/// What an Anthropic content block turned into.
#[derive(Debug, Clone, Copy)]
enum Block {
    Text,
    /// A tool call with this OpenAI `tool_calls` index.
    Tool(u64),
    /// A thinking block: its index in `State::thoughts`.
    Thinking(usize),
    /// Redacted thinking (handed out whole as it starts) and server-tool blocks.
    Dropped,
}

/// A thinking block being streamed.
#[derive(Debug, Default)]
struct Thought {
    text: String,
    signature: String,
    /// Whether its `thinking_blocks` chunk went out.
    sent: bool,
}

#[derive(Debug)]
struct State {
    model: String,
    include_usage: bool,
    created: u64,
    /// The completion id, known once `message_start` came (and the role chunk went out).
    id: Option<String>,
    /// Anthropic block index → what it became.
    blocks: Vec<(u64, Block)>,
    /// The thinking blocks seen, in order.
    thoughts: Vec<Thought>,
    tool_calls: u64,
    usage: Option<Usage>,
    ended: bool,
    completed: bool,
}

impl Translator for State {
    fn event(&mut self, event: &Event<'_>, out: &mut Vec<u8>) {
        let Some(data) = data_object(event) else {
            return;
        };
        let kind = data.get("type").and_then(Value::as_str).or(event.name).unwrap_or_default();
        match kind {
            "message_start" => self.message_start(&data, out),
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out),
            "content_block_stop" => self.block_stop(&data, out),
            "message_delta" => self.message_delta(&data, out),
            "message_stop" => self.message_stop(out),
            "error" => self.error(&data, out),
            _ => {}
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn interrupt(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(INTERRUPTION);
        self.ended = true;
    }
}

impl State {
    fn message_start(&mut self, data: &Object, out: &mut Vec<u8>) {
        let message = data.get("message").and_then(Value::as_object);
        if let Some(raw) = message.and_then(|m| m.get("usage")).and_then(|u| RawUsage::deserialize(u).ok()) {
            self.usage = Some(raw.into_usage(Protocol::AnthropicMessages));
        }
        let id = message.and_then(|m| m.get("id")).and_then(Value::as_str).map(mapping::openai_id);
        self.start(id, out);
    }

    /// Sends the role chunk once.
    fn start(&mut self, id: Option<String>, out: &mut Vec<u8>) {
        if self.id.is_none() {
            self.id = Some(id.unwrap_or_else(|| FALLBACK_ID.to_owned()));
            let delta = object([("role", Value::from("assistant")), ("content", Value::from(""))]);
            self.chunk(Value::Object(delta), Value::Null, out);
        }
    }

    fn block_start(&mut self, data: &Object, out: &mut Vec<u8>) {
        self.start(None, out);
        let index = data.get("index").and_then(Value::as_u64).unwrap_or_default();
        let block = data.get("content_block").and_then(Value::as_object).cloned().unwrap_or_default();
        let kind = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    self.text(text, out);
                }
                Block::Text
            }
            Some("tool_use") => self.tool_start(&block, out),
            Some("thinking") => {
                let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default();
                let signature = block.get("signature").and_then(Value::as_str).unwrap_or_default();
                if !text.is_empty() {
                    self.reasoning(text, out);
                }
                self.thoughts.push(Thought { text: text.to_owned(), signature: signature.to_owned(), sent: false });
                Block::Thinking(self.thoughts.len() - 1)
            }
            Some("redacted_thinking") => {
                self.thinking_blocks(Value::Object(block), out);
                Block::Dropped
            }
            _ => Block::Dropped,
        };
        self.blocks.push((index, kind));
    }

    /// Opens tool call number `self.tool_calls` with its id and name.
    fn tool_start(&mut self, block: &Object, out: &mut Vec<u8>) -> Block {
        let index = self.tool_calls;
        self.tool_calls += 1;
        let function =
            object([("name", block.get("name").cloned().unwrap_or_default()), ("arguments", Value::from(""))]);
        let call = object([
            ("index", Value::from(index)),
            ("id", block.get("id").cloned().unwrap_or_default()),
            ("type", Value::from("function")),
            ("function", Value::Object(function)),
        ]);
        self.tool_chunk(call, out);
        Block::Tool(index)
    }

    fn block_delta(&mut self, data: &Object, out: &mut Vec<u8>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or_default();
        let Some(delta) = data.get("delta").and_then(Value::as_object) else {
            return;
        };
        let block = self.blocks.iter().rev().find(|(i, _)| *i == index).map(|(_, b)| *b);
        let str_of = |key| delta.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
        match (block, delta.get("type").and_then(Value::as_str)) {
            (Some(Block::Text), Some("text_delta")) => {
                if let Some(text) = str_of("text") {
                    self.text(text, out);
                }
            }
            (Some(Block::Thinking(k)), Some("thinking_delta")) => {
                if let Some(text) = str_of("thinking") {
                    if let Some(thought) = self.thoughts.get_mut(k) {
                        thought.text.push_str(text);
                    }
                    self.reasoning(text, out);
                }
            }
            (Some(Block::Thinking(k)), Some("signature_delta")) => {
                if let Some(signature) = str_of("signature")
                    && let Some(thought) = self.thoughts.get_mut(k)
                {
                    thought.signature.push_str(signature);
                    self.send_thought(k, out);
                }
            }
            (Some(Block::Tool(call)), Some("input_json_delta")) => {
                if let Some(fragment) = str_of("partial_json") {
                    let function = object([("arguments", Value::from(fragment))]);
                    let call = object([("index", Value::from(call)), ("function", Value::Object(function))]);
                    self.tool_chunk(call, out);
                }
            }
            _ => {}
        }
    }

    /// A thinking block's end: its block goes out now if it came signed in its start
    /// (a stream re-rendered from a whole answer) rather than by `signature_delta`.
    fn block_stop(&mut self, data: &Object, out: &mut Vec<u8>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or_default();
        let block = self.blocks.iter().rev().find(|(i, _)| *i == index).map(|(_, b)| *b);
        if let Some(Block::Thinking(k)) = block
            && self.thoughts.get(k).is_some_and(|t| !t.sent && !t.signature.is_empty())
        {
            self.send_thought(k, out);
        }
    }

    /// Thinking block `k`, whole and signed, as a `delta.thinking_blocks` chunk.
    fn send_thought(&mut self, k: usize, out: &mut Vec<u8>) {
        let Some(thought) = self.thoughts.get_mut(k) else { return };
        thought.sent = true;
        let block = object([
            ("type", Value::from("thinking")),
            ("thinking", Value::from(thought.text.as_str())),
            ("signature", Value::from(thought.signature.as_str())),
        ]);
        self.thinking_blocks(Value::Object(block), out);
    }

    fn thinking_blocks(&mut self, block: Value, out: &mut Vec<u8>) {
        let delta = object([("thinking_blocks", Value::Array(vec![block]))]);
        self.chunk(Value::Object(delta), Value::Null, out);
    }

    fn reasoning(&mut self, text: &str, out: &mut Vec<u8>) {
        self.chunk(Value::Object(object([("reasoning_content", Value::from(text))])), Value::Null, out);
    }

    fn message_delta(&mut self, data: &Object, out: &mut Vec<u8>) {
        if let Some(raw) = data.get("usage").and_then(|u| RawUsage::deserialize(u).ok()) {
            raw.merge_anthropic(self.usage.get_or_insert_with(Usage::default));
        }
        let stop_reason = data.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str);
        if let Some(stop_reason) = stop_reason {
            self.start(None, out);
            let finish = mapping::finish_reason(Some(stop_reason));
            self.chunk(Value::Object(Object::new()), Value::from(finish), out);
        }
    }

    fn message_stop(&mut self, out: &mut Vec<u8>) {
        self.start(None, out);
        if self.include_usage
            && let Some(usage) = &self.usage
        {
            let mut chunk = self.envelope(Vec::new());
            chunk.insert("usage".to_owned(), mapping::openai_usage(usage));
            write_event(out, None, &Value::Object(chunk));
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
        self.ended = true;
        self.completed = true;
    }

    /// An upstream `error` event as an OpenAI error chunk (what the SDKs raise on).
    fn error(&mut self, data: &Object, out: &mut Vec<u8>) {
        let error = data.get("error").and_then(Value::as_object);
        let field = |key: &str, default: &str| {
            Value::from(error.and_then(|e| json::present(e, key)).and_then(Value::as_str).unwrap_or(default))
        };
        let body = object([
            ("message", field("message", "the provider reported an error")),
            ("type", field("type", "api_error")),
            ("code", Value::Null),
        ]);
        write_event(out, None, &Value::Object(object([("error", Value::Object(body))])));
        self.ended = true;
    }

    fn text(&mut self, text: &str, out: &mut Vec<u8>) {
        self.chunk(Value::Object(object([("content", Value::from(text))])), Value::Null, out);
    }

    fn tool_chunk(&mut self, call: Object, out: &mut Vec<u8>) {
        let delta = object([("tool_calls", Value::Array(vec![Value::Object(call)]))]);
        self.chunk(Value::Object(delta), Value::Null, out);
    }

    /// One `chat.completion.chunk` with a single choice.
    fn chunk(&self, delta: Value, finish_reason: Value, out: &mut Vec<u8>) {
        let choice = object([
            ("index", Value::from(0)),
            ("delta", delta),
            ("logprobs", Value::Null),
            ("finish_reason", finish_reason),
        ]);
        let chunk = self.envelope(vec![Value::Object(choice)]);
        write_event(out, None, &Value::Object(chunk));
    }

    fn envelope(&self, choices: Vec<Value>) -> Object {
        object([
            ("id", Value::from(self.id.as_deref().unwrap_or(FALLBACK_ID))),
            ("object", Value::from("chat.completion.chunk")),
            ("created", Value::from(self.created)),
            ("model", Value::from(self.model.as_str())),
            ("choices", Value::Array(choices)),
        ])
    }
}
