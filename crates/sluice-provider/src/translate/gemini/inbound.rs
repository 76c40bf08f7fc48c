//! A Gemini `generateContent` body from a client → the OpenAI chat body the gateway's road
//! serves: the inverse of [`openai_to_gemini_request`](super::openai_to_gemini_request),
//! over the same tables (roles, sampling names, tool modes, thinking budgets, signatures).
//!
//! The request shape is Google's `GenerateContentRequest`
//! (<https://ai.google.dev/api/generate-content#request-body>, the same body on Vertex AI:
//! <https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference>).

use serde_json::{Map, Value, json};

use super::request::{SAMPLING, TOOL_MODES};
use super::thinking;
use crate::translate::error::TranslateError;
use crate::translate::json::{self, Object};

/// Fields that would change the answer and have no OpenAI chat counterpart.
const REFUSED: [(&str, &str); 1] =
    [("cachedContent", "Gemini context caches live at Google; send the contents instead")];

/// Translates a Gemini `generateContent` body for `model` (the sluice model profile the
/// path names) into an OpenAI chat-completions body; `stream` asks for a stream (with its
/// usage, which Gemini streams always carry).
///
/// | Gemini | OpenAI chat |
/// |---|---|
/// | `systemInstruction.parts[].text` | a `system` message |
/// | `contents[]` role `user` / `model` | `user` / `assistant` messages |
/// | `text`, `inlineData` (images) parts | text and `image_url` (`data:` URL) parts |
/// | `thought: true` parts | left out (thought summaries are not sent back) |
/// | `functionCall` parts (model turn) | `tool_calls[]` (id from the call, else `call_{n}`) |
/// | `functionResponse` parts (user turn) | `tool` messages, answering the call of that id or name |
/// | `thoughtSignature` | `extra_content.google.thought_signature` on the tool call or message |
/// | `tools[].functionDeclarations[]` | `tools[].function` (`parameters`: OpenAPI types lower-cased) |
/// | `toolConfig.functionCallingConfig` | `tool_choice` |
/// | `generationConfig` sampling, `maxOutputTokens`, `stopSequences` | `temperature`, `top_p`, `max_tokens`, `stop`… |
/// | `responseMimeType` `application/json` (+ `responseJsonSchema` / `responseSchema`) | `response_format` |
/// | `thinkingConfig` (`thinkingBudget`, `thinkingLevel`) | `reasoning_effort` |
///
/// Dropped: `safetySettings`, `labels`, `topK`, `includeThoughts`. Refused, naming the
/// field: `candidateCount > 1`, `cachedContent`, non-text `responseModalities`, tools other
/// than function declarations, parts other than the above (`fileData`, code execution),
/// `inlineData` that is not an image.
///
/// # Errors
/// [`TranslateError::Invalid`] naming the field (`contents[1].parts[0].functionCall.name`…).
pub fn gemini_to_openai_request(body: &[u8], model: &str, stream: bool) -> Result<Vec<u8>, TranslateError> {
    let request = proto_names(json::parse_body(body)?);
    Ok(json::to_vec(&Value::Object(chat_request(&request, model, stream)?)))
}

/// Translates a Gemini `countTokens` body for `model` into the OpenAI chat body whose input
/// sluice counts: its `generateContentRequest` when it has one, else its `contents`
/// (<https://ai.google.dev/api/tokens#method:-models.counttokens>).
///
/// # Errors
/// As [`gemini_to_openai_request`], the fields named inside `generateContentRequest`.
pub fn gemini_count_to_openai_request(body: &[u8], model: &str) -> Result<Vec<u8>, TranslateError> {
    let request = proto_names(json::parse_body(body)?);
    let chat = match json::present(&request, "generateContentRequest") {
        Some(inner) => chat_request(json::as_object(inner, "generateContentRequest")?, model, false)
            .map_err(|e| within("generateContentRequest", e))?,
        None => chat_request(&request, model, false)?,
    };
    Ok(json::to_vec(&Value::Object(chat)))
}

