//! The cloud URL surfaces over real HTTP: Gemini's OpenAI-compatible path, Azure OpenAI's
//! classic deployment path (with `api-version`) and v1 path, Azure's `api-key` check.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::*;
use serde_json::Value;

const CONFIG: &str = r#"seed = 5
[[models]]
name = "gemini-flash"
flavor = "gemini"
completion = { dist = "fixed", tokens = 4 }
[[models]]
name = "gpt4o-east"
flavor = "azure"
completion = { dist = "fixed", tokens = 4 }
limits = { tpm = 100000 }
[[models]]
name = "embed-east"
flavor = "azure"
embedding_dims = 4
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 4 }
"#;

async fn send(
    sim: &sluice_sim::server::SimHandle,
    path: &str,
    key: Option<(&str, &str)>,
    body: &Value,
) -> reqwest::Response {
    let mut request = client().post(format!("{}{path}", sim.url())).json(body);
    if let Some((name, value)) = key {
        request = request.header(name, value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn gemini_is_served_at_its_openai_compatible_path_only_for_gemini_models() {
    let sim = start(CONFIG).await;
    let ok = send(&sim, "/v1beta/openai/chat/completions", None, &chat("gemini-flash", "hi", 5)).await;
    assert_eq!(ok.status(), 200);
    let body: Value = ok.json().await.unwrap();
    assert_eq!(body["usage"]["completion_tokens"], 4);
    let doubled = send(&sim, "/v1beta/openai/v1/chat/completions", None, &chat("gemini-flash", "hi", 5)).await;
    assert_eq!(doubled.status(), 404, "the path generic clients build by appending /v1 does not exist");
    let plain = send(&sim, "/v1/chat/completions", None, &chat("gemini-flash", "hi", 5)).await;
    assert_eq!(plain.status(), 404, "nor does OpenAI's own path");
    let other = send(&sim, "/v1beta/openai/chat/completions", None, &chat("gpt-4o-mini", "hi", 5)).await;
    assert_eq!(other.status(), 404);
}

#[tokio::test]
async fn azure_classic_path_names_the_deployment_and_needs_api_version_and_key() {
    let sim = start(CONFIG).await;
    let path = "/openai/deployments/gpt4o-east/chat/completions?api-version=2024-10-21";
    let body = chat("ignored-by-azure", "hi", 5);
    let ok = send(&sim, path, Some(("api-key", "k")), &body).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(header(&ok, "x-ratelimit-limit-requests"), "600", "RPM derived from TPM, 6 per 1,000");
    assert!(ok.headers().contains_key("x-ratelimit-remaining-tokens"));
    assert_eq!(header(&ok, "apim-request-id"), header(&ok, "x-request-id"), "Azure's request id header");
    assert!(ok.headers().contains_key("x-ms-region"));
    let denied = send(&sim, path, None, &body).await;
    assert_eq!(denied.status(), 401);
    let error: Value = denied.json().await.unwrap();
    assert_eq!(error["error"]["code"], "401");
    assert!(error["error"]["message"].as_str().unwrap().contains("invalid subscription key"));
    let bearer = send(&sim, path, Some(("authorization", "Bearer entra-token")), &body).await;
    assert_eq!(bearer.status(), 200, "an Entra ID token is accepted in place of the key");
    let misplaced = send(&sim, path, Some(("api-key", "Bearer entra-token")), &body).await;
    assert_eq!(misplaced.status(), 401, "a Bearer token in api-key is no key");
    let unversioned = "/openai/deployments/gpt4o-east/chat/completions";
    assert_eq!(send(&sim, unversioned, Some(("api-key", "k")), &body).await.status(), 400);
    let plain = "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21";
    assert_eq!(send(&sim, plain, Some(("api-key", "k")), &body).await.status(), 404, "not an Azure model");
}

#[tokio::test]
async fn azure_v1_path_takes_the_deployment_from_the_body() {
    let sim = start(CONFIG).await;
    let ok = send(&sim, "/openai/v1/chat/completions", Some(("api-key", "k")), &chat("gpt4o-east", "hi", 5)).await;
    assert_eq!(ok.status(), 200);
    let denied = send(&sim, "/openai/v1/chat/completions", Some(("api-key", " ")), &chat("gpt4o-east", "hi", 5)).await;
    assert_eq!(denied.status(), 401, "an empty key is no key");
}

#[tokio::test]
async fn azure_embeddings_on_both_surfaces() {
    let sim = start(CONFIG).await;
    let body = serde_json::json!({"model": "ignored", "input": "hello"});
    let path = "/openai/deployments/embed-east/embeddings?api-version=2024-10-21";
    let classic = send(&sim, path, Some(("api-key", "k")), &body).await;
    assert_eq!(classic.status(), 200);
    let vectors: Value = classic.json().await.unwrap();
    assert_eq!(vectors["data"][0]["embedding"].as_array().unwrap().len(), 4);
    let v1_body = serde_json::json!({"model": "embed-east", "input": "hello"});
    assert_eq!(send(&sim, "/openai/v1/embeddings", Some(("api-key", "k")), &v1_body).await.status(), 200);
    assert_eq!(send(&sim, path, None, &body).await.status(), 401);
}

#[tokio::test]
async fn azure_responses_live_outside_the_deployment_path_with_the_deployment_as_model() {
    let sim = start(CONFIG).await;
    let key = Some(("api-key", "k"));
    let body = serde_json::json!({"model": "gpt4o-east", "input": "hi", "max_output_tokens": 5});
    let classic = send(&sim, "/openai/responses?api-version=2025-04-01-preview", key, &body).await;
    assert_eq!(classic.status(), 200);
    let created: Value = classic.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let v1 = send(&sim, "/openai/v1/responses", key, &body).await;
    assert_eq!(v1.status(), 200);
    let deployment_path = "/openai/deployments/gpt4o-east/responses?api-version=2025-04-01-preview";
    assert_eq!(send(&sim, deployment_path, key, &body).await.status(), 404, "no Responses under a deployment");
    let model_name = serde_json::json!({"model": "gpt-4o", "input": "hi"});
    let named = send(&sim, "/openai/responses?api-version=2025-04-01-preview", key, &model_name).await;
    assert_eq!(named.status(), 404, "`model` names a deployment, not a model");
    assert_eq!(send(&sim, "/openai/responses", key, &body).await.status(), 400, "api-version required");
    assert_eq!(send(&sim, "/openai/responses?api-version=1", None, &body).await.status(), 401);
    let get = |path: String| client().get(format!("{}{path}", sim.url())).header("api-key", "k").send();
    let read = get(format!("/openai/responses/{id}?api-version=2025-04-01-preview")).await.unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(read.json::<Value>().await.unwrap()["id"], id.as_str());
    assert_eq!(get(format!("/openai/v1/responses/{id}")).await.unwrap().status(), 200);
    assert_eq!(get(format!("/openai/v1/responses/{id}/input_items")).await.unwrap().status(), 200);
    let deleted = client()
        .delete(format!("{}/openai/responses/{id}?api-version=2025-04-01-preview", sim.url()))
        .header("api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(get(format!("/openai/v1/responses/{id}")).await.unwrap().status(), 404);
}

const GEMINI: &str = r#"seed = 5
[[models]]
name = "gemini-3-flash-preview"
flavor = "gemini"
completion = { dist = "fixed", tokens = 4 }
[[models]]
name = "gemini-2.5-pro"
flavor = "gemini"
completion = { dist = "fixed", tokens = 4 }
[google]
api_keys = ["AIza-k"]
"#;

async fn generate(sim: &sluice_sim::server::SimHandle, model: &str, body: &Value) -> (u16, Value) {
    let url = format!("{}/v1beta/models/{model}:generateContent", sim.url());
    let response = client().post(url).header("x-goog-api-key", "AIza-k").json(body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn gemini_thinking_models_sign_their_calls_and_want_the_signature_back() {
    let sim = start(GEMINI).await;
    let tools = serde_json::json!([{"functionDeclarations": [{"name": "weather"}]}]);
    let ask =
        serde_json::json!({"contents": [{"role": "user", "parts": [{"text": "call-tool:weather"}]}], "tools": tools});
    let (status, answer) = generate(&sim, "gemini-3-flash-preview", &ask).await;
    assert_eq!(status, 200, "{answer}");
    let part = answer["candidates"][0]["content"]["parts"][0].clone();
    assert!(part["functionCall"].is_object() && part["thoughtSignature"].is_string(), "{answer}");
    assert!(answer["usageMetadata"]["thoughtsTokenCount"].as_u64().unwrap() > 0, "{answer}");
    let replay = |model_part: Value| {
        serde_json::json!({"tools": tools, "contents": [
            ask["contents"][0],
            {"role": "model", "parts": [model_part]},
            {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": 3}}}]}]})
    };
    let (status, body) = generate(&sim, "gemini-3-flash-preview", &replay(part.clone())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sim.thought_signatures_verified(), 1);
    let mut unsigned = part.clone();
    unsigned.as_object_mut().unwrap().remove("thoughtSignature");
    let (status, body) = generate(&sim, "gemini-3-flash-preview", &replay(unsigned)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
    assert!(body["error"]["message"].as_str().unwrap().contains("missing a thought_signature"), "{body}");
    let mut altered = part;
    altered["functionCall"]["args"] = serde_json::json!({"city": "elsewhere"});
    let (status, body) = generate(&sim, "gemini-3-flash-preview", &replay(altered)).await;
    assert_eq!((status, body["error"]["message"].as_str()), (400, Some("Corrupted thought signature.")));
    let off =
        serde_json::json!({"contents": ask["contents"], "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}});
    let (status, body) = generate(&sim, "gemini-2.5-pro", &off).await;
    assert_eq!(status, 400, "2.5 Pro cannot turn thinking off: {body}");
}
