//! The Gemini `generateContent` shape as the simulator answers it (the Gemini API and
//! Gemini on Vertex AI alike): the request counted, admitted on the model's limits (TPM
//! counts input, as Gemini's does), and answered as one `GenerateContentResponse` or an
//! SSE stream of them, the last with `finishReason` and the whole `usageMetadata`. A
//! thinking model's config and thought signatures are checked, and its answers signed, as
//! [`super::thinking`] describes.

use std::sync::Arc;

use axum::Extension;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::admission::Cost;
use crate::conn::ConnCtl;
use crate::flow::{self, Prepared};
use crate::pacer::{Render, data};
use crate::sim::{Ask, Sim, Ticket};
use crate::tools::ToolCall;

use super::thinking::{self, Thinking};

/// Per-content overhead counted on top of its parts' text.
const PER_CONTENT: u64 = 3;

/// Answers a `generateContent` (`stream` false) or `streamGenerateContent` call for `model`.
pub async fn generate(
    sim: Arc<Sim>,
    model: &str,
    stream: bool,
    ctl: Option<Extension<ConnCtl>>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let ctl = ctl.map(|Extension(ctl)| ctl);
    let (prepared, call, thinking) = match prepare(&sim, model, stream, headers, body) {
        Ok(counted) => counted,
        Err(response) => return *response,
    };
    let structured = structured(body);
    let mut ticket = match flow::admit(&sim, ctl.as_ref(), &prepared, headers).await {
        Ok(ticket) => ticket,
        Err(response) => return response,
    };
    if let Some(call) = &call {
        ticket.output = call.tokens(&prepared.model.tokenizer);
    }
    let id = sim.request_id().trim_start_matches("req_").to_owned();
    if stream {
        let (flavor, snapshot) = (prepared.model.flavor, ticket.snapshot);
        let (input, cap, version) = (prepared.input, prepared.ask.cap, version(&prepared));
        let render = GeminiStream { id, input, cap, call, version, thinking };
        let body = crate::pacer::body(Arc::clone(&sim), prepared, ticket, render);
        return crate::respond::sse(&sim, flavor, Some(&snapshot), body);
    }
    flow::generate(&ticket).await;
    whole(&sim, &prepared, &ticket, &id, (call.as_ref(), thinking, structured))
}

/// JSON mode (`generationConfig.responseMimeType: application/json`): the answer's text is
/// a JSON value of the request's `responseJsonSchema` (or OpenAPI `responseSchema`), `{}`
/// without one (<https://ai.google.dev/gemini-api/docs/structured-output>). Whole answers
/// only: a stream keeps its filler text.
fn structured(body: &[u8]) -> Option<String> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let config = request.get("generationConfig")?;
    if config.get("responseMimeType").and_then(Value::as_str) != Some("application/json") {
        return None;
    }
    let schema = config.get("responseJsonSchema").or_else(|| config.get("responseSchema"));
    Some(schema.map_or_else(|| json!({}), |s| instance(s, 0)).to_string())
}

/// A small value of `schema` (its first `enum` value, one item per array), to depth 8.
fn instance(schema: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if let Some(first) = schema.get("anyOf").and_then(|a| a.get(0)) {
        return instance(first, depth + 1);
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.to_ascii_lowercase(),
        Some(Value::Array(kinds)) => {
            kinds.iter().filter_map(Value::as_str).find(|k| *k != "null").unwrap_or("null").to_owned()
        }
        _ => "object".to_owned(),
    };
    match kind.as_str() {
        "object" => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let fields = properties.into_iter().flatten().map(|(k, v)| (k.clone(), instance(v, depth + 1)));
            Value::Object(fields.collect())
        }
        "array" => json!([schema.get("items").map_or(Value::Null, |i| instance(i, depth + 1))]),
        "string" => Value::from("text"),
        "integer" | "number" => Value::from(1),
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    }
}

