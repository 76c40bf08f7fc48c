//! The stream translators (Anthropic SSE → OpenAI chunks, OpenAI chunks → Anthropic SSE)
//! fed arbitrary bytes cut into arbitrary chunks.
//! Input: first byte picks the chunk size (1..=64), the rest is the upstream stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_provider::{AnthropicToOpenAiStream, OpenAiToAnthropicStream};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else { return };
    let size = usize::from(selector % 64) + 1;

    let mut to_openai = AnthropicToOpenAiStream::new("fast-chat", selector & 0x80 != 0, 1_700_000_000);
    for chunk in stream.chunks(size) {
        let _ = to_openai.push(chunk);
    }
    let _ = to_openai.finish();
    let _ = (to_openai.usage(), to_openai.completed());

    let mut to_anthropic = OpenAiToAnthropicStream::new("smart-chat");
    for chunk in stream.chunks(size) {
        let _ = to_anthropic.push(chunk);
    }
    let _ = to_anthropic.finish();
    let _ = (to_anthropic.usage(), to_anthropic.completed());
});
