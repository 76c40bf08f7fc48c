//! The operator settings: the admin key's hash, and limits written for the admin API.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use sluice_config::{hash_key, parse, parse_limits};
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
