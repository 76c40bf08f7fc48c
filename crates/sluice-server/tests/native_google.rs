//! Google's client shapes at sluice's edge, over HTTP, in front of an OpenAI deployment of
//! the simulated provider: a Gemini `generateContent` body is served by any deployment and
//! answered in Gemini's shapes (JSON, `alt=sse` events, an unframed JSON array, the token
//! count), and every refusal comes in Google's error object with sluice's meaning kept: a
//! body it cannot serve is a 400 `INVALID_ARGUMENT` naming the field, an unknown profile a
//! 404 `NOT_FOUND`, a missing or wrong key a 401 `UNAUTHENTICATED`. Vertex's Claude paths
//! take an Anthropic body without `model`.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::config::{ModelConfig, SimConfig};

async fn start_env() -> Env {
    let sim = SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() };
    start(sim, &one_deployment("")).await
}

/// Posts `body` to `path` with `key` (if any) in `x-goog-api-key`: status, content type, body text.
async fn google(env: &Env, path: &str, key: Option<&str>, body: &str) -> (u16, String, String) {
    let mut request = env.http.post(format!("{}{path}", env.gateway.url())).body(body.to_owned());
    if let Some(key) = key {
        request = request.header("x-goog-api-key", key);
    }
    let response = request.header("content-type", "application/json").send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

fn error_of(text: &str) -> Value {
    let value: Value = serde_json::from_str(text).expect(text);
    value["error"].clone()
}

fn violation(error: &Value) -> Option<String> {
    let details = error["details"].as_array()?;
    let bad = details.iter().find(|d| d["@type"] == "type.googleapis.com/google.rpc.BadRequest")?;
    bad["fieldViolations"][0]["field"].as_str().map(str::to_owned)
}

const HI: &str =
    r#"{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}],"generationConfig":{"maxOutputTokens":16}}"#;

#[tokio::test]
async fn gemini_bodies_are_served_by_an_openai_deployment_in_geminis_shapes() {
    let env = start_env().await;
    let (status, kind, text) = google(&env, "/v1beta/models/fast:generateContent", Some(KEY), HI).await;
    assert_eq!(status, 200, "{text}");
    assert!(kind.starts_with("application/json"), "{kind}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    let candidate = &answer["candidates"][0];
    assert_eq!(candidate["content"]["role"], "model");
    assert!(!candidate["content"]["parts"][0]["text"].as_str().unwrap().is_empty());
    assert!(matches!(candidate["finishReason"].as_str(), Some("STOP" | "MAX_TOKENS")), "{answer}");
    let usage = &answer["usageMetadata"];
    assert_eq!(
        usage["totalTokenCount"].as_u64().unwrap(),
        usage["promptTokenCount"].as_u64().unwrap() + usage["candidatesTokenCount"].as_u64().unwrap()
    );

    let (status, kind, text) = google(&env, "/v1/models/fast:streamGenerateContent?alt=sse", Some(KEY), HI).await;
    assert_eq!((status, kind.as_str()), (200, "text/event-stream"), "{text}");
    let events: Vec<Value> = text
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(events.len() >= 2, "{text}");
    let last = events.last().unwrap();
    assert!(
        last["candidates"][0]["finishReason"].is_string()
            && last["usageMetadata"]["candidatesTokenCount"].as_u64() > Some(0)
    );

    // Without `alt=sse`, one JSON array; the key may come as `?key=`.
    let path = format!("/v1beta/models/fast:streamGenerateContent?key={KEY}");
    let (status, _, text) = google(&env, &path, None, HI).await;
    assert_eq!(status, 200, "{text}");
    let array: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(array.last().unwrap()["usageMetadata"], last["usageMetadata"]);

    let (status, _, text) = google(&env, "/v1beta/models/fast:countTokens", Some(KEY), HI).await;
    assert_eq!(status, 200, "{text}");
    let counted: Value = serde_json::from_str(&text).unwrap();
    assert!(counted["totalTokens"].as_u64() > Some(0), "{counted}");
    let wrapped = format!(r#"{{"generateContentRequest":{HI}}}"#);
    let (_, _, text) = google(&env, "/v1beta/models/fast:countTokens", Some(KEY), &wrapped).await;
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), counted, "both shapes of the count body");
    env.shutdown().await;
}

#[tokio::test]
async fn refusals_come_in_googles_error_shape_with_sluices_meaning() {
    let env = start_env().await;
    let cases = [
        (r#"{"contents":"hi"}"#, "contents"),
        ("not json", "body"),
        (
            r#"{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":2}}"#,
            "generationConfig.candidateCount",
        ),
        (
            r#"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}"#,
            "contents[0].parts[0].functionResponse.name",
        ),
        (r#"{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"codeExecution":{}}]}"#, "tools[0].codeExecution"),
    ];
    for (body, field) in cases {
        let (status, _, text) = google(&env, "/v1beta/models/fast:generateContent", Some(KEY), body).await;
        assert_eq!(status, 400, "{body}: {text}");
        let error = error_of(&text);
        assert_eq!((error["code"].as_u64(), error["status"].as_str()), (Some(400), Some("INVALID_ARGUMENT")), "{text}");
        assert_eq!(violation(&error).as_deref(), Some(field), "{text}");
        assert!(error["message"].as_str().unwrap().contains(field), "{text}");
    }

    let (status, _, text) = google(&env, "/v1beta/models/no-such-profile:generateContent", Some(KEY), HI).await;
    let error = error_of(&text);
    assert_eq!((status, error["status"].as_str()), (404, Some("NOT_FOUND")), "{text}");
    assert!(error["message"].as_str().unwrap().contains("no-such-profile"), "{text}");
    let reason = error["details"][0]["reason"].as_str();
    assert_eq!(reason, Some("model_not_found"), "sluice's own code, as the ErrorInfo reason: {text}");

    let (status, _, text) = google(&env, "/v1beta/models/fast:embedContent", Some(KEY), HI).await;
    assert_eq!((status, error_of(&text)["status"].as_str()), (404, Some("NOT_FOUND")), "{text}");

    for key in [None, Some("sk-wrong")] {
        let (status, _, text) = google(&env, "/v1beta/models/fast:generateContent", key, HI).await;
        let error = error_of(&text);
        assert_eq!((status, error["status"].as_str()), (401, Some("UNAUTHENTICATED")), "{key:?}: {text}");
        assert!(!text.contains("sk-provider-planted-secret"));
    }
    // A missing key is refused before the body is read: a bad body without a key is a 401.
    let (status, _, _) = google(&env, "/v1beta/models/fast:generateContent", None, "not json").await;
    assert_eq!(status, 401);
    // Refusals at the edge are counted as the road counts those refused before routing.
    let metrics = env.metrics().await;
    let refused = |status: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with("llm_requests_total") && l.contains(&format!("status=\"{status}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!((refused("400"), refused("401")), (5.0, 3.0), "{metrics}");
    env.shutdown().await;
}

#[tokio::test]
async fn vertex_claude_paths_take_an_anthropic_body_without_its_model() {
    let env = start_env().await;
    let body = json!({"anthropic_version": "vertex-2023-10-16", "max_tokens": 16,
        "messages": [{"role": "user", "content": "Say hi"}]});
    let url = format!(
        "{}/v1/projects/acme/locations/us-east5/publishers/anthropic/models/fast:rawPredict",
        env.gateway.url()
    );
    let response = env.http.post(&url).bearer_auth(KEY).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!((answer["type"].as_str(), answer["role"].as_str()), (Some("message"), Some("assistant")), "{answer}");
    assert!(answer["usage"]["output_tokens"].as_u64() > Some(0));

    let stream_url = url.replace(":rawPredict", ":streamRawPredict");
    let response = env.http.post(&stream_url).bearer_auth(KEY).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("event: message_start") && text.contains("event: message_stop"), "{text}");

    let response = env.http.post(&url).bearer_auth("sk-wrong").json(&body).send().await.unwrap();
    assert_eq!(response.status(), 401);
    env.shutdown().await;
}
