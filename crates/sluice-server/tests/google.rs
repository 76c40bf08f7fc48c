//! Google's quota domains through the gateway over HTTP against the simulated provider:
//! the Gemini API's native `generateContent` surface (`x-goog-api-key`), and Vertex AI for
//! Gemini and for Claude with OAuth tokens minted from a service-account key that the
//! simulator's token endpoint checks against the account's public key. Thinking models:
//! `reasoning_effort` reaches `thinkingConfig`, and thought signatures go back to Gemini
//! on the parts they came with (the simulator verifies them).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use sluice_quota::SystemClock;
use sluice_server::Running;
use sluice_sim::config::{Flavor, Limits, ModelConfig, SimConfig};
use sluice_sim::google::auth::{GoogleConfig, ServiceAccount};

const ACCOUNT: &str = "sluice@acme-ai.iam.gserviceaccount.com";
/// The Gemini key the harness's key file holds.
const GEMINI_KEY: &str = "sk-provider-planted-secret-0000";

/// A fresh RSA key pair (PKCS#8 private key file, PKCS#1 public key PEM), made with openssl.
fn key_pair(dir: &Path, name: &str) -> (String, String) {
    let private = dir.join(format!("{name}-key.pem"));
    let public = dir.join(format!("{name}-pub.pem"));
    let run = |args: &[&str]| {
        let status = Command::new("openssl").args(args).output().expect("openssl runs");
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    };
    let private_path = private.to_str().unwrap();
    run(&["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", private_path]);
    run(&["rsa", "-in", private_path, "-RSAPublicKey_out", "-out", public.to_str().unwrap()]);
    (std::fs::read_to_string(private).unwrap(), std::fs::read_to_string(public).unwrap())
}

/// A service-account key file whose `token_uri` is the simulator's.
fn key_file(dir: &Path, private_pem: &str, token_uri: &str) -> String {
    let file = json!({
        "type": "service_account", "project_id": "acme-ai", "private_key_id": "k1",
        "private_key": private_pem, "client_email": ACCOUNT, "token_uri": token_uri,
    });
    let path = dir.join("sa.json");
    std::fs::write(&path, file.to_string()).unwrap();
    path.display().to_string()
}

/// What the simulator's `[google]` section varies between tests.
#[derive(Default, Clone, Copy)]
struct Quirks {
    /// The simulator knows another key pair's public key: assertions do not verify.
    foreign: bool,
    /// Life of the tokens it issues.
    token_ttl_secs: Option<u64>,
    /// Requests per minute of the Vertex project and region, shared by its models.
    vertex_rpm: Option<u64>,
}

fn sim(public_pem: &str, api_keys: &[&str], gemini_limits: Limits, quirks: Quirks) -> SimConfig {
    let gemini =
        ModelConfig { flavor: Some(Flavor::Gemini), limits: gemini_limits, ..ModelConfig::openai("gemini-flash") };
    let google = GoogleConfig {
        api_keys: api_keys.iter().map(|k| (*k).to_owned()).collect(),
        service_accounts: vec![ServiceAccount { client_email: ACCOUNT.into(), public_key_pem: public_pem.into() }],
        token_ttl_secs: quirks.token_ttl_secs,
        vertex_rpm: quirks.vertex_rpm,
    };
    let thinking = |name: &str| ModelConfig { flavor: Some(Flavor::Gemini), ..ModelConfig::openai(name) };
    let models = vec![
        gemini,
        ModelConfig::anthropic("claude-sonnet-4-5"),
        thinking("gemini-3-flash-preview"),
        thinking("gemini-2.5-flash"),
        thinking("gemini-2.5-pro"),
    ];
    SimConfig { seed: Some(3), models, google, ..SimConfig::default() }
}

