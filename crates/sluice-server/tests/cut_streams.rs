//! Streams cut short are paid for what they delivered, over HTTP against the simulated
//! provider. Each client protocol (OpenAI chat, Responses, Anthropic Messages) reaches each
//! upstream kind (OpenAI, Anthropic, Bedrock Converse, Gemini); the client hangs up after a
//! random number of events, or the provider cuts the stream at a random point, or neither.
//! For every stream, the output tokens `/admin/usage` charges are at least the tokens the
//! client received. A tenant with a money budget receives no more than the budget plus one
//! request's reservation of answers. A stream whose client left is drained for the
//! provider's own final count. A request refused after admission reserves nothing in the
//! reserved-vs-used counters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Deadline, sha};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use sluice_quota::{MemoryStore, SystemClock};
use sluice_sim::bedrock::sigv4::{SIM_ACCESS_KEY_ID, SIM_SECRET_ACCESS_KEY};
use sluice_sim::config::{Flavor, ModelConfig, SimConfig};
use sluice_sim::faults::FaultConfig;
use sluice_sim::google::auth::GoogleConfig;
use sluice_sim::latency::{Completion, LatencyConfig};

const ADMIN: &str = "sk-admin-cut-streams";
/// The Gemini key the harness's provider key file holds.
const GEMINI_KEY: &str = "sk-provider-planted-secret-0000";
const BEDROCK_MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
/// Output tokens each request may take.
const MAX_TOKENS: u64 = 90;

