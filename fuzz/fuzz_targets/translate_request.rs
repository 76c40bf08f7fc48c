//! OpenAI ⇄ Anthropic request translation on any request that parses, and on to Gemini's
//! `generateContent` body. Input: the first byte picks the direction (bit 0) and, from
//! Anthropic, whether the chat body is for a Gemini deployment (bit 1); the rest is the
//! client's body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_provider::{
    ChatUpstream, Protocol, anthropic_to_openai_request, openai_to_anthropic_request, openai_to_gemini_request,
    parse_request,
};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let (from, to) = if selector % 2 == 0 {
        (Protocol::OpenAiChat, Protocol::AnthropicMessages)
    } else {
        (Protocol::AnthropicMessages, Protocol::OpenAiChat)
    };
    let Ok(req) = parse_request(from, body) else { return };
    let translated = match from {
        Protocol::OpenAiChat => openai_to_anthropic_request(&req, u64::from(selector)),
        _ if selector & 2 == 0 => anthropic_to_openai_request(&req, ChatUpstream::OpenAi),
        _ => anthropic_to_openai_request(&req, ChatUpstream::Gemini),
    };
    if let Ok(out) = translated {
        // Serializing and re-parsing what would go upstream must not panic either.
        let bytes = serde_json::to_vec(&out).unwrap_or_default();
        let _ = parse_request(to, &bytes);
        if to == Protocol::OpenAiChat {
            let _ = openai_to_gemini_request(&bytes);
        }
    }
});
