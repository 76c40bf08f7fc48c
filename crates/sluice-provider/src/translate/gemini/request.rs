//! OpenAI chat request → Gemini `generateContent` body.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::thinking;
use crate::translate::error::TranslateError;
use crate::translate::json::{self, Object};

/// OpenAI sampling fields and their `generationConfig` names, both directions.
pub(super) const SAMPLING: [(&str, &str); 5] = [
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
];

/// OpenAI `tool_choice` strings and Gemini's `functionCallingConfig.mode`, both directions.
pub(super) const TOOL_MODES: [(&str, &str); 3] = [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")];

/// Fields whose absence would change the answer, with why Gemini cannot carry them.
const REFUSED: [(&str, &str); 5] = [
    ("logprobs", "Gemini's native API has no per-token log probabilities here"),
    ("top_logprobs", "Gemini's native API has no per-token log probabilities here"),
    ("logit_bias", "Gemini has no logit bias"),
    ("functions", "legacy functions are not translated; use tools"),
    ("audio", "audio output is not translated"),
];

/// Translates an OpenAI chat-completions body (as the gateway sends it upstream) into a
/// Gemini `generateContent` body. The model is not in the body: it is in the URL (the
/// body's `model`, the one sent upstream, tells how `reasoning_effort` is set).
///
/// Thought signatures a client sends back (`extra_content.google.thought_signature` on a
/// tool call or an assistant message) go on the part they came from.
///
/// # Errors
/// [`TranslateError::Invalid`] for a body that is not a chat request, a field Gemini has
/// no counterpart for (`n > 1`, `logprobs`, `logit_bias`, legacy `functions`, audio, a
/// `reasoning_effort` the model has no thinking setting for), an image that is not a
/// `data:` URL, or malformed messages.
pub fn openai_to_gemini_request(body: &[u8]) -> Result<Vec<u8>, TranslateError> {
    let request = json::parse_body(body)?;
    refuse(&request)?;
    let mut out = Map::new();
    let (system, contents) = messages(json::opt_array(&request, "messages", "")?)?;
    if !system.is_empty() {
        out.insert("systemInstruction".into(), json!({"parts": system}));
    }
    out.insert("contents".into(), Value::Array(contents));
    let declarations = function_declarations(json::opt_array(&request, "tools", "")?)?;
    if !declarations.is_empty() {
        out.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
    }
    if let Some(choice) = json::present(&request, "tool_choice") {
        out.insert("toolConfig".into(), json!({"functionCallingConfig": tool_choice(choice)?}));
    }
    let model = json::opt_str(&request, "model", "")?.unwrap_or_default();
    let mut config = generation_config(&request)?;
    if let Some(thinking) = thinking::thinking_config(&request, model)? {
        config.insert("thinkingConfig".into(), thinking);
    }
    if !config.is_empty() {
        out.insert("generationConfig".into(), Value::Object(config));
    }
    Ok(json::to_vec(&Value::Object(out)))
}

fn refuse(request: &Object) -> Result<(), TranslateError> {
    for (field, reason) in REFUSED {
        if json::present(request, field).is_some_and(|v| v != &Value::Bool(false)) {
            return Err(no_counterpart(field, reason));
        }
    }
    if json::present(request, "n").and_then(Value::as_u64).is_some_and(|n| n > 1) {
        return Err(no_counterpart("n", "only one candidate is translated"));
    }
    Ok(())
}

fn no_counterpart(field: &str, reason: &str) -> TranslateError {
    TranslateError::invalid(field, format!("cannot be translated to Gemini: {reason}"))
}

/// The system parts and the turns: consecutive turns of one role are merged (parallel
/// tool results go back as one turn, as Gemini wants).
fn messages(messages: &[Value]) -> Result<(Vec<Value>, Vec<Value>), TranslateError> {
    let mut system = Vec::new();
    let mut contents: Vec<(String, Vec<Value>)> = Vec::new();
    let mut call_names: HashMap<String, String> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        let message = json::as_object(message, &path)?;
        let (role, parts) = match json::req_str(message, "role", &path)? {
            "system" | "developer" => {
                system.extend(text_parts(message, &path)?);
                continue;
            }
            "user" => ("user", user_parts(message, &path)?),
            "assistant" => ("model", assistant_parts(message, &path, &mut call_names)?),
            "tool" => ("user", vec![tool_result(message, &path, &call_names)?]),
            other => return Err(TranslateError::invalid(format!("{path}.role"), format!("unknown role `{other}`"))),
        };
        match contents.last_mut() {
            Some((last, held)) if last == role => held.extend(parts),
            _ => contents.push((role.to_owned(), parts)),
        }
    }
    let contents = contents.into_iter().map(|(role, parts)| json!({"role": role, "parts": parts})).collect();
    Ok((system, contents))
}