/// Fields whose value is the caller's own JSON (a call's arguments, a function's result, a
/// schema, labels): the names inside are data, kept as sent.
const OPAQUE: [&str; 7] =
    ["args", "response", "parameters", "parametersJsonSchema", "responseSchema", "responseJsonSchema", "labels"];

/// The body with every field under its lowerCamelCase JSON name. Google's API reads a
/// message's fields by either name, as proto3 JSON parsers do ("accept both the
/// lowerCamelCase name and the original proto field name",
/// <https://protobuf.dev/programming-guides/json/>), and google-genai sends some of them
/// under the original name (`inlineData.mime_type`, `functionDeclarations[].parameters_json_schema`).
fn proto_names(object: Object) -> Object {
    object
        .into_iter()
        .map(|(key, value)| {
            let key = lower_camel(key);
            let value = if OPAQUE.contains(&key.as_str()) { value } else { proto_names_in(value) };
            (key, value)
        })
        .collect()
}

fn proto_names_in(value: Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(proto_names(object)),
        Value::Array(items) => Value::Array(items.into_iter().map(proto_names_in).collect()),
        other => other,
    }
}

/// `mime_type` → `mimeType`; a name without `_` as it is.
fn lower_camel(key: String) -> String {
    if !key.contains('_') {
        return key;
    }
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn within(outer: &str, error: TranslateError) -> TranslateError {
    match error {
        TranslateError::Invalid { field, reason } => TranslateError::invalid(json::join(outer, &field), reason),
        other => other,
    }
}

/// The chat body for an already parsed `GenerateContentRequest`.
fn chat_request(request: &Object, model: &str, stream: bool) -> Result<Object, TranslateError> {
    for (field, reason) in REFUSED {
        if json::present(request, field).is_some() {
            return Err(no_counterpart(field, reason));
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), Value::from(model));
    let mut messages = Vec::new();
    if let Some(system) = json::present(request, "systemInstruction") {
        let text = system_text(system)?;
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    turns(json::opt_array(request, "contents", "")?, &mut messages)?;
    if messages.is_empty() {
        return Err(TranslateError::invalid("contents", "is required"));
    }
    out.insert("messages".into(), Value::Array(messages));
    let tools = tools(json::opt_array(request, "tools", "")?)?;
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(config) = json::present(request, "toolConfig")
        && let Some(choice) = tool_choice(json::as_object(config, "toolConfig")?)?
    {
        out.insert("tool_choice".into(), choice);
    }
    if let Some(config) = json::present(request, "generationConfig") {
        generation_config(json::as_object(config, "generationConfig")?, &mut out)?;
    }
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(out)
}

fn no_counterpart(field: &str, reason: &str) -> TranslateError {
    TranslateError::invalid(field, format!("has no counterpart sluice can serve: {reason}"))
}

/// The text of `systemInstruction` (a `Content`; its role, if any, is ignored).
fn system_text(system: &Value) -> Result<String, TranslateError> {
    let system = json::as_object(system, "systemInstruction")?;
    let mut text = Vec::new();
    for (i, part) in json::opt_array(system, "parts", "systemInstruction")?.iter().enumerate() {
        let path = format!("systemInstruction.parts[{i}]");
        let part = json::as_object(part, &path)?;
        match json::opt_str(part, "text", &path)? {
            Some(t) => text.push(t),
            None => return Err(no_counterpart(&path, "a system instruction is text")),
        }
    }
    Ok(text.join("\n"))
}

/// The calls of a model turn not yet answered: (id, name).
type Pending = Vec<(String, String)>;

fn turns(contents: &[Value], messages: &mut Vec<Value>) -> Result<(), TranslateError> {
    let mut pending: Pending = Vec::new();
    let mut calls = 0usize;
    for (i, content) in contents.iter().enumerate() {
        let path = format!("contents[{i}]");
        let content = json::as_object(content, &path)?;
        let parts = json::opt_array(content, "parts", &path)?;
        match json::opt_str(content, "role", &path)?.unwrap_or("user") {
            "user" => user_turn(parts, &path, &mut pending, messages)?,
            "model" => {
                pending.clear();
                messages.push(model_turn(parts, &path, &mut calls, &mut pending)?);
            }
            other => {
                return Err(TranslateError::invalid(json::join(&path, "role"), format!("unknown role `{other}`")));
            }
        }
    }
    Ok(())
}

/// A user turn: its function responses as `tool` messages (first: they must follow the
/// calls they answer), then the rest as one `user` message.
fn user_turn(
    parts: &[Value],
    path: &str,
    pending: &mut Pending,
    messages: &mut Vec<Value>,
) -> Result<(), TranslateError> {
    let mut content = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let part_path = format!("{path}.parts[{j}]");
        let part = json::as_object(part, &part_path)?;
        if let Some(response) = json::present(part, "functionResponse") {
            messages.push(tool_message(response, &json::join(&part_path, "functionResponse"), pending)?);
        } else if let Some(piece) = user_part(part, &part_path)? {
            content.push(piece);
        }
    }
    if !content.is_empty() {
        let only_text = content.len() == 1 && content[0].get("type").and_then(Value::as_str) == Some("text");
        let content = if only_text { content[0]["text"].clone() } else { Value::Array(content) };
        messages.push(json!({"role": "user", "content": content}));
    }
    Ok(())
}

/// A part of a user turn as an OpenAI content part (`None` for a thought summary).
fn user_part(part: &Object, path: &str) -> Result<Option<Value>, TranslateError> {
    if is_thought(part) {
        return Ok(None);
    }
    if let Some(text) = json::opt_str(part, "text", path)? {
        return Ok(Some(json!({"type": "text", "text": text})));
    }
    if let Some(data) = json::present(part, "inlineData") {
        let path = json::join(path, "inlineData");
        let data = json::as_object(data, &path)?;
        let mime = json::req_str(data, "mimeType", &path)?;
        let bytes = json::req_str(data, "data", &path)?;
        if !mime.starts_with("image/") {
            return Err(no_counterpart(&json::join(&path, "mimeType"), "only images are translated"));
        }
        return Ok(Some(json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{bytes}")}})));
    }
    Err(unknown_part(part, path))
}

fn unknown_part(part: &Object, path: &str) -> TranslateError {
    match part.keys().find(|k| !matches!(k.as_str(), "thoughtSignature" | "thought" | "videoMetadata")) {
        Some(kind) => no_counterpart(&json::join(path, kind), "this kind of part is not translated"),
        None => TranslateError::invalid(path, "has no content"),
    }
}

fn is_thought(part: &Object) -> bool {
    part.get("thought").and_then(Value::as_bool).unwrap_or(false)
}

/// A model turn as one assistant message: its text, its function calls as tool calls, the
/// signatures where the outbound translation reads them back, and the thinking blocks
/// sluice handed out in thought parts (Claude's) as `thinking_blocks`, for the Anthropic
/// translation to replay.
fn model_turn(parts: &[Value], path: &str, calls: &mut usize, pending: &mut Pending) -> Result<Value, TranslateError> {
    let mut text = String::new();
    let mut text_signature = None;
    let mut tool_calls = Vec::new();
    let mut thinking_blocks = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let part_path = format!("{path}.parts[{j}]");
        let part = json::as_object(part, &part_path)?;
        let signature = json::opt_str(part, "thoughtSignature", &part_path)?;
        if let Some(call) = json::present(part, "functionCall") {
            let call_path = json::join(&part_path, "functionCall");
            let call = json::as_object(call, &call_path)?;
            let name = json::req_str(call, "name", &call_path)?;
            let args = json::present(call, "args").cloned().unwrap_or_else(|| json!({}));
            if !args.is_object() {
                return Err(TranslateError::invalid(json::join(&call_path, "args"), "must be an object"));
            }
            let id = json::opt_str(call, "id", &call_path)?.map_or_else(|| format!("call_{calls}"), str::to_owned);
            *calls += 1;
            pending.push((id.clone(), name.to_owned()));
            let mut entry =
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}});
            if let Some(signature) = signature {
                entry["extra_content"] = thinking::extra_content(signature);
            }
            tool_calls.push(entry);
            continue;
        }
        if let Some(block) = signature.and_then(thinking::block_of_signature) {
            // A signed thinking block of another provider's, handed out in a thought part.
            thinking_blocks.push(block);
            continue;
        }
        if signature.is_some() {
            text_signature = signature;
        }
        if is_thought(part) {
            continue;
        }
        match json::opt_str(part, "text", &part_path)? {
            Some(t) => text.push_str(t),
            None => return Err(unknown_part(part, &part_path)),
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), Value::from("assistant"));
    let content = if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { Value::from(text) };
    message.insert("content".into(), content);
    if !tool_calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(signature) = text_signature {
        message.insert("extra_content".into(), thinking::extra_content(signature));
    }
    if !thinking_blocks.is_empty() {
        message.insert("thinking_blocks".into(), Value::Array(thinking_blocks));
    }
    Ok(Value::Object(message))
}

