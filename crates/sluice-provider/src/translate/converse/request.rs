//! Converse request bodies from Anthropic Messages bodies, and back.
//!
//! The shapes, from AWS's Converse API reference:
//! - `ContentBlock` is a union: `text`, `image`, `toolUse`, `toolResult`, `reasoningContent`
//!   (a union of `reasoningText {text, signature}` and `redactedContent`, base64 bytes) and
//!   `cachePoint {type: "default", ttl?: "5m" | "1h"}`
//!   (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ContentBlock.html>,
//!   `API_runtime_ReasoningContentBlock.html`, `API_runtime_ReasoningTextBlock.html`,
//!   `API_runtime_CachePointBlock.html`). A reasoning block passed back in a later turn
//!   carries its text and signature unmodified; with thinking on, the assistant turn that
//!   made a tool call must keep it, or Bedrock refuses the turn that answers the call
//!   (<https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html>).
//! - `SystemContentBlock` and `Tool` are unions too, each with a `cachePoint` member: a
//!   cache checkpoint is its own block, placed after what it closes
//!   (`API_runtime_SystemContentBlock.html`, `API_runtime_Tool.html`,
//!   <https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html>).
//! - Anthropic's beta flags travel in the body: `additionalModelRequestFields.anthropic_beta`
//!   for Converse, `anthropic_beta` for InvokeModel
//!   (<https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html>).

use serde_json::{Map, Value, json};

use super::names::image_format;
use crate::translate::error::TranslateError;
use crate::translate::json::{Object, as_object, opt_array, present};

/// Bedrock takes at most four cache checkpoints in a request, as Anthropic takes four
/// `cache_control` breakpoints.
const MAX_CACHE_POINTS: usize = 4;

/// The Converse body (`POST /model/{modelId}/converse`) for an Anthropic Messages `body`,
/// with the client's Anthropic beta flags (`betas`, from its `anthropic-beta` header) in
/// `additionalModelRequestFields.anthropic_beta`. The model goes in the URL and streaming
/// in the path (`converse-stream`), so `model` and `stream` are dropped, as is `metadata`
/// (Converse has no end-user field). Thinking blocks become `reasoningContent` blocks in
/// their place, `cache_control` breakpoints `cachePoint` blocks after what they mark.
///
/// # Errors
/// A body that is no JSON object, or a block Converse cannot carry (an image by URL).
pub fn anthropic_to_converse_request(body: &[u8], betas: &[&str]) -> Result<Vec<u8>, TranslateError> {
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
    let mut additional: Object =
        ["top_k", "thinking"].into_iter().filter_map(|k| present(obj, k).map(|v| (k.to_owned(), v.clone()))).collect();
    if !betas.is_empty() {
        additional.insert("anthropic_beta".into(), json!(betas));
    }
    if !additional.is_empty() {
        out.insert("additionalModelRequestFields".into(), Value::Object(additional));
    }
    if let Some(config) = tool_config(obj) {
        out.insert("toolConfig".into(), config);
    }
    Ok(serde_json::to_vec(&out).unwrap_or_default())
}

/// The InvokeModel body for an Anthropic model: the Messages body without `model` and
/// `stream` (the URL says both), with `anthropic_version: bedrock-2023-05-31` and the
/// client's beta flags (`betas`) as `anthropic_beta`. Everything else, thinking blocks and
/// `cache_control` included, is Anthropic's own shape and goes as it is.
///
/// # Errors
/// A body that is no JSON object.
pub fn anthropic_to_invoke_request(body: &[u8], betas: &[&str]) -> Result<Vec<u8>, TranslateError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let Some(obj) = value.as_object_mut() else { return Err(TranslateError::invalid("body", "must be an object")) };
    obj.remove("model");
    obj.remove("stream");
    obj.insert("anthropic_version".into(), Value::from(BEDROCK_ANTHROPIC_VERSION));
    if !betas.is_empty() {
        obj.insert("anthropic_beta".into(), json!(betas));
    }
    Ok(serde_json::to_vec(&value).unwrap_or_default())
}

