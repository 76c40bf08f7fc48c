use super::*;
use crate::validate::ConfigError;

fn parse(text: &str) -> Result<SimConfig, ConfigError> {
    SimConfig::from_toml_str(text)
}

fn rejected(text: &str, needle: &str) {
    let err = parse(text).expect_err("config should be rejected");
    assert!(err.0.contains(needle), "`{}` does not mention `{needle}`", err.0);
}

const MODEL: &str = "[[models]]\nname = \"m\"\n";

#[test]
fn the_example_config_is_valid() {
    let config = parse(include_str!("../examples/sim.toml")).unwrap();
    assert_eq!(config.models.len(), 5);
    let azure = config.models.iter().find(|m| m.flavor() == Flavor::Azure).unwrap();
    assert_eq!(azure.limits.effective(Flavor::Azure).rpm, Some(360));
    let claude = config.models.iter().find(|m| m.shape == Shape::Anthropic).unwrap();
    assert_eq!(claude.limits.concurrency_status, 529);
    assert!(!claude.count_rejected());
}

#[test]
fn defaults_are_the_documented_ones() {
    let config = parse(MODEL).unwrap();
    let m = &config.models[0];
    assert_eq!(config.time_scale, 1.0);
    assert_eq!(m.shape, Shape::Openai);
    assert_eq!(m.limits.window_ms, DEFAULT_WINDOW_MS);
    assert_eq!(m.limits.window_fraction, DEFAULT_WINDOW_FRACTION);
    assert_eq!(m.token_rule, TokenRule::PromptPlusMax);
    assert_eq!(m.output_accounting, OutputAccounting::Actual);
    assert!(m.count_rejected());
}

#[test]
fn unknown_fields_are_rejected() {
    rejected("bogus = 1\n[[models]]\nname = \"m\"\n", "unknown field");
    rejected("[[models]]\nname = \"m\"\nrpm = 5\n", "unknown field");
    rejected("[[models]]\nname = \"m\"\nlimits = { rpmm = 5 }\n", "unknown field");
    rejected("[faults]\nerror_501 = 0.1\n[[models]]\nname = \"m\"\n", "unknown field");
    rejected("[[models]]\nname = \"m\"\ncompletion = { dist = \"fixed\", tokens = 3, x = 1 }\n", "unknown field");
}

#[test]
fn bad_values_are_rejected_with_a_reason() {
    rejected("", "at least one model");
    rejected(&format!("time_scale = 0.0\n{MODEL}"), "time_scale");
    rejected(&format!("{MODEL}{MODEL}"), "defined twice");
    rejected(&format!("{MODEL}limits = {{ rpm = 0 }}\n"), "rpm must be positive");
    rejected(&format!("{MODEL}limits = {{ itpm = 5 }}\n"), "anthropic shape");
    rejected("[[models]]\nname = \"c\"\nshape = \"anthropic\"\nlimits = { tpm = 5 }\n", "openai shape");
    rejected(&format!("{MODEL}limits = {{ concurrency_status = 503 }}\n"), "429 or 529");
    rejected(&format!("{MODEL}limits = {{ window_fraction = 1.5 }}\n"), "window_fraction");
    rejected(&format!("{MODEL}limits = {{ window_ms = 0.0 }}\n"), "window_ms");
    rejected(&format!("{MODEL}flavor = \"anthropic\"\n"), "does not fit shape");
    rejected(&format!("{MODEL}cached_input_fraction = 2.0\n"), "cached_input_fraction");
    rejected(&format!("{MODEL}cached_input_fraction = 0.5\nprompt_cache = true\n"), "exclude each other");
    rejected(&format!("{MODEL}completion = {{ dist = \"uniform\", min = 5, max = 2 }}\n"), "completion");
    rejected(&format!("[faults]\nerror_500 = 0.7\nreset = 0.7\n{MODEL}"), "sum to");
    rejected(&format!("[faults]\nhang = -0.1\n{MODEL}"), "within 0..=1");
    rejected(&format!("[latency]\nttft_ms = -1.0\n{MODEL}"), "non-negative");
    rejected(&format!("[latency]\njitter = 2.0\n{MODEL}"), "jitter");
    rejected(&format!("{MODEL}latency = {{ chunk_tokens = 0 }}\n"), "chunk_tokens");
}

#[test]
fn a_quantized_window_is_configured_by_its_length() {
    let config =
        parse("[[models]]\nname = \"m\"\nlimits = { rpm = 600, window_kind = \"quantized\", window_ms = 2000.0 }\n")
            .unwrap();
    let limits = &config.models[0].limits;
    assert_eq!(limits.window_kind, WindowKind::Quantized);
    assert_eq!(limits.clone(), Limits { rpm: Some(600), ..Limits::default() }.quantized(2000.0));
    rejected("[[models]]\nname = \"m\"\nlimits = { rpm = 1, window_kind = \"fixed\" }\n", "window_kind");
}