/// A `functionResponse` as the `tool` message answering its call: by id when it names one,
/// else the first call of that name still unanswered.
fn tool_message(response: &Value, path: &str, pending: &mut Pending) -> Result<Value, TranslateError> {
    let response = json::as_object(response, path)?;
    let name = json::req_str(response, "name", path)?;
    let by_id = json::opt_str(response, "id", path)?.and_then(|id| pending.iter().position(|(p, _)| p == id));
    let Some(at) = by_id.or_else(|| pending.iter().position(|(_, n)| n == name)) else {
        return Err(TranslateError::invalid(json::join(path, "name"), "answers no function call of the turn before"));
    };
    let (id, _) = pending.remove(at);
    // The object as JSON text: the outbound translation passes a JSON object back as is.
    let result = json::present(response, "response").cloned().unwrap_or_else(|| json!({}));
    Ok(json!({"role": "tool", "tool_call_id": id, "content": result.to_string()}))
}

fn tools(tools: &[Value]) -> Result<Vec<Value>, TranslateError> {
    let mut out = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let path = format!("tools[{i}]");
        let tool = json::as_object(tool, &path)?;
        if let Some(kind) = tool.keys().find(|k| k.as_str() != "functionDeclarations") {
            return Err(no_counterpart(&json::join(&path, kind), "only function declarations are translated"));
        }
        for (j, declaration) in json::opt_array(tool, "functionDeclarations", &path)?.iter().enumerate() {
            let path = format!("{path}.functionDeclarations[{j}]");
            let declaration = json::as_object(declaration, &path)?;
            let mut function = Map::new();
            function.insert("name".into(), Value::from(json::req_str(declaration, "name", &path)?));
            if let Some(description) = json::opt_str(declaration, "description", &path)? {
                function.insert("description".into(), Value::from(description));
            }
            if let Some(schema) = json::present(declaration, "parametersJsonSchema") {
                function.insert("parameters".into(), schema.clone());
            } else if let Some(schema) = json::present(declaration, "parameters") {
                function.insert("parameters".into(), json_schema(schema));
            }
            out.push(json!({"type": "function", "function": function}));
        }
    }
    Ok(out)
}

