//! Anthropic Messages request bodies and their input token count.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_provider::MediaPricing;

use crate::prompt_cache::{Plan, Rule};
use crate::tokens::{PER_MESSAGE, Tokenizer};

/// `POST /v1/messages`.
#[derive(Debug, Deserialize)]
pub struct MessagesRequest<'a> {
    /// Model name.
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// Conversation.
    #[serde(borrow, default)]
    pub messages: Option<Vec<Message<'a>>>,
    /// Output cap (required by the API).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// System prompt.
    #[serde(borrow, default)]
    pub system: Option<Content<'a>>,
    /// Stream as SSE.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Metadata (`user_id` is the tenant).
    #[serde(borrow, default)]
    pub metadata: Option<Metadata<'a>>,
    /// Tool definitions (their JSON is counted).
    #[serde(default)]
    pub tools: Option<Value>,
    /// Which tool to call (`{"type": "auto" | "any" | "tool" | "none"}`).
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Extended thinking (`{"type": "enabled", "budget_tokens": n}`): see [`super::thinking`].
    #[serde(default)]
    pub thinking: Option<Value>,
    /// Sampling temperature (only 1 with thinking on).
    #[serde(default)]
    pub temperature: Option<Value>,
    /// Nucleus sampling (0.95 or more with thinking on).
    #[serde(default)]
    pub top_p: Option<Value>,
    /// Top-k sampling (unset with thinking on).
    #[serde(default)]
    pub top_k: Option<Value>,
}

/// `metadata`.
#[derive(Debug, Deserialize)]
pub struct Metadata<'a> {
    /// End-user id.
    #[serde(borrow, default)]
    pub user_id: Option<Cow<'a, str>>,
}

/// One message.
#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    /// Role.
    #[serde(borrow, default)]
    pub role: Cow<'a, str>,
    /// Text or blocks.
    #[serde(borrow)]
    pub content: Content<'a>,
}

/// Text or content blocks.
#[derive(Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Content<'a> {
    /// Plain text.
    Text(#[serde(borrow)] Cow<'a, str>),
    /// Blocks: `text` blocks count their text, images and documents their media cost,
    /// tool results their blocks, others their JSON.
    Blocks(Vec<Value>),
}

impl Content<'_> {
    /// Tokens of this content.
    #[must_use]
    pub fn tokens(&self, tok: &Tokenizer) -> u64 {
        match self {
            Self::Text(text) => tok.count(text),
            Self::Blocks(blocks) => blocks.iter().map(|b| block_tokens(tok, b)).sum(),
        }
    }

    /// The text of text blocks, joined.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Self::Text(text) => text.to_string(),
            Self::Blocks(blocks) => {
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(" ")
            }
        }
    }
}

/// One block: text by its text; images and PDF documents by Anthropic's documented rules
/// (the ones sluice's estimator applies); a tool result by its nested blocks; anything else
/// (text-source documents included) by its JSON.
fn block_tokens(tok: &Tokenizer, block: &Value) -> u64 {
    let kind = block.get("type").and_then(Value::as_str);
    match (kind, block.get("text").and_then(Value::as_str), block.get("content")) {
        (Some("text"), Some(text), _) => tok.count(text),
        (Some("tool_result"), _, Some(Value::Array(inner))) => inner.iter().map(|b| block_tokens(tok, b)).sum(),
        _ => match MediaPricing::Anthropic.anthropic_block(block) {
            0 => tok.count(&block.to_string()),
            media => media,
        },
    }
}

/// Whether a block or tool carries a `cache_control` breakpoint.
fn marked(value: &Value) -> bool {
    value.get("cache_control").is_some()
}

/// The JSON of a block, or of a list of tools, without its `cache_control` markers.
fn unmarked(value: &Value) -> String {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(object) = v.as_object_mut() {
            object.remove("cache_control");
        }
        v
    };
    match value {
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()).to_string(),
        other => strip(other).to_string(),
    }
}