fn policy(service_account: &str) -> String {
    format!(
        r#"
[[providers]]
name = "gemini"
kind = "gemini"
api_surface = "native"
base_url = "{{SIM}}"
api_key_file = "{{KEYFILE}}"

[[providers]]
name = "vertex"
kind = "vertex"
project = "acme-ai"
region = "us-east5"
base_url = "{{SIM}}"
service_account_file = "{service_account}"

[[providers]]
name = "vertex-claude"
kind = "vertex"
publisher = "anthropic"
project = "acme-ai"
region = "us-east5"
base_url = "{{SIM}}"
service_account_file = "{service_account}"

[[deployments]]
name = "gemini-native"
provider = "gemini"
model = "gemini-flash"

[[deployments]]
name = "vertex-gemini"
provider = "vertex"
model = "gemini-flash"

[[deployments]]
name = "vertex-claude"
provider = "vertex-claude"
model = "claude-sonnet-4-5"

[[deployments]]
name = "gemini3"
provider = "gemini"
model = "gemini-3-flash-preview"

[[deployments]]
name = "vertex-gemini3"
provider = "vertex"
model = "gemini-3-flash-preview"

[[deployments]]
name = "gemini25"
provider = "gemini"
model = "gemini-2.5-flash"

[[deployments]]
name = "gemini25-pro"
provider = "gemini"
model = "gemini-2.5-pro"

[[models]]
name = "gemini"
deployment = "gemini-native"

[[models]]
name = "gemini3"
deployment = "gemini3"

[[models]]
name = "vertex-gemini3"
deployment = "vertex-gemini3"

[[models]]
name = "gemini25"
deployment = "gemini25"

[[models]]
name = "gemini25-pro"
deployment = "gemini25-pro"

[[models]]
name = "vertex-gemini"
deployment = "vertex-gemini"

[[models]]
name = "claude"
deployment = "vertex-claude"

[[tenants]]
name = "acme"

[[classes]]
name = "patient"
max_wait = "1m"
retry_attempts = 2
retry_within = "30s"

[[keys]]
id = "acme"
tenant = "acme"
class = "patient"
sha256 = "{sha}"
"#,
        sha = sha(KEY)
    )
}

struct Google {
    env: Env,
    _dir: tempfile::TempDir,
}

/// The simulator (knowing the account's public key, accepting `api_keys`), then a gateway
/// whose Vertex providers hold a key file pointing at the simulator's token endpoint.
async fn start_google(api_keys: &[&str], gemini_limits: Limits, sim_time_scale: f64) -> Google {
    start_signed(api_keys, gemini_limits, sim_time_scale, Quirks::default()).await
}

/// [`start_google`] with the simulator's [`Quirks`].
async fn start_signed(api_keys: &[&str], gemini_limits: Limits, sim_time_scale: f64, quirks: Quirks) -> Google {
    let dir = tempfile::tempdir().unwrap();
    let (private_pem, mut public_pem) = key_pair(dir.path(), "account");
    if quirks.foreign {
        public_pem = key_pair(dir.path(), "foreign").1;
    }
    let config = SimConfig { time_scale: sim_time_scale, ..sim(&public_pem, api_keys, gemini_limits, quirks) };
    let sim = sluice_sim::SimProvider::start(config).await.unwrap();
    let account = key_file(dir.path(), &private_pem, &format!("{}/token", sim.url()));
    let config = common::config(&sim, "", &policy(&account));
    let store = sluice_redis::choose::from_config(&config.store, Arc::new(SystemClock::new()), None);
    let gateway = Running::start(&config, store, "127.0.0.1:0".parse().unwrap()).await.unwrap();
    Google { env: Env { sim, gateway, http: reqwest::Client::new() }, _dir: dir }
}

