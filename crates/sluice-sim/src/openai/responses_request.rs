//! `POST /v1/responses` request bodies, parsed leniently like chat ones.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use sluice_provider::MediaPricing;

use crate::prompt_cache::{Plan, Rule};
use crate::tokens::{REPLY_PRIMING, Tokenizer};

/// `POST /v1/responses`.
#[derive(Debug, Deserialize)]
pub struct ResponsesRequest<'a> {
    /// Model name.
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// A string (one user message) or a list of input items.
    #[serde(default)]
    pub input: Option<Value>,
    /// System instructions.
    #[serde(borrow, default)]
    pub instructions: Option<Cow<'a, str>>,
    /// Output cap (reasoning included).
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Stream as SSE.
    #[serde(default)]
    pub stream: Option<bool>,
    /// End-user id (the tenant).
    #[serde(borrow, default)]
    pub user: Option<Cow<'a, str>>,
    /// Tool definitions (their JSON is counted).
    #[serde(default)]
    pub tools: Option<Value>,
    /// The response this one continues: its context is added to the input.
    #[serde(borrow, default)]
    pub previous_response_id: Option<Cow<'a, str>>,
    /// The conversation this response belongs to: an id or `{"id": …}`.
    #[serde(default)]
    pub conversation: Option<Value>,
    /// Which tool to call, if any must be.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Run in the background: answered `queued`, read later.
    #[serde(default)]
    pub background: Option<bool>,
    /// Joins the prompt-cache key: equal prefixes under different keys are cached apart.
    #[serde(borrow, default)]
    pub prompt_cache_key: Option<Cow<'a, str>>,
}

/// The texts of one item's `content` (a string or typed parts with `text`).
fn texts(content: Option<&Value>) -> Vec<&str> {
    match content {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => Vec::new(),
    }
}

/// Tokens of one input item: messages as chat messages (media parts by OpenAI's rule),
/// anything else (function calls and their outputs, reasoning items) by its JSON.
fn item_tokens(item: &Value, tok: &Tokenizer) -> u64 {
    let is_message = item.get("type").and_then(Value::as_str).is_none_or(|t| t == "message");
    let Some(role) = item.get("role").and_then(Value::as_str).filter(|_| is_message) else {
        return tok.count(&item.to_string());
    };
    let content = item.get("content");
    let media = content
        .and_then(Value::as_array)
        .map_or(0, |parts| parts.iter().map(|p| MediaPricing::OpenAi.responses_part(p)).sum::<u64>());
    tok.message(role, texts(content), None) + media
}

impl ResponsesRequest<'_> {
    /// Whether `input` is present and a string or a non-empty list.
    #[must_use]
    pub fn has_input(&self) -> bool {
        match &self.input {
            Some(Value::String(_)) => true,
            Some(Value::Array(items)) => !items.is_empty(),
            _ => false,
        }
    }

    /// Input tokens: instructions as a system message, the input items, the tools' JSON.
    #[must_use]
    pub fn input_tokens(&self, tok: &Tokenizer) -> u64 {
        let mut total = REPLY_PRIMING;
        if let Some(instructions) = &self.instructions {
            total += tok.message("system", [instructions.as_ref()], None);
        }
        total += match &self.input {
            Some(Value::String(text)) => tok.message("user", [text.as_str()], None),
            Some(Value::Array(items)) => items.iter().map(|item| item_tokens(item, tok)).sum(),
            _ => 0,
        };
        if let Some(tools) = &self.tools {
            total += tok.count(&tools.to_string());
        }
        total
    }

    /// The prompt as the prompt cache sees it: the tools, the instructions, the earlier
    /// turns (`context`: each `(kind, id, tokens)` one segment), then each input item, keyed
    /// under `prompt_cache_key`. Its tokens are the context's plus [`Self::input_tokens`]
    /// but the reply priming.
    #[must_use]
    pub fn cache_plan(&self, tok: &Tokenizer, context: &[(&str, &str, u64)]) -> Plan {
        let mut plan = Plan::new(Rule::Openai, self.prompt_cache_key.as_deref());
        if let Some(tools) = &self.tools {
            let json = tools.to_string();
            plan.push(&["tools", &json], tok.count(&json), false);
        }
        if let Some(instructions) = &self.instructions {
            plan.push(&["system", instructions], tok.message("system", [instructions.as_ref()], None), false);
        }
        for (kind, id, tokens) in context {
            plan.push(&[kind, id, &tokens.to_string()], *tokens, false);
        }
        match &self.input {
            Some(Value::String(text)) => plan.push(&["user", text], tok.message("user", [text.as_str()], None), false),
            Some(Value::Array(items)) => {
                for item in items {
                    plan.push(&[&item.to_string()], item_tokens(item, tok), false);
                }
            }
            _ => {}
        }
        plan
    }

    /// The text of the last input item (where `req-id:` markers are looked for).
    #[must_use]
    pub fn last_text(&self) -> String {
        match &self.input {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(items)) => items.last().map(|i| texts(i.get("content")).join(" ")).unwrap_or_default(),
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;

    #[test]
    fn input_tokens_count_instructions_items_and_tools() {
        let t = Tokenizer::new(Encoding::O200kBase);
        let plain: ResponsesRequest = serde_json::from_str(r#"{"model":"m","input":"hello world"}"#).unwrap();
        assert_eq!(plain.input_tokens(&t), 3 + (3 + 1 + 2));
        assert_eq!(plain.last_text(), "hello world");
        let body = r#"{"model":"m","instructions":"Be brief.","input":[
            {"role":"user","content":[{"type":"input_text","text":"hello world"}]},
            {"type":"function_call_output","call_id":"c1","output":"42"}],
            "tools":[{"type":"function","name":"f","parameters":{}}]}"#;
        let items: ResponsesRequest = serde_json::from_str(body).unwrap();
        let output_item = r#"{"call_id":"c1","output":"42","type":"function_call_output"}"#;
        let tools = r#"[{"name":"f","parameters":{},"type":"function"}]"#;
        let expected =
            3 + t.message("system", ["Be brief."], None) + (3 + 1 + 2) + t.count(output_item) + t.count(tools);
        assert_eq!(items.input_tokens(&t), expected);
        assert_eq!(items.cache_plan(&t, &[("previous", "resp_1", 40)]).tokens() + REPLY_PRIMING, 40 + expected);
        assert!(items.has_input());
        // An image part costs what OpenAI charges for it (85 tokens at low detail).
        let image = r#"{"model":"m","input":[{"role":"user","content":[
            {"type":"input_image","image_url":"https://x/y.png","detail":"low"}]}]}"#;
        let image: ResponsesRequest = serde_json::from_str(image).unwrap();
        assert_eq!(image.input_tokens(&t), 3 + (3 + 1) + 85);
        let empty: ResponsesRequest = serde_json::from_str(r#"{"model":"m","input":[]}"#).unwrap();
        assert!(!empty.has_input());
    }
}