/// The text of a message whose content may only be text (a string or text parts).
fn text_parts(message: &Object, path: &str) -> Result<Vec<Value>, TranslateError> {
    content_parts(message, path, false)
}

fn user_parts(message: &Object, path: &str) -> Result<Vec<Value>, TranslateError> {
    content_parts(message, path, true)
}

fn content_parts(message: &Object, path: &str, images: bool) -> Result<Vec<Value>, TranslateError> {
    match json::present(message, "content") {
        None => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![json!({"text": text})]),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| content_part(part, &format!("{path}.content[{j}]"), images))
            .collect(),
        Some(_) => Err(TranslateError::invalid(format!("{path}.content"), "must be a string or an array")),
    }
}

fn content_part(part: &Value, path: &str, images: bool) -> Result<Value, TranslateError> {
    let part = json::as_object(part, path)?;
    match json::req_str(part, "type", path)? {
        "text" => Ok(json!({"text": json::req_str(part, "text", path)?})),
        "image_url" if images => inline_image(part, path),
        other => Err(no_counterpart(&format!("{path}.type"), &format!("`{other}` parts are not translated"))),
    }
}

/// A `data:` URL image as an `inlineData` part (Gemini fetches no http URLs).
fn inline_image(part: &Object, path: &str) -> Result<Value, TranslateError> {
    let url = match json::present(part, "image_url") {
        Some(Value::String(url)) => url.as_str(),
        Some(Value::Object(image)) => json::req_str(image, "url", &json::join(path, "image_url"))?,
        _ => return Err(TranslateError::invalid(json::join(path, "image_url"), "must be an object with a url")),
    };
    let field = json::join(path, "image_url.url");
    let Some((mime, data)) = url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,")) else {
        return Err(no_counterpart(&field, "only base64 data: image URLs are passed to Gemini"));
    };
    Ok(json!({"inlineData": {"mimeType": mime, "data": data}}))
}

/// An assistant turn: its text, then its tool calls as `functionCall` parts (their ids
/// remembered, so the tool results that answer them can be named), each part with the
/// thought signature the client kept for it.
fn assistant_parts(
    message: &Object,
    path: &str,
    call_names: &mut HashMap<String, String>,
) -> Result<Vec<Value>, TranslateError> {
    let mut parts = text_parts(message, path)?;
    if let Some(signature) = thinking::signature_of(message, path)? {
        // A text part's signature: Gemini puts it on the last part of a text answer.
        match parts.last_mut() {
            Some(last) => last["thoughtSignature"] = Value::from(signature),
            None => parts.push(json!({"text": "", "thoughtSignature": signature})),
        }
    }
    for (j, call) in json::opt_array(message, "tool_calls", path)?.iter().enumerate() {
        let call_path = format!("{path}.tool_calls[{j}]");
        let call = json::as_object(call, &call_path)?;
        let function = json::as_object(json::present(call, "function").unwrap_or(&Value::Null), &call_path)?;
        let name = json::req_str(function, "name", &json::join(&call_path, "function"))?;
        let arguments = json::opt_str(function, "arguments", &call_path)?.unwrap_or("");
        let args = json::parse_arguments(arguments, &json::join(&call_path, "function.arguments"))?;
        if let Some(id) = json::opt_str(call, "id", &call_path)? {
            call_names.insert(id.to_owned(), name.to_owned());
        }
        let mut part = json!({"functionCall": {"name": name, "args": args}});
        if let Some(signature) = thinking::signature_of(call, &call_path)? {
            part["thoughtSignature"] = Value::from(signature);
        }
        parts.push(part);
    }
    Ok(parts)
}

/// A tool message as a `functionResponse` part, named after the call it answers.
fn tool_result(message: &Object, path: &str, call_names: &HashMap<String, String>) -> Result<Value, TranslateError> {
    let id = json::req_str(message, "tool_call_id", path)?;
    let Some(name) = call_names.get(id) else {
        return Err(TranslateError::invalid(format!("{path}.tool_call_id"), "answers no earlier tool call"));
    };
    let text: String =
        text_parts(message, path)?.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
    // Gemini wants an object whose keys are the caller's choice ("e.g. output, result",
    // <https://ai.google.dev/api/caching#FunctionResponse>): a JSON object result is passed
    // as is, other text wrapped under `result`, as google-genai wraps a function's return
    // value in automatic function calling.
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => json!({"result": text}),
    };
    Ok(json!({"functionResponse": {"name": name, "response": response}}))
}