/// A non-streamed answer: the thought summary when asked for, the text (or the function
/// call, signed when the model thought), its finish reason and usage.
fn whole(
    sim: &Sim,
    prepared: &Prepared,
    ticket: &Ticket,
    id: &str,
    (call, thinking, structured): (Option<&ToolCall>, Thinking, Option<String>),
) -> Response {
    let version = version(prepared);
    let mut parts: Vec<Value> = thinking.summary().into_iter().collect();
    parts.extend(match call {
        Some(call) => vec![function_call(call, &version, thinking)],
        None => {
            let text = structured.unwrap_or_else(|| crate::text::filler(ticket.output));
            let mut text = json!({"text": text});
            if thinking.signs_text() {
                text["thoughtSignature"] = Value::from(thinking::sign_part(&version, &text));
            }
            vec![text]
        }
    });
    let finish = Some(finish(ticket.output, prepared.ask.cap));
    let answer = response(id, &version, parts, finish, usage(prepared.input, ticket.output, thinking.thoughts));
    sim.complete(&prepared.model, ticket.reserved_output, &prepared.served(ticket.output));
    let body = serde_json::to_vec(&answer).unwrap_or_default();
    crate::respond::json(sim, prepared.model.flavor, Some(&ticket.snapshot), StatusCode::OK, body)
}

fn version(prepared: &Prepared) -> String {
    prepared.model.config.name.clone()
}

/// Counts and prices the request, checks its thinking config and thought signatures, and
/// decides its function call; refusals in Google's words.
fn prepare(
    sim: &Sim,
    name: &str,
    stream: bool,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Prepared, Option<ToolCall>, Thinking), Box<Response>> {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return Err(Box::new(super::error(sim, 400, "Invalid JSON payload received.", "INVALID_ARGUMENT")));
    };
    let model = sim
        .model(name, crate::config::Shape::Openai)
        .filter(|m| m.flavor == crate::config::Flavor::Gemini)
        .cloned()
        .ok_or_else(|| {
            let message =
                format!("models/{name} is not found for API version v1beta, or is not supported for generateContent.");
            Box::new(super::error(sim, 404, &message, "NOT_FOUND"))
        })?;
    let contents = request.get("contents").and_then(Value::as_array).filter(|c| !c.is_empty());
    let Some(contents) = contents else {
        return Err(Box::new(super::error(
            sim,
            400,
            "* GenerateContentRequest.contents: contents is not specified",
            "INVALID_ARGUMENT",
        )));
    };
    let invalid = |message: String| Box::new(super::error(sim, 400, &message, "INVALID_ARGUMENT"));
    let thinking = thinking::thinking(&model.config.name, request.get("generationConfig")).map_err(invalid)?;
    sim.google().signatures.check(&model.config.name, contents).map_err(invalid)?;
    let tok = &model.tokenizer;
    let system = request.get("systemInstruction").map_or(0, |s| parts_tokens(s, tok));
    let tools = request.get("tools").map_or(0, |t| tok.count(&t.to_string()));
    let input = system + tools + contents.iter().map(|c| PER_CONTENT + parts_tokens(c, tok)).sum::<u64>();
    let config = request.get("generationConfig");
    let cap = config
        .and_then(|c| c.get("maxOutputTokens"))
        .and_then(Value::as_u64)
        .unwrap_or(model.config.default_max_tokens);
    #[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    let ask = Ask { cost: Cost { tokens: input as f64, ..Cost::default() }, stream, cap };
    let last_text = contents.last().map(text_of).unwrap_or_default();
    let tenant = crate::text::tenant(headers, None);
    let marker = crate::text::marker(&last_text);
    let call = tool_call(&request, &last_text);
    Ok((Prepared { model, ask, input, cached: 0, tenant, marker, prompt_cache: None }, call, thinking))
}

