//! Stream translation, Anthropic messages events ⇄ OpenAI chat chunks: what the SDKs'
//! stream accumulators would build from the output, split invariance, interruptions.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers fail loudly")]

use proptest::prelude::*;
use serde_json::{Value, json};
use sluice_provider::{AnthropicToOpenAiStream, OpenAiToAnthropicStream, Usage};

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_014p7gG3wDgGV9EUtLvnow3U\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":1024,\"output_tokens\":2}}}\n\n",
    "event: ping\n",
    "data: {\"type\": \"ping\"}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay, let me check \"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the wéather.\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\":\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" \\\"San Francisco, CA\\\"}\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

const OPENAI_STREAM: &str = concat!(
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me lôok.\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{}\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":null}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B9M\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":17,\"total_tokens\":1217,\"prompt_tokens_details\":{\"cached_tokens\":1024},\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\r\n\r\n",
    "data: [DONE]\r\n\r\n",
);

/// What the OpenAI SDKs' chunk accumulator ends up with.
#[derive(Debug, Default, PartialEq)]
struct OpenAiView {
    role: Option<String>,
    content: String,
    /// `(id, name, arguments)` per tool-call index.
    tool_calls: Vec<(String, String, String)>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    error: Option<Value>,
    done: bool,
}

fn openai_view(bytes: &[u8]) -> OpenAiView {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut view = OpenAiView::default();
    for event in text.split("\n\n").filter(|e| !e.is_empty()) {
        assert!(!view.done && view.error.is_none(), "event after the end: {event}");
        let data = event.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data line: {event}"));
        if data == "[DONE]" {
            view.done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        if let Some(error) = chunk.get("error") {
            view.error = Some(error.clone());
            continue;
        }
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert!(chunk["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert!(chunk["created"].is_u64() && chunk["model"].is_string());
        if let Some(usage) = chunk.get("usage") {
            assert_eq!(chunk["choices"], json!([]));
            view.usage = Some(usage.clone());
        }
        for choice in chunk["choices"].as_array().unwrap() {
            accumulate_choice(&mut view, choice);
        }
    }
    view
}

fn accumulate_choice(view: &mut OpenAiView, choice: &Value) {
    assert_eq!(choice["index"], 0);
    let delta = &choice["delta"];
    if let Some(role) = delta["role"].as_str() {
        view.role = Some(role.to_owned());
    }
    view.content.push_str(delta["content"].as_str().unwrap_or_default());
    for call in delta["tool_calls"].as_array().into_iter().flatten() {
        let index = usize::try_from(call["index"].as_u64().unwrap()).unwrap();
        if index == view.tool_calls.len() {
            assert_eq!(call["type"], "function");
            let id = call["id"].as_str().unwrap().to_owned();
            view.tool_calls.push((id, call["function"]["name"].as_str().unwrap().to_owned(), String::new()));
        }
        view.tool_calls[index].2.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
    }
    if let Some(finish) = choice["finish_reason"].as_str() {
        view.finish_reason = Some(finish.to_owned());
    }
}

/// What the Anthropic SDKs' message accumulator ends up with (the final `Message`), plus
/// the event names in order.
fn anthropic_view(bytes: &[u8]) -> (Value, Vec<String>) {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut message = Value::Null;
    let mut json_buf = String::new();
    let mut names = Vec::new();
    for event in text.split("\n\n").filter(|e| !e.is_empty()) {
        let (name_line, data_line) = event.split_once('\n').unwrap();
        let name = name_line.strip_prefix("event: ").unwrap();
        let data: Value = serde_json::from_str(data_line.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(data["type"], name, "event name and data type agree");
        assert!(names.last().is_none_or(|n| n != "message_stop" && n != "error"), "event after the end");
        names.push(name.to_owned());
        match name {
            "message_start" => message = data["message"].clone(),
            "content_block_start" => {
                let content = message["content"].as_array_mut().unwrap();
                assert_eq!(data["index"], content.len());
                content.push(data["content_block"].clone());
                json_buf.clear();
            }
            "content_block_delta" => {
                let last = message["content"].as_array().unwrap().len() - 1;
                assert_eq!(data["index"], last);
                let block = &mut message["content"][last];
                match data["delta"]["type"].as_str().unwrap() {
                    "text_delta" => {
                        let text =
                            format!("{}{}", block["text"].as_str().unwrap(), data["delta"]["text"].as_str().unwrap());
                        block["text"] = json!(text);
                    }
                    "input_json_delta" => json_buf.push_str(data["delta"]["partial_json"].as_str().unwrap()),
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                let last = message["content"].as_array().unwrap().len() - 1;
                assert_eq!(data["index"], last);
                if message["content"][last]["type"] == "tool_use" && !json_buf.is_empty() {
                    message["content"][last]["input"] = serde_json::from_str(&json_buf).unwrap();
                }
            }
            "message_delta" => {
                message["stop_reason"] = data["delta"]["stop_reason"].clone();
                for (key, value) in data["usage"].as_object().unwrap() {
                    message["usage"][key] = value.clone();
                }
            }
            "message_stop" | "ping" => {}
            "error" => message["error"] = data["error"].clone(),
            other => panic!("unknown event {other}"),
        }
    }
    (message, names)
}

fn run_to_openai(chunks: &[&[u8]], include_usage: bool) -> (Vec<u8>, AnthropicToOpenAiStream) {
    let mut stream = AnthropicToOpenAiStream::new("gpt-4o", include_usage, 1_730_000_000);
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&stream.push(chunk));
    }
    out.extend_from_slice(&stream.finish());
    (out, stream)
}

fn run_to_anthropic(chunks: &[&[u8]]) -> (Vec<u8>, OpenAiToAnthropicStream) {
    let mut stream = OpenAiToAnthropicStream::new("claude-sonnet-4-5");
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&stream.push(chunk));
    }
    out.extend_from_slice(&stream.finish());
    (out, stream)
}

#[test]
fn anthropic_stream_as_openai_chunks() {
    let (out, stream) = run_to_openai(&[ANTHROPIC_STREAM.as_bytes()], true);
    let view = openai_view(&out);
    assert_eq!(
        view,
        OpenAiView {
            role: Some("assistant".to_owned()),
            content: "Okay, let me check the wéather.".to_owned(),
            tool_calls: vec![(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_owned(),
                "get_weather".to_owned(),
                "{\"location\": \"San Francisco, CA\"}".to_owned()
            )],
            finish_reason: Some("tool_calls".to_owned()),
            usage: Some(json!({"prompt_tokens": 1496, "completion_tokens": 89, "total_tokens": 1585,
                "prompt_tokens_details": {"cached_tokens": 1024}})),
            error: None,
            done: true,
        }
    );
    assert!(std::str::from_utf8(&out).unwrap().ends_with("data: [DONE]\n\n"));
    assert!(stream.completed());
    let usage = Usage {
        input_tokens: 472,
        output_tokens: 89,
        cache_read_input_tokens: 1024,
        cache_creation_input_tokens: 0,
        reasoning_tokens: 0,
    };
    assert_eq!(stream.usage(), Some(usage));
}

#[test]
fn openai_usage_chunk_only_when_asked() {
    let (out, stream) = run_to_openai(&[ANTHROPIC_STREAM.as_bytes()], false);
    let view = openai_view(&out);
    assert_eq!(view.usage, None);
    assert!(view.done);
    assert_eq!(stream.usage().map(|u| u.output_tokens), Some(89), "the gateway still sees the usage");
}

#[test]
fn openai_stream_as_anthropic_events() {
    let (out, stream) = run_to_anthropic(&[OPENAI_STREAM.as_bytes()]);
    let (message, names) = anthropic_view(&out);
    assert_eq!(
        message,
        json!({
            "id": "msg_B9M", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Let me lôok."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 176, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1024, "output_tokens": 17}
        })
    );
    let expected_names = [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ];
    assert_eq!(names, expected_names);
    assert!(stream.completed());
    let usage = Usage {
        input_tokens: 1200,
        output_tokens: 17,
        cache_read_input_tokens: 1024,
        cache_creation_input_tokens: 0,
        reasoning_tokens: 0,
    };
    assert_eq!(stream.usage(), Some(usage));
}

#[test]
fn there_and_back_keeps_the_answer() {
    let (anthropic, _) = run_to_anthropic(&[OPENAI_STREAM.as_bytes()]);
    let (openai, _) = run_to_openai(&[&anthropic], true);
    let view = openai_view(&openai);
    assert_eq!(view.content, "Let me lôok.");
    let calls: Vec<_> =
        view.tool_calls.iter().map(|(id, name, args)| (id.as_str(), name.as_str(), args.as_str())).collect();
    assert_eq!(calls, [("call_1", "get_weather", "{\"city\":\"Paris\"}"), ("call_2", "get_time", "{}")]);
    assert_eq!(view.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(view.usage.unwrap()["prompt_tokens"], 1200);
}

#[test]
fn cut_anthropic_stream_ends_with_openai_error_chunk() {
    let cut = ANTHROPIC_STREAM.find("the wéather").unwrap();
    let (out, stream) = run_to_openai(&[&ANTHROPIC_STREAM.as_bytes()[..cut]], true);
    let view = openai_view(&out);
    assert_eq!(view.content, "Okay, let me check ");
    assert!(!view.done && !stream.completed());
    assert_eq!(view.error.unwrap()["code"], "upstream_stream_interrupted");
}

#[test]
fn cut_openai_stream_ends_with_anthropic_error_event() {
    let cut = OPENAI_STREAM.find("data: [DONE]").unwrap();
    let (out, stream) = run_to_anthropic(&[&OPENAI_STREAM.as_bytes()[..cut]]);
    let (message, names) = anthropic_view(&out);
    assert_eq!(names.last().map(String::as_str), Some("error"));
    assert!(!names.contains(&"message_stop".to_owned()));
    assert_eq!(message["error"]["type"], "api_error");
    assert_eq!(message["content"][0]["text"], "Let me lôok.");
    assert!(!stream.completed());
    assert_eq!(stream.usage().map(|u| u.output_tokens), Some(17));
}

#[test]
fn last_event_without_blank_line_still_completes() {
    let trimmed = OPENAI_STREAM.trim_end();
    let (out, stream) = run_to_anthropic(&[trimmed.as_bytes()]);
    assert_eq!(anthropic_view(&out).1.last().map(String::as_str), Some("message_stop"));
    assert!(stream.completed());
    let (out, stream) = run_to_openai(&[ANTHROPIC_STREAM.trim_end().as_bytes()], false);
    assert!(openai_view(&out).done && stream.completed());
}

#[test]
fn upstream_error_events_translate_and_end_the_stream() {
    let anthropic = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let view = openai_view(&run_to_openai(&[anthropic.as_bytes()], true).0);
    assert_eq!(view.error, Some(json!({"message": "Overloaded", "type": "overloaded_error", "code": null})));
    assert!(!view.done);

    let openai = concat!(
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n",
        "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"code\":null}}\n\n",
    );
    let (message, names) = anthropic_view(&run_to_anthropic(&[openai.as_bytes()]).0);
    assert_eq!(names.last().map(String::as_str), Some("error"));
    assert_eq!(message["error"], json!({"type": "api_error", "message": "The server had an error"}));
}

#[test]
fn openai_refusal_streams_as_refusal() {
    let openai = concat!(
        "data: {\"id\":\"chatcmpl-9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"refusal\":\"\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I can't help.\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (message, _) = anthropic_view(&run_to_anthropic(&[openai.as_bytes()]).0);
    assert_eq!(message["content"], json!([{"type": "text", "text": "I can't help."}]));
    assert_eq!(message["stop_reason"], "refusal");
    assert_eq!(message["usage"]["output_tokens"], 0, "no usage chunk: zeros, never a guess");
}

fn split_at<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for point in points {
        chunks.push(&bytes[start..point]);
        start = point;
    }
    chunks.push(&bytes[start..]);
    chunks
}

proptest! {
    #[test]
    fn splitting_never_changes_the_translation(
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        include_usage in any::<bool>(),
        truncate in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let cut = |s: &'static str| truncate.map_or(s.len(), |t| t.index(s.len() + 1));
        let anthropic = &ANTHROPIC_STREAM.as_bytes()[..cut(ANTHROPIC_STREAM)];
        let whole = run_to_openai(&[anthropic], include_usage);
        let split = run_to_openai(&split_at(anthropic, &cuts), include_usage);
        prop_assert_eq!(&split.0, &whole.0);
        prop_assert_eq!(split.1.usage(), whole.1.usage());

        let openai = &OPENAI_STREAM.as_bytes()[..cut(OPENAI_STREAM)];
        let whole = run_to_anthropic(&[openai]);
        let split = run_to_anthropic(&split_at(openai, &cuts));
        prop_assert_eq!(&split.0, &whole.0);
        prop_assert_eq!(split.1.completed(), whole.1.completed());
    }
}

#[test]
fn byte_by_byte_equals_whole() {
    let bytes: Vec<&[u8]> = ANTHROPIC_STREAM.as_bytes().chunks(1).collect();
    assert_eq!(run_to_openai(&bytes, true).0, run_to_openai(&[ANTHROPIC_STREAM.as_bytes()], true).0);
    let bytes: Vec<&[u8]> = OPENAI_STREAM.as_bytes().chunks(1).collect();
    assert_eq!(run_to_anthropic(&bytes).0, run_to_anthropic(&[OPENAI_STREAM.as_bytes()]).0);
}

/// An Anthropic stream with redacted thinking, then thinking (two deltas and its
/// signature), then a tool call, as the simulator and Anthropic stream them.
const THINKING_STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_think\",\"usage\":{\"input_tokens\":40,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va3p\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\" call it.\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM1gbc\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":30}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn streamed_thinking_reaches_an_openai_client_as_reasoning_content_and_signed_thinking_blocks() {
    let (out, _) = run_to_openai(&[THINKING_STREAM.as_bytes()], false);
    let text = std::str::from_utf8(&out).unwrap();
    let mut reasoning = String::new();
    let mut blocks = Vec::new();
    for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(data).unwrap();
        let delta = &chunk["choices"][0]["delta"];
        reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or_default());
        blocks.extend(delta["thinking_blocks"].as_array().into_iter().flatten().cloned());
    }
    assert_eq!(reasoning, "Let me call it.");
    assert_eq!(
        blocks,
        vec![
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"}),
            json!({"type": "thinking", "thinking": "Let me call it.", "signature": "EqQBCgIYAhIM1gbc"}),
        ],
        "each block once, whole, its signature verbatim"
    );
    let view = openai_view(&out);
    assert_eq!(view.tool_calls, vec![("toolu_9".to_owned(), "get_weather".to_owned(), "{}".to_owned())]);
    assert_eq!(view.finish_reason.as_deref(), Some("tool_calls"));
}
