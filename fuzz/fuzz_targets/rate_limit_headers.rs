//! Provider rate-limit header parsing and error classification.
//! Input: 2 bytes of status, 1 byte of provider flavour, 8 bytes of "now", then
//! `name: value` header lines, a blank line, and the error body.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use sluice_provider::{
    ProviderFlavor, classify, classify_with_hints, parse_go_duration, parse_hints, parse_rfc3339_unix_ms,
};

fuzz_target!(|data: &[u8]| {
    if data.len() < 11 {
        return;
    }
    let (head, rest) = data.split_at(11);
    let status = u16::from_le_bytes([head[0], head[1]]) % 1000;
    let flavor = match head[2] % 5 {
        0 => ProviderFlavor::OpenAi,
        1 => ProviderFlavor::Azure,
        2 => ProviderFlavor::Anthropic,
        3 => ProviderFlavor::Gemini,
        _ => ProviderFlavor::Ollama,
    };
    let mut now = [0u8; 8];
    now.copy_from_slice(&head[3..11]);
    let now = u64::from_le_bytes(now);

    let split = rest.windows(2).position(|w| w == b"\n\n").unwrap_or(rest.len());
    let (header_block, body) = rest.split_at(split);
    let body = body.get(2..).unwrap_or_default();
    let mut headers = HeaderMap::new();
    for line in header_block.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let value = line[colon + 1..].strip_prefix(b" ").unwrap_or(&line[colon + 1..]);
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
        if let Ok(text) = std::str::from_utf8(value) {
            let _ = parse_go_duration(text);
            let _ = parse_rfc3339_unix_ms(text);
        }
    }

    let hints = parse_hints(&headers, Some(body), Some(now));
    let _ = (hints.earliest_retry(), hints.is_empty(), hints.windows().count());
    let _ = parse_hints(&headers, None, None);
    let _ = classify(status, &headers, body, flavor);
    let _ = classify_with_hints(status, &hints, body, flavor);
});