fn function_declarations(tools: &[Value]) -> Result<Vec<Value>, TranslateError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let path = format!("tools[{i}]");
            let tool = json::as_object(tool, &path)?;
            if json::opt_str(tool, "type", &path)?.is_some_and(|t| t != "function") {
                return Err(no_counterpart(&format!("{path}.type"), "only function tools are translated"));
            }
            let function = json::as_object(json::present(tool, "function").unwrap_or(&Value::Null), &path)?;
            let mut declaration = Map::new();
            declaration.insert("name".into(), Value::from(json::req_str(function, "name", &path)?));
            if let Some(description) = json::opt_str(function, "description", &path)? {
                declaration.insert("description".into(), Value::from(description));
            }
            if let Some(parameters) = json::present(function, "parameters") {
                declaration.insert("parametersJsonSchema".into(), parameters.clone());
            }
            Ok(Value::Object(declaration))
        })
        .collect()
}

fn tool_choice(choice: &Value) -> Result<Value, TranslateError> {
    match choice {
        Value::String(mode) => match TOOL_MODES.iter().find(|(openai, _)| openai == mode) {
            Some((_, gemini)) => Ok(json!({"mode": gemini})),
            None => Err(TranslateError::invalid("tool_choice", format!("unknown value `{mode}`"))),
        },
        Value::Object(named) => {
            let function = json::as_object(json::present(named, "function").unwrap_or(&Value::Null), "tool_choice")?;
            let name = json::req_str(function, "name", "tool_choice.function")?;
            Ok(json!({"mode": "ANY", "allowedFunctionNames": [name]}))
        }
        _ => Err(TranslateError::invalid("tool_choice", "must be a string or an object")),
    }
}

/// `generationConfig` from the sampling fields; `stream_options`, `user`, `store`,
/// `metadata` and `service_tier` are dropped (Gemini streams always carry usage).
fn generation_config(request: &Object) -> Result<Object, TranslateError> {
    let mut config = Map::new();
    let max = json::present(request, "max_completion_tokens").or_else(|| json::present(request, "max_tokens"));
    if let Some(max) = max {
        config.insert("maxOutputTokens".into(), max.clone());
    }
    for (from, to) in SAMPLING {
        if let Some(value) = json::present(request, from) {
            config.insert(to.into(), value.clone());
        }
    }
    match json::present(request, "stop") {
        Some(Value::String(stop)) => _ = config.insert("stopSequences".into(), json!([stop])),
        Some(Value::Array(stops)) => _ = config.insert("stopSequences".into(), Value::Array(stops.clone())),
        _ => {}
    }
    response_format(request, &mut config)?;
    Ok(config)
}

