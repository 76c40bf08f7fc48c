//! Converse request bodies from Anthropic Messages bodies, and back.

use serde_json::{Map, Value, json};

use super::names::image_format;
use crate::translate::error::TranslateError;
use crate::translate::json::{Object, as_object, opt_array, present};

/// The Converse body (`POST /model/{modelId}/converse`) for an Anthropic Messages `body`.
/// The model goes in the URL and streaming in the path (`converse-stream`), so `model` and
/// `stream` are dropped, as is `metadata` (Converse has no end-user field).
///
/// # Errors
/// A body that is no JSON object, or a block Converse cannot carry (an image by URL).
pub fn anthropic_to_converse_request(body: &[u8]) -> Result<Vec<u8>, TranslateError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let obj = as_object(&value, "body")?;
    let mut out = Object::new();
    if let Some(system) = present(obj, "system") {
        out.insert("system".into(), Value::Array(system_blocks(system)));
    }
    let mut messages = Vec::new();
    for (i, message) in opt_array(obj, "messages", "")?.iter().enumerate() {
        messages.push(message_to_converse(message, &format!("messages[{i}]"))?);
    }
    out.insert("messages".into(), Value::Array(messages));
    out.insert("inferenceConfig".into(), Value::Object(inference_config(obj)));
    let additional: Object =
        ["top_k", "thinking"].into_iter().filter_map(|k| present(obj, k).map(|v| (k.to_owned(), v.clone()))).collect();
    if !additional.is_empty() {
        out.insert("additionalModelRequestFields".into(), Value::Object(additional));
    }
    if let Some(config) = tool_config(obj) {
        out.insert("toolConfig".into(), config);
    }
    Ok(serde_json::to_vec(&out).unwrap_or_default())
}

/// The InvokeModel body for an Anthropic model: the Messages body without `model` and
/// `stream` (the URL says both), with `anthropic_version: bedrock-2023-05-31`.
///
/// # Errors
/// A body that is no JSON object.
pub fn anthropic_to_invoke_request(body: &[u8]) -> Result<Vec<u8>, TranslateError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let Some(obj) = value.as_object_mut() else { return Err(TranslateError::invalid("body", "must be an object")) };
    obj.remove("model");
    obj.remove("stream");
    obj.insert("anthropic_version".into(), Value::from(BEDROCK_ANTHROPIC_VERSION));
    Ok(serde_json::to_vec(&value).unwrap_or_default())
}

/// The `anthropic_version` Bedrock's InvokeModel takes for Anthropic models.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

fn system_blocks(system: &Value) -> Vec<Value> {
    match system {
        Value::String(text) => vec![json!({"text": text})],
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).map(|t| json!({"text": t})).collect()
        }
        _ => Vec::new(),
    }
}

fn inference_config(obj: &Object) -> Object {
    let pairs = [
        ("max_tokens", "maxTokens"),
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("stop_sequences", "stopSequences"),
    ];
    pairs.into_iter().filter_map(|(from, to)| present(obj, from).map(|v| (to.to_owned(), v.clone()))).collect()
}

fn tool_config(obj: &Object) -> Option<Value> {
    let tools = present(obj, "tools")?.as_array()?;
    let specs: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut spec = json!({"name": t.get("name"), "inputSchema": {"json": t.get("input_schema").cloned().unwrap_or(json!({"type": "object"}))}});
            if let Some(description) = t.get("description") {
                spec["description"] = description.clone();
            }
            json!({"toolSpec": spec})
        })
        .collect();
    let mut config = json!({"tools": specs});
    let choice = present(obj, "tool_choice").and_then(|c| c.get("type")).and_then(Value::as_str);
    match choice {
        Some("any") => config["toolChoice"] = json!({"any": {}}),
        Some("tool") => config["toolChoice"] = json!({"tool": {"name": obj["tool_choice"].get("name")}}),
        Some("auto") => config["toolChoice"] = json!({"auto": {}}),
        _ => {}
    }
    Some(config)
}

fn message_to_converse(message: &Value, path: &str) -> Result<Value, TranslateError> {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("user");
    let content = match message.get("content") {
        Some(Value::String(text)) => vec![json!({"text": text})],
        Some(Value::Array(blocks)) => {
            let mut out = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.iter().enumerate() {
                if let Some(b) = block_to_converse(block, &format!("{path}.content[{j}]"))? {
                    out.push(b);
                }
            }
            out
        }
        _ => return Err(TranslateError::invalid(format!("{path}.content"), "must be text or blocks")),
    };
    Ok(json!({"role": role, "content": content}))
}

/// One Anthropic content block as a Converse one (`None`: dropped, e.g. a cache marker only).
fn block_to_converse(block: &Value, path: &str) -> Result<Option<Value>, TranslateError> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
    Ok(Some(match kind {
        "text" => json!({"text": block.get("text").cloned().unwrap_or(Value::from(""))}),
        "image" => image_to_converse(block, path)?,
        "tool_use" => {
            json!({"toolUse": {"toolUseId": block.get("id"), "name": block.get("name"), "input": block.get("input").cloned().unwrap_or(json!({}))}})
        }
        "tool_result" => tool_result_to_converse(block),
        "thinking" | "redacted_thinking" => return Ok(None),
        other => {
            let reason = format!("a `{other}` block cannot be sent to Bedrock's Converse API");
            return Err(TranslateError::invalid(format!("{path}.type"), reason));
        }
    }))
}

