//! Constraints: the regions and labels a tenant, team or key is limited to, narrowed into
//! a key's effective constraint; every rejection names its field and line.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::sync::Arc;

use sluice_config::{Allowed, Config, parse};

/// Four deployments: `a` in eu-west (gdpr, ptu), `b` in eu-north (gdpr), `c` in us-east,
/// `d` in no region (ptu); then tenant `t` with `TENANT` added to its table, its team `x`
/// with `TEAM`, and key `k` in team `x` with `KEY`.
fn config(tenant: &str, team: &str, key: &str) -> String {
    format!(
        r#"
[[providers]]
name = "oa"
kind = "openai"
base_url = "http://127.0.0.1:9"
api_key_env = "OA_KEY"

[[deployments]]
name = "a"
provider = "oa"
model = "m"
region = "eu-west"
labels = ["gdpr", "ptu"]

[[deployments]]
name = "b"
provider = "oa"
model = "m"
region = "eu-north"
labels = ["gdpr"]

[[deployments]]
name = "c"
provider = "oa"
model = "m"
region = "us-east"

[[deployments]]
name = "d"
provider = "oa"
model = "m"
labels = ["ptu"]

[[models]]
name = "m"
deployments = ["a", "b", "c", "d"]

[[tenants]]
name = "t"
{tenant}

[[tenants.teams]]
name = "x"
{team}

[[keys]]
id = "k"
tenant = "t"
team = "x"
sha256 = "f9d2f05f48aa3417bcc39581f50a6ce2128f608cbacb7f2ddc28e6b1e07d5d46"
{key}
"#
    )
}

/// Line of the tenant's, team's and key's added text.
const TENANT_LINE: usize = 40;
const TEAM_LINE: usize = 44;
const KEY_LINE: usize = 51;

fn names(items: &[&str]) -> Option<Arc<[Arc<str>]>> {
    Some(items.iter().map(|i| Arc::from(*i)).collect())
}

/// The deployments key `k` may be served by.
fn served_by(config: &Config) -> Vec<&str> {
    let allowed = config.allowed(&config.keys[0]);
    config.deployments.iter().filter(|d| allowed.admits(d.region.as_deref(), &d.labels)).map(|d| &*d.name).collect()
}

#[test]
fn without_constraints_a_key_may_be_served_by_every_deployment() {
    let config = parse(&config("", "", "")).unwrap();
    assert!(config.tenants[0].allowed.is_unconstrained());
    assert!(config.allowed(&config.keys[0]).is_unconstrained());
    assert_eq!(served_by(&config), ["a", "b", "c", "d"]);
}

#[test]
fn each_level_keeps_what_it_wrote_and_a_key_gets_them_all_narrowed() {
    let config =
        parse(&config("regions = [\"eu-west\", \"eu-north\"]", "labels = [\"gdpr\"]", "regions = [\"eu-north\"]"))
            .unwrap();
    let tenant = &config.tenants[0];
    assert_eq!(tenant.allowed, Allowed { regions: names(&["eu-west", "eu-north"]), labels: None });
    assert_eq!(tenant.teams[0].allowed, Allowed { regions: None, labels: names(&["gdpr"]) });
    assert_eq!(config.keys[0].allowed, Allowed { regions: names(&["eu-north"]), labels: None });
    let effective = config.allowed(&config.keys[0]);
    assert_eq!(effective, Allowed { regions: names(&["eu-north"]), labels: names(&["gdpr"]) });
    assert_eq!(served_by(&config), ["b"]);
}

#[test]
fn a_tenants_regions_keep_its_keys_out_of_other_regions_and_labels_must_all_be_carried() {
    let eu = parse(&config("regions = [\"eu-west\", \"eu-north\"]", "", "")).unwrap();
    assert_eq!(served_by(&eu), ["a", "b"], "never us-east, never a deployment stating no region");
    let both = parse(&config("labels = [\"gdpr\", \"ptu\"]", "", "")).unwrap();
    assert_eq!(served_by(&both), ["a"], "b lacks ptu, d lacks gdpr");
}

/// `(tenant, team, key, field, line, words)`: a constraint refused.
const BAD: &[(&str, &str, &str, &str, usize, &str)] = &[
    ("regions = []", "", "", "tenants[0].regions", TENANT_LINE, "an empty list admits no deployment"),
    ("", "labels = []", "", "tenants[0].teams[0].labels", TEAM_LINE, "an empty list admits no deployment"),
    ("", "", "regions = []", "keys[0].regions", KEY_LINE, "an empty list admits no deployment"),
    (
        "regions = [\"eu-wets\"]",
        "",
        "",
        "tenants[0].regions[0]",
        TENANT_LINE,
        "no deployment has the region `eu-wets` (known: eu-north, eu-west, us-east)",
    ),
    (
        "",
        "",
        "labels = [\"gdrp\"]",
        "keys[0].labels[0]",
        KEY_LINE,
        "no deployment has the label `gdrp` (known: gdpr, ptu)",
    ),
    ("regions = [\"EU\"]", "", "", "tenants[0].regions[0]", TENANT_LINE, "lowercase letters"),
    ("", "regions = [\"eu-west\", \"eu-west\"]", "", "tenants[0].teams[0].regions[1]", TEAM_LINE, "listed twice"),
    (
        "regions = [\"eu-west\", \"eu-north\"]",
        "regions = [\"eu-west\", \"us-east\"]",
        "",
        "tenants[0].teams[0].regions[1]",
        TEAM_LINE,
        "`us-east` is outside the regions it is already limited to (eu-west, eu-north)",
    ),
    (
        "",
        "regions = [\"eu-north\"]",
        "regions = [\"eu-west\"]",
        "keys[0].regions[0]",
        KEY_LINE,
        "`eu-west` is outside the regions it is already limited to (eu-north)",
    ),
    (
        "regions = [\"us-east\"]",
        "",
        "labels = [\"gdpr\"]",
        "keys[0].labels",
        KEY_LINE,
        "no deployment is admitted by regions us-east; labels gdpr",
    ),
    (
        "regions = [\"eu-north\"]",
        "labels = [\"ptu\"]",
        "",
        "tenants[0].teams[0].labels",
        TEAM_LINE,
        "no deployment is admitted by regions eu-north; labels ptu",
    ),
    ("regions = \"eu-west\"", "", "", "regions", TENANT_LINE, "invalid type"),
];

#[test]
fn a_constraint_is_refused_naming_its_field_and_line() {
    for (tenant, team, key, field, line, words) in BAD {
        let text = config(tenant, team, key);
        let error = parse(&text).expect_err(&format!("{tenant} | {team} | {key}"));
        assert_eq!((error.field.as_str(), error.line), (*field, Some(*line)), "{error}");
        assert!(error.message.contains(words), "{error}");
    }
}

#[test]
fn a_region_no_deployment_states_is_refused_even_when_none_states_one() {
    let text = config("regions = [\"eu-west\"]", "", "")
        .replace("region = \"eu-west\"\n", "")
        .replace("region = \"eu-north\"\n", "")
        .replace("region = \"us-east\"\n", "");
    let error = parse(&text).unwrap_err();
    assert_eq!(error.field, "tenants[0].regions[0]");
    assert!(error.message.contains("no deployment states a region"), "{error}");
}