/// The upstream kinds, as (profile and deployment name, provider, model).
const UPSTREAMS: [(&str, &str, &str); 4] = [
    ("oa", "sim", "gpt-cut"),
    ("an", "sim-anthropic", "claude-cut"),
    ("br", "bedrock", BEDROCK_MODEL),
    ("ge", "gemini", "gemini-cut"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Chat,
    Responses,
    Messages,
}

const CLIENTS: [Client; 3] = [Client::Chat, Client::Responses, Client::Messages];

fn sim(drop_rate: f64) -> SimConfig {
    let faults = FaultConfig { stream_drop: drop_rate, stream_drop_anywhere: true, ..FaultConfig::default() };
    let latency = LatencyConfig { per_token_ms: 1.0, chunk_tokens: 3, ..LatencyConfig::default() };
    let shaped = |model: ModelConfig| ModelConfig {
        completion: Completion::Uniform { min: 12, max: MAX_TOKENS },
        faults: Some(faults.clone()),
        latency: Some(latency.clone()),
        ..model
    };
    let models = vec![
        shaped(ModelConfig::openai("gpt-cut")),
        shaped(ModelConfig::anthropic("claude-cut")),
        shaped(ModelConfig { flavor: Some(Flavor::Bedrock), ..ModelConfig::anthropic(BEDROCK_MODEL) }),
        shaped(ModelConfig { flavor: Some(Flavor::Gemini), ..ModelConfig::openai("gemini-cut") }),
    ];
    let google = GoogleConfig { api_keys: vec![GEMINI_KEY.to_owned()], ..GoogleConfig::default() };
    SimConfig { seed: Some(11), models, google, ..SimConfig::default() }
}

fn key(lane: usize) -> String {
    format!("sk-cut-streams-{lane}")
}

/// Deployments of every upstream kind draining for `drain`, priced at `price`, and `keys`
/// keys of one tenant whose limits are `tenant_limits`.
fn policy(credentials: &str, drain: &str, price: &str, tenant_limits: &str, keys: usize) -> String {
    let mut policy = format!(
        r#"
[admin]
key_sha256 = "{admin}"

[jobs]
workers = 0

[[providers]]
name = "bedrock"
kind = "bedrock"
base_url = "{{SIM}}"
region = "us-east-1"
aws_credentials_file = "{credentials}"

[[providers]]
name = "gemini"
kind = "gemini"
api_surface = "native"
base_url = "{{SIM}}"
api_key_file = "{{KEYFILE}}"

[[tenants]]
name = "acme"
{tenant_limits}
"#,
        admin = sha(ADMIN)
    );
    for (name, provider, model) in UPSTREAMS {
        policy.push_str(&format!(
            "\n[[deployments]]\nname = \"{name}\"\nprovider = \"{provider}\"\nmodel = \"{model}\"\n\
             stream_drain_timeout = \"{drain}\"\nlimits = {{ rpm = 100000 }}\n{price}\n\
             [[models]]\nname = \"{name}\"\ndeployment = \"{name}\"\n"
        ));
    }
    for lane in 0..keys {
        policy
            .push_str(&format!("\n[[keys]]\nid = \"k{lane}\"\ntenant = \"acme\"\nsha256 = \"{}\"\n", sha(&key(lane))));
    }
    policy
}

struct Gate {
    url: String,
    http: reqwest::Client,
    _sim: sluice_sim::SimHandle,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

async fn gate(sim_config: SimConfig, drain: &str, price: &str, tenant_limits: &str, keys: usize) -> Gate {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("aws");
    let aws = format!(
        "[default]\naws_access_key_id = {SIM_ACCESS_KEY_ID}\naws_secret_access_key = {SIM_SECRET_ACCESS_KEY}\n"
    );
    std::fs::write(&credentials, aws).unwrap();
    let sim = sluice_sim::SimProvider::start(sim_config).await.unwrap();
    let policy = policy(&credentials.display().to_string(), drain, price, tenant_limits, keys);
    let config = common::config(&sim, "", &policy);
    let clock = Arc::new(SystemClock::new());
    let jobs = sluice_jobs::EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock.clone()).unwrap();
    let store = Arc::new(MemoryStore::new(clock));
    let state = sluice_server::AppState::build(&config, store)
        .unwrap()
        .with_jobs(Arc::new(jobs), &config)
        .with_surface(sluice_admin::surface(&config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(sluice_server::serve(listener, state, std::future::pending()));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    Gate { url, http, _sim: sim, server, _dir: dir }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn request(client: Client, profile: &str) -> (&'static str, Value) {
    let text = "tell me a long story about a fox";
    match client {
        Client::Chat => (
            "/v1/chat/completions",
            json!({"model": profile, "stream": true, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": text}]}),
        ),
        Client::Responses => {
            ("/v1/responses", json!({"model": profile, "stream": true, "max_output_tokens": MAX_TOKENS, "input": text}))
        }
        Client::Messages => (
            "/v1/messages",
            json!({"model": profile, "stream": true, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": text}]}),
        ),
    }
}

/// The generated text one complete event carries, in `client`'s protocol.
fn content(client: Client, event: &str) -> String {
    let data: String = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
    let Ok(value) = serde_json::from_str::<Value>(&data) else { return String::new() };
    let text = match client {
        Client::Chat => &value["choices"][0]["delta"]["content"],
        Client::Responses if value["type"] == "response.output_text.delta" => &value["delta"],
        Client::Messages if value["type"] == "content_block_delta" => &value["delta"]["text"],
        _ => &Value::Null,
    };
    text.as_str().unwrap_or_default().to_owned()
}

/// What a client received before it stopped reading.
struct Received {
    status: u16,
    /// Output tokens in the complete events received (the simulator's filler text is one
    /// token per word).
    tokens: u64,
    /// The stream ended by itself (not hung up on).
    whole: bool,
}

/// Streams `body`, hanging up after `hang_up_after` content events (`None`: reads it all).
async fn stream(gate: &Gate, key: &str, path: &str, body: &Value, hang_up_after: Option<usize>) -> Received {
    let request = gate.http.post(format!("{}{path}", gate.url)).bearer_auth(key);
    let mut response = request.header("anthropic-version", "2023-06-01").json(body).send().await.unwrap();
    let status = response.status().as_u16();
    if status != 200 {
        return Received { status, tokens: 0, whole: true };
    }
    let client = match path {
        "/v1/chat/completions" => Client::Chat,
        "/v1/responses" => Client::Responses,
        _ => Client::Messages,
    };
    let (mut buf, mut text, mut events) = (String::new(), String::new(), 0);
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) | Err(_) => return Received { status, tokens: words(&text), whole: true },
        };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(at) = buf.find("\n\n") {
            let event: String = buf.drain(..at + 2).collect();
            let piece = content(client, &event);
            if !piece.is_empty() {
                text.push_str(&piece);
                events += 1;
                if hang_up_after.is_some_and(|n| events >= n) {
                    drop(response);
                    return Received { status, tokens: words(&text), whole: false };
                }
            }
        }
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// `/admin/usage` for today, grouped by key: each key's row.
async fn usage(gate: &Gate) -> Value {
    let url = format!("{}/admin/usage?group_by=key", gate.url);
    let response = gate.http.get(url).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn row<'a>(usage: &'a Value, key: &str) -> Option<&'a Value> {
    usage["rows"].as_array().unwrap().iter().find(|r| r["key"] == key)
}

fn field(usage: &Value, key: &str, name: &str) -> u64 {
    row(usage, key).map_or(0, |r| r[name].as_u64().unwrap())
}

/// Waits until `key` has `requests` settled requests; its row then.
async fn settled(gate: &Gate, key: &str, requests: u64) -> Value {
    let deadline = Deadline::after(Duration::from_secs(20));
    loop {
        let usage = usage(gate).await;
        if field(&usage, key, "requests") >= requests {
            return row(&usage, key).unwrap().clone();
        }
        assert!(deadline.sleep(Duration::from_millis(10)).await, "{key} never reached {requests} requests: {usage}");
    }
}

/// The pairs the gateway serves (a Responses client has no Gemini road: refused with 400).
fn lanes() -> Vec<(Client, &'static str)> {
    let mut lanes = Vec::new();
    for client in CLIENTS {
        for (profile, _, _) in UPSTREAMS {
            if !(client == Client::Responses && profile == "ge") {
                lanes.push((client, profile));
            }
        }
    }
    lanes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cut_stream_is_charged_at_least_what_it_delivered() {
    const STREAMS: usize = 200;
    let lanes = lanes();
    let gate = Arc::new(gate(sim(0.35), "0s", "", "", lanes.len()).await);
    let per_lane = STREAMS.div_ceil(lanes.len());
    let tasks: Vec<_> = lanes
        .iter()
        .enumerate()
        .map(|(lane, &(client, profile))| {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(lane as u64);
                let (key, id) = (key(lane), format!("k{lane}"));
                let (path, body) = request(client, profile);
                let (mut charged, mut cut) = (0, 0);
                for n in 1..=per_lane {
                    let hang_up = rng.random_bool(0.5).then(|| rng.random_range(1..=12));
                    let got = stream(&gate, &key, path, &body, hang_up).await;
                    assert_eq!(got.status, 200, "{client:?} to {profile}");
                    let row = settled(&gate, &id, n as u64).await;
                    let output = row["output_tokens"].as_u64().unwrap();
                    assert!(
                        output - charged >= got.tokens,
                        "{client:?} to {profile}, stream {n}: charged {} output tokens, delivered {}",
                        output - charged,
                        got.tokens
                    );
                    charged = output;
                    cut += usize::from(!got.whole);
                }
                (lane, cut)
            })
        })
        .collect();
    let mut hung_up = 0;
    for task in tasks {
        hung_up += task.await.unwrap().1;
    }
    let usage = usage(&gate).await;
    let total = &usage["total"];
    assert_eq!(total["requests"].as_u64().unwrap(), (per_lane * lanes.len()) as u64, "every stream counts: {total}");
    assert!(hung_up >= STREAMS / 4, "clients hung up on {hung_up} streams");
    assert!(total["counted_requests"].as_u64().unwrap() >= (STREAMS / 4) as u64, "cut streams are counted: {total}");
    // A Responses client has no road to Gemini: a clear 400, and nothing is charged.
    let (path, body) = request(Client::Responses, "ge");
    assert_eq!(stream(&gate, &key(0), path, &body, None).await.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_bounds_what_cut_streams_receive() {
    // 0.002 per output token: the day's 1.00 buys 500 tokens; a reservation is 90 of them.
    let price = "price = { input = 0.0, output = 2000.0 }";
    let gate = gate(sim(0.3), "0s", price, "limits = { budget = { day = 1.0 } }", 1).await;
    let mut rng = StdRng::seed_from_u64(7);
    let (mut received, mut refused) = (0, false);
    for n in 0..200 {
        let (client, profile) = lanes()[n % lanes().len()];
        let (path, body) = request(client, profile);
        let hang_up = rng.random_bool(0.6).then(|| rng.random_range(1..=8));
        let got = stream(&gate, &key(0), path, &body, hang_up).await;
        if got.status != 200 {
            assert_eq!(got.status, 429, "a spent budget is a 429");
            refused = true;
            break;
        }
        received += got.tokens;
        // One request at a time: each settles before the next is admitted.
        settled(&gate, "k0", n as u64 + 1).await;
    }
    assert!(refused, "the budget ran out within 200 requests");
    let spent = received as f64 * 0.002;
    let reservation = MAX_TOKENS as f64 * 0.002;
    assert!(spent <= 1.0 + reservation + 1e-9, "received {received} tokens worth {spent:.3}, budget 1.00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_left_is_drained_for_the_providers_own_count() {
    let gate = gate(sim(0.0), "30s", "", "", 1).await;
    let mut settled_requests = 0;
    for client in CLIENTS {
        let profile = if client == Client::Responses { "oa" } else { "an" };
        let (path, mut body) = request(client, profile);
        // Long enough that the client leaves well before the end.
        body["max_tokens"] = json!(MAX_TOKENS);
        let before = usage(&gate).await;
        let got = stream(&gate, &key(0), path, &body, Some(2)).await;
        assert!(!got.whole && got.tokens > 0);
        settled_requests += 1;
        let row = settled(&gate, "k0", settled_requests).await;
        let output = row["output_tokens"].as_u64().unwrap() - field(&before, "k0", "output_tokens");
        assert!(output >= 12 && output > got.tokens, "{client:?}: the provider's whole answer, {output} tokens");
        assert_eq!(row["counted_requests"], 0, "{client:?}: settled on the provider's own usage: {row}");
    }
}

fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_after_admission_reserves_nothing_in_the_counters() {
    let gate = gate(sim(0.0), "0s", "", "", 1).await;
    let metrics =
        || async { gate.http.get(format!("{}/metrics", gate.url)).send().await.unwrap().text().await.unwrap() };
    let body = json!({"model": "oa", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]});
    let answer = gate.http.post(format!("{}/v1/chat/completions", gate.url)).bearer_auth(key(0)).json(&body);
    assert_eq!(answer.send().await.unwrap().status(), 200);
    let before = metrics().await;
    let (reserved, used) =
        (counter(&before, "sluice_tokens_reserved_total"), counter(&before, "sluice_tokens_used_total"));
    assert!(reserved >= used && used > 0.0, "reserved {reserved}, used {used}");
    // Admitted for the Anthropic deployment, then refused: logit_bias does not cross.
    let body = json!({"model": "an", "max_tokens": 4000, "logit_bias": {"50256": -100},
                      "messages": [{"role": "user", "content": "hi"}]});
    let refused = gate.http.post(format!("{}/v1/chat/completions", gate.url)).bearer_auth(key(0)).json(&body);
    assert_eq!(refused.send().await.unwrap().status(), 400);
    let after = metrics().await;
    assert_eq!(
        counter(&after, "sluice_tokens_reserved_total"),
        reserved,
        "the refused request's 4,000 are not counted"
    );
    assert_eq!(counter(&after, "sluice_tokens_used_total"), used);
}