fn parts_of(content: &Value) -> &[Value] {
    content.get("parts").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn parts_tokens(content: &Value, tok: &crate::tokens::Tokenizer) -> u64 {
    parts_of(content)
        .iter()
        .map(|part| match part.get("text").and_then(Value::as_str) {
            Some(text) => tok.count(text),
            None => tok.count(&part.to_string()),
        })
        .sum()
}

fn text_of(content: &Value) -> String {
    parts_of(content).iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect()
}

/// The function the answer calls: `ANY` mode, a named allowed function, or a
/// `call-tool:<name>` marker in the last turn, as for the other shapes.
fn tool_call(request: &Value, last_text: &str) -> Option<ToolCall> {
    let declarations = request.get("tools")?.as_array()?.iter().find_map(|t| t.get("functionDeclarations"))?;
    let config = request.get("toolConfig").and_then(|c| c.get("functionCallingConfig"));
    let choice = match config.and_then(|c| c.get("mode")).and_then(Value::as_str) {
        Some("NONE") => json!("none"),
        Some("ANY") => match config.and_then(|c| c.get("allowedFunctionNames")).and_then(|n| n.get(0)) {
            Some(name) => json!({"name": name}),
            None => json!("required"),
        },
        _ => json!("auto"),
    };
    crate::tools::decide(Some(declarations), Some(&choice), last_text)
}

/// The answer's `functionCall` part, signed by `model` when it thought.
fn function_call(call: &ToolCall, model: &str, thinking: Thinking) -> Value {
    let args: Value = serde_json::from_str(call.arguments).unwrap_or_else(|_| json!({}));
    let mut part = json!({"functionCall": {"name": call.name, "args": args}});
    if thinking.on() {
        part["thoughtSignature"] = Value::from(thinking::sign_part(model, &part));
    }
    part
}

/// `STOP`, or `MAX_TOKENS` when the cap cut the answer.
fn finish(output: u64, cap: u64) -> &'static str {
    if output >= cap { "MAX_TOKENS" } else { "STOP" }
}

/// `usageMetadata` of an answer (`thoughts` thinking tokens, reported when there were any).
#[must_use]
pub fn usage(input: u64, output: u64, thoughts: u64) -> Value {
    let mut usage = json!({"promptTokenCount": input, "candidatesTokenCount": output,
        "totalTokenCount": input + output + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": input}]});
    if thoughts > 0 {
        usage["thoughtsTokenCount"] = Value::from(thoughts);
    }
    usage
}

fn response(id: &str, version: &str, parts: Vec<Value>, finish: Option<&str>, usage: Value) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = Value::from(finish);
    }
    json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": version, "responseId": id})
}

/// One streamed answer: a `GenerateContentResponse` per content chunk, the last one
/// carrying `finishReason` and the final usage.
struct GeminiStream {
    id: String,
    input: u64,
    cap: u64,
    call: Option<ToolCall>,
    version: String,
    thinking: Thinking,
}

impl Render for GeminiStream {
    fn head(&mut self, out: &mut Vec<u8>) {
        if let Some(summary) = self.thinking.summary() {
            let usage = json!({"promptTokenCount": self.input});
            data(out, &response(&self.id, &self.version, vec![summary], None, usage));
        }
    }

    fn chunk(&mut self, text: &str, out: &mut Vec<u8>) {
        if self.call.is_none() {
            let usage = json!({"promptTokenCount": self.input});
            data(out, &response(&self.id, &self.version, vec![json!({"text": text})], None, usage));
        }
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        let mut parts: Vec<Value> =
            self.call.as_ref().map(|call| function_call(call, &self.version, self.thinking)).into_iter().collect();
        if self.call.is_none() && self.thinking.signs_text() {
            // Gemini 3 streams a text answer's signature on an empty last part.
            let mut last = json!({"text": ""});
            last["thoughtSignature"] = Value::from(thinking::sign_part(&self.version, &last));
            parts.push(last);
        }
        let usage = usage(self.input, output, self.thinking.thoughts);
        data(out, &response(&self.id, &self.version, parts, Some(finish(output, self.cap)), usage));
    }
}
