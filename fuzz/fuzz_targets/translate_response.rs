//! OpenAI ⇄ Anthropic translation of whole (non-stream) response bodies, and usage
//! extraction from any response body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_provider::{
    Protocol, anthropic_to_openai_response, openai_to_anthropic_response, usage_from_response,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = anthropic_to_openai_response(data, "fast-chat", 1_700_000_000) {
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok(), "translated body is not JSON");
        let _ = usage_from_response(Protocol::OpenAiChat, &out);
    }
    if let Ok(out) = openai_to_anthropic_response(data, "smart-chat") {
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok(), "translated body is not JSON");
        let _ = usage_from_response(Protocol::AnthropicMessages, &out);
    }
    for protocol in [Protocol::OpenAiChat, Protocol::OpenAiEmbeddings, Protocol::AnthropicMessages] {
        let _ = usage_from_response(protocol, data);
    }
});