/// The Anthropic Messages body for InvokeModel's Anthropic `body` on `model` (the path
/// names it): the body must carry `anthropic_version: bedrock-2023-05-31` and no `model`;
/// `anthropic_beta` is taken out ([`bedrock_beta_flags`] reads it), `model` and `stream`
/// put in. The rest is Anthropic's own shape
/// (<https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html>).
///
/// # Errors
/// A body that is no JSON object, without that `anthropic_version`, or naming a `model`.
pub fn invoke_to_anthropic_request(body: &[u8], model: &str, stream: bool) -> Result<Vec<u8>, TranslateError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let Some(obj) = value.as_object_mut() else { return Err(TranslateError::invalid("body", "must be an object")) };
    if obj.remove("anthropic_version").as_ref().and_then(Value::as_str) != Some(BEDROCK_ANTHROPIC_VERSION) {
        return Err(TranslateError::invalid("anthropic_version", format!("must be `{BEDROCK_ANTHROPIC_VERSION}`")));
    }
    if obj.contains_key("model") {
        return Err(TranslateError::invalid("model", "is not taken in the body: the path names the model"));
    }
    obj.remove("anthropic_beta");
    obj.insert("model".into(), Value::from(model));
    obj.insert("stream".into(), Value::from(stream));
    Ok(serde_json::to_vec(&value).unwrap_or_default())
}

/// The Anthropic Messages body whose input a CountTokens `body` on `model` counts:
/// `input.converse` (Converse's `messages`, `system`, `toolConfig`,
/// `additionalModelRequestFields`) or `input.invokeModel.body` (InvokeModel's Anthropic body,
/// base64 in JSON as every blob is)
/// (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html>).
///
/// # Errors
/// A body without exactly one of the two, or one that does not translate (named by its
/// path under `input`).
pub fn count_tokens_to_anthropic_request(body: &[u8], model: &str) -> Result<Vec<u8>, TranslateError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let input = value.get("input").filter(|i| i.is_object());
    let under = |e: TranslateError, at: &str| match e {
        TranslateError::Invalid { field, reason } => TranslateError::Invalid { field: format!("{at}.{field}"), reason },
        other => other,
    };
    match (input.and_then(|i| i.get("converse")), input.and_then(|i| i.get("invokeModel"))) {
        (Some(converse), None) => {
            let converse = serde_json::to_vec(converse).unwrap_or_default();
            converse_to_anthropic_request(&converse, model, false).map_err(|e| under(e, "input.converse"))
        }
        (None, Some(invoke)) => {
            let bytes =
                invoke.get("body").and_then(Value::as_str).and_then(|b| aws_smithy_types::base64::decode(b).ok());
            let Some(bytes) = bytes else {
                return Err(TranslateError::invalid("input.invokeModel.body", "must be the model's body in base64"));
            };
            invoke_to_anthropic_request(&bytes, model, false).map_err(|e| under(e, "input.invokeModel.body"))
        }
        _ => Err(TranslateError::invalid("input", "must hold exactly one of `converse` and `invokeModel`")),
    }
}

/// The Anthropic beta flags of a Converse body (`additionalModelRequestFields.anthropic_beta`)
/// or, `invoke`, an InvokeModel one (`anthropic_beta`): a list of flag names, each
/// `name-YYYY-MM-DD`; none when the field is absent.
///
/// # Errors
/// A field that is not such a list, named by its path.
pub fn bedrock_beta_flags(body: &[u8], invoke: bool) -> Result<Vec<String>, TranslateError> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (field, path) = if invoke {
        (value.get("anthropic_beta"), "anthropic_beta")
    } else {
        (value.pointer("/additionalModelRequestFields/anthropic_beta"), "additionalModelRequestFields.anthropic_beta")
    };
    let Some(field) = field else { return Ok(Vec::new()) };
    let flags: Option<Vec<String>> = field
        .as_array()
        .and_then(|list| list.iter().map(|f| f.as_str().filter(|f| is_flag(f)).map(str::to_owned)).collect());
    flags.ok_or_else(|| TranslateError::invalid(path, "must be a list of beta flags (`name-YYYY-MM-DD`)"))
}

