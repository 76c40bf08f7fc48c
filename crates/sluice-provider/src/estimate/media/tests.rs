use super::*;

/// Builders of real (minimal) media files, for tests elsewhere in the estimator.
pub(crate) mod fixtures {
    pub(crate) use super::super::audio::tests::wav;
    pub(crate) use super::super::b64::tests::encode;
    pub(crate) use super::super::image::tests::{jpeg_header, png_header};
    pub(crate) use super::super::pdf::tests::pdf;
}

#[test]
fn openai_tiles_follow_the_documented_examples() {
    assert_eq!(openai_tiles((1024, 1024)), 765);
    assert_eq!(openai_tiles((2048, 4096)), 1_105);
    assert_eq!(openai_tiles((512, 512)), 255, "small images are not scaled up");
    assert_eq!(openai_tiles((100, 100)), 255);
    assert_eq!(openai_tiles((1536, 4096)), OPENAI_IMAGE_MAX, "the dearest shape: 768 x 2048");
    assert_eq!(openai_tiles((768, 20_000)), 765, "fitted to 79 x 2048: 1 x 4 tiles");
    assert!(openai_tiles((u32::MAX, 1)) <= OPENAI_IMAGE_MAX);
}

#[test]
fn anthropic_area_rule() {
    assert_eq!(anthropic_image((200, 200)), 54);
    assert_eq!(anthropic_image((1000, 1000)), 1_334);
    assert_eq!(anthropic_image((1092, 1092)), 1_590);
    assert_eq!(anthropic_image((4032, 3024)), ANTHROPIC_IMAGE_MAX, "scaled to the cap");
    assert_eq!(anthropic_image((3136, 100)), 105, "long edge 1568: 1568 x 50");
}

#[test]
fn images_priced_from_their_headers_or_at_the_maximum() {
    let png = format!("data:image/png;base64,{}", fixtures::encode(&fixtures::png_header(1024, 1024)));
    assert_eq!(MediaPricing::OpenAi.image(Some(&png), false), 765);
    assert_eq!(MediaPricing::OpenAi.image(Some(&png), true), 85);
    assert_eq!(MediaPricing::Anthropic.image(Some(&png), true), 1_399);
    let url = Some("https://example.com/cat.png");
    assert_eq!(MediaPricing::OpenAi.image(url, false), OPENAI_IMAGE_MAX);
    assert_eq!(MediaPricing::Anthropic.image(url, false), ANTHROPIC_IMAGE_MAX);
    assert_eq!(MediaPricing::OpenAi.image(Some("data:image/png;base64,!!!!"), false), OPENAI_IMAGE_MAX);
    assert_eq!(MediaPricing::Anthropic.image(None, false), ANTHROPIC_IMAGE_MAX);
}

#[test]
fn documents_by_pages_and_audio_by_seconds() {
    let pdf = fixtures::encode(&fixtures::pdf(4, "some text"));
    assert_eq!(MediaPricing::Anthropic.pdf(Some(&pdf)), 4 * ANTHROPIC_PDF_PER_PAGE);
    assert_eq!(MediaPricing::OpenAi.pdf(Some(&pdf)), 4 * 1_765);
    assert_eq!(MediaPricing::Anthropic.pdf(None), UNKNOWN_DOCUMENT_PAGES * ANTHROPIC_PDF_PER_PAGE);
    let wav = fixtures::encode(&fixtures::wav(6, 24_000, 1));
    assert_eq!(MediaPricing::OpenAi.audio(&wav, Some("wav")), 60);
}