/// Gemini's OpenAPI-subset `Schema` (`type: "OBJECT"`, `nullable`) as JSON Schema; a
/// JSON Schema passes unchanged.
fn json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(fields) => {
            let mut out = Map::new();
            let nullable = fields.get("nullable").and_then(Value::as_bool).unwrap_or(false);
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("nullable" | "propertyOrdering", _) => {}
                    ("type", Value::String(kind)) => {
                        let kind = Value::from(kind.to_ascii_lowercase());
                        out.insert(key.clone(), if nullable { json!([kind, "null"]) } else { kind });
                    }
                    ("properties", Value::Object(properties)) => {
                        let properties = properties.iter().map(|(k, v)| (k.clone(), json_schema(v))).collect();
                        out.insert(key.clone(), Value::Object(properties));
                    }
                    ("items", item) => _ = out.insert(key.clone(), json_schema(item)),
                    ("anyOf", Value::Array(options)) => {
                        out.insert(key.clone(), Value::Array(options.iter().map(json_schema).collect()));
                    }
                    _ => _ = out.insert(key.clone(), value.clone()),
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// `functionCallingConfig` as `tool_choice`: the modes of [`TOOL_MODES`] read backwards;
/// `ANY` with one allowed function names it.
fn tool_choice(config: &Object) -> Result<Option<Value>, TranslateError> {
    let path = "toolConfig.functionCallingConfig";
    let Some(calling) = json::present(config, "functionCallingConfig") else { return Ok(None) };
    let calling = json::as_object(calling, path)?;
    let Some(mode) = json::opt_str(calling, "mode", path)? else { return Ok(None) };
    let allowed = json::opt_array(calling, "allowedFunctionNames", path)?;
    if mode == "ANY"
        && let [Value::String(name)] = allowed
    {
        return Ok(Some(json!({"type": "function", "function": {"name": name}})));
    }
    if !allowed.is_empty() {
        return Err(no_counterpart(&format!("{path}.allowedFunctionNames"), "only one allowed function is translated"));
    }
    match TOOL_MODES.iter().find(|(_, gemini)| *gemini == mode) {
        Some((openai, _)) => Ok(Some(Value::from(*openai))),
        None => Err(no_counterpart(&format!("{path}.mode"), &format!("`{mode}` is not translated"))),
    }
}

fn generation_config(config: &Object, out: &mut Object) -> Result<(), TranslateError> {
    let path = "generationConfig";
    if let Some(max) = json::present(config, "maxOutputTokens") {
        out.insert("max_tokens".into(), max.clone());
    }
    for (openai, gemini) in SAMPLING {
        if let Some(value) = json::present(config, gemini) {
            out.insert(openai.into(), value.clone());
        }
    }
    let stops = json::opt_array(config, "stopSequences", path)?;
    if !stops.is_empty() {
        out.insert("stop".into(), Value::Array(stops.to_vec()));
    }
    if json::present(config, "candidateCount").and_then(Value::as_u64).is_some_and(|n| n > 1) {
        return Err(no_counterpart("generationConfig.candidateCount", "only one candidate is served"));
    }
    if let Some(modalities) = json::present(config, "responseModalities").and_then(Value::as_array)
        && modalities.iter().any(|m| !m.as_str().is_some_and(|m| m.eq_ignore_ascii_case("text")))
    {
        return Err(no_counterpart("generationConfig.responseModalities", "only text answers are translated"));
    }
    if let Some(format) = response_format(config)? {
        out.insert("response_format".into(), format);
    }
    if let Some(thinking) = json::present(config, "thinkingConfig") {
        let thinking = json::as_object(thinking, "generationConfig.thinkingConfig")?;
        if let Some(effort) = thinking::effort_of(thinking)? {
            out.insert("reasoning_effort".into(), Value::from(effort));
        }
        // Thought summaries, which only a Gemini deployment gives: asked for as Google's
        // compatibility layer takes it (other deployments are not sent `extra_body`).
        if json::present(thinking, "includeThoughts").and_then(Value::as_bool) == Some(true) {
            out.insert("extra_body".into(), thinking::google_extra_body(json!({"include_thoughts": true})));
        }
    }
    Ok(())
}

/// `responseMimeType` (and its schema) as `response_format`, the inverse of the outbound
/// `response_format` mapping.
fn response_format(config: &Object) -> Result<Option<Value>, TranslateError> {
    let path = "generationConfig";
    let schema = json::present(config, "responseJsonSchema")
        .cloned()
        .or_else(|| json::present(config, "responseSchema").map(json_schema));
    match json::opt_str(config, "responseMimeType", path)? {
        None | Some("text/plain") if schema.is_none() => Ok(None),
        None | Some("application/json") => Ok(Some(match schema {
            Some(schema) => json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}),
            None => json!({"type": "json_object"}),
        })),
        Some(other) => {
            Err(no_counterpart("generationConfig.responseMimeType", &format!("`{other}` answers are not translated")))
        }
    }
}