/// A beta flag's form: lowercase words and digits joined by `-`, ending in a date.
fn is_flag(flag: &str) -> bool {
    let Some((name, date)) = flag.len().checked_sub(10).and_then(|at| flag.split_at_checked(at)) else { return false };
    let date_ok = date.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    let name = name.strip_suffix('-').unwrap_or_default();
    date_ok && !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The `anthropic_version` Bedrock's InvokeModel takes for Anthropic models.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The `cachePoint` block that closes what an Anthropic `cache_control` marks (`ttl`, when
/// given, kept: Bedrock takes `5m` and `1h` as Anthropic does).
fn cache_point(block: &Value) -> Option<Value> {
    let control = block.get("cache_control").filter(|c| !c.is_null())?;
    let mut point = json!({"type": "default"});
    if let Some(ttl) = control.get("ttl").filter(|t| !t.is_null()) {
        point["ttl"] = ttl.clone();
    }
    Some(json!({"cachePoint": point}))
}

fn system_blocks(system: &Value) -> Vec<Value> {
    match system {
        Value::String(text) => vec![json!({"text": text})],
        Value::Array(blocks) => {
            let mut out = Vec::with_capacity(blocks.len());
            for block in blocks {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    out.push(json!({"text": text}));
                    out.extend(cache_point(block));
                }
            }
            out
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
    let mut specs = Vec::with_capacity(tools.len());
    for t in tools {
        let mut spec = json!({"name": t.get("name"), "inputSchema": {"json": t.get("input_schema").cloned().unwrap_or(json!({"type": "object"}))}});
        if let Some(description) = t.get("description") {
            spec["description"] = description.clone();
        }
        specs.push(json!({"toolSpec": spec}));
        specs.extend(cache_point(t));
    }
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
                out.push(block_to_converse(block, &format!("{path}.content[{j}]"))?);
                out.extend(cache_point(block));
            }
            out
        }
        _ => return Err(TranslateError::invalid(format!("{path}.content"), "must be text or blocks")),
    };
    Ok(json!({"role": role, "content": content}))
}

