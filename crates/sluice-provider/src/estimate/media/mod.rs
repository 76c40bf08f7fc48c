//! What non-text input parts cost: images, documents (PDF) and audio.
//!
//! The facts come from the part's own bytes, read through [`Base64`] without decoding the
//! whole payload (image headers, the WAV header; a PDF is scanned once for its pages), and
//! are priced by the *deployment's* provider ([`MediaPricing`]), since a request may be
//! translated to the other protocol. Every figure below aims at "close and rarely low",
//! like the text estimate; the settle step replaces it with the provider's usage. The
//! figures and their sources are listed in `docs/operations.md` ("Estimating input").

mod audio;
mod b64;
mod image;
mod parts;
mod pdf;

use b64::Base64;
use image::Size;

/// Whose rules price media parts: the provider the request is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MediaPricing {
    /// OpenAI (and OpenAI-compatible) deployments: the 512-px tile rule for images.
    #[default]
    OpenAi,
    /// Anthropic deployments: `width × height / 750` after Anthropic's downscaling.
    Anthropic,
}

/// OpenAI: tokens of every image, plus per 512-px tile at high detail (and the whole cost
/// of a `detail: "low"` image).
pub(crate) const OPENAI_IMAGE_BASE: u64 = 85;
/// OpenAI: tokens per 512-px tile.
const OPENAI_IMAGE_TILE: u64 = 170;
/// OpenAI: an image is first fitted in a square of this side...
const OPENAI_FIT: f64 = 2048.0;
/// ...then its shortest side is brought down to this.
const OPENAI_SHORT_SIDE: f64 = 768.0;
/// OpenAI: the dearest image at high detail (768 × 2048 after scaling: 2 × 4 tiles), for
/// images whose size is not known (URLs, unreadable headers).
pub(crate) const OPENAI_IMAGE_MAX: u64 = OPENAI_IMAGE_BASE + 8 * OPENAI_IMAGE_TILE;
/// Anthropic: images whose long edge passes this are scaled down to it.
const ANTHROPIC_LONG_EDGE: f64 = 1568.0;
/// Anthropic: pixels per token.
const ANTHROPIC_PIXELS_PER_TOKEN: f64 = 750.0;
/// Anthropic: larger images are scaled down to about this many tokens (~1.2 megapixels);
/// also the cost of an image whose size is not known.
pub(crate) const ANTHROPIC_IMAGE_MAX: u64 = 1_600;

/// OpenAI: extracted text per PDF page (a dense page is 500–800 tokens).
const OPENAI_PDF_TEXT_PER_PAGE: u64 = 1_000;
/// OpenAI: the image of a portrait page at high detail (768 × 994: 2 × 2 tiles).
const OPENAI_PDF_IMAGE_PER_PAGE: u64 = OPENAI_IMAGE_BASE + 4 * OPENAI_IMAGE_TILE;
/// Anthropic: a PDF page, text and page image together (documented 1,500–3,000 text tokens
/// per page plus the page image; measured totals run 1,600–2,500).
const ANTHROPIC_PDF_PER_PAGE: u64 = 3_000;
/// Pages assumed for a document known only by URL or file id.
pub(crate) const UNKNOWN_DOCUMENT_PAGES: u64 = 10;
/// Audio input tokens per second (OpenAI: one token per 100 ms of user audio).
pub(crate) const AUDIO_TOKENS_PER_SECOND: u64 = 10;

impl MediaPricing {
    /// Tokens of an image given as a URL, a `data:` URL or bare base64; `low` is OpenAI's
    /// `detail: "low"`.
    pub(crate) fn image(self, source: Option<&str>, low: bool) -> u64 {
        if low && self == Self::OpenAi {
            return OPENAI_IMAGE_BASE;
        }
        let size = source.filter(|s| !is_remote(s)).and_then(|s| image::size(&Base64::new(s)));
        match (self, size) {
            (Self::OpenAi, Some(size)) => openai_tiles(size),
            (Self::OpenAi, None) => OPENAI_IMAGE_MAX,
            (Self::Anthropic, Some(size)) => anthropic_image(size),
            (Self::Anthropic, None) => ANTHROPIC_IMAGE_MAX,
        }
    }

    /// Tokens of a PDF given as base64 (or a `data:` URL); `None` when only a URL or file id
    /// is known.
    pub(crate) fn pdf(self, data: Option<&str>) -> u64 {
        let pages = data.map_or(UNKNOWN_DOCUMENT_PAGES, |d| pdf::pages(&Base64::new(d)));
        pages.saturating_mul(self.per_page())
    }

    fn per_page(self) -> u64 {
        match self {
            Self::OpenAi => OPENAI_PDF_TEXT_PER_PAGE + OPENAI_PDF_IMAGE_PER_PAGE,
            Self::Anthropic => ANTHROPIC_PDF_PER_PAGE,
        }
    }

    /// Tokens of base64 audio in `format` (`wav`, `mp3`, ...).
    pub(crate) fn audio(self, data: &str, format: Option<&str>) -> u64 {
        audio::seconds(&Base64::new(data), format).saturating_mul(AUDIO_TOKENS_PER_SECOND)
    }
}

fn is_remote(source: &str) -> bool {
    source.starts_with("https://") || source.starts_with("http://")
}

/// OpenAI's rule: fit in 2048 × 2048, shortest side down to 768, then 170 per 512-px tile
/// plus 85. Images are only ever scaled down.
fn openai_tiles((w, h): Size) -> u64 {
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    let fit = (OPENAI_FIT / w.max(h)).min(1.0);
    (w, h) = (w * fit, h * fit);
    let short = (OPENAI_SHORT_SIDE / w.min(h)).min(1.0);
    (w, h) = ((w * short).round().max(1.0), (h * short).round().max(1.0));
    // Sides are at most 2048 here, so the casts are exact.
    let tiles = (w / 512.0).ceil() as u64 * (h / 512.0).ceil() as u64;
    OPENAI_IMAGE_BASE + OPENAI_IMAGE_TILE * tiles
}

/// Anthropic's rule: long edge down to 1568, then `w × h / 750`, at most ~1,600.
fn anthropic_image((w, h): Size) -> u64 {
    let (w, h) = (f64::from(w), f64::from(h));
    let scale = (ANTHROPIC_LONG_EDGE / w.max(h)).min(1.0);
    let tokens = ((w * scale).round() * (h * scale).round() / ANTHROPIC_PIXELS_PER_TOKEN).ceil();
    // At most 1568² / 750 before the cap, so the cast is exact.
    (tokens as u64).min(ANTHROPIC_IMAGE_MAX)
}

#[cfg(test)]
pub(crate) mod tests;
