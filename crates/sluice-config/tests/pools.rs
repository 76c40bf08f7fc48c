//! Pools: a model profile over several deployments, its members, tiers, weights and
//! strategy, and where each deployment stands; every rejection names its field and line.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use sluice_config::{Member, Placement, parse};

/// Three deployments (`a` priced by its model's preset, `b` and `c` on a model without
/// one), then `MODEL` (the `[[models]]` table under test), a tenant and a key.
fn config(model: &str) -> String {
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
model = "gpt-4o"
limits = {{ rpm = 300 }}
region = "eu-west"
labels = ["ptu", "eu"]
context_window = 128000

[[deployments]]
name = "b"
provider = "oa"
model = "house-model"
limits = {{ rpm = 200 }}

[[deployments]]
name = "c"
provider = "oa"
model = "house-model"
limits = {{ rpm = 100 }}

[[models]]
{model}

[[tenants]]
name = "t"

[[keys]]
id = "k"
tenant = "t"
sha256 = "f9d2f05f48aa3417bcc39581f50a6ce2128f608cbacb7f2ddc28e6b1e07d5d46"
"#
    )
}

const fn member(deployment: usize, weight: u32, tier: u8) -> Member {
    Member { deployment, weight, tier }
}

#[test]
fn one_deployment_is_a_pool_of_one_placed_by_headroom() {
    let config = parse(&config("name = \"m\"\ndeployment = \"b\"")).unwrap();
    let profile = &config.models[0];
    assert_eq!((profile.deployment, profile.pool.as_slice()), (1, &[member(1, 1, 0)][..]));
    assert_eq!(profile.strategy, Placement::Headroom);
}

#[test]
fn a_pool_names_its_members_or_describes_them_and_its_primary_is_the_first_of_its_lowest_tier() {
    let names = parse(&config("name = \"m\"\ndeployments = [\"a\", \"b\", \"c\"]")).unwrap();
    assert_eq!(names.models[0].pool, [member(0, 1, 0), member(1, 1, 0), member(2, 1, 0)]);
    assert_eq!(names.models[0].deployment, 0);

    let tables = "name = \"m\"\nstrategy = \"weighted\"\ndeployments = [\n  { deployment = \"a\", tier = 1 },\n  \
                  { deployment = \"c\", weight = 2 },\n  \"b\",\n]";
    let config = parse(&config(tables)).unwrap();
    let profile = &config.models[0];
    assert_eq!(profile.pool, [member(0, 1, 1), member(2, 2, 0), member(1, 1, 0)]);
    assert_eq!(profile.deployment, 2, "tier 0 comes first, in the order listed");
    assert_eq!(profile.strategy, Placement::Weighted);
}

#[test]
fn a_deployment_states_its_region_labels_and_context_window() {
    let config = parse(&config("name = \"m\"\ndeployment = \"a\"")).unwrap();
    let a = &config.deployments[0];
    assert_eq!(a.region.as_deref(), Some("eu-west"));
    assert_eq!(a.labels.iter().map(|l| &**l).collect::<Vec<_>>(), ["ptu", "eu"]);
    assert_eq!(a.context_window.map(std::num::NonZeroU64::get), Some(128_000));
    let b = &config.deployments[1];
    assert_eq!((b.region.as_deref(), b.labels.len(), b.context_window), (None, 0, None));
}

#[test]
fn cost_places_a_pool_whose_members_all_have_a_price() {
    let text = config("name = \"m\"\nstrategy = \"cost\"\ndeployments = [\"a\", \"c\"]");
    let error = parse(&text).unwrap_err();
    assert_eq!((error.field.as_str(), error.line), ("models[0].strategy", Some(31)), "{error}");
    assert!(error.message.contains("deployment `c` has none"), "{error}");
    // `c` with a price of its own: the pool is placed by cost.
    let priced = text.replace(
        "model = \"house-model\"\nlimits = { rpm = 100 }",
        "model = \"house-model\"\nlimits = { rpm = 100 }\nprice = { input = 1.0, output = 2.0 }",
    );
    assert_eq!(parse(&priced).unwrap().models[0].strategy, Placement::Cost);
    // Presets are in USD: in another currency `a` has no price until it is given one.
    let euros = priced.replace("[[tenants]]", "[pricing]\ncurrency = \"EUR\"\n\n[[tenants]]");
    let error = parse(&euros).unwrap_err();
    assert!(error.message.contains("deployment `a` has none"), "{error}");
}

