//! The cloud providers through the gateway over HTTP against the simulated provider:
//! Gemini's OpenAI-compatible path, Azure OpenAI's classic and v1 surfaces with the
//! `api-key` header (the Responses API at Azure's resource path, the deployment as the
//! body's `model`), and an Entra ID token file.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::*;
use sluice_sim::config::{Flavor, ModelConfig, SimConfig};

fn flavored(name: &str, flavor: Flavor) -> ModelConfig {
    ModelConfig { flavor: Some(flavor), ..ModelConfig::openai(name) }
}

/// Providers of every cloud kind on the sim, a deployment and profile on each, one key.
fn policy(azure_auth: &str) -> String {
    format!(
        r#"
[[providers]]
name = "gemini"
kind = "gemini"
base_url = "{{SIM}}"
api_key_file = "{{KEYFILE}}"

[[providers]]
name = "azure-classic"
kind = "azure"
base_url = "{{SIM}}"
api_version = "2024-10-21"
{azure_auth}

[[providers]]
name = "azure-v1"
kind = "azure"
api_surface = "v1"
base_url = "{{SIM}}"
api_key_file = "{{KEYFILE}}"

[[deployments]]
name = "gemini-flash"
provider = "gemini"
model = "gemini-flash"

[[deployments]]
name = "azure-east"
provider = "azure-classic"
model = "gpt-4o"
azure_deployment = "gpt4o-east"
limits = {{ tpm = 1000 }}

[[deployments]]
name = "azure-v1"
provider = "azure-v1"
model = "gpt4o-east"

[[deployments]]
name = "azure-responses"
provider = "azure-classic"
model = "gpt-4o"
azure_deployment = "gpt4o-east"

[[deployments]]
name = "azure-embed"
provider = "azure-classic"
model = "embed-east"

[[models]]
name = "gemini"
deployment = "gemini-flash"

[[models]]
name = "azure-embed"
deployment = "azure-embed"

[[models]]
name = "azure"
deployment = "azure-east"

[[models]]
name = "azure-v1"
deployment = "azure-v1"

[[models]]
name = "azure-responses"
deployment = "azure-responses"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{sha}"
"#,
        sha = sha(KEY)
    )
}

