//! Anthropic Messages request bodies and their input token count.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_provider::MediaPricing;

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
