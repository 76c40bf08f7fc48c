//! The SSE `StreamTap` the gateway puts on every streamed response.
//! Input: first byte picks the protocol, the hiding of the usage chunk and the chunk size;
//! the rest is the upstream stream.
//! Properties: without hiding, the client receives exactly the upstream bytes; how the
//! stream is cut into chunks does not change what the tap concludes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_provider::{Protocol, StreamTap};

fn run(protocol: Protocol, hide: bool, stream: &[u8], size: usize) -> (Vec<u8>, sluice_provider::StreamOutcome) {
    let mut tap = StreamTap::new(protocol, hide);
    let mut out = Vec::new();
    for chunk in stream.chunks(size) {
        out.extend_from_slice(&tap.push(chunk));
    }
    out.extend_from_slice(&tap.flush());
    (out, tap.outcome())
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else { return };
    let protocol = match selector % 3 {
        0 => Protocol::OpenAiChat,
        1 => Protocol::OpenAiEmbeddings,
        _ => Protocol::AnthropicMessages,
    };
    let hide = selector & 0x80 != 0;
    let size = usize::from((selector >> 2) % 32) + 1;

    let (chunked, chunked_outcome) = run(protocol, hide, stream, size);
    let (whole, whole_outcome) = run(protocol, hide, stream, stream.len().max(1));
    if !hide {
        assert_eq!(chunked, stream, "the tap changed a stream it should pass through");
    }
    assert_eq!(chunked, whole, "chunking changed what the client receives");
    assert_eq!(chunked_outcome, whole_outcome, "chunking changed the outcome");
});