impl MessagesRequest<'_> {
    /// Input tokens: system + each message's content + 3 per message + tool JSON
    /// (cl100k_base stands in for Claude's tokenizer).
    #[must_use]
    pub fn input_tokens(&self, tok: &Tokenizer) -> u64 {
        let system = self.system.as_ref().map_or(0, |s| s.tokens(tok));
        let messages: u64 = self.messages.iter().flatten().map(|m| PER_MESSAGE + m.content.tokens(tok)).sum();
        let tools = self.tools.as_ref().map_or(0, |t| tok.count(&t.to_string()));
        system + messages + tools
    }

    /// The prompt as the prompt cache sees it: the tools, each system block, each message
    /// block (a message's first carries its overhead), in that order; `cache_control` marks
    /// breakpoints and is left out of the keys, so a moved breakpoint keeps the prefix. Its
    /// tokens are [`Self::input_tokens`].
    #[must_use]
    pub fn cache_plan(&self, tok: &Tokenizer) -> Plan {
        let mut plan = Plan::new(Rule::Anthropic, None);
        if let Some(tools) = &self.tools {
            let marked = tools.as_array().is_some_and(|tools| tools.iter().any(marked));
            plan.push(&["tools", &unmarked(tools)], tok.count(&tools.to_string()), marked);
        }
        match &self.system {
            None => {}
            Some(Content::Text(text)) => plan.push(&["system", text], tok.count(text), false),
            Some(Content::Blocks(blocks)) => {
                for block in blocks {
                    plan.push(&["system", &unmarked(block)], block_tokens(tok, block), marked(block));
                }
            }
        }
        for m in self.messages.iter().flatten() {
            match &m.content {
                Content::Text(text) => plan.push(&[&m.role, text], PER_MESSAGE + tok.count(text), false),
                Content::Blocks(blocks) if blocks.is_empty() => plan.push(&[&m.role], PER_MESSAGE, false),
                Content::Blocks(blocks) => {
                    for (i, block) in blocks.iter().enumerate() {
                        let (role, overhead) = if i == 0 { (m.role.as_ref(), PER_MESSAGE) } else { ("", 0) };
                        plan.push(&[role, &unmarked(block)], overhead + block_tokens(tok, block), marked(block));
                    }
                }
            }
        }
        plan
    }

    /// Text of the last message.
    #[must_use]
    pub fn last_text(&self) -> String {
        self.messages.iter().flatten().last().map(|m| m.content.text()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;

    #[test]
    fn input_tokens_count_system_messages_and_overhead() {
        let body = br#"{"model":"claude","max_tokens":10,"system":"hello world",
            "messages":[{"role":"user","content":"hello world"},
                        {"role":"assistant","content":[{"type":"text","text":"hello world req-id:7"}]}]}"#;
        let req: MessagesRequest = serde_json::from_slice(body).unwrap();
        let t = Tokenizer::new(Encoding::Cl100kBase);
        let marker = t.count("hello world req-id:7");
        assert_eq!(req.input_tokens(&t), 2 + (3 + 2) + (3 + marker));
        assert_eq!(crate::text::marker(&req.last_text()).as_deref(), Some("7"));
    }

    #[test]
    fn the_cache_plan_covers_the_input_and_ignores_where_breakpoints_sit() {
        let marked = br#"{"model":"claude","max_tokens":10,"tools":[{"name":"t","cache_control":{"type":"ephemeral"}}],
            "system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],
            "messages":[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"world"}]},
                        {"role":"assistant","content":"hi"}]}"#;
        let plain = br#"{"model":"claude","max_tokens":10,"tools":[{"name":"t"}],
            "system":[{"type":"text","text":"be brief"}],
            "messages":[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"world"}]},
                        {"role":"assistant","content":"hi"}]}"#;
        let t = Tokenizer::new(Encoding::Cl100kBase);
        let marked: MessagesRequest = serde_json::from_slice(marked).unwrap();
        let plain: MessagesRequest = serde_json::from_slice(plain).unwrap();
        let (a, b) = (marked.cache_plan(&t), plain.cache_plan(&t));
        assert_eq!(a.tokens(), marked.input_tokens(&t));
        let keys = |p: &Plan| p.boundaries().iter().map(|b| b.key).collect::<Vec<_>>();
        assert_eq!(keys(&a), keys(&b));
        let breakpoints: Vec<bool> = a.boundaries().iter().map(|b| b.breakpoint).collect();
        assert_eq!(breakpoints, [true, true, false, false, false]);
    }

    #[test]
    fn images_and_documents_count_by_anthropics_rules() {
        let png = "iVBORw0KGgoAAAANSUhEUgAABAAAAAQACAYAAAAAAAAA";
        let pdf = "JVBERi0xLjQgPDwvVHlwZSAvUGFnZXM+PiA8PC9UeXBlIC9QYWdlPj4gPDwvVHlwZSAvUGFnZT4+ICUlRU9G";
        let body = format!(
            r#"{{"model":"claude","max_tokens":10,"messages":[{{"role":"user","content":[
            {{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{png}"}}}},
            {{"type":"tool_result","tool_use_id":"t","content":[
              {{"type":"document","source":{{"type":"base64","media_type":"application/pdf","data":"{pdf}"}}}}]}}]}}]}}"#
        );
        let req: MessagesRequest = serde_json::from_str(&body).unwrap();
        let t = Tokenizer::new(Encoding::Cl100kBase);
        // 1024 x 1024 / 750 = 1,399; two pages at 3,000.
        assert_eq!(req.input_tokens(&t), 3 + 1_399 + 2 * 3_000);
    }
}