fn image_to_converse(block: &Value, path: &str) -> Result<Value, TranslateError> {
    let source = block.get("source").unwrap_or(&Value::Null);
    let media = source.get("media_type").and_then(Value::as_str).and_then(image_format);
    match (source.get("type").and_then(Value::as_str), media, source.get("data")) {
        (Some("base64"), Some(format), Some(data)) => {
            Ok(json!({"image": {"format": format, "source": {"bytes": data}}}))
        }
        _ => Err(TranslateError::invalid(
            format!("{path}.source"),
            "Bedrock's Converse API takes base64 PNG, JPEG, GIF or WebP images only",
        )),
    }
}

fn tool_result_to_converse(block: &Value) -> Value {
    let content: Vec<Value> = match block.get("content") {
        Some(Value::String(text)) => vec![json!({"text": text})],
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).map(|t| json!({"text": t})).collect()
        }
        _ => Vec::new(),
    };
    let mut result = json!({"toolUseId": block.get("tool_use_id"), "content": content});
    if block.get("is_error").and_then(Value::as_bool) == Some(true) {
        result["status"] = Value::from("error");
    }
    json!({"toolResult": result})
}

/// The Anthropic Messages body for a Converse `body` on `model` (the simulator serves
/// Converse through its Anthropic shape).
///
/// # Errors
/// A body that is no JSON object.
pub fn converse_to_anthropic_request(body: &[u8], model: &str, stream: bool) -> Result<Vec<u8>, TranslateError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let obj = as_object(&value, "body")?;
    let mut out = Map::new();
    out.insert("model".into(), Value::from(model));
    out.insert("stream".into(), Value::from(stream));
    let texts: Vec<Value> = opt_array(obj, "system", "")?
        .iter()
        .filter_map(|b| b.get("text"))
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    if !texts.is_empty() {
        out.insert("system".into(), Value::Array(texts));
    }
    let messages: Vec<Value> = opt_array(obj, "messages", "")?.iter().map(message_to_anthropic).collect();
    out.insert("messages".into(), Value::Array(messages));
    let config = obj.get("inferenceConfig").and_then(Value::as_object);
    let pairs = [
        ("maxTokens", "max_tokens"),
        ("temperature", "temperature"),
        ("topP", "top_p"),
        ("stopSequences", "stop_sequences"),
    ];
    for (from, to) in pairs {
        if let Some(v) = config.and_then(|c| c.get(from)) {
            out.insert(to.into(), v.clone());
        }
    }
    if let Some(tools) = obj.get("toolConfig").and_then(|c| c.get("tools")).and_then(Value::as_array) {
        let tools: Vec<Value> = tools.iter().filter_map(|t| t.get("toolSpec")).map(|s| json!({"name": s.get("name"), "description": s.get("description"), "input_schema": s.get("inputSchema").and_then(|i| i.get("json"))})).collect();
        out.insert("tools".into(), Value::Array(tools));
    }
    Ok(serde_json::to_vec(&out).unwrap_or_default())
}

fn message_to_anthropic(message: &Value) -> Value {
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let content: Vec<Value> = blocks.iter().filter_map(block_to_anthropic).collect();
    json!({"role": message.get("role").cloned().unwrap_or(Value::from("user")), "content": content})
}

fn block_to_anthropic(block: &Value) -> Option<Value> {
    if let Some(text) = block.get("text") {
        return Some(json!({"type": "text", "text": text}));
    }
    if let Some(image) = block.get("image") {
        let media = format!("image/{}", image.get("format")?.as_str()?);
        let data = image.get("source")?.get("bytes")?;
        return Some(json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}));
    }
    if let Some(call) = block.get("toolUse") {
        return Some(
            json!({"type": "tool_use", "id": call.get("toolUseId"), "name": call.get("name"), "input": call.get("input")}),
        );
    }
    let result = block.get("toolResult")?;
    let content: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.get("text"))
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    let is_error = result.get("status").and_then(Value::as_str) == Some("error");
    Some(
        json!({"type": "tool_result", "tool_use_id": result.get("toolUseId"), "content": content, "is_error": is_error}),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn parse(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap_or(Value::Null)
    }

    #[test]
    fn an_anthropic_request_becomes_converse_and_comes_back_the_same() {
        let anthropic = json!({
            "model": "m", "stream": false, "max_tokens": 64, "temperature": 0.5, "stop_sequences": ["END"],
            "system": [{"type": "text", "text": "be brief"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get", "input": {"q": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "42"}], "is_error": false}]}
            ],
            "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}]
        });
        let converse = parse(&anthropic_to_converse_request(anthropic.to_string().as_bytes()).unwrap_or_default());
        assert_eq!(converse["system"], json!([{"text": "be brief"}]));
        assert_eq!(converse["inferenceConfig"], json!({"maxTokens": 64, "temperature": 0.5, "stopSequences": ["END"]}));
        assert_eq!(
            converse["messages"][0]["content"][1],
            json!({"image": {"format": "png", "source": {"bytes": "iVBO"}}})
        );
        assert_eq!(converse["messages"][1]["content"][0]["toolUse"]["toolUseId"], "t1");
        assert_eq!(converse["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"], json!({"type": "object"}));
        assert!(converse.get("model").is_none() && converse.get("stream").is_none());
        let back =
            parse(&converse_to_anthropic_request(converse.to_string().as_bytes(), "m", false).unwrap_or_default());
        assert_eq!(back, anthropic);
    }

    #[test]
    fn what_converse_cannot_carry_is_refused_naming_the_field() {
        let url_image = json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}]});
        let err = anthropic_to_converse_request(url_image.to_string().as_bytes()).err();
        assert_eq!(err.as_ref().and_then(TranslateError::field), Some("messages[0].content[0].source"));
        let document = json!({"messages": [{"role": "user", "content": [{"type": "server_tool_use"}]}]});
        let err = anthropic_to_converse_request(document.to_string().as_bytes()).err();
        assert_eq!(err.as_ref().and_then(TranslateError::field), Some("messages[0].content[0].type"));
    }
}
