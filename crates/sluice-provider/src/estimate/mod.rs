//! Input-token estimation before a request is sent.
//!
//! Counts follow OpenAI's documented chat overhead (the rule the simulated provider also
//! applies); Anthropic and other families without a public tokenizer are approximated and
//! padded by a per-family safety factor from config. Every estimate is settled later
//! against the provider's reported usage, so the aim is "close and rarely low", not exact.

mod anthropic;
mod media;
mod openai;
mod responses;

use tiktoken_rs::CoreBPE;

use crate::error::EstimatorError;
use crate::protocol::Protocol;
use crate::request::ParsedRequest;

pub use media::MediaPricing;

/// Which tokenizer counts a model family's text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenizerKind {
    /// `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series).
    O200k,
    /// `cl100k_base` (GPT-4, GPT-3.5, text-embedding-3/ada-002; stand-in for Claude).
    Cl100k,
    /// Characters-based approximation for families without a public tokenizer:
    /// `ceil(chars / chars_per_token)` over all text (Unicode scalar values), plus the same
    /// fixed overheads as the BPE kinds.
    Approx {
        /// Average characters per token; values that are not finite and positive fall back to 4.
        chars_per_token: f64,
    },
}

/// Characters per token used when an `Approx` kind carries an unusable ratio.
const FALLBACK_CHARS_PER_TOKEN: f64 = 4.0;

/// Model-name prefixes tokenized with `o200k_base`.
const O200K_PREFIXES: &[&str] = &["gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "chatgpt-4o", "o1", "o3", "o4"];

/// The tokenizer for a model name.
///
/// `o200k` for `gpt-4o*`, `gpt-4.1*`, `gpt-4.5*`, `gpt-5*`, `gpt-oss*`, `chatgpt-4o*`, `o1*`, `o3*`,
/// `o4*`; `cl100k` for everything else, which covers `gpt-4*`, `gpt-3.5*`,
/// `text-embedding-3*` and `text-embedding-ada-002` exactly, and stands in for `claude*`
/// (Anthropic publishes no tokenizer; cl100k counts English prose within a few percent of
/// Claude's counts, and the safety factor covers the rest). Matching ignores ASCII case and
/// a leading `vendor/` path (`openai/gpt-4o`).
#[must_use]
pub fn tokenizer_for_model(model: &str) -> TokenizerKind {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    if O200K_PREFIXES.iter().any(|p| name.starts_with(p)) { TokenizerKind::O200k } else { TokenizerKind::Cl100k }
}

/// Holds the loaded BPE tables. Loading takes a few hundred milliseconds: build one at
/// start-up and share it (`Arc<Estimator>`); every method takes `&self` and is safe to call
/// from many threads at once.
pub struct Estimator {
    o200k: CoreBPE,
    cl100k: CoreBPE,
}

impl std::fmt::Debug for Estimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Estimator").finish_non_exhaustive()
    }
}

impl Estimator {
    /// Loads the `o200k_base` and `cl100k_base` tables (embedded in the binary, no IO).
    ///
    /// # Errors
    /// [`EstimatorError`] if an embedded table fails to load, which means a broken build.
    pub fn new() -> Result<Self, EstimatorError> {
        let o200k =
            tiktoken_rs::o200k_base().map_err(|e| EstimatorError { encoding: "o200k_base", reason: e.to_string() })?;
        let cl100k = tiktoken_rs::cl100k_base()
            .map_err(|e| EstimatorError { encoding: "cl100k_base", reason: e.to_string() })?;
        Ok(Self { o200k, cl100k })
    }

    /// Input tokens the provider will count for this request: its text with per-message,
    /// role, name and tool overhead, multiplied by `safety_factor` and rounded up, plus every
    /// image, document and audio part priced by `media` (the rules of the provider the
    /// request goes to, which may differ from the client's protocol).
    ///
    /// `safety_factor` comes from config per model family and should be >= 1.0; smaller or
    /// non-finite values are treated as 1.0 (an estimate is never shrunk below the count).
    /// It covers tokenizer mismatch, so it does not scale media parts, whose figures are
    /// conservative already.
    ///
    /// # Examples
    /// ```
    /// use sluice_provider::{parse_request, tokenizer_for_model, Estimator, MediaPricing, Protocol};
    ///
    /// let estimator = Estimator::new().unwrap();
    /// let body = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"Hello there"}]}"#;
    /// let req = parse_request(Protocol::OpenAiChat, body).unwrap();
    /// let kind = tokenizer_for_model(&req.model);
    /// // 3 (message) + 1 ("user") + 2 ("Hello there") + 3 (reply priming)
    /// let openai = MediaPricing::OpenAi;
    /// assert_eq!(estimator.input_tokens(&kind, openai, &req, 1.0), 9);
    /// assert_eq!(estimator.input_tokens(&kind, openai, &req, 1.2), 11);
    /// ```
    #[must_use]
    pub fn input_tokens(
        &self,
        kind: &TokenizerKind,
        media: MediaPricing,
        req: &ParsedRequest,
        safety_factor: f64,
    ) -> u64 {
        let mut tally = self.tally(kind, media);
        match req.protocol {
            Protocol::OpenAiChat => openai::chat(&mut tally, &req.body),
            Protocol::OpenAiEmbeddings => openai::inputs(&mut tally, req.body.get("input")),
            Protocol::OpenAiCompletions => openai::inputs(&mut tally, req.body.get("prompt")),
            Protocol::OpenAiResponses => responses::responses(&mut tally, &req.body),
            Protocol::AnthropicMessages => anthropic::messages(&mut tally, &req.body),
        }
        apply_safety(tally.total(), safety_factor).saturating_add(tally.media_tokens)
    }

