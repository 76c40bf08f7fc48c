//! The Gemini `generateContent` shape as the simulator answers it (the Gemini API and
//! Gemini on Vertex AI alike): the request counted, admitted on the model's limits (TPM
//! counts input, as Gemini's does), and answered as one `GenerateContentResponse` or an
//! SSE stream of them, the last with `finishReason` and the whole `usageMetadata`.

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
    let (prepared, call) = match prepare(&sim, model, stream, headers, body) {
        Ok(counted) => counted,
        Err(response) => return *response,
    };
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
        let render = GeminiStream { id, input, cap, call, version };
        let body = crate::pacer::body(Arc::clone(&sim), prepared, ticket, render);
        return crate::respond::sse(&sim, flavor, Some(&snapshot), body);
    }
    flow::generate(&ticket).await;
    whole(&sim, &prepared, &ticket, &id, call.as_ref())
}

/// A non-streamed answer: the text (or the function call), its finish reason and usage.
fn whole(sim: &Sim, prepared: &Prepared, ticket: &Ticket, id: &str, call: Option<&ToolCall>) -> Response {
    let parts = match call {
        Some(call) => vec![function_call(call)],
        None => vec![json!({"text": crate::text::filler(ticket.output)})],
    };
    let finish = Some(finish(ticket.output, prepared.ask.cap));
    let answer = response(id, &version(prepared), parts, finish, usage(prepared.input, ticket.output));
    sim.complete(&prepared.model, ticket.reserved_output, &prepared.served(ticket.output));
    let body = serde_json::to_vec(&answer).unwrap_or_default();
    crate::respond::json(sim, prepared.model.flavor, Some(&ticket.snapshot), StatusCode::OK, body)
}

fn version(prepared: &Prepared) -> String {
    prepared.model.config.name.clone()
}

/// Counts and prices the request and decides its function call; refusals in Google's
/// words.
fn prepare(
    sim: &Sim,
    name: &str,
    stream: bool,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Prepared, Option<ToolCall>), Box<Response>> {
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
    Ok((Prepared { model, ask, input, cached: 0, tenant, marker, prompt_cache: None }, call))
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

fn function_call(call: &ToolCall) -> Value {
    let args: Value = serde_json::from_str(call.arguments).unwrap_or_else(|_| json!({}));
    json!({"functionCall": {"name": call.name, "args": args}})
}

/// `STOP`, or `MAX_TOKENS` when the cap cut the answer.
fn finish(output: u64, cap: u64) -> &'static str {
    if output >= cap { "MAX_TOKENS" } else { "STOP" }
}

/// `usageMetadata` of an answer.
#[must_use]
pub fn usage(input: u64, output: u64) -> Value {
    json!({"promptTokenCount": input, "candidatesTokenCount": output, "totalTokenCount": input + output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": input}]})
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
}

impl Render for GeminiStream {
    fn head(&mut self, _out: &mut Vec<u8>) {}

    fn chunk(&mut self, text: &str, out: &mut Vec<u8>) {
        if self.call.is_none() {
            let usage = json!({"promptTokenCount": self.input});
            data(out, &response(&self.id, &self.version, vec![json!({"text": text})], None, usage));
        }
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        let parts = self.call.as_ref().map(function_call).into_iter().collect();
        data(out, &response(&self.id, &self.version, parts, Some(finish(output, self.cap)), usage(self.input, output)));
    }
}