async fn stream_text(env: &Env, path: &str, body: &Value) -> (u16, String) {
    let url = format!("{}{path}", env.gateway.url());
    let response = env.http.post(url).bearer_auth(KEY).header("x-api-key", KEY).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn streamed(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

fn messages(model: &str) -> Value {
    json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hello there"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_native_answers_openai_and_anthropic_clients_plain_and_streamed() {
    let google = start_google(&[GEMINI_KEY], Limits::default(), 1.0).await;
    let env = &google.env;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("gemini", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "gemini");
    assert!(!body["choices"][0]["message"]["content"].as_str().unwrap().is_empty(), "{body}");
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "usageMetadata read: {body}");
    let (status, text) = stream_text(env, "/v1/chat/completions", &streamed(chat("gemini", 4, 8))).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("chat.completion.chunk") && text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(!text.contains("\"usage\""), "usage not asked for, not shown: {text}");
    let (status, _, body) = env.post("/v1/messages", KEY, &messages("gemini")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["type"], "message", "an Anthropic client crosses to Gemini: {body}");
    let (status, text) = stream_text(env, "/v1/messages", &streamed(messages("gemini"))).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    assert_eq!(env.sim.stats().served, 4, "all four reached the native route (which checks x-goog-api-key)");
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_serves_gemini_and_claude_with_one_minted_token() {
    let google = start_google(&[GEMINI_KEY], Limits::default(), 1.0).await;
    let env = &google.env;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("vertex-gemini", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    let (status, text) = stream_text(env, "/v1/chat/completions", &streamed(chat("vertex-gemini", 4, 8))).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let (status, _, body) = env.post("/v1/messages", KEY, &messages("claude")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["type"], "message");
    let (status, text) = stream_text(env, "/v1/messages", &streamed(messages("claude"))).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("claude", 4, 8)).await;
    assert_eq!(status, 200, "an OpenAI client reaches Claude on Vertex: {body}");
    assert_eq!(env.sim.stats().served, 5);
    // Each deployment minted once and reused its token (the sim verified every assertion).
    assert_eq!(env.sim.google_tokens_issued(), 2, "one token per Vertex deployment, cached");
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_gemini_key_or_service_account_is_the_gateways_502() {
    let google = start_google(&["AIza-another-key"], Limits::default(), 1.0).await;
    let env = &google.env;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("gemini", 4, 8)).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_auth_failed", "{body}");
    assert!(!body.to_string().contains(GEMINI_KEY), "{body}");
    google.env.shutdown().await;

    // A simulator that knows another key pair: the assertion's signature does not verify.
    let google =
        start_signed(&[GEMINI_KEY], Limits::default(), 1.0, Quirks { foreign: true, ..Quirks::default() }).await;
    let env = &google.env;
    let (status, _, body) = env.post("/v1/messages", KEY, &messages("claude")).await;
    assert_eq!(status, 502, "{body}");
    assert!(body.to_string().contains("upstream_auth_failed"), "{body}");
    assert_eq!(env.sim.stats().served, 0);
    assert_eq!(env.sim.google_tokens_issued(), 0);
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_exhausted_is_retried_after_its_retry_info_delay() {
    // One request per simulated minute, a simulated minute every ten real seconds (room
    // for a slow machine between the two calls): the second request meets
    // RESOURCE_EXHAUSTED with a RetryInfo of up to ten seconds, inside the retry window.
    let limits = Limits { rpm: Some(1), ..Limits::default() };
    let google = start_google(&[GEMINI_KEY], limits, 6.0).await;
    let env = &google.env;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("gemini", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("gemini", 4, 8)).await;
    assert_eq!(status, 200, "retried once the hint had passed: {body}");
    let stats = env.sim.stats();
    assert_eq!(stats.served, 2);
    assert_eq!(stats.rate_limited.total(), 1, "the retry waited out the hint: no second 429");
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_within_the_refresh_margin_is_minted_again_before_use() {
    // Tokens that live 200 s are always within the 300 s margin: every call mints anew.
    let google =
        start_signed(&[GEMINI_KEY], Limits::default(), 1.0, Quirks { token_ttl_secs: Some(200), ..Quirks::default() })
            .await;
    let env = &google.env;
    for round in 1..=3 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("vertex-gemini", 4, 8)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(env.sim.google_tokens_issued(), round, "a token this close to expiry is replaced");
    }
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vertex_project_quota_is_shared_by_its_models() {
    // One request a minute for the project and region, whichever model: Claude's first call
    // meets the RESOURCE_EXHAUSTED that Gemini's call left. Its RetryInfo (about a minute)
    // is past the class's retry window, so the client gets the provider's 429.
    let quirks = Quirks { vertex_rpm: Some(1), ..Quirks::default() };
    let google = start_signed(&[GEMINI_KEY], Limits::default(), 1.0, quirks).await;
    let env = &google.env;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("vertex-gemini", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, body) = env.post("/v1/messages", KEY, &messages("claude")).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.to_string().contains("admitted_then_provider_rejected"), "{body}");
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(wait >= 20, "the RetryInfo is the client's Retry-After: {wait}");
    assert_eq!(env.sim.stats().served, 1);
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_tool_calls_round_trip_through_gemini_function_calls() {
    let google = start_google(&[GEMINI_KEY], Limits::default(), 1.0).await;
    let env = &google.env;
    let tools = json!([{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]);
    let ask = json!({"model": "gemini", "max_tokens": 32, "tools": tools,
        "messages": [{"role": "user", "content": "call-tool:weather in Oslo"}]});
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &ask).await;
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "weather");
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(arguments.is_object(), "{body}");
    // The tool's result goes back as a functionResponse; the model answers in text.
    let answer = json!({"model": "gemini", "max_tokens": 32, "tools": tools, "messages": [
        {"role": "user", "content": "call-tool:weather in Oslo"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "{\"temp\": 3}"},
        {"role": "user", "content": "and so?"}
    ]});
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &answer).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    let (status, text) = stream_text(env, "/v1/chat/completions", &streamed(ask)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"tool_calls\"") && text.contains("\"weather\""), "{text}");
    assert!(text.contains("\"finish_reason\":\"tool_calls\""), "{text}");
    google.env.shutdown().await;
}

/// A weather tool and a user turn that makes the simulator call it.
fn weather_turn(model: &str) -> Value {
    let tools = json!([{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]);
    json!({"model": model, "max_tokens": 32, "tools": tools,
        "messages": [{"role": "user", "content": "call-tool:weather in Oslo"}]})
}

/// `conversation` with `assistant` (as the client got it) and the tool's answer appended.
fn answered(mut conversation: Value, assistant: &Value) -> Value {
    let id = assistant["tool_calls"][0]["id"].clone();
    let messages = conversation["messages"].as_array_mut().unwrap();
    messages.push(assistant.clone());
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "{\"temp\": 3}"}));
    conversation
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thinking_models_calls_go_back_with_their_thought_signatures_for_three_turns() {
    let google = start_google(&[GEMINI_KEY], Limits::default(), 1.0).await;
    let env = &google.env;
    for profile in ["gemini3", "vertex-gemini3"] {
        let verified = env.sim.thought_signatures_verified();
        // Turn 1: the model calls the tool; its signature rides on the tool call.
        let ask = weather_turn(profile);
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &ask).await;
        assert_eq!(status, 200, "{profile}: {body}");
        let assistant = body["choices"][0]["message"].clone();
        let signature = &assistant["tool_calls"][0]["extra_content"]["google"]["thought_signature"];
        assert!(signature.as_str().is_some_and(|s| !s.is_empty()), "{profile}: {body}");
        // Turn 2: the tool's answer with the call as the client got it back: verified.
        let second = answered(ask.clone(), &assistant);
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &second).await;
        assert_eq!(status, 200, "{profile}: the signature went back: {body}");
        assert_eq!(env.sim.thought_signatures_verified(), verified + 1);
        let reply = body["choices"][0]["message"].clone();
        assert!(reply["extra_content"]["google"]["thought_signature"].is_string(), "Gemini 3 signs text: {body}");
        // Turn 3: the whole history, both signatures on their parts.
        let mut third = second.clone();
        third["messages"].as_array_mut().unwrap().push(reply);
        third["messages"].as_array_mut().unwrap().push(json!({"role": "user", "content": "and tomorrow?"}));
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &third).await;
        assert_eq!(status, 200, "{profile}: {body}");
        assert_eq!(env.sim.thought_signatures_verified(), verified + 3);
        // A client that drops the signature meets Gemini 3's refusal, in OpenAI's shape.
        let mut stripped = assistant.clone();
        stripped["tool_calls"][0].as_object_mut().unwrap().remove("extra_content");
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &answered(ask, &stripped)).await;
        assert_eq!(status, 400, "{profile}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("missing a thought_signature"), "{body}");
    }
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_calls_thought_signature_goes_back_too() {
    let google = start_google(&[GEMINI_KEY], Limits::default(), 1.0).await;
    let env = &google.env;
    let ask = weather_turn("gemini3");
    let (status, text) = stream_text(env, "/v1/chat/completions", &streamed(ask.clone())).await;
    assert_eq!(status, 200, "{text}");
    let call = text
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find_map(|chunk| chunk["choices"][0]["delta"]["tool_calls"].get(0).cloned())
        .expect("a tool call chunk");
    assert!(call["extra_content"]["google"]["thought_signature"].is_string(), "{text}");
    let assistant = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": call["id"], "type": "function", "function": call["function"], "extra_content": call["extra_content"]}]});
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &answered(ask, &assistant)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(env.sim.thought_signatures_verified(), 1);
    google.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_effort_reaches_the_thinking_config_of_each_family_or_is_refused() {
    let google = start_google(&[GEMINI_KEY], Limits::default(), 1.0).await;
    let env = &google.env;
    // The simulator thinks a 128th of a budget (a level: minimal 4, low 8, medium 64, high 192).
    let cases = [("gemini25", "high", 192), ("gemini25", "low", 8), ("gemini25", "none", 0), ("gemini3", "medium", 64)];
    for (profile, effort, thoughts) in cases {
        let mut body = chat(profile, 4, 8);
        body["reasoning_effort"] = json!(effort);
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &body).await;
        assert_eq!(status, 200, "{profile} {effort}: {body}");
        assert_eq!(
            body["usage"]["completion_tokens_details"]["reasoning_tokens"], thoughts,
            "{profile} {effort}: {body}"
        );
    }
    let served = env.sim.stats().served;
    for (profile, effort) in [("gemini25-pro", "none"), ("gemini", "low"), ("gemini3", "none")] {
        let mut body = chat(profile, 4, 8);
        body["reasoning_effort"] = json!(effort);
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &body).await;
        assert_eq!(status, 400, "{profile} {effort}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("reasoning_effort"), "{profile}: {body}");
    }
    assert_eq!(env.sim.stats().served, served, "refused before it was sent");
    google.env.shutdown().await;
}
