//! The operator settings: the admin key's hash, where the admin plane listens and where
//! its metrics token comes from, and limits written for the admin API.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use sluice_config::{AdminListen, SecretSource, hash_key, parse, parse_limits};
use sluice_quota::ScopeKind;

const BASE: &str = r#"
[[providers]]
name = "oa"
kind = "openai"
base_url = "http://127.0.0.1:9"
api_key_env = "OA_KEY"

[[deployments]]
name = "d"
provider = "oa"
model = "gpt-4o"
"#;

#[test]
fn the_admin_key_is_a_sha256_or_absent() {
    assert_eq!(parse(BASE).unwrap().admin.key_sha256, None);
    let sha = hex_of(&hash_key("admin-secret"));
    let config = parse(&format!("[admin]\nkey_sha256 = \"{sha}\"\n{BASE}")).unwrap();
    assert_eq!(config.admin.key_sha256, Some(hash_key("admin-secret")));

    let err = parse(&format!("[admin]\nkey_sha256 = \"admin-secret\"\n{BASE}")).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("admin.key_sha256", Some(2)));
    assert!(err.message.contains("64 hex digits"), "{err}");
    let err = parse(&format!("[admin]\nkey = \"admin-secret\"\n{BASE}")).unwrap_err();
    assert!(err.message.contains("unknown field `key`"), "{err}");
}

#[test]
fn the_admin_plane_listens_apart_on_loopback_unless_told_or_shared() {
    let apart = |addr: &str| AdminListen::Apart(addr.parse().unwrap());
    assert_eq!(parse(BASE).unwrap().admin.listen, apart("127.0.0.1:9090"));
    let at = |listen: &str| parse(&format!("[admin]\nlisten = \"{listen}\"\n{BASE}")).map(|c| c.admin.listen);
    assert_eq!(at("0.0.0.0:9191").unwrap(), apart("0.0.0.0:9191"));
    assert_eq!(at("shared").unwrap(), AdminListen::Shared);
    let err = at("localhost").unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("admin.listen", Some(2)));
    assert!(err.message.contains("shared"), "{err}");
}

#[test]
fn the_metrics_token_comes_from_a_variable_or_a_file_never_the_config() {
    assert_eq!(parse(BASE).unwrap().admin.metrics_token, None);
    let token = |line: &str| parse(&format!("[admin]\n{line}\n{BASE}")).map(|c| c.admin.metrics_token);
    assert_eq!(token("metrics_token_env = \"MT\"").unwrap(), Some(SecretSource::Env("MT".into())));
    assert_eq!(token("metrics_token_file = \"/run/t\"").unwrap(), Some(SecretSource::File("/run/t".into())));
    let err = token("metrics_token_env = \"MT\"\nmetrics_token_file = \"/run/t\"").unwrap_err();
    assert!(err.field == "admin.metrics_token_file" && err.message.contains("not both"), "{err}");
    assert_eq!(token("metrics_token_env = \"\"").unwrap_err().field, "admin.metrics_token_env");
    let err = token("metrics_token = \"secret\"").unwrap_err();
    assert!(err.message.contains("unknown field `metrics_token`"), "{err}");
}

#[test]
fn limits_for_the_admin_api_follow_the_file_rules_and_name_the_field() {
    let limits = parse_limits(ScopeKind::Tenant, "limits", "rpm = 500\ntpm = 30000\nconcurrency = 4").unwrap();
    assert_eq!(limits.rates.len(), 2);
    assert_eq!(limits.concurrency.map(std::num::NonZeroU64::get), Some(4));
    assert!(parse_limits(ScopeKind::Tenant, "limits", "").unwrap().is_unlimited());

    let err = parse_limits(ScopeKind::Tenant, "limits", "rpm = 0").unwrap_err();
    assert_eq!(err.field, "limits.rpm");
    assert!(err.message.contains("positive"), "{err}");
    let err = parse_limits(ScopeKind::Tenant, "limits", "rpx = 5").unwrap_err();
    assert_eq!(err.field, "limits.rpx");
    let err = parse_limits(ScopeKind::Tenant, "limits", "burst_seconds = -1.0").unwrap_err();
    assert_eq!(err.field, "limits.burst_seconds");
    let err = parse_limits(ScopeKind::Tenant, "limits", "tpm = \"lots\"").unwrap_err();
    assert!(err.field.starts_with("limits"), "{err}");
}

#[test]
fn limits_for_the_admin_api_take_the_burst_default_of_their_scope_kind() {
    let burst = |kind| {
        let limits = parse_limits(kind, "limits", "tpm = 20000").unwrap();
        (limits.rates[0].burst.get(), limits.rates[0].guard)
    };
    for caller in [ScopeKind::Tenant, ScopeKind::Team, ScopeKind::ApiKey, ScopeKind::ModelProfile] {
        assert_eq!(burst(caller), (20_000, false), "{caller:?}: the whole minute");
    }
    assert_eq!(burst(ScopeKind::Deployment), (333, true), "one second, guarded");
    let explicit = parse_limits(ScopeKind::Team, "limits", "tpm = 20000\nburst_seconds = 1").unwrap();
    assert_eq!(explicit.rates[0].burst.get(), 333);
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