    /// Tokens of a plain text under `kind`, without any overhead.
    #[must_use]
    pub fn text_tokens(&self, kind: &TokenizerKind, text: &str) -> u64 {
        let mut tally = self.tally(kind, MediaPricing::default());
        tally.text(text);
        tally.total()
    }

    fn tally(&self, kind: &TokenizerKind, media: MediaPricing) -> Tally<'_> {
        let tally = match *kind {
            TokenizerKind::O200k => Tally::bpe(&self.o200k),
            TokenizerKind::Cl100k => Tally::bpe(&self.cl100k),
            TokenizerKind::Approx { chars_per_token } => Tally::approx(chars_per_token),
        };
        Tally { pricing: media, ..tally }
    }
}

/// `ceil(tokens * factor)`, factor clamped to >= 1.0, saturating.
fn apply_safety(tokens: u64, safety_factor: f64) -> u64 {
    let factor = if safety_factor.is_finite() && safety_factor > 1.0 { safety_factor } else { 1.0 };
    if factor == 1.0 {
        return tokens;
    }
    // Token counts stay far below 2^52, so the f64 round trip is exact; `as` saturates.
    (tokens as f64 * factor).ceil() as u64
}

/// Running count for one request: BPE tokens, or characters for the approximation, plus
/// fixed overheads and media parts.
pub(crate) struct Tally<'a> {
    bpe: Option<&'a CoreBPE>,
    /// How images, documents and audio are priced.
    pub(crate) pricing: MediaPricing,
    /// Tokens of media parts, kept apart from text (the safety factor is for text).
    media_tokens: u64,
    chars_per_token: f64,
    chars: u64,
    tokens: u64,
}

impl<'a> Tally<'a> {
    fn bpe(bpe: &'a CoreBPE) -> Self {
        Self {
            bpe: Some(bpe),
            pricing: MediaPricing::default(),
            media_tokens: 0,
            chars_per_token: FALLBACK_CHARS_PER_TOKEN,
            chars: 0,
            tokens: 0,
        }
    }

    fn approx(chars_per_token: f64) -> Self {
        let usable = chars_per_token.is_finite() && chars_per_token > 0.0;
        let chars_per_token = if usable { chars_per_token } else { FALLBACK_CHARS_PER_TOKEN };
        Self { bpe: None, pricing: MediaPricing::default(), media_tokens: 0, chars_per_token, chars: 0, tokens: 0 }
    }

    /// Adds a fixed overhead.
    pub(crate) fn fixed(&mut self, tokens: u64) {
        self.tokens = self.tokens.saturating_add(tokens);
    }

    /// Adds the tokens of a media part.
    pub(crate) fn media(&mut self, tokens: u64) {
        self.media_tokens = self.media_tokens.saturating_add(tokens);
    }

    /// Adds the tokens of a text (no special tokens: `<|endoftext|>` in user text is counted
    /// as the ordinary text it is).
    pub(crate) fn text(&mut self, text: &str) {
        match self.bpe {
            Some(_) if text.is_empty() => {}
            Some(bpe) => self.fixed(bpe.count_ordinary(text) as u64),
            None => self.chars = self.chars.saturating_add(text.chars().count() as u64),
        }
    }

    /// Adds the tokens of a role name; the usual roles are one token in every encoding.
    pub(crate) fn role(&mut self, role: &str) {
        match role {
            "system" | "user" | "assistant" | "tool" | "function" | "developer" => self.fixed(1),
            other => self.text(other),
        }
    }

    /// Adds the tokens of a JSON value's compact serialization.
    pub(crate) fn json(&mut self, value: &serde_json::Value) {
        if let Ok(text) = serde_json::to_string(value) {
            self.text(&text);
        }
    }

    fn total(&self) -> u64 {
        // chars_per_token is finite and positive, so the quotient is finite and >= 0.
        let approx = (self.chars as f64 / self.chars_per_token).ceil() as u64;
        self.tokens.saturating_add(approx)
    }
}

#[cfg(test)]
mod parts_tests;
#[cfg(test)]
mod tests;
