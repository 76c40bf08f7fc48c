use serde_json::json;

use super::*;
use crate::translate::AnthropicToResponsesStream;

fn parsed(body: &Value) -> ParsedRequest {
    parse_request(Protocol::OpenAiResponses, body.to_string().as_bytes()).unwrap()
}

#[test]
fn a_responses_request_reaches_anthropic_with_its_tools_and_tool_results() {
    let body = json!({"model": "m", "instructions": "Be brief.", "max_output_tokens": 50, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "look it up"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{\"q\":\"x\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "42"}],
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]});
    let out = Value::Object(responses_to_anthropic_request(&parsed(&body), 100).unwrap());
    assert_eq!(out["system"], "Be brief.");
    assert_eq!(out["max_tokens"], 50);
    assert_eq!(out["tools"][0]["name"], "lookup");
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"][1]["type"], "image");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "call_1");
}

#[test]
fn what_only_openai_keeps_is_refused_by_name() {
    for (extra, field) in [
        (json!({"previous_response_id": "resp_1"}), "previous_response_id"),
        (json!({"tools": [{"type": "web_search"}]}), "tools[0].type"),
        (json!({"background": true}), "background"),
        (json!({"text": {"format": {"type": "json_schema"}}}), "text.format"),
    ] {
        let mut body = json!({"model": "m", "input": "hi"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let err = responses_to_anthropic_request(&parsed(&body), 100).unwrap_err();
        assert_eq!(err.field(), Some(field), "{err}");
    }
}

const MESSAGE: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[
    {"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"lookup","input":{"q":"x"}}],
    "stop_reason":"tool_use","usage":{"input_tokens":12,"output_tokens":7}}"#;

#[test]
fn an_anthropic_answer_is_a_response_object() {
    let body: Value =
        serde_json::from_slice(&anthropic_to_responses_response(MESSAGE.as_bytes(), "fast", 5).unwrap()).unwrap();
    assert_eq!(
        (body["object"].as_str(), body["status"].as_str(), body["model"].as_str()),
        (Some("response"), Some("completed"), Some("fast"))
    );
    assert_eq!(body["output"][0]["content"][0]["text"], "Checking.");
    assert_eq!(body["output"][1]["type"], "function_call");
    assert_eq!(body["output"][1]["call_id"], "toolu_1");
    assert_eq!(body["usage"]["input_tokens"], 12);
    assert_eq!(body["usage"]["output_tokens"], 7);
}

const STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" there\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn event_names(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out).lines().filter_map(|l| l.strip_prefix("event: ")).map(str::to_owned).collect()
}

#[test]
fn an_anthropic_stream_is_relayed_as_responses_events_or_ends_with_an_error_event() {
    let mut stream = AnthropicToResponsesStream::new("fast", 5);
    let mut out = Vec::new();
    for piece in STREAM.as_bytes().chunks(9) {
        out.extend_from_slice(&stream.push(piece));
    }
    out.extend_from_slice(&stream.finish());
    let names = event_names(&out);
    assert_eq!(names.first().map(String::as_str), Some("response.created"));
    assert_eq!(names.last().map(String::as_str), Some("response.completed"), "{names:?}");
    assert_eq!(names.iter().filter(|n| *n == "response.output_text.delta").count(), 2);
    let text = String::from_utf8_lossy(&out);
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    let data: Value = serde_json::from_str(last.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
    assert_eq!(data["response"]["output"][0]["content"][0]["text"], "Hi there");
    assert_eq!(data["response"]["usage"]["output_tokens"], 5);
    assert_eq!(stream.usage().map(|u| u.output_tokens), Some(5));
    let mut cut = AnthropicToResponsesStream::new("fast", 5);
    let half = &STREAM[..STREAM.find("event: content_block_stop").unwrap()];
    let mut out = cut.push(half.as_bytes()).to_vec();
    out.extend_from_slice(&cut.finish());
    assert_eq!(event_names(&out).last().map(String::as_str), Some("error"), "the protocol's error event");
}