/// The ids a `GenerateContentRequest` gives its calls, for tests: each call's id maps to
/// its name.
#[cfg(test)]
fn call_names(chat: &Value) -> std::collections::HashMap<String, String> {
    chat["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| (c["id"].as_str().unwrap_or("").to_owned(), c["function"]["name"].as_str().unwrap_or("").to_owned()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::translate::gemini::openai_to_gemini_request;

    fn translate(body: &Value) -> Value {
        serde_json::from_slice(&gemini_to_openai_request(body.to_string().as_bytes(), "gemini", false).unwrap())
            .unwrap()
    }

    #[test]
    fn proto_field_names_read_as_their_json_names_but_not_inside_the_callers_data() {
        // As google-genai sends an image and a function declaration.
        let body = json!({
            "system_instruction": {"parts": [{"text": "be brief"}]},
            "contents": [{"role": "user", "parts": [
                {"text": "look"},
                {"inlineData": {"data": "iVBORw0KGgo=", "mime_type": "image/png"}},
            ]}],
            "tools": [{"function_declarations": [{"name": "get_weather", "parameters_json_schema":
                {"type": "object", "properties": {"city_name": {"type": "string"}}}}]}],
            "generation_config": {"max_output_tokens": 20},
        });
        let chat = translate(&body);
        assert_eq!(chat["messages"][0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(chat["messages"][1]["content"][1]["image_url"]["url"], "data:image/png;base64,iVBORw0KGgo=");
        let parameters = &chat["tools"][0]["function"]["parameters"];
        assert_eq!(parameters["properties"]["city_name"], json!({"type": "string"}), "{chat}");
        assert_eq!(chat["max_tokens"], 20);
    }

    #[test]
    fn text_system_and_sampling_carry_over() {
        let body = json!({
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "what is this?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0"}}]},
                {"role": "model", "parts": [{"text": "thinking", "thought": true}, {"text": "a dot"}]},
                {"parts": [{"text": "sure?"}]}
            ],
            "generationConfig": {"temperature": 0.5, "topP": 0.9, "topK": 3, "maxOutputTokens": 64, "stopSequences": ["END"],
                "responseMimeType": "application/json", "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": true}}}},
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]
        });
        let out = translate(&body);
        assert_eq!(
            out["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0"}}]},
                {"role": "assistant", "content": "a dot"},
                {"role": "user", "content": "sure?"}
            ])
        );
        assert_eq!(
            (out["temperature"].clone(), out["top_p"].clone(), out["max_tokens"].clone()),
            (json!(0.5), json!(0.9), json!(64))
        );
        assert_eq!(out["stop"], json!(["END"]));
        assert_eq!(
            out["response_format"]["json_schema"]["schema"],
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}})
        );
        assert!(out.get("stream").is_none());
        // And back: the outbound translation gives the same turns and config.
        let back: Value =
            serde_json::from_slice(&openai_to_gemini_request(out.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(back["contents"][1], json!({"role": "model", "parts": [{"text": "a dot"}]}));
        assert_eq!(back["generationConfig"]["stopSequences"], json!(["END"]));
        assert_eq!(back["systemInstruction"], json!({"parts": [{"text": "be brief"}]}));
    }

    #[test]
    fn function_calls_results_and_signatures_round_trip_to_gemini() {
        let body = json!({
            "contents": [
                {"role": "user", "parts": [{"text": "weather in Oslo and Rome?"}]},
                {"role": "model", "parts": [
                    {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"},
                    {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "weather", "response": {"temp": 3}}},
                    {"functionResponse": {"name": "weather", "response": {"temp": 20}}}]}
            ],
            "tools": [{"functionDeclarations": [{"name": "weather", "description": "d", "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}}
        });
        let out = translate(&body);
        assert_eq!(out["tool_choice"], json!({"type": "function", "function": {"name": "weather"}}));
        assert_eq!(out["tools"][0]["function"]["parameters"]["properties"]["city"], json!({"type": "string"}));
        let calls = &out["messages"][1]["tool_calls"];
        assert_eq!(calls[0]["extra_content"], json!({"google": {"thought_signature": "c2ln"}}));
        assert_eq!(
            (out["messages"][2]["tool_call_id"].clone(), out["messages"][3]["tool_call_id"].clone()),
            (calls[0]["id"].clone(), calls[1]["id"].clone())
        );
        assert_eq!(call_names(&out).len(), 2);
        let back: Value =
            serde_json::from_slice(&openai_to_gemini_request(out.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(back["contents"][1], body["contents"][1], "the calls go back exactly, signature included");
        assert_eq!(back["contents"][2], body["contents"][2], "parallel results go back as one turn");
    }

    #[test]
    fn what_cannot_be_served_is_refused_naming_the_field() {
        let refused = |body: Value| gemini_to_openai_request(body.to_string().as_bytes(), "m", false).unwrap_err();
        let user = json!([{"role": "user", "parts": [{"text": "hi"}]}]);
        let with = |key: &str, value: Value| {
            let mut body = json!({"contents": user});
            body[key] = value;
            body
        };
        assert_eq!(refused(json!({"contents": []})).field(), Some("contents"));
        assert_eq!(refused(json!({"contents": "hi"})).field(), Some("contents"));
        assert_eq!(refused(with("tools", json!([{"googleSearch": {}}]))).field(), Some("tools[0].googleSearch"));
        assert_eq!(
            refused(with("generationConfig", json!({"candidateCount": 2}))).field(),
            Some("generationConfig.candidateCount")
        );
        let file = json!({"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": "gs://a", "mimeType": "image/png"}}]}]});
        assert_eq!(refused(file).field(), Some("contents[0].parts[0].fileData"));
        let orphan =
            json!({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]});
        assert_eq!(refused(orphan).field(), Some("contents[0].parts[0].functionResponse.name"));
        let unnamed = json!({"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]});
        assert_eq!(refused(unnamed).field(), Some("contents[0].parts[0].functionCall.name"));
        assert_eq!(refused(with("cachedContent", json!("cachedContents/x"))).field(), Some("cachedContent"));
    }

    #[test]
    fn thinking_config_becomes_the_effort_the_outbound_side_maps_back() {
        let body = |thinking: Value| json!({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"thinkingConfig": thinking}});
        assert_eq!(translate(&body(json!({"thinkingBudget": 1024})))["reasoning_effort"], "low");
        assert_eq!(translate(&body(json!({"thinkingBudget": 5000})))["reasoning_effort"], "medium");
        assert_eq!(translate(&body(json!({"thinkingBudget": 0})))["reasoning_effort"], "none");
        assert_eq!(
            translate(&body(json!({"thinkingLevel": "high", "includeThoughts": true})))["reasoning_effort"],
            "high"
        );
        assert!(
            translate(&body(json!({"thinkingBudget": -1}))).get("reasoning_effort").is_none(),
            "dynamic: the model decides"
        );
        let streamed: Value = serde_json::from_slice(
            &gemini_to_openai_request(body(json!({})).to_string().as_bytes(), "m", true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (streamed["stream"].clone(), streamed["stream_options"]["include_usage"].clone()),
            (json!(true), json!(true))
        );
    }
}
