//! Media parts in whole request bodies, built from real (minimal) files.

use serde_json::json;

use super::media::tests::fixtures::{encode, jpeg_header, pdf, png_header, wav};
use super::tests::estimator;
use super::*;
use crate::request::parse_request;

fn count(protocol: Protocol, media: MediaPricing, body: &serde_json::Value) -> u64 {
    let req = parse_request(protocol, body.to_string().as_bytes()).unwrap();
    estimator().input_tokens(&TokenizerKind::Cl100k, media, &req, 1.0)
}

fn openai_parts(parts: serde_json::Value) -> serde_json::Value {
    json!({"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]})
}

fn anthropic_blocks(blocks: serde_json::Value) -> serde_json::Value {
    json!({"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": blocks}]})
}

/// A PDF of about 240 KB with `pages` page objects.
fn pdf_240k(pages: usize) -> Vec<u8> {
    let doc = pdf(pages, &"lorem ipsum ".repeat(240 * 1024 / pages / 12));
    assert!((230 * 1024..250 * 1024).contains(&doc.len()), "{}", doc.len());
    doc
}

/// The same body without its media: what the estimate was before media were priced.
const OPENAI_OVERHEAD: u64 = 3 + 1 + 3;

#[test]
fn images_by_their_header_size() {
    let png = format!("data:image/png;base64,{}", encode(&png_header(1024, 1024)));
    let body = openai_parts(json!([{"type": "image_url", "image_url": {"url": png}}]));
    assert_eq!(count(Protocol::OpenAiChat, MediaPricing::OpenAi, &body), OPENAI_OVERHEAD + 765);
    // The same body sent to an Anthropic deployment: 1024 x 1024 / 750.
    assert_eq!(count(Protocol::OpenAiChat, MediaPricing::Anthropic, &body), OPENAI_OVERHEAD + 1_399);
    let jpeg = encode(&jpeg_header(400, 300));
    let source = json!({"type": "base64", "media_type": "image/jpeg", "data": jpeg});
    let body = anthropic_blocks(json!([{"type": "image", "source": source}]));
    assert_eq!(count(Protocol::AnthropicMessages, MediaPricing::Anthropic, &body), 3 + 160);
}

#[test]
fn a_240_kb_pdf_costs_its_pages() {
    let data = format!("data:application/pdf;base64,{}", encode(&pdf_240k(12)));
    let file = json!({"type": "file", "file": {"file_data": data, "filename": "report.pdf"}});
    let body = openai_parts(json!([{"type": "text", "text": "Summarize"}, file]));
    let openai = count(Protocol::OpenAiChat, MediaPricing::OpenAi, &body);
    // OpenAI: the page image alone (765) up to text plus a 6-tile page image, per page.
    assert!((12 * 765..=12 * 2_105).contains(&openai), "{openai}");
    let source = json!({"type": "base64", "media_type": "application/pdf", "data": encode(&pdf_240k(12))});
    let body = anthropic_blocks(json!([{"type": "document", "source": source}]));
    let anthropic = count(Protocol::AnthropicMessages, MediaPricing::Anthropic, &body);
    // Anthropic: 1,500-3,000 text tokens a page plus the page image (at most 1,600).
    assert!((12 * 1_500..=12 * 4_600).contains(&anthropic), "{anthropic}");
    assert!(anthropic > 10_000 && openai > 10_000, "was 5 tokens when documents counted as nothing");
}

#[test]
fn a_pdf_without_visible_pages_is_priced_by_size() {
    let opaque = encode(&vec![0x42u8; 240 * 1024]);
    let source = json!({"type": "base64", "media_type": "application/pdf", "data": opaque});
    let body = anthropic_blocks(json!([{"type": "document", "source": source}]));
    let tokens = count(Protocol::AnthropicMessages, MediaPricing::Anthropic, &body);
    assert!((15 * 1_500..=15 * 4_600).contains(&tokens), "{tokens}");
}

#[test]
fn audio_by_its_duration() {
    let audio = json!({"type": "input_audio", "input_audio": {"data": encode(&wav(5, 16_000, 1)), "format": "wav"}});
    let body = openai_parts(json!([audio]));
    assert_eq!(count(Protocol::OpenAiChat, MediaPricing::OpenAi, &body), OPENAI_OVERHEAD + 50);
}

#[test]
fn documents_in_tool_results_and_text_sources() {
    let kind = TokenizerKind::Cl100k;
    let doc = json!({"type": "document", "title": "Notes", "source": {"type": "base64", "media_type": "application/pdf", "data": encode(&pdf(2, "x"))}});
    let text_doc = json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."}});
    let result = json!({"type": "tool_result", "tool_use_id": "t1", "content": [doc, text_doc]});
    let body = anthropic_blocks(json!([result]));
    let expected =
        3 + 2 * 3_000 + estimator().text_tokens(&kind, "Notes") + estimator().text_tokens(&kind, "The grass is green.");
    assert_eq!(count(Protocol::AnthropicMessages, MediaPricing::Anthropic, &body), expected);
}

#[test]
fn unknown_sizes_cost_the_most_or_a_default() {
    let url = json!({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}});
    let file_id = json!({"type": "file", "file": {"file_id": "file-abc"}});
    let body = openai_parts(json!([url, file_id]));
    let tokens = count(Protocol::OpenAiChat, MediaPricing::OpenAi, &body);
    assert_eq!(tokens, OPENAI_OVERHEAD + media::OPENAI_IMAGE_MAX + media::UNKNOWN_DOCUMENT_PAGES * 1_765);
}

#[test]
fn the_safety_factor_scales_text_not_media() {
    let png = format!("data:image/png;base64,{}", encode(&png_header(1024, 1024)));
    let body = openai_parts(json!([{"type": "image_url", "image_url": {"url": png}}]));
    let req = parse_request(Protocol::OpenAiChat, body.to_string().as_bytes()).unwrap();
    let tokens = estimator().input_tokens(&TokenizerKind::Cl100k, MediaPricing::OpenAi, &req, 2.0);
    assert_eq!(tokens, 2 * OPENAI_OVERHEAD + 765);
}
