//! No side door: the OpenAI endpoints beyond chat, Responses and embeddings are served under
//! admission when the model profile lists them (legacy completions on tokens, moderations
//! as one request), refused with a 404 `endpoint_not_served` naming the path otherwise, and
//! any other path gets a structured 404.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::{KEY, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};

fn sim() -> SimConfig {
    let limits = Limits { rpm: Some(1_000), tpm: Some(1_000_000), ..Limits::default() };
    let model =
        ModelConfig { completion: Completion::Fixed { tokens: 9 }, ..ModelConfig::openai("gpt-x").with_limits(limits) };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

fn policy(passthrough: &str) -> String {
    format!(
        r#"
[[deployments]]
name = "sim-x"
provider = "sim"
model = "gpt-x"
limits = {{ rpm = 1000, tpm = 1000000 }}

[[models]]
name = "fast"
deployment = "sim-x"
{passthrough}

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{}"
"#,
        sha(KEY)
    )
}

fn counter(metrics: &str, name: &str) -> f64 {
    metrics.lines().filter(|l| l.starts_with(name)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_completions_are_admitted_on_tokens_and_settled_from_usage() {
    let env = start(sim(), &policy("")).await;
    let body = json!({"model": "fast", "prompt": "Say this is a test", "max_tokens": 40});
    let (status, _, answer) = env.post("/v1/completions", KEY, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "text_completion");
    assert_eq!(answer["model"], "gpt-x", "sent as the deployment's model");
    assert_eq!(answer["usage"]["completion_tokens"], 9);
    let metrics = env.metrics().await;
    let prompt = answer["usage"]["prompt_tokens"].as_f64().unwrap();
    // Reserved: the prompt estimate and 40 for output; settled to the usage.
    assert!(counter(&metrics, "sluice_tokens_reserved_total") >= 40.0, "{metrics}");
    assert_eq!(counter(&metrics, "sluice_tokens_used_total"), prompt + 9.0);
    let (status, _, refused) = env.post("/v1/completions", KEY, &json!({"model": "fast", "prompt": 7})).await;
    assert_eq!((status, &refused["error"]["param"]), (400, &json!("prompt")), "{refused}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlisted_endpoints_are_refused_by_path_and_listed_ones_served_as_requests() {
    let env = start(sim(), &policy("")).await;
    let (status, _, moderated) = env.post("/v1/moderations", KEY, &json!({"model": "fast", "input": "hi"})).await;
    assert_eq!(status, 200, "{moderated}");
    assert_eq!(moderated["model"], "gpt-x");
    let (status, _, refused) = env.post("/v1/images/generations", KEY, &json!({"model": "fast", "prompt": "a"})).await;
    assert_eq!(status, 404, "{refused}");
    assert_eq!(refused["error"]["code"], "endpoint_not_served");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("/v1/images/generations") && message.contains("\"images\""), "{message}");
    let (status, _, refused) = env.post("/v1/assistants", KEY, &json!({"model": "fast"})).await;
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("endpoint_not_served")));
    let (status, _, unknown) = env.post("/v1/nothing-here", KEY, &json!({})).await;
    assert_eq!((status, &unknown["error"]["code"]), (404, &json!("unknown_route")), "{unknown}");
    let (status, _, anonymous) = env.post("/v1/images/generations", "sk-wrong", &json!({"model": "fast"})).await;
    assert_eq!(status, 401, "{anonymous}");
    assert_eq!(env.sim.stats().requests, 0, "no generation reached the provider");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_without_completions_refuses_them_and_one_with_images_passes_them_on() {
    let env = start(sim(), &policy("passthrough = [\"images\"]")).await;
    let body = json!({"model": "fast", "prompt": "hi"});
    let (status, _, refused) = env.post("/v1/completions", KEY, &body).await;
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("endpoint_not_served")), "{refused}");
    let (status, _, refused) = env.post("/v1/moderations", KEY, &json!({"model": "fast", "input": "x"})).await;
    assert_eq!(status, 404, "{refused}");
    // Listed: sent to the deployment (the simulated provider has no images: its own 404).
    let (status, _, passed) = env.post("/v1/images/generations", KEY, &json!({"model": "fast", "prompt": "a"})).await;
    assert_eq!(status, 404);
    assert_ne!(passed["error"]["code"], json!("endpoint_not_served"), "{passed}");
    let metrics = env.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sluice_requests_total") && l.contains("status=\"404\"") && l.contains("gpt-x")),
        "{metrics}"
    );
    env.shutdown().await;
}

const OTHER_KEY: &str = "sk-test-other-tenant";

