//! Provider accounts: `[[accounts]]` and a deployment's `account`.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use sluice_config::parse;

const BASE: &str = r#"
[[providers]]
name = "oa"
kind = "openai"
base_url = "http://127.0.0.1:9"
api_key_env = "OA_KEY"

[[accounts]]
name = "east"
limits = { tpm = 50000 }

[[deployments]]
name = "d"
provider = "oa"
model = "gpt-4o"
account = "east"
limits = { tpm = 30000 }

[[deployments]]
name = "e"
provider = "oa"
model = "gpt-4o-mini"
limits = { tpm = 30000 }
"#;

#[test]
fn a_deployment_names_the_account_whose_quota_it_shares() {
    let config = parse(BASE).unwrap();
    assert_eq!(&*config.accounts[0].name, "east");
    assert_eq!(config.deployments[0].account, Some(0));
    assert_eq!(config.deployments[1].account, None);
}

#[test]
fn an_unknown_or_doubled_account_is_refused_naming_the_field() {
    let err = parse(&BASE.replacen("account = \"east\"", "account = \"west\"", 1)).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("deployments[0].account", Some(16)), "{err}");
    assert!(err.message.contains("no account named `west`"), "{}", err.message);
    let twice = BASE.replacen("[[deployments]]", "[[accounts]]\nname = \"east\"\n\n[[deployments]]", 1);
    let err = parse(&twice).unwrap_err();
    assert_eq!(err.field, "accounts[1].name", "{err}");
}