/// (the `[[models]]` table, expected field, expected line, words the message must contain)
const BAD: &[(&str, &str, usize, &str)] = &[
    ("name = \"m\"", "models[0]", 30, "needs `deployment` (one) or `deployments` (a pool)"),
    ("name = \"m\"\ndeployment = \"a\"\ndeployments = [\"b\"]", "models[0].deployments", 32, "not both"),
    ("name = \"m\"\ndeployments = []", "models[0].deployments", 31, "at least one deployment"),
    ("name = \"m\"\ndeployments = [\"a\", \"z\"]", "models[0].deployments[1]", 31, "no deployment named `z`"),
    ("name = \"m\"\ndeployments = [\"a\", { deployment = \"a\" }]", "models[0].deployments[1]", 31, "already a member"),
    ("name = \"m\"\ndeployments = [\"a\", 3]", "models[0].deployments[1]", 31, "a deployment's name, or a table"),
    ("name = \"m\"\ndeployments = [{ weight = 2 }]", "models[0].deployments[0]", 31, "needs `deployment`"),
    (
        "name = \"m\"\ndeployments = [{ deployment = \"a\", weigth = 2 }]",
        "models[0].deployments[0].weigth",
        31,
        "unknown field `weigth` (known: deployment, weight, tier)",
    ),
    (
        "name = \"m\"\ndeployments = [{ deployment = \"a\", weight = 0 }]",
        "models[0].deployments[0].weight",
        31,
        "between 1 and 1000",
    ),
    (
        "name = \"m\"\ndeployments = [{ deployment = \"a\", tier = 10 }]",
        "models[0].deployments[0].tier",
        31,
        "between 0 and 9",
    ),
    (
        "name = \"m\"\nstrategy = \"random\"\ndeployments = [\"a\", \"b\"]",
        "models[0].strategy",
        31,
        "unknown strategy `random` (known: headroom, weighted, latency, cost)",
    ),
    ("name = \"m\"\nstrategy = \"latency\"\ndeployment = \"a\"", "models[0].strategy", 31, "set `deployments`"),
    (
        "name = \"m\"\naffinity_header = \"x-session\"\ndeployment = \"a\"",
        "models[0].affinity_header",
        31,
        "set `deployments`",
    ),
    (
        "name = \"m\"\naffinity_header = \"x session\"\ndeployments = [\"a\", \"b\"]",
        "models[0].affinity_header",
        31,
        "not a header name",
    ),
];

#[test]
fn a_pools_affinity_header_is_kept_in_lower_case() {
    let parsed =
        parse(&config("name = \"m\"\naffinity_header = \"X-Session-Id\"\ndeployments = [\"a\", \"b\"]")).unwrap();
    assert_eq!(parsed.models[0].affinity_header.as_deref(), Some("x-session-id"));
}

#[test]
fn a_malformed_pool_is_refused_naming_its_field_and_line() {
    for (model, field, line, words) in BAD {
        let error = parse(&config(model)).expect_err(model);
        assert_eq!((error.field.as_str(), error.line), (*field, Some(*line)), "{model}: {error}");
        assert!(error.message.contains(words), "{model}: {error}");
    }
}

#[test]
fn a_malformed_region_label_or_context_window_is_refused_naming_its_field_and_line() {
    let bad = [
        ("region = \"eu-west\"", "region = \"EU West\"", "deployments[0].region", 13, "lowercase letters"),
        ("labels = [\"ptu\", \"eu\"]", "labels = [\"ptu\", \"ptu\"]", "deployments[0].labels[1]", 14, "listed twice"),
        ("labels = [\"ptu\", \"eu\"]", "labels = [\"\"]", "deployments[0].labels[0]", 14, "1 to 64 characters"),
        ("context_window = 128000", "context_window = 0", "deployments[0].context_window", 15, "positive"),
    ];
    for (from, to, field, line, words) in bad {
        let text = config("name = \"m\"\ndeployment = \"a\"").replace(from, to);
        let error = parse(&text).expect_err(to);
        assert_eq!((error.field.as_str(), error.line), (field, Some(line)), "{to}: {error}");
        assert!(error.message.contains(words), "{to}: {error}");
    }
}