fn response_format(request: &Object, config: &mut Object) -> Result<(), TranslateError> {
    let Some(format) = json::present(request, "response_format") else { return Ok(()) };
    let format = json::as_object(format, "response_format")?;
    match json::req_str(format, "type", "response_format")? {
        "text" => {}
        "json_object" => _ = config.insert("responseMimeType".into(), Value::from("application/json")),
        "json_schema" => {
            let schema = json::present(format, "json_schema").and_then(|s| s.get("schema")).cloned();
            config.insert("responseMimeType".into(), Value::from("application/json"));
            if let Some(schema) = schema {
                config.insert("responseJsonSchema".into(), schema);
            }
        }
        other => return Err(no_counterpart("response_format.type", &format!("`{other}` is not translated"))),
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};

    use super::openai_to_gemini_request;

    fn translate(body: &Value) -> Value {
        serde_json::from_slice(&openai_to_gemini_request(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn turns_system_images_and_sampling_carry_over() {
        let body = json!({
            "model": "gemini-2.5-flash", "max_tokens": 64, "temperature": 0.5, "stop": "END", "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0"}}]},
                {"role": "assistant", "content": "a dot"},
                {"role": "user", "content": "sure?"}
            ]
        });
        assert_eq!(
            translate(&body),
            json!({
                "systemInstruction": {"parts": [{"text": "be brief"}]},
                "contents": [
                    {"role": "user", "parts": [{"text": "what is this?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0"}}]},
                    {"role": "model", "parts": [{"text": "a dot"}]},
                    {"role": "user", "parts": [{"text": "sure?"}]}
                ],
                "generationConfig": {"maxOutputTokens": 64, "temperature": 0.5, "stopSequences": ["END"]}
            })
        );
    }

    #[test]
    fn tool_calls_and_their_results_become_function_parts() {
        let body = json!({
            "model": "m", "tool_choice": {"type": "function", "function": {"name": "weather"}},
            "tools": [{"type": "function", "function": {"name": "weather", "description": "d", "parameters": {"type": "object"}}}],
            "messages": [
                {"role": "user", "content": "weather in Oslo and Rome?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\":3}"},
                {"role": "tool", "tool_call_id": "c2", "content": "sunny"}
            ]
        });
        let out = translate(&body);
        assert_eq!(
            out["tools"][0]["functionDeclarations"][0],
            json!({"name": "weather", "description": "d", "parametersJsonSchema": {"type": "object"}})
        );
        assert_eq!(
            out["toolConfig"],
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}})
        );
        assert_eq!(
            out["contents"][1]["parts"][1],
            json!({"functionCall": {"name": "weather", "args": {"city": "Rome"}}})
        );
        assert_eq!(
            out["contents"][2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "weather", "response": {"temp": 3}}},
                {"functionResponse": {"name": "weather", "response": {"result": "sunny"}}}]}),
            "parallel results go back as one turn"
        );
    }

    #[test]
    fn what_gemini_cannot_carry_is_refused_naming_the_field() {
        let refused = |body: Value| openai_to_gemini_request(body.to_string().as_bytes()).unwrap_err();
        let base = |extra: (&str, Value)| {
            let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
            body[extra.0] = extra.1;
            body
        };
        assert_eq!(refused(base(("n", json!(2)))).field(), Some("n"));
        assert_eq!(refused(base(("logprobs", json!(true)))).field(), Some("logprobs"));
        let http_image = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]});
        assert_eq!(refused(http_image).field(), Some("messages[0].content[0].image_url.url"));
        assert!(openai_to_gemini_request(base(("n", json!(1))).to_string().as_bytes()).is_ok());
        let effort = json!({"model": "gemini-2.0-flash", "reasoning_effort": "low", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(refused(effort).field(), Some("reasoning_effort"), "a model that does not think");
    }

    #[test]
    fn reasoning_effort_becomes_the_thinking_config_of_the_models_family() {
        let body = |model: &str, effort: &str| json!({"model": model, "max_tokens": 9, "reasoning_effort": effort, "messages": [{"role": "user", "content": "hi"}]});
        let config = &translate(&body("gemini-2.5-flash", "medium"))["generationConfig"];
        assert_eq!(config, &json!({"maxOutputTokens": 9, "thinkingConfig": {"thinkingBudget": 8192}}));
        let config = &translate(&body("gemini-3-pro-preview", "high"))["generationConfig"];
        assert_eq!(config["thinkingConfig"], json!({"thinkingLevel": "high"}));
        let plain = json!({"model": "gemini-2.0-flash", "messages": [{"role": "user", "content": "hi"}]});
        assert!(translate(&plain).get("generationConfig").is_none(), "no effort, no thinking config");
    }

    #[test]
    fn thought_signatures_kept_by_the_client_go_back_on_their_parts() {
        let body = json!({
            "model": "gemini-3-flash-preview",
            "tools": [{"type": "function", "function": {"name": "weather"}}],
            "messages": [
                {"role": "user", "content": "weather in Oslo and Rome?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
                        "extra_content": {"google": {"thought_signature": "sig/A+=="}}},
                    {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "3"},
                {"role": "tool", "tool_call_id": "c2", "content": "20"},
                {"role": "assistant", "content": "Cold and warm.", "extra_content": {"google": {"thought_signature": "sig-text"}}},
                {"role": "user", "content": "thanks"}
            ]
        });
        let out = translate(&body);
        assert_eq!(
            out["contents"][1]["parts"],
            json!([
                {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "sig/A+=="},
                {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}
            ]),
            "exactly as received: only the first of parallel calls carries one"
        );
        assert_eq!(out["contents"][3]["parts"], json!([{"text": "Cold and warm.", "thoughtSignature": "sig-text"}]));
        let mut bad = body;
        bad["messages"][1]["tool_calls"][0]["extra_content"]["google"]["thought_signature"] = json!(7);
        let error = openai_to_gemini_request(bad.to_string().as_bytes()).unwrap_err();
        assert_eq!(error.field(), Some("messages[1].tool_calls[0].extra_content.google.thought_signature"));
    }
}
