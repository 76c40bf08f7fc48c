//! OpenAI ⇄ Anthropic request translation on any request that parses.
//! Input: first byte picks the direction, the rest is the client's body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_provider::{Protocol, anthropic_to_openai_request, openai_to_anthropic_request, parse_request};

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
        _ => anthropic_to_openai_request(&req),
    };
    if let Ok(out) = translated {
        // Serializing and re-parsing what would go upstream must not panic either.
        let bytes = serde_json::to_vec(&out).unwrap_or_default();
        let _ = parse_request(to, &bytes);
    }
});
