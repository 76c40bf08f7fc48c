//! Bedrock providers: the region, the AWS credentials' source, the output weight preset.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use sluice_config::{BedrockSurface, ProviderApi, ProviderKind, SecretSource, parse};

const BASE: &str = r#"
[[providers]]
name = "br"
kind = "bedrock"
base_url = "http://127.0.0.1:9"
region = "us-east-1"

[[deployments]]
name = "d"
provider = "br"
model = "anthropic.claude-3-7-sonnet-20250219-v1:0"
limits = { tpm = 30000 }

[[models]]
name = "m"
deployment = "d"
"#;

#[test]
fn bedrock_example_config_is_valid() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/bedrock.toml")).unwrap();
    let config = parse(&text).unwrap();
    let converse = ProviderApi::Bedrock { region: "us-east-1".into(), surface: BedrockSurface::Converse };
    assert_eq!(config.providers[0].api, converse);
    let invoke = ProviderApi::Bedrock { region: "us-east-1".into(), surface: BedrockSurface::InvokeModel };
    let text = BASE.replacen("region =", "bedrock_api = \"invoke\"\nregion =", 1);
    assert_eq!(parse(&text).unwrap().providers[0].api, invoke);
    assert_eq!(config.providers[0].api_key, SecretSource::Aws { file: Some("/run/aws/credentials".into()) });
    assert_eq!(config.deployments[0].output_weight, 5, "the preset for Claude 4");
    assert_eq!(config.deployments[1].output_weight, 1, "explicit config");
}

#[test]
fn a_bedrock_provider_signs_with_aws_credentials_and_weighs_claude_output_5x() {
    let config = parse(BASE).unwrap();
    assert_eq!(config.providers[0].kind, ProviderKind::Anthropic, "reached through the Anthropic shape");
    assert_eq!(config.providers[0].api_key, SecretSource::Aws { file: None });
    assert_eq!(config.deployments[0].output_weight, 5);
    let explicit = BASE.replacen("limits = {", "output_weight = 2\nlimits = {", 1);
    assert_eq!(parse(&explicit).unwrap().deployments[0].output_weight, 2, "explicit config wins");
    let older = BASE.replacen("claude-3-7-sonnet-20250219", "claude-3-5-sonnet-20240620", 1);
    assert_eq!(parse(&older).unwrap().deployments[0].output_weight, 1);
}

#[test]
fn bedrock_fields_are_refused_where_they_do_not_belong() {
    let cases: [(String, &str, usize, &str); 6] = [
        (
            BASE.replacen("region =", "bedrock_api = \"rest\"\nregion =", 1),
            "providers[0].bedrock_api",
            6,
            "converse or invoke",
        ),
        (BASE.replacen("region = \"us-east-1\"\n", "", 1), "providers[0].region", 4, "needs region"),
        (BASE.replacen("\"us-east-1\"", "\"US East\"", 1), "providers[0].region", 6, "AWS region"),
        (
            BASE.replacen("region =", "api_key_env = \"K\"\nregion =", 1),
            "providers[0].api_key_env",
            6,
            "AWS credentials",
        ),
        (
            BASE.replacen("kind = \"bedrock\"", "kind = \"anthropic\"\napi_key_env = \"K\"", 1),
            "providers[0].region",
            7,
            "only for kind = \"bedrock\"",
        ),
        (
            BASE.replacen("limits = {", "output_weight = 0\nlimits = {", 1),
            "deployments[0].output_weight",
            12,
            "between 1 and 100",
        ),
    ];
    for (text, field, line, words) in cases {
        let err = parse(&text).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), (field, Some(line)), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
}