fn sim() -> SimConfig {
    let models = vec![
        flavored("gemini-flash", Flavor::Gemini),
        flavored("gpt4o-east", Flavor::Azure),
        flavored("embed-east", Flavor::Azure),
    ];
    SimConfig { models, ..SimConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_is_called_at_its_openai_compatible_path() {
    let env = start(sim(), &policy("api_key_file = \"{KEYFILE}\"")).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("gemini", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(env.sim.stats().served, 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_classic_and_v1_surfaces_are_called_with_the_api_key() {
    let env = start(sim(), &policy("api_key_file = \"{KEYFILE}\"")).await;
    for profile in ["azure", "azure-v1"] {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat(profile, 4, 8)).await;
        assert_eq!(status, 200, "{profile}: {body}");
    }
    let embed = serde_json::json!({"model": "azure-embed", "input": "hello"});
    let (status, _, body) = env.post("/v1/embeddings", KEY, &embed).await;
    assert_eq!(status, 200, "embeddings on the classic path: {body}");
    assert_eq!(env.sim.stats().served, 3, "all reached the sim's Azure paths (which require api-key)");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_with_an_entra_token_file_is_called_with_the_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("entra-token");
    std::fs::write(&token, "eyJ-entra-access-token\n").unwrap();
    let auth = format!("token_file = \"{}\"", token.display());
    let env = start(sim(), &policy(&auth)).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("azure", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_openai_clients_reach_a_profile_named_in_the_path_with_the_api_key_header() {
    let env = start(sim(), &policy("api_key_file = \"{KEYFILE}\"")).await;
    let url = env.gateway.url();
    let send = |path: &str, key: Option<&str>, model: &str| {
        let mut request = env.http.post(format!("{url}{path}")).json(&chat(model, 4, 8));
        if let Some(key) = key {
            request = request.header("api-key", key);
        }
        request.send()
    };
    let classic = "/openai/deployments/gemini/chat/completions?api-version=2024-10-21";
    let ok = send(classic, Some(KEY), "ignored").await.unwrap();
    assert_eq!(ok.status(), 200, "the path's deployment names the profile, the body's model is replaced");
    let v1 = send("/openai/v1/chat/completions", Some(KEY), "azure-v1").await.unwrap();
    assert_eq!(v1.status(), 200);
    let embed = serde_json::json!({"model": "azure-embed", "input": "hello"});
    let v1_embed = env.http.post(format!("{url}/openai/v1/embeddings")).header("api-key", KEY).json(&embed);
    let v1_embed = v1_embed.send().await.unwrap();
    assert_eq!(v1_embed.status(), 200, "the v1 surface serves embeddings too");
    assert_eq!(env.sim.stats().served, 3);
    let keyless = send(classic, None, "ignored").await.unwrap();
    assert_eq!(keyless.status(), 401);
    let unknown = send("/openai/deployments/nope/chat/completions?api-version=1", Some(KEY), "gemini").await.unwrap();
    assert_eq!(unknown.status(), 404, "an unknown profile in the path is refused, not the body's model used");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_submission_through_an_azure_path_runs_on_the_profile_the_path_names() {
    let env = start_jobs(sim(), &format!("{}\n[jobs]\nworkers = 1\n", policy("api_key_file = \"{KEYFILE}\""))).await;
    let classic = "/openai/deployments/gemini/chat/completions?api-version=2024-10-21";
    let accepted = env.http.post(format!("{}{classic}", env.url)).header("api-key", KEY);
    let accepted = accepted.header("Prefer", "respond-async").json(&chat("ignored", 4, 8)).send().await.unwrap();
    assert_eq!(accepted.status(), 202, "the body's model is replaced before the job is checked");
    let accepted: serde_json::Value = accepted.json().await.unwrap();
    let id = accepted["job_id"].as_str().unwrap();
    let job = env.wait_for(KEY, id, std::time::Duration::from_secs(30), |j| j["status"] == "completed").await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(env.sim.stats().served, 1, "served by the path's profile (gemini)");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_deployment_with_only_tpm_is_held_to_the_derived_rpm() {
    let env = start(sim(), &policy("api_key_file = \"{KEYFILE}\"")).await;
    // tpm = 1000 derives 6 RPM, whose burst (3 s worth) lets one request through at once.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("azure", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("azure", 4, 8)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!((body["error"]["limiter"].as_str(), body["error"]["scope"].as_str()), (Some("rpm"), Some("deployment")));
    assert_eq!(body["error"]["gateway_decision"], "rejected_before_send");
    assert_eq!(env.sim.stats().served, 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_429_is_read_with_its_retry_after_ms_and_pauses_the_deployment() {
    let limits = sluice_sim::config::Limits { rpm: Some(1), ..sluice_sim::config::Limits::default() };
    let tight = flavored("gpt4o-east", Flavor::Azure).with_limits(limits);
    let sim = SimConfig { models: vec![flavored("gemini-flash", Flavor::Gemini), tight], ..SimConfig::default() };
    let env = start(sim, &policy("api_key_file = \"{KEYFILE}\"")).await;
    // The v1 deployment has no gateway limits: the sim's own RPM of 1 answers the second.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("azure-v1", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, body) = env.post("/v1/chat/completions", KEY, &chat("azure-v1", 4, 8)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["gateway_decision"], "admitted_then_provider_rejected", "{body}");
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(wait >= 1, "Azure's retry-after-ms is passed on as the wait: {wait}");
    assert!(env.sim.stats().rate_limited.total() >= 1);
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("azure-v1", 4, 8)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["gateway_decision"], "rejected_before_send", "the pause holds it back: {body}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_responses_go_to_the_resource_path_with_the_deployment_as_model() {
    let env = start(sim(), &policy("api_key_file = \"{KEYFILE}\"")).await;
    // The classic deployment is `gpt4o-east` serving `gpt-4o`: the simulator serves
    // Responses only at `/openai/responses?api-version=…` with `model` = the deployment.
    let mut ids = Vec::new();
    for profile in ["azure-responses", "azure-v1"] {
        let body = serde_json::json!({"model": profile, "input": "hello there", "max_output_tokens": 8});
        let (status, _, body) = env.post("/v1/responses", KEY, &body).await;
        assert_eq!(status, 200, "{profile}: {body}");
        assert_eq!(body["object"], "response", "{body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    // Reading one back goes to the same resource path (`/openai/responses/{id}?api-version=…`).
    let read =
        env.http.get(format!("{}/v1/responses/{}", env.gateway.url(), ids[0])).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(read.json::<serde_json::Value>().await.unwrap()["id"], ids[0].as_str());
    // The AzureOpenAI client's own Responses path reaches the profile its `model` names.
    let azure_client = env
        .http
        .post(format!("{}/openai/responses?api-version=2025-04-01-preview", env.gateway.url()))
        .header("api-key", KEY)
        .json(&serde_json::json!({"model": "azure-responses", "input": "hi", "max_output_tokens": 8}))
        .send()
        .await
        .unwrap();
    assert_eq!(azure_client.status(), 200);
    assert_eq!(env.sim.stats().served, 3, "every create reached the simulator's Azure Responses paths");
    env.shutdown().await;
}
