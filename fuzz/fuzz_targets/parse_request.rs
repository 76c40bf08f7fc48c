//! Request parsing of every endpoint: `parse_request` for each protocol, then what the
//! gateway does next with a parsed request (token estimate, upstream body).
//! Input: first byte picks the protocol, the rest is the body.
#![no_main]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a fuzz harness: a failed setup must abort loudly")]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_provider::{Estimator, MediaPricing, Protocol, parse_request, tokenizer_for_model, upstream_body};

fn estimator() -> &'static Estimator {
    static ESTIMATOR: OnceLock<Estimator> = OnceLock::new();
    ESTIMATOR.get_or_init(|| Estimator::new().expect("tokenizers load"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let protocol = match selector % 3 {
        0 => Protocol::OpenAiChat,
        1 => Protocol::OpenAiEmbeddings,
        _ => Protocol::AnthropicMessages,
    };
    let Ok(req) = parse_request(protocol, body) else { return };
    assert_eq!(req.protocol, protocol);
    let kind = tokenizer_for_model(&req.model);
    // Media parts (images, documents, audio) are priced by either provider's rules.
    let pricing = if selector & 0x40 != 0 { MediaPricing::Anthropic } else { MediaPricing::OpenAi };
    let _ = estimator().input_tokens(&kind, pricing, &req, 1.1);
    let out = upstream_body(&req, "provider-model", selector & 0x80 != 0);
    // The rewritten body is what goes upstream: it must parse again as the same protocol.
    let again = parse_request(protocol, &out);
    assert!(again.is_ok(), "upstream body does not parse again: {again:?}");
});