/// One Anthropic content block as a Converse one. Thinking keeps its signature (Bedrock
/// refuses a replayed reasoning block whose signature is missing or altered).
fn block_to_converse(block: &Value, path: &str) -> Result<Value, TranslateError> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
    Ok(match kind {
        "text" => json!({"text": block.get("text").cloned().unwrap_or(Value::from(""))}),
        "image" => image_to_converse(block, path)?,
        "tool_use" => {
            json!({"toolUse": {"toolUseId": block.get("id"), "name": block.get("name"), "input": block.get("input").cloned().unwrap_or(json!({}))}})
        }
        "tool_result" => tool_result_to_converse(block),
        "thinking" => {
            let mut text = json!({"text": block.get("thinking").cloned().unwrap_or(Value::from(""))});
            if let Some(signature) = block.get("signature").filter(|s| !s.is_null()) {
                text["signature"] = signature.clone();
            }
            json!({"reasoningContent": {"reasoningText": text}})
        }
        // Anthropic's `data` is the encrypted reasoning in base64, the form Converse's
        // `redactedContent` bytes take in JSON: it goes as it is.
        "redacted_thinking" => json!({"reasoningContent": {"redactedContent": block.get("data")}}),
        other => {
            let reason = format!("a `{other}` block cannot be sent to Bedrock's Converse API");
            return Err(TranslateError::invalid(format!("{path}.type"), reason));
        }
    })
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
/// Converse through its Anthropic shape): `reasoningContent` back to `thinking` (with its
/// signature) and `redacted_thinking`, each `cachePoint` back to `cache_control` on the
/// block before it, `additionalModelRequestFields.thinking` and `top_k` back to the top
/// level. `anthropic_beta` is left to the caller (Anthropic takes it as a header).
///
/// # Errors
/// A body that is no JSON object, or one Bedrock refuses: a `cachePoint` that closes
/// nothing, of a type other than `default` or a TTL other than `5m`/`1h`, more than
/// four of them, a `reasoningContent` with neither member.
pub fn converse_to_anthropic_request(body: &[u8], model: &str, stream: bool) -> Result<Vec<u8>, TranslateError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let obj = as_object(&value, "body")?;
    let mut points = 0;
    let mut out = Map::new();
    out.insert("model".into(), Value::from(model));
    out.insert("stream".into(), Value::from(stream));
    let mut system = Vec::new();
    for (i, block) in opt_array(obj, "system", "")?.iter().enumerate() {
        let path = format!("system[{i}]");
        if let Some(point) = block.get("cachePoint") {
            mark(&mut system, point, &path, &mut points)?;
        } else if let Some(text) = block.get("text") {
            system.push(json!({"type": "text", "text": text}));
        }
    }
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    let mut messages = Vec::new();
    for (i, message) in opt_array(obj, "messages", "")?.iter().enumerate() {
        messages.push(message_to_anthropic(message, &format!("messages[{i}]"), &mut points)?);
    }
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
    let additional = obj.get("additionalModelRequestFields").and_then(Value::as_object);
    for key in ["thinking", "top_k"] {
        if let Some(v) = additional.and_then(|a| a.get(key)) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(tools) = obj.get("toolConfig").and_then(|c| c.get("tools")).and_then(Value::as_array) {
        let mut specs = Vec::with_capacity(tools.len());
        for (i, tool) in tools.iter().enumerate() {
            if let Some(point) = tool.get("cachePoint") {
                mark(&mut specs, point, &format!("toolConfig.tools[{i}]"), &mut points)?;
            } else if let Some(s) = tool.get("toolSpec") {
                let mut spec =
                    json!({"name": s.get("name"), "input_schema": s.get("inputSchema").and_then(|i| i.get("json"))});
                if let Some(description) = s.get("description") {
                    spec["description"] = description.clone();
                }
                specs.push(spec);
            }
        }
        out.insert("tools".into(), Value::Array(specs));
    }
    if let Some(choice) = obj.get("toolConfig").and_then(|c| c.get("toolChoice")) {
        out.insert("tool_choice".into(), tool_choice_to_anthropic(choice)?);
    }
    if points > MAX_CACHE_POINTS {
        let reason = format!("has {points} cache points; at most {MAX_CACHE_POINTS} are allowed");
        return Err(TranslateError::invalid("body", reason));
    }
    Ok(serde_json::to_vec(&out).unwrap_or_default())
}

/// Converse's `toolChoice` (a union: `auto`, `any`, `tool {name}`:
/// <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolChoice.html>) as
/// Anthropic's `tool_choice`.
fn tool_choice_to_anthropic(choice: &Value) -> Result<Value, TranslateError> {
    if choice.get("auto").is_some() {
        return Ok(json!({"type": "auto"}));
    }
    if choice.get("any").is_some() {
        return Ok(json!({"type": "any"}));
    }
    match choice.get("tool").and_then(|t| t.get("name")).and_then(Value::as_str) {
        Some(name) => Ok(json!({"type": "tool", "name": name})),
        None => Err(TranslateError::invalid(
            "toolConfig.toolChoice",
            "must hold one of `auto`, `any` and `tool` (with its `name`)",
        )),
    }
}

/// The member a union object holds (its first key), for naming it in a refusal.
fn member(block: &Value) -> &str {
    block.as_object().and_then(|o| o.keys().next()).map_or("empty", String::as_str)
}

/// A `cachePoint` at `path`: `cache_control` on the last block of `blocks` (the one it
/// closes), counted in `points`.
fn mark(blocks: &mut [Value], point: &Value, path: &str, points: &mut usize) -> Result<(), TranslateError> {
    let path = format!("{path}.cachePoint");
    if point.get("type").and_then(Value::as_str) != Some("default") {
        return Err(TranslateError::invalid(format!("{path}.type"), "must be `default`"));
    }
    let ttl = point.get("ttl");
    if ttl.is_some_and(|t| !matches!(t.as_str(), Some("5m" | "1h"))) {
        return Err(TranslateError::invalid(format!("{path}.ttl"), "must be `5m` or `1h`"));
    }
    let Some(last) = blocks.last_mut().and_then(Value::as_object_mut) else {
        return Err(TranslateError::invalid(path, "must follow the content it caches"));
    };
    let mut control = json!({"type": "ephemeral"});
    if let Some(ttl) = ttl {
        control["ttl"] = ttl.clone();
    }
    last.insert("cache_control".into(), control);
    *points += 1;
    Ok(())
}

