//! OpenAI request bodies, parsed leniently (unknown fields are ignored, as the gateway
//! may pass fields the simulator does not model).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use sluice_provider::MediaPricing;

use crate::prompt_cache::{Plan, Rule};
use crate::tokens::{REPLY_PRIMING, Tokenizer, estimate_from_chars};

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub struct ChatRequest<'a> {
    /// Model name.
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// Conversation.
    #[serde(borrow, default)]
    pub messages: Option<Vec<Message<'a>>>,
    /// Legacy output cap.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Output cap.
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Stream as SSE.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// End-user id (the tenant).
    #[serde(borrow, default)]
    pub user: Option<Cow<'a, str>>,
    /// Tool definitions (their JSON is counted).
    #[serde(default)]
    pub tools: Option<Value>,
    /// Which tool to call (`auto`, `none`, `required` or a named function).
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Joins the prompt-cache key: equal prefixes under different keys are cached apart.
    #[serde(borrow, default)]
    pub prompt_cache_key: Option<Cow<'a, str>>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a final usage chunk.
    #[serde(default)]
    pub include_usage: bool,
}

/// One chat message.
#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    /// Role.
    #[serde(borrow, default)]
    pub role: Cow<'a, str>,
    /// Text or parts.
    #[serde(borrow, default)]
    pub content: Option<Content<'a>>,
    /// Participant name.
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    /// Assistant tool calls (their JSON is counted).
    #[serde(default)]
    pub tool_calls: Option<Value>,
}

/// Message content: a string or a list of parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content<'a> {
    /// Plain text.
    Text(#[serde(borrow)] Cow<'a, str>),
    /// Typed parts: text parts count their text, images, audio and files their media cost.
    Parts(Vec<Value>),
}

impl Content<'_> {
    /// The text parts.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let (one, many) = match self {
            Self::Text(text) => (Some(text.as_ref()), None),
            Self::Parts(parts) => (None, Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// Tokens of image, audio and file parts, by the rule OpenAI documents (tiles for
    /// images, duration for audio, pages for PDFs), the one sluice's estimator applies.
    pub fn media_tokens(&self) -> u64 {
        match self {
            Self::Text(_) => 0,
            Self::Parts(parts) => parts.iter().map(|p| MediaPricing::OpenAi.openai_part(p)).sum(),
        }
    }
}

impl ChatRequest<'_> {
    /// Prompt tokens by OpenAI's documented formula (messages, names, tools, reply priming,
    /// media parts).
    #[must_use]
    pub fn prompt_tokens(&self, tok: &Tokenizer) -> u64 {
        let messages = self.messages.as_deref().unwrap_or_default();
        let mut total = REPLY_PRIMING;
        for m in messages {
            total += tok.message(&m.role, m.content.iter().flat_map(Content::texts), m.name.as_deref());
            total += m.content.as_ref().map_or(0, Content::media_tokens);
            if let Some(calls) = &m.tool_calls {
                total += tok.count(&calls.to_string());
            }
        }
        if let Some(tools) = &self.tools {
            total += tok.count(&tools.to_string());
        }
        total
    }

    /// The prompt as the prompt cache sees it: the tools, then each message, keyed under
    /// `prompt_cache_key`. Its tokens are [`Self::prompt_tokens`] but the reply priming.
    #[must_use]
    pub fn cache_plan(&self, tok: &Tokenizer) -> Plan {
        let mut plan = Plan::new(Rule::Openai, self.prompt_cache_key.as_deref());
        if let Some(tools) = &self.tools {
            let json = tools.to_string();
            plan.push(&["tools", &json], tok.count(&json), false);
        }
        for m in self.messages.as_deref().unwrap_or_default() {
            let mut tokens = tok.message(&m.role, m.content.iter().flat_map(Content::texts), m.name.as_deref());
            tokens += m.content.as_ref().map_or(0, Content::media_tokens);
            let calls = m.tool_calls.as_ref().map(Value::to_string).unwrap_or_default();
            if m.tool_calls.is_some() {
                tokens += tok.count(&calls);
            }
            let content = match &m.content {
                None => String::new(),
                Some(Content::Text(text)) => text.to_string(),
                Some(Content::Parts(parts)) => Value::Array(parts.clone()).to_string(),
            };
            plan.push(&[&m.role, m.name.as_deref().unwrap_or_default(), &content, &calls], tokens, false);
        }
        plan
    }

    /// OpenAI's character estimate of the request's text.
    #[must_use]
    pub fn char_estimate(&self) -> u64 {
        let messages = self.messages.as_deref().unwrap_or_default();
        let chars: usize =
            messages.iter().flat_map(|m| m.content.iter().flat_map(Content::texts)).map(|t| t.chars().count()).sum();
        estimate_from_chars(chars)
    }

    /// The text of the last message (where `req-id:` markers are looked for).
    #[must_use]
    pub fn last_text(&self) -> String {
        let last = self.messages.as_deref().unwrap_or_default().last();
        last.and_then(|m| m.content.as_ref()).map(|c| c.texts().collect::<Vec<_>>().join(" ")).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;

    #[test]
    fn prompt_tokens_follow_the_cookbook_formula() {
        let body = br#"{"model":"gpt-4","messages":[
            {"role":"system","content":"You are a helpful assistant."},
            {"role":"user","name":"bob","content":[{"type":"text","text":"hello world"},{"type":"image_url","image_url":{"url":"x"}}]}
        ]}"#;
        let req: ChatRequest = serde_json::from_slice(body).unwrap();
        let t = Tokenizer::new(Encoding::Cl100kBase);
        // system: 3 + 1 + 6; user: 3 + 1 + 2 + (1 + 1) + an image of unknown size (the
        // dearest shape, 1,445); priming 3.
        assert_eq!(t.count("You are a helpful assistant."), 6);
        assert_eq!(req.prompt_tokens(&t), 10 + 8 + 1_445 + 3);
        assert_eq!(req.last_text(), "hello world");
        assert_eq!(req.char_estimate(), (28 + 11_u64).div_ceil(4));
        assert_eq!(req.cache_plan(&t).tokens() + REPLY_PRIMING, req.prompt_tokens(&t));
    }

    #[test]
    fn media_parts_count_by_openais_rules() {
        // A 1024 x 1024 PNG header (765 tokens at high detail) and a two-page PDF.
        let png = "iVBORw0KGgoAAAANSUhEUgAABAAAAAQACAYAAAAAAAAA";
        let pdf = "JVBERi0xLjQgPDwvVHlwZSAvUGFnZXM+PiA8PC9UeXBlIC9QYWdlPj4gPDwvVHlwZSAvUGFnZT4+ICUlRU9G";
        let body = format!(
            r#"{{"model":"gpt-4o","messages":[{{"role":"user","content":[
            {{"type":"image_url","image_url":{{"url":"data:image/png;base64,{png}"}}}},
            {{"type":"file","file":{{"file_data":"data:application/pdf;base64,{pdf}"}}}}]}}]}}"#
        );
        let req: ChatRequest = serde_json::from_str(&body).unwrap();
        let t = Tokenizer::new(Encoding::O200kBase);
        assert_eq!(req.prompt_tokens(&t), (3 + 1 + 765 + 2 * 1_765) + 3);
    }
}
