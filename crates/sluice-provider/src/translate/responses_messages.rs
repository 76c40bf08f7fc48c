//! The OpenAI Responses API to an Anthropic deployment and back, through the chat ⇄
//! messages translation: a Responses request becomes the equivalent chat request (input
//! items as messages, function calls and their outputs as tool calls and tool messages,
//! function tools as chat tools), which [`openai_to_anthropic_request`] carries on; the
//! answer comes back through [`anthropic_to_openai_response`] and is rewritten as a
//! `response` object ([`ResponseObject`]).
//!
//! Refused with the field named: what only OpenAI keeps or runs (`previous_response_id`,
//! `conversation`, `background`, built-in tools, stored prompts, file inputs, reasoning
//! items, item references) and structured output (`text.format` other than text).

use serde_json::{Map, Value, json};

use super::error::TranslateError;
use super::request::openai_to_anthropic_request;
use super::response::anthropic_to_openai_response;
use crate::protocol::Protocol;
use crate::request::{ParsedRequest, parse_request};

fn refused(field: impl Into<String>, reason: &'static str) -> TranslateError {
    TranslateError::Unsupported { field: field.into(), target: Protocol::AnthropicMessages, reason }
}

/// Fields only OpenAI can honour, with why.
const OPENAI_ONLY: [(&str, &str); 5] = [
    ("previous_response_id", "the earlier turns are kept by OpenAI"),
    ("conversation", "the conversation is kept by OpenAI"),
    ("prompt", "stored prompts are OpenAI's"),
    ("reasoning", "reasoning settings have no Anthropic counterpart here"),
    ("include", "extra output data has no Anthropic counterpart"),
];

/// Translates a Responses request into an Anthropic messages body.
///
/// # Errors
/// [`TranslateError::Unsupported`] naming the field for what cannot be translated (see the
/// module); what the chat translation refuses, as it names it.
pub fn responses_to_anthropic_request(
    req: &ParsedRequest,
    default_max_tokens: u64,
) -> Result<Map<String, Value>, TranslateError> {
    if req.protocol != Protocol::OpenAiResponses {
        return Err(TranslateError::WrongProtocol { expected: Protocol::OpenAiResponses, found: req.protocol });
    }
    let body = &req.body;
    for (field, reason) in OPENAI_ONLY {
        if body.get(field).is_some_and(|v| !v.is_null()) {
            return Err(refused(field, reason));
        }
    }
    if body.get("background").and_then(Value::as_bool) == Some(true) {
        return Err(refused("background", "Anthropic runs no background responses"));
    }
    let format = body.get("text").and_then(|t| t.get("format")).and_then(|f| f.get("type"));
    if format.is_some_and(|f| f != "text") {
        return Err(refused("text.format", "structured output is not translated"));
    }
    let chat = chat_body(req)?;
    let bytes = serde_json::to_vec(&chat).unwrap_or_default();
    let chat = parse_request(Protocol::OpenAiChat, &bytes)
        .map_err(|e| TranslateError::Invalid { field: e.param.unwrap_or_else(|| "body".into()), reason: e.message })?;
    openai_to_anthropic_request(&chat, default_max_tokens)
}

/// The chat-completions body equivalent to a Responses request.
fn chat_body(req: &ParsedRequest) -> Result<Map<String, Value>, TranslateError> {
    let body = &req.body;
    let mut chat = Map::new();
    chat.insert("model".into(), Value::from(req.model.as_str()));
    let mut messages = Vec::new();
    if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    match body.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                push_item(&mut messages, item, i)?;
            }
        }
        _ => {}
    }
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(max) = req.max_output_tokens {
        chat.insert("max_tokens".into(), Value::from(max));
    }
    for field in ["temperature", "top_p", "stream", "parallel_tool_calls"] {
        if let Some(value) = body.get(field).filter(|v| !v.is_null()) {
            chat.insert(field.into(), value.clone());
        }
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array).filter(|t| !t.is_empty()) {
        chat.insert("tools".into(), Value::Array(chat_tools(tools)?));
    }
    if let Some(choice) = body.get("tool_choice").filter(|v| !v.is_null()) {
        chat.insert("tool_choice".into(), chat_tool_choice(choice)?);
    }
    Ok(chat)
}

fn chat_tools(tools: &[Value]) -> Result<Vec<Value>, TranslateError> {
    let chat = |(i, tool): (usize, &Value)| {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(refused(format!("tools[{i}].type"), "built-in tools run only at OpenAI"));
        }
        let mut function = Map::new();
        for field in ["name", "description", "parameters", "strict"] {
            if let Some(value) = tool.get(field).filter(|v| !v.is_null()) {
                function.insert(field.into(), value.clone());
            }
        }
        Ok(json!({"type": "function", "function": function}))
    };
    tools.iter().enumerate().map(chat).collect()
}

fn chat_tool_choice(choice: &Value) -> Result<Value, TranslateError> {
    match choice {
        Value::String(_) => Ok(choice.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            Ok(json!({"type": "function", "function": {"name": o.get("name").cloned().unwrap_or(Value::Null)}}))
        }
        _ => Err(refused("tool_choice", "only auto, none, required or a function tool")),
    }
}

