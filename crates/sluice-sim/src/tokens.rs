//! Token counting with real tokenizers (tiktoken), plus OpenAI's documented chat overhead.
//!
//! OpenAI model names map to their encoding (o200k_base for the gpt-4o / gpt-4.1 / gpt-5 /
//! o-series families, cl100k_base otherwise). Anthropic-shaped models are counted with
//! cl100k_base as a documented stand-in for Claude's tokenizer. Each encoding is loaded once
//! per process (tiktoken-rs singletons) and warmed when the simulator starts.

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

/// Tokens added per chat message (OpenAI's documented formula).
pub const PER_MESSAGE: u64 = 3;
/// Tokens added once per chat prompt to prime the reply.
pub const REPLY_PRIMING: u64 = 3;
/// Tokens added for a message's `name` besides the name's own tokens.
pub const PER_NAME: u64 = 1;

/// A BPE encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// gpt-4o, gpt-4.1, gpt-5, o1, o3, o4 families.
    O200kBase,
    /// gpt-4, gpt-3.5, embeddings, unknown names, and the Anthropic stand-in.
    Cl100kBase,
}

const O200K_PREFIXES: [&str; 8] = ["gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o"];

impl Encoding {
    /// The encoding OpenAI uses for a model name.
    #[must_use]
    pub fn for_openai_model(name: &str) -> Self {
        if O200K_PREFIXES.iter().any(|p| name.starts_with(p)) { Self::O200kBase } else { Self::Cl100kBase }
    }
}

/// A loaded tokenizer (cheap to copy: it refers to a process-wide table).
#[derive(Clone, Copy)]
pub struct Tokenizer {
    bpe: &'static CoreBPE,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokenizer")
    }
}

impl Tokenizer {
    /// The tokenizer for `encoding`, loading it on first use.
    #[must_use]
    pub fn new(encoding: Encoding) -> Self {
        let bpe = match encoding {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        Self { bpe }
    }

    /// Number of tokens of `text` (special tokens are treated as ordinary text).
    #[must_use]
    pub fn count(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        self.bpe.count_ordinary(text) as u64
    }

    /// Tokens of one chat message: `3 + role + content parts + (name + 1)`.
    pub fn message<'a>(&self, role: &str, parts: impl IntoIterator<Item = &'a str>, name: Option<&str>) -> u64 {
        let content: u64 = parts.into_iter().map(|p| self.count(p)).sum();
        let name = name.map_or(0, |n| self.count(n) + PER_NAME);
        PER_MESSAGE + self.count(role) + content + name
    }
}

/// A rough token estimate from characters (`ceil(chars / 4)`), as OpenAI's TPM estimator does.
#[must_use]
pub fn estimate_from_chars(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_map_to_encodings() {
        assert_eq!(Encoding::for_openai_model("gpt-4o-mini"), Encoding::O200kBase);
        assert_eq!(Encoding::for_openai_model("gpt-4.1"), Encoding::O200kBase);
        assert_eq!(Encoding::for_openai_model("gpt-5-nano"), Encoding::O200kBase);
        assert_eq!(Encoding::for_openai_model("o3-mini"), Encoding::O200kBase);
        assert_eq!(Encoding::for_openai_model("gpt-4"), Encoding::Cl100kBase);
        assert_eq!(Encoding::for_openai_model("gpt-3.5-turbo"), Encoding::Cl100kBase);
        assert_eq!(Encoding::for_openai_model("my-model"), Encoding::Cl100kBase);
    }

    #[test]
    fn counts_are_real_tokenizer_counts() {
        let cl = Tokenizer::new(Encoding::Cl100kBase);
        let o2 = Tokenizer::new(Encoding::O200kBase);
        assert_eq!(cl.count("hello world"), 2);
        assert_eq!(o2.count("hello world"), 2);
        assert_eq!(cl.count(""), 0);
        assert_eq!(cl.count("tiktoken is great!"), 6);
        // Special-token text is counted as ordinary text, not rejected.
        assert!(cl.count("<|endoftext|>") > 1);
    }

    #[test]
    fn chat_overhead_follows_the_documented_formula() {
        let t = Tokenizer::new(Encoding::Cl100kBase);
        // 3 + "user"(1) + "hello world"(2)
        assert_eq!(t.message("user", ["hello world"], None), 6);
        // + name "bob"(1) + 1
        assert_eq!(t.message("user", ["hello world"], Some("bob")), 8);
        assert_eq!(t.message("system", ["hello", " world"], None), 3 + 1 + 2);
    }

    #[test]
    fn char_estimate_rounds_up() {
        assert_eq!(estimate_from_chars(0), 0);
        assert_eq!(estimate_from_chars(1), 1);
        assert_eq!(estimate_from_chars(8), 2);
        assert_eq!(estimate_from_chars(9), 3);
    }
}