/// The policy with `passthrough` and a second tenant, `globex` ([`OTHER_KEY`]).
fn two_tenants(passthrough: &str) -> String {
    let other = format!(
        "\n[[tenants]]\nname = \"globex\"\n\n[[keys]]\nid = \"globex-key\"\ntenant = \"globex\"\nsha256 = \"{}\"\n",
        sha(OTHER_KEY)
    );
    policy(passthrough) + &other
}

/// `method` on `path` with `key`, naming profile `fast` in the header: status and JSON body.
async fn call(env: &common::Env, method: reqwest::Method, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("{}{path}", env.gateway.url());
    let mut request = env.http.request(method, url).bearer_auth(key).header("x-sluice-model", "fast");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_conversations_are_its_own_and_shared_lists_are_refused() {
    use reqwest::Method;
    let env = start(sim(), &two_tenants("passthrough = [\"conversations\", \"vector_stores\"]")).await;
    let items = json!({"items": [{"type": "message", "role": "user", "content": "my secret plan"}]});
    let (status, created) = call(&env, Method::POST, "/v1/conversations", KEY, Some(items)).await;
    assert_eq!((status, &created["object"]), (200, &json!("conversation")), "{created}");
    let id = created["id"].as_str().unwrap();
    let path = format!("/v1/conversations/{id}/items");
    let (status, listed) = call(&env, Method::GET, &path, KEY, None).await;
    assert_eq!((status, &listed["data"][0]["role"]), (200, &json!("user")), "{listed}");
    // globex reads, deletes or continues acme's conversation: answered as a missing one.
    let missing = call(&env, Method::GET, "/v1/conversations/conv_nope/items", OTHER_KEY, None).await;
    assert_eq!((missing.0, &missing.1["error"]["code"]), (404, &json!("conversation_not_found")), "{missing:?}");
    for (method, path) in [(Method::GET, path.clone()), (Method::DELETE, format!("/v1/conversations/{id}"))] {
        let (status, theirs) = call(&env, method, &path, OTHER_KEY, None).await;
        assert_eq!((status, &theirs["error"]["code"]), (404, &json!("conversation_not_found")), "{theirs}");
        assert_eq!(theirs["error"]["message"], missing.1["error"]["message"]);
    }
    let requests = env.sim.stats().requests;
    let turn = json!({"model": "fast", "input": "and then?", "conversation": id, "max_output_tokens": 20});
    let (status, _, theirs) = env.post("/v1/responses", OTHER_KEY, &turn).await;
    assert_eq!((status, &theirs["error"]["code"]), (404, &json!("conversation_not_found")), "{theirs}");
    assert_eq!(env.sim.stats().requests, requests, "nothing was sent upstream");
    let ours = json!({"model": "fast", "input": "and then?", "conversation": {"id": id}, "max_output_tokens": 20});
    let (status, _, ours) = env.post("/v1/responses", KEY, &ours).await;
    assert_eq!(status, 200, "{ours}");
    // Listing every tenant's vector stores is refused, before any upstream call; an id
    // the tenant never created is missing.
    let (status, refused) = call(&env, Method::GET, "/v1/vector_stores", OTHER_KEY, None).await;
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("endpoint_not_served")), "{refused}");
    let (status, unknown) = call(&env, Method::GET, "/v1/vector_stores/vs_abc", OTHER_KEY, None).await;
    assert_eq!((status, &unknown["error"]["code"]), (404, &json!("object_not_found")), "{unknown}");
    // Nor may a response search a vector store the tenant never created.
    let search = json!({"model": "fast", "input": "find it", "tools": [{"type": "file_search", "vector_store_ids": ["vs_abc"]}]});
    let requests = env.sim.stats().requests;
    let (status, _, refused) = env.post("/v1/responses", OTHER_KEY, &search).await;
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("object_not_found")), "{refused}");
    let many: Vec<String> = (0..17).map(|i| format!("vs_{i}")).collect();
    let search = json!({"model": "fast", "input": "x", "tools": [{"type": "file_search", "vector_store_ids": many}]});
    let (status, _, refused) = env.post("/v1/responses", OTHER_KEY, &search).await;
    assert_eq!((status, &refused["error"]["param"]), (400, &json!("tools")), "{refused}");
    assert_eq!(env.sim.stats().requests, requests, "nothing was sent upstream");
    // acme's conversation survived globex's delete; acme's own delete forgets it.
    let (status, _) = call(&env, Method::GET, &path, KEY, None).await;
    assert_eq!(status, 200);
    let (status, deleted) = call(&env, Method::DELETE, &format!("/v1/conversations/{id}"), KEY, None).await;
    assert_eq!((status, &deleted["deleted"]), (200, &json!(true)), "{deleted}");
    let (status, gone) = call(&env, Method::GET, &path, KEY, None).await;
    assert_eq!((status, &gone["error"]["code"]), (404, &json!("conversation_not_found")), "{gone}");
    env.shutdown().await;
}
