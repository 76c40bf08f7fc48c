//! Spend: each settled request's cost from the provider's reported usage and its
//! deployment's price table, summed per tenant in `sluice_spend_total`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use common::{KEY, chat, sha, start};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};

const BETA: &str = "sk-spend-beta";

fn policy() -> String {
    format!(
        r#"
# Not USD: no preset applies, so only a deployment with its own price is priced.
[pricing]
currency = "EUR"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}
price = {{ input = 2.5, output = 10.0 }}

[[deployments]]
name = "free"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[models]]
name = "fast"
deployment = "mini"

[[models]]
name = "unpriced"
deployment = "free"

[[tenants]]
name = "acme"

[[tenants]]
name = "beta"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{acme}"

[[keys]]
id = "beta-1"
tenant = "beta"
sha256 = "{beta}"
"#,
        acme = sha(KEY),
        beta = sha(BETA),
    )
}

/// `sluice_spend_total{tenant="...",currency="..."}` as scraped (in any currency), if present.
fn spend(metrics: &str, tenant: &str) -> Option<f64> {
    spend_in(metrics, tenant).map(|(_, value)| value)
}

/// The tenant's spend and the currency it is labelled with.
fn spend_in(metrics: &str, tenant: &str) -> Option<(String, f64)> {
    let prefix = format!("sluice_spend_total{{tenant=\"{tenant}\",currency=\"");
    metrics.lines().find_map(|l| {
        let (currency, value) = l.strip_prefix(&prefix)?.split_once("\"} ")?;
        Some((currency.to_owned(), value.trim().parse().unwrap()))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_is_priced_by_its_reported_usage_per_tenant() {
    let model = ModelConfig { completion: Completion::Fixed { tokens: 7 }, ..ModelConfig::openai("gpt-4o-mini") };
    let env = start(SimConfig { models: vec![model], ..SimConfig::default() }, &policy()).await;
    let mut expected = 0.0;
    for words in [3, 40, 200] {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("fast", words, 16)).await;
        assert_eq!(status, 200, "{body}");
        let (input, output) =
            (body["usage"]["prompt_tokens"].as_f64().unwrap(), body["usage"]["completion_tokens"].as_f64().unwrap());
        expected += input * 2.5 / 1e6 + output * 10.0 / 1e6;
    }
    // Another tenant on an unpriced deployment (gpt-4o-mini has a USD preset only) spends nothing.
    let (status, _, _) = env.post("/v1/chat/completions", BETA, &chat("unpriced", 3, 16)).await;
    assert_eq!(status, 200);
    let metrics = env.metrics().await;
    let (currency, acme) = spend_in(&metrics, "acme").unwrap_or_else(|| panic!("no acme spend in\n{metrics}"));
    assert!((acme - expected).abs() < 1e-9, "acme spent {acme}, usage says {expected}");
    assert_eq!(currency, "EUR", "labelled with [pricing] currency");
    assert!(spend(&metrics, "beta").is_none(), "{metrics}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_model_is_priced_by_its_preset_without_a_price_table() {
    let model = ModelConfig { completion: Completion::Fixed { tokens: 7 }, ..ModelConfig::openai("gpt-4o-mini") };
    let usd = policy().replace("[pricing]\ncurrency = \"EUR\"\n", "");
    let env = start(SimConfig { models: vec![model], ..SimConfig::default() }, &usd).await;
    let (status, _, body) = env.post("/v1/chat/completions", BETA, &chat("unpriced", 30, 16)).await;
    assert_eq!(status, 200, "{body}");
    let (input, output) =
        (body["usage"]["prompt_tokens"].as_f64().unwrap(), body["usage"]["completion_tokens"].as_f64().unwrap());
    // gpt-4o-mini's preset: 0.15 in, 0.60 out per 1M tokens.
    let expected = input * 0.15 / 1e6 + output * 0.60 / 1e6;
    let metrics = env.metrics().await;
    let (currency, beta) = spend_in(&metrics, "beta").unwrap_or_else(|| panic!("no beta spend in\n{metrics}"));
    assert!((beta - expected).abs() < 1e-12, "beta spent {beta}, the preset says {expected}");
    assert_eq!(currency, "USD", "the default currency");
    env.shutdown().await;
}
