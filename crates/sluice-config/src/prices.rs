//! Price presets: list prices of common models in US dollars per 1 M tokens, matched on
//! a deployment's model name, so that spend is counted without a price table in the file.
//!
//! Source: the providers' public pricing pages (openai.com/api/pricing,
//! anthropic.com/pricing, ai.google.dev/gemini-api/docs/pricing), standard tier, as listed
//! in late 2025. Prices change: an operator who bills on these figures should pin them in
//! `[[deployments]] price`, which overrides a preset field by field. Reasoning is billed as
//! output by all three providers; Anthropic's cache reads are the `cached_input` price.

use crate::model::Price;

/// `(model, input, cached input, output)` per 1 M tokens, USD.
const PRESETS: &[(&str, f64, f64, f64)] = &[
    ("gpt-4o", 2.50, 1.25, 10.00),
    ("gpt-4o-mini", 0.15, 0.075, 0.60),
    ("gpt-4.1", 2.00, 0.50, 8.00),
    ("gpt-4.1-mini", 0.40, 0.10, 1.60),
    ("gpt-4.1-nano", 0.10, 0.025, 0.40),
    ("o3", 2.00, 0.50, 8.00),
    ("o3-mini", 1.10, 0.55, 4.40),
    ("o4-mini", 1.10, 0.275, 4.40),
    ("claude-opus-4-5", 5.00, 0.50, 25.00),
    ("claude-opus-4-1", 15.00, 1.50, 75.00),
    ("claude-opus-4", 15.00, 1.50, 75.00),
    ("claude-sonnet-4-5", 3.00, 0.30, 15.00),
    ("claude-sonnet-4", 3.00, 0.30, 15.00),
    ("claude-3-7-sonnet", 3.00, 0.30, 15.00),
    ("claude-haiku-4-5", 1.00, 0.10, 5.00),
    ("claude-3-5-haiku", 0.80, 0.08, 4.00),
    ("gemini-2.5-pro", 1.25, 0.125, 10.00),
    ("gemini-2.5-flash", 0.30, 0.03, 2.50),
    ("gemini-2.5-flash-lite", 0.10, 0.01, 0.40),
    ("gemini-2.0-flash", 0.10, 0.025, 0.40),
    ("gemini-2.0-flash-lite", 0.075, 0.075, 0.30),
];

/// Bedrock's cross-region inference profiles put a geography before the model id.
const REGION_PREFIXES: &[&str] = &["us.", "eu.", "apac.", "jp.", "au.", "global."];

/// The preset for `model`, in USD: the longest preset name `model` starts with, followed
/// by nothing or by a version tail (`-2024-08-06`, `-20250929-v1:0`, `@20250929`,
/// `-latest`). Bedrock ids (`us.anthropic.claude-sonnet-4-5-20250929-v1:0`) and Gemini's
/// `models/` prefix are read as the bare model name.
///
/// ```
/// let price = sluice_config::preset_price("us.anthropic.claude-sonnet-4-5-20250929-v1:0").unwrap();
/// assert_eq!((price.input, price.output), (3.0, 15.0));
/// assert!(sluice_config::preset_price("gpt-4o-mini-2024-07-18").unwrap().input < 1.0);
/// assert!(sluice_config::preset_price("my-fine-tune").is_none());
/// ```
#[must_use]
pub fn preset_price(model: &str) -> Option<Price> {
    let bare = bare_model(model);
    PRESETS
        .iter()
        .filter(|(name, ..)| bare.strip_prefix(name).is_some_and(is_version_tail))
        .max_by_key(|(name, ..)| name.len())
        .map(|&(_, input, cached_input, output)| Price { input, cached_input, output, reasoning: output })
}

/// `model` without a Bedrock geography, an `anthropic.` vendor or Gemini's `models/`.
fn bare_model(model: &str) -> &str {
    let model = model.strip_prefix("models/").unwrap_or(model);
    let model = REGION_PREFIXES.iter().find_map(|p| model.strip_prefix(p)).unwrap_or(model);
    model.strip_prefix("anthropic.").unwrap_or(model)
}

/// Whether what follows a preset's name only names a version of it (not another model:
/// `gpt-4o` is followed by `-mini` in `gpt-4o-mini`).
fn is_version_tail(rest: &str) -> bool {
    let digit_after_dash = rest.strip_prefix('-').and_then(|r| r.chars().next()).is_some_and(|c| c.is_ascii_digit());
    rest.is_empty() || digit_after_dash || rest.starts_with('@') || rest.starts_with(':') || rest == "-latest"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(model: &str) -> Option<(f64, f64, f64)> {
        preset_price(model).map(|p| (p.input, p.cached_input, p.output))
    }

    #[test]
    fn dated_snapshots_match_their_family_and_not_a_longer_name() {
        assert_eq!(io("gpt-4o-2024-08-06"), Some((2.50, 1.25, 10.00)));
        assert_eq!(io("gpt-4o-mini"), Some((0.15, 0.075, 0.60)));
        assert_eq!(io("gpt-4.1-nano-2025-04-14"), Some((0.10, 0.025, 0.40)));
        assert_eq!(io("o3-2025-04-16"), Some((2.00, 0.50, 8.00)));
        // o3-pro is priced apart and has no preset: it must not borrow o3's.
        assert_eq!(io("o3-pro"), None);
        assert_eq!(io("claude-opus-4-1-20250805"), Some((15.00, 1.50, 75.00)));
        assert_eq!(io("claude-opus-4-5-20251101"), Some((5.00, 0.50, 25.00)));
        assert_eq!(io("claude-3-5-haiku-latest"), Some((0.80, 0.08, 4.00)));
        assert_eq!(io("gemini-2.5-flash-lite"), Some((0.10, 0.01, 0.40)));
        assert_eq!(io("models/gemini-2.5-pro"), Some((1.25, 0.125, 10.00)));
    }

    #[test]
    fn bedrock_and_vertex_ids_match_the_anthropic_models() {
        assert_eq!(io("anthropic.claude-3-7-sonnet-20250219-v1:0"), Some((3.00, 0.30, 15.00)));
        assert_eq!(io("eu.anthropic.claude-haiku-4-5-20251001-v1:0"), Some((1.00, 0.10, 5.00)));
        assert_eq!(io("global.anthropic.claude-sonnet-4-20250514-v1:0"), Some((3.00, 0.30, 15.00)));
        assert_eq!(io("claude-sonnet-4-5@20250929"), Some((3.00, 0.30, 15.00)));
        assert_eq!(io("anthropic.titan"), None);
    }

    #[test]
    fn reasoning_is_priced_as_output() {
        let price = preset_price("o4-mini").unwrap();
        assert!((price.reasoning - price.output).abs() < f64::EPSILON);
    }
}