fn message_to_anthropic(message: &Value, path: &str, points: &mut usize) -> Result<Value, TranslateError> {
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut content = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.iter().enumerate() {
        let path = format!("{path}.content[{j}]");
        if let Some(point) = block.get("cachePoint") {
            mark(&mut content, point, &path, points)?;
        } else if let Some(block) = block_to_anthropic(block, &path)? {
            content.push(block);
        }
    }
    Ok(json!({"role": message.get("role").cloned().unwrap_or(Value::from("user")), "content": content}))
}

fn block_to_anthropic(block: &Value, path: &str) -> Result<Option<Value>, TranslateError> {
    if let Some(text) = block.get("text") {
        return Ok(Some(json!({"type": "text", "text": text})));
    }
    if let Some(reasoning) = block.get("reasoningContent") {
        return reasoning_to_anthropic(reasoning, path).map(Some);
    }
    if let Some(image) = block.get("image") {
        let media = image.get("format").and_then(Value::as_str).map(|f| format!("image/{f}"));
        let data = image.get("source").and_then(|s| s.get("bytes"));
        let Some((media, data)) = media.zip(data) else {
            return Err(TranslateError::invalid(format!("{path}.image"), "needs a `format` and `source.bytes`"));
        };
        return Ok(Some(json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})));
    }
    if let Some(call) = block.get("toolUse") {
        return Ok(Some(
            json!({"type": "tool_use", "id": call.get("toolUseId"), "name": call.get("name"), "input": call.get("input")}),
        ));
    }
    let Some(result) = block.get("toolResult") else {
        let reason = format!("a `{}` content block is not supported", member(block));
        return Err(TranslateError::invalid(path, reason));
    };
    let parts = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut content = Vec::with_capacity(parts.len());
    for (k, part) in parts.iter().enumerate() {
        // `ToolResultContentBlock`: `text`, `json` (any JSON, given to the model as its
        // text), `image`; documents and videos are refused.
        if let Some(text) = part.get("text") {
            content.push(json!({"type": "text", "text": text}));
        } else if let Some(value) = part.get("json") {
            content.push(json!({"type": "text", "text": value.to_string()}));
        } else if part.get("image").is_some() {
            content.extend(block_to_anthropic(part, path)?);
        } else {
            let reason = format!("a `{}` tool result block is not supported", member(part));
            return Err(TranslateError::invalid(format!("{path}.toolResult.content[{k}]"), reason));
        }
    }
    let is_error = result.get("status").and_then(Value::as_str) == Some("error");
    Ok(Some(
        json!({"type": "tool_result", "tool_use_id": result.get("toolUseId"), "content": content, "is_error": is_error}),
    ))
}