/// Appends the chat message(s) of input item `i`.
fn push_item(messages: &mut Vec<Value>, item: &Value, i: usize) -> Result<(), TranslateError> {
    match item.get("type").and_then(Value::as_str).unwrap_or("message") {
        "message" => messages.push(message(item, i)?),
        "function_call" => {
            let call = json!({"id": item.get("call_id"), "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")}});
            // Consecutive calls are one assistant turn with several tool calls.
            let last = messages.last_mut().filter(|m| m["role"] == "assistant" && m.get("tool_calls").is_some());
            match last.and_then(|m| m.get_mut("tool_calls")).and_then(Value::as_array_mut) {
                Some(calls) => calls.push(call),
                None => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            messages.push(json!({"role": "tool", "tool_call_id": item.get("call_id"), "content": output}));
        }
        _ => return Err(refused(format!("input[{i}].type"), "only messages, function calls and their outputs")),
    }
    Ok(())
}

/// A message item as a chat message: `developer` as `system`, text parts as text, images
/// as `image_url` parts.
fn message(item: &Value, i: usize) -> Result<Value, TranslateError> {
    let role = match item.get("role").and_then(Value::as_str).unwrap_or("user") {
        "developer" => "system",
        other => other,
    };
    let content = match item.get("content") {
        Some(Value::Array(parts)) => {
            let parts: Result<Vec<Value>, _> = parts.iter().enumerate().map(|(j, p)| part(p, i, j)).collect();
            Value::Array(parts?)
        }
        Some(other) => other.clone(),
        None => Value::String(String::new()),
    };
    Ok(json!({"role": role, "content": content}))
}

fn part(part: &Value, i: usize, j: usize) -> Result<Value, TranslateError> {
    match part.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => Ok(json!({"type": "text", "text": part.get("text")})),
        Some("input_image") => match part.get("image_url").and_then(Value::as_str) {
            Some(url) => Ok(json!({"type": "image_url", "image_url": {"url": url}})),
            None => Err(refused(format!("input[{i}].content[{j}].image_url"), "images by file id are OpenAI's")),
        },
        _ => Err(refused(format!("input[{i}].content[{j}].type"), "only text and images")),
    }
}

/// A `response` object under construction: what the translated answer holds.
#[derive(Debug, Clone, Default)]
pub struct ResponseObject {
    /// `resp_…`.
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// The model the client asked for.
    pub model: String,
    /// Output items, in order.
    pub output: Vec<Value>,
    /// (input, output) tokens, once known.
    pub usage: Option<(u64, u64)>,
    /// The answer stopped at the output limit.
    pub truncated: bool,
}

impl ResponseObject {
    /// The object with `status` (`in_progress`, `completed`, `incomplete`).
    #[must_use]
    pub fn to_value(&self, status: &str) -> Value {
        let usage = self.usage.map(|(input, output)| {
            json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input + output})
        });
        let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
        json!({"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "error": null, "incomplete_details": incomplete, "model": self.model, "output": self.output,
            "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "usage": usage})
    }

    /// `completed`, or `incomplete` when the answer hit its output limit.
    #[must_use]
    pub fn final_status(&self) -> &'static str {
        if self.truncated { "incomplete" } else { "completed" }
    }
}

/// The item id of a message or call in response `id`.
#[must_use]
pub fn item_id(prefix: &str, response_id: &str, n: usize) -> String {
    format!("{prefix}_{}_{n}", response_id.trim_start_matches("resp_"))
}

/// Rewrites an Anthropic messages response as a Responses API `response` object.
///
/// # Errors
/// When the body is not an Anthropic message.
pub fn anthropic_to_responses_response(body: &[u8], model: &str, created: u64) -> Result<Vec<u8>, TranslateError> {
    let chat: Value = serde_json::from_slice(&anthropic_to_openai_response(body, model, created)?)
        .map_err(|e| TranslateError::Invalid { field: "body".into(), reason: e.to_string() })?;
    let id = format!("resp_{}", chat["id"].as_str().unwrap_or_default().trim_start_matches("chatcmpl-"));
    let choice = &chat["choices"][0];
    let mut object = ResponseObject { id, created_at: created, model: model.to_owned(), ..ResponseObject::default() };
    if let Some(text) = choice["message"]["content"].as_str().filter(|t| !t.is_empty()) {
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        object.output.push(json!({"id": item_id("msg", &object.id, 0), "type": "message", "status": "completed",
            "role": "assistant", "content": [part]}));
    }
    for (n, call) in choice["message"]["tool_calls"].as_array().into_iter().flatten().enumerate() {
        object.output.push(json!({"id": item_id("fc", &object.id, n), "type": "function_call",
            "status": "completed", "call_id": call["id"], "name": call["function"]["name"],
            "arguments": call["function"]["arguments"]}));
    }
    let usage = &chat["usage"];
    object.usage =
        Some((usage["prompt_tokens"].as_u64().unwrap_or(0), usage["completion_tokens"].as_u64().unwrap_or(0)));
    object.truncated = choice["finish_reason"] == "length";
    Ok(serde_json::to_vec(&object.to_value(object.final_status())).unwrap_or_default())
}

#[cfg(test)]
mod tests;