/// `reasoningContent` (a union: exactly one of `reasoningText`, `redactedContent`) as
/// Anthropic's `thinking` or `redacted_thinking` block.
fn reasoning_to_anthropic(reasoning: &Value, path: &str) -> Result<Value, TranslateError> {
    let path = format!("{path}.reasoningContent");
    match (reasoning.get("reasoningText"), reasoning.get("redactedContent")) {
        (Some(text), None) => {
            let Some(thinking) = text.get("text").filter(|t| t.is_string()) else {
                return Err(TranslateError::invalid(format!("{path}.reasoningText.text"), "is required"));
            };
            let mut block = json!({"type": "thinking", "thinking": thinking});
            if let Some(signature) = text.get("signature") {
                block["signature"] = signature.clone();
            }
            Ok(block)
        }
        (None, Some(Value::String(data))) => Ok(json!({"type": "redacted_thinking", "data": data})),
        _ => Err(TranslateError::invalid(path, "must hold exactly one of `reasoningText` and `redactedContent`")),
    }
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
        let converse = parse(&anthropic_to_converse_request(anthropic.to_string().as_bytes(), &[]).unwrap_or_default());
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
        let err = anthropic_to_converse_request(url_image.to_string().as_bytes(), &[]).err();
        assert_eq!(err.as_ref().and_then(TranslateError::field), Some("messages[0].content[0].source"));
        let document = json!({"messages": [{"role": "user", "content": [{"type": "server_tool_use"}]}]});
        let err = anthropic_to_converse_request(document.to_string().as_bytes(), &[]).err();
        assert_eq!(err.as_ref().and_then(TranslateError::field), Some("messages[0].content[0].type"));
    }

    #[test]
    fn thinking_blocks_become_reasoning_content_with_their_signatures_in_order_and_come_back() {
        let anthropic = json!({
            "model": "m", "stream": false, "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "weather? call-tool:get"}]},
                {"role": "assistant", "content": [
                    {"type": "redacted_thinking", "data": "RU5DUllQVEVE"},
                    {"type": "thinking", "thinking": "I should call get.", "signature": "c2lnLTE="},
                    {"type": "tool_use", "id": "t1", "name": "get", "input": {}}
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "sunny"}], "is_error": false}]}
            ]
        });
        let converse = parse(&anthropic_to_converse_request(anthropic.to_string().as_bytes(), &[]).unwrap_or_default());
        assert_eq!(
            converse["messages"][1]["content"],
            json!([
                {"reasoningContent": {"redactedContent": "RU5DUllQVEVE"}},
                {"reasoningContent": {"reasoningText": {"text": "I should call get.", "signature": "c2lnLTE="}}},
                {"toolUse": {"toolUseId": "t1", "name": "get", "input": {}}}
            ])
        );
        assert_eq!(converse["additionalModelRequestFields"]["thinking"], anthropic["thinking"]);
        let back =
            parse(&converse_to_anthropic_request(converse.to_string().as_bytes(), "m", false).unwrap_or_default());
        assert_eq!(back, anthropic, "the simulator reads back what the client sent");
    }

    #[test]
    fn cache_breakpoints_become_cache_points_after_the_block_they_close_and_come_back() {
        let ephemeral = json!({"type": "ephemeral"});
        let anthropic = json!({
            "model": "m", "stream": false, "max_tokens": 16,
            "system": [{"type": "text", "text": "long rules", "cache_control": ephemeral},
                       {"type": "text", "text": "today"}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "document", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                {"type": "text", "text": "question"}
            ]}],
            "tools": [{"name": "a", "description": "d", "input_schema": {"type": "object"}},
                      {"name": "b", "description": "d", "input_schema": {"type": "object"}, "cache_control": ephemeral}]
        });
        let converse = parse(&anthropic_to_converse_request(anthropic.to_string().as_bytes(), &[]).unwrap_or_default());
        let point = json!({"cachePoint": {"type": "default"}});
        assert_eq!(converse["system"], json!([{"text": "long rules"}, point, {"text": "today"}]));
        assert_eq!(
            converse["messages"][0]["content"],
            json!([{"text": "document"}, {"cachePoint": {"type": "default", "ttl": "1h"}}, {"text": "question"}])
        );
        let tools = converse["toolConfig"]["tools"].as_array().cloned().unwrap_or_default();
        assert_eq!(tools.len(), 3);
        assert_eq!((&tools[1]["toolSpec"]["name"], &tools[2]), (&json!("b"), &point));
        let back =
            parse(&converse_to_anthropic_request(converse.to_string().as_bytes(), "m", false).unwrap_or_default());
        assert_eq!(back, anthropic, "each breakpoint back on the block it marked");
    }

    #[test]
    fn beta_flags_go_in_the_body_of_both_apis() {
        let anthropic = json!({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
        let betas = ["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"];
        let converse =
            parse(&anthropic_to_converse_request(anthropic.to_string().as_bytes(), &betas).unwrap_or_default());
        assert_eq!(converse["additionalModelRequestFields"], json!({"anthropic_beta": betas}));
        let plain = parse(&anthropic_to_converse_request(anthropic.to_string().as_bytes(), &[]).unwrap_or_default());
        assert!(plain.get("additionalModelRequestFields").is_none(), "{plain}");
        let invoke = parse(&anthropic_to_invoke_request(anthropic.to_string().as_bytes(), &betas).unwrap_or_default());
        assert_eq!(invoke["anthropic_beta"], json!(betas));
        assert_eq!(invoke["anthropic_version"], BEDROCK_ANTHROPIC_VERSION);
        assert!(invoke.get("model").is_none());
    }

    #[test]
    fn beta_flags_come_from_the_body_in_each_apis_place() {
        let converse = br#"{"additionalModelRequestFields":{"anthropic_beta":["context-1m-2025-08-07","interleaved-thinking-2025-05-14"]}}"#;
        assert_eq!(
            bedrock_beta_flags(converse, false),
            Ok(vec!["context-1m-2025-08-07".into(), "interleaved-thinking-2025-05-14".into()])
        );
        assert_eq!(bedrock_beta_flags(converse, true), Ok(vec![]), "InvokeModel reads its own field");
        let invoke = br#"{"anthropic_beta":["token-efficient-tools-2025-02-19"]}"#;
        assert_eq!(bedrock_beta_flags(invoke, true), Ok(vec!["token-efficient-tools-2025-02-19".into()]));
        for bad in [
            r#"{"anthropic_beta":"context-1m-2025-08-07"}"#,
            r#"{"anthropic_beta":["Context 1M"]}"#,
            r#"{"anthropic_beta":["context-1m"]}"#,
            r#"{"anthropic_beta":[7]}"#,
        ] {
            let err = bedrock_beta_flags(bad.as_bytes(), true).err();
            assert_eq!(err.as_ref().and_then(TranslateError::field), Some("anthropic_beta"), "{bad}");
        }
    }

    #[test]
    fn an_invoke_model_body_is_anthropics_with_the_model_of_the_path() {
        let body = json!({"anthropic_version": BEDROCK_ANTHROPIC_VERSION, "anthropic_beta": ["context-1m-2025-08-07"],
            "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
        let out = parse(&invoke_to_anthropic_request(body.to_string().as_bytes(), "claude", true).unwrap_or_default());
        assert_eq!(
            out,
            json!({"model": "claude", "stream": true, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
        );
        let field = |body: Value| {
            invoke_to_anthropic_request(body.to_string().as_bytes(), "claude", false)
                .err()
                .and_then(|e| e.field().map(str::to_owned))
        };
        assert_eq!(field(json!({"max_tokens": 8})).as_deref(), Some("anthropic_version"));
        assert_eq!(field(json!({"anthropic_version": "2023-06-01"})).as_deref(), Some("anthropic_version"));
        let named = json!({"anthropic_version": BEDROCK_ANTHROPIC_VERSION, "model": "x"});
        assert_eq!(field(named).as_deref(), Some("model"));
        assert_eq!(field(json!([1])).as_deref(), Some("body"));
    }

    #[test]
    fn count_tokens_reads_either_input_as_anthropics_body() {
        let converse = json!({"input": {"converse": {"system": [{"text": "be brief"}], "messages": [{"role": "user", "content": [{"text": "hi"}]}]}}});
        let out = parse(&count_tokens_to_anthropic_request(converse.to_string().as_bytes(), "m").unwrap_or_default());
        assert_eq!(out["system"], json!([{"type": "text", "text": "be brief"}]));
        assert_eq!((&out["model"], &out["messages"][0]["content"][0]["text"]), (&json!("m"), &json!("hi")));
        let invoke_body = json!({"anthropic_version": BEDROCK_ANTHROPIC_VERSION, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
        let encoded = aws_smithy_types::base64::encode(invoke_body.to_string());
        let invoke = json!({"input": {"invokeModel": {"body": encoded}}});
        let out = parse(&count_tokens_to_anthropic_request(invoke.to_string().as_bytes(), "m").unwrap_or_default());
        assert_eq!((&out["model"], &out["max_tokens"]), (&json!("m"), &json!(8)));
        let field = |body: Value| {
            count_tokens_to_anthropic_request(body.to_string().as_bytes(), "m")
                .err()
                .and_then(|e| e.field().map(str::to_owned))
        };
        assert_eq!(field(json!({"input": {}})).as_deref(), Some("input"));
        let unversioned = aws_smithy_types::base64::encode(r#"{"messages":[]}"#);
        assert_eq!(
            field(json!({"input": {"invokeModel": {"body": unversioned}}})).as_deref(),
            Some("input.invokeModel.body.anthropic_version")
        );
        let bad = json!({"input": {"converse": {"messages": [{"role": "user", "content": [{"video": {}}]}]}}});
        assert_eq!(field(bad).as_deref(), Some("input.converse.messages[0].content[0]"));
    }

    #[test]
    fn converse_tool_choice_json_results_and_unknown_blocks_read_back() {
        let converse = json!({
            "messages": [
                {"role": "user", "content": [{"text": "go"}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "get", "input": {}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"temp": 21}}]}}]}
            ],
            "toolConfig": {"tools": [{"toolSpec": {"name": "get", "inputSchema": {"json": {"type": "object"}}}}],
                           "toolChoice": {"tool": {"name": "get"}}}
        });
        let out =
            parse(&converse_to_anthropic_request(converse.to_string().as_bytes(), "m", false).unwrap_or_default());
        assert_eq!(out["tool_choice"], json!({"type": "tool", "name": "get"}));
        assert_eq!(out["tools"][0], json!({"name": "get", "input_schema": {"type": "object"}}), "no null description");
        assert_eq!(out["messages"][2]["content"][0]["content"], json!([{"type": "text", "text": "{\"temp\":21}"}]));
        let refused = |body: Value| {
            converse_to_anthropic_request(body.to_string().as_bytes(), "m", false)
                .err()
                .and_then(|e| e.field().map(str::to_owned))
        };
        let document = json!({"messages": [{"role": "user", "content": [{"text": "x"}, {"document": {"name": "d"}}]}]});
        assert_eq!(refused(document).as_deref(), Some("messages[0].content[1]"));
        let video = json!({"messages": [{"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"video": {}}]}}]}]});
        assert_eq!(refused(video).as_deref(), Some("messages[0].content[0].toolResult.content[0]"));
        let image = json!({"messages": [{"role": "user", "content": [{"image": {"format": "png"}}]}]});
        assert_eq!(refused(image).as_deref(), Some("messages[0].content[0].image"));
        let choice = json!({"messages": [], "toolConfig": {"tools": [], "toolChoice": {"tool": {}}}});
        assert_eq!(refused(choice).as_deref(), Some("toolConfig.toolChoice"));
    }

    #[test]
    fn the_simulator_refuses_cache_points_and_reasoning_bedrock_refuses() {
        let refused = |body: Value| {
            converse_to_anthropic_request(body.to_string().as_bytes(), "m", false)
                .err()
                .and_then(|e| e.field().map(str::to_owned))
        };
        let first =
            json!({"messages": [{"role": "user", "content": [{"cachePoint": {"type": "default"}}, {"text": "x"}]}]});
        assert_eq!(refused(first).as_deref(), Some("messages[0].content[0].cachePoint"));
        let kind = json!({"system": [{"text": "x"}, {"cachePoint": {"type": "ephemeral"}}]});
        assert_eq!(refused(kind).as_deref(), Some("system[1].cachePoint.type"));
        let ttl = json!({"system": [{"text": "x"}, {"cachePoint": {"type": "default", "ttl": "2h"}}]});
        assert_eq!(refused(ttl).as_deref(), Some("system[1].cachePoint.ttl"));
        let five: Vec<Value> = (0..5)
            .flat_map(|i| [json!({"text": format!("part {i}")}), json!({"cachePoint": {"type": "default"}})])
            .collect();
        assert_eq!(refused(json!({"system": five})).as_deref(), Some("body"));
        let empty = json!({"messages": [{"role": "assistant", "content": [{"reasoningContent": {}}]}]});
        assert_eq!(refused(empty).as_deref(), Some("messages[0].content[0].reasoningContent"));
        let no_text = json!({"messages": [{"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"signature": "s"}}}]}]});
        assert_eq!(refused(no_text).as_deref(), Some("messages[0].content[0].reasoningContent.reasoningText.text"));
    }
}
