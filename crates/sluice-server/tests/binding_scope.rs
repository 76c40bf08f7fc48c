//! Every refusal names the scope and dimension that bound it — in the 429 body (scope,
//! limiter, message with the limit's figures), the refusal metrics' labels, the access log
//! and the `x-sluice-ratelimit-scope` header — one test per kind of scope; a wait that runs
//! out names the last refusal, not the queue; Anthropic routes answer Anthropic's headers.
//!
//! The gateway runs on a [`FakeClock`] that moves only when a test moves it: no bucket
//! refills between two requests, so the second one's refusal is certain.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::sha;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sluice_admin::{Sample, parse_samples};
use sluice_quota::{FakeClock, MemoryStore, QuotaStore};
use sluice_server::AppState;
use sluice_sim::config::{Completion, ModelConfig, SimConfig};
use sluice_sim::server::SimHandle;

const KEY: &str = "sk-test-binding";
/// Tokens every simulated answer uses, and every request's `max_tokens`.
const ANSWER: u64 = 100;

/// A gateway on a fake clock in front of the sim.
struct Gate {
    sim: SimHandle,
    url: String,
    http: reqwest::Client,
    clock: FakeClock,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// One answer: status, headers, body and the access-log line of its trace.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Value,
    trace: String,
}

async fn gate(policy: &str) -> Gate {
    access_log();
    let fixed = |m: ModelConfig| ModelConfig { completion: Completion::Fixed { tokens: ANSWER }, ..m };
    let models = vec![fixed(ModelConfig::openai("gpt-4o-mini")), fixed(ModelConfig::anthropic("claude-sonnet-4-5"))];
    let sim =
        sluice_sim::SimProvider::start(SimConfig { seed: Some(3), models, ..SimConfig::default() }).await.unwrap();
    let config = common::config(&sim, "", policy);
    let clock = FakeClock::default();
    let store: Arc<dyn QuotaStore> = Arc::new(MemoryStore::new(Arc::new(clock.clone())));
    let state = AppState::build_with_clock(&config, store, Arc::new(clock.clone()))
        .unwrap()
        .with_surface(sluice_admin::surface(&config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(sluice_server::serve(listener, state, std::future::pending()));
    Gate { sim, url, http: reqwest::Client::new(), clock, server }
}

/// A policy: one deployment `d` (`deployment_extra` added to it), profile `fast`
/// (`model_extra`), tenant `acme` with team `search`, [`KEY`] in that team; `limits` go
/// on the scope `on` names (`deployment`, `model`, `tenant`, `team`, `key`).
fn policy(on: &str, limits: &str, head: &str, deployment_extra: &str) -> String {
    let at = |scope: &str| if scope == on { format!("limits = {{ {limits} }}\n") } else { String::new() };
    format!(
        "{head}\n[[classes]]\nname = \"now\"\nmax_wait = \"1ms\"\n\n\
         [[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n{deployment}{deployment_extra}\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n{model}\n\
         [[tenants]]\nname = \"acme\"\n{tenant}\n[[tenants.teams]]\nname = \"search\"\n{team}\n\
         [[keys]]\nid = \"k\"\ntenant = \"acme\"\nteam = \"search\"\nclass = \"now\"\nsha256 = \"{sha}\"\n{key}",
        deployment = if on == "deployment" {
            format!("limits = {{ {limits} }}\n")
        } else {
            "limits = { rpm = 100000 }\n".into()
        },
        model = at("model"),
        tenant = at("tenant"),
        team = at("team"),
        key = at("key"),
        sha = sha(KEY),
    )
}

impl Gate {
    async fn post(&self, path: &str, body: &Value) -> Answer {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let trace = format!("{:032x}", 0xb1d0_0000_0000_u64 + N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(KEY)
            .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
            .header("anthropic-version", "2023-06-01")
            .json(body)
            .send()
            .await
            .unwrap();
        let (status, headers) = (response.status().as_u16(), response.headers().clone());
        let body = response.json().await.unwrap_or(Value::Null);
        Answer { status, headers, body, trace }
    }

    /// Posts a chat until the gateway refuses it (at most five times); the refusal.
    async fn until_refused(&self) -> Answer {
        for _ in 0..5 {
            let answer = self.post("/v1/chat/completions", &chat()).await;
            if answer.status != 200 {
                return answer;
            }
        }
        panic!("never refused");
    }

    async fn samples(&self) -> Vec<Sample> {
        let text = self.http.get(format!("{}/metrics", self.url)).send().await.unwrap().text().await.unwrap();
        parse_samples(&text)
    }

    async fn shutdown(self) {
        self.server.abort();
        self.sim.shutdown().await;
    }
}

fn chat() -> Value {
    json!({"model": "fast", "max_tokens": ANSWER, "messages": [{"role": "user", "content": "hello there"}]})
}

/// The access log of this test binary: every `sluice::access` line, as JSON.
fn access_log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Writer(Arc::clone(&buffer));
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_env_filter("sluice::access=info")
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buffer
    })
}

#[derive(Clone)]
struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The access-log fields of the request with `trace` (written as its handler lets go:
/// looked for a bounded while).
async fn logged(trace: &str) -> Value {
    for _ in 0..200 {
        let text = String::from_utf8_lossy(&access_log().lock().unwrap()).into_owned();
        let line = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["fields"]["trace_id"] == trace);
        if let Some(line) = line {
            return line["fields"].clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no access-log line for {trace}");
}

fn total(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples.iter().filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == *v)).map(|s| s.value).sum()
}

/// What a refusal by `limiter` of the scope `kind` named `name` in `dimension` must say
/// everywhere; `figures` starts the message's figures.
async fn assert_named(gate: &Gate, refusal: &Answer, expected: [&str; 4], figures: &str) {
    let [kind, name, limiter, dimension] = expected;
    assert_eq!(refusal.status, 429, "{}", refusal.body);
    let error = &refusal.body["error"];
    assert_eq!((error["scope"].as_str(), error["scope_name"].as_str()), (Some(kind), Some(name)), "{error}");
    assert_eq!((error["limiter"].as_str(), error["dimension"].as_str()), (Some(limiter), Some(dimension)), "{error}");
    let message = error["message"].as_str().unwrap();
    let named = format!("rate limit `{limiter}` reached for {kind} {name}: {figures}");
    assert!(message.starts_with(&named), "{message:?} does not start with {named:?}");
    assert!(!message.contains("sk-"), "{message}");
    assert!(error["tenant_id"] == "acme" && error["gateway_decision"] == "rejected_before_send", "{error}");
    assert_eq!(refusal.headers["x-sluice-ratelimit-scope"], kind);
    assert!(refusal.headers.contains_key("retry-after"));
    let samples = gate.samples().await;
    let labels = [("limit_type", limiter), ("scope_kind", kind), ("dimension", dimension)];
    assert_eq!(total(&samples, "sluice_rate_limit_hits_total", &labels), 1.0, "{samples:?}");
    let labels = [("decision", "rejected"), ("limiter", limiter), ("scope_kind", kind), ("dimension", dimension)];
    assert_eq!(total(&samples, "sluice_decisions_total", &labels), 1.0, "{samples:?}");
    let line = logged(&refusal.trace).await;
    assert_eq!((line["scope_kind"].as_str(), line["scope"].as_str()), (Some(kind), Some(name)), "{line}");
    assert_eq!((line["dimension"].as_str(), line["limiter"].as_str()), (Some(dimension), Some(limiter)), "{line}");
    assert_eq!(line["status"], 429);
    assert!(line["tokens_estimated"].as_u64().unwrap() > ANSWER, "the estimate of a refused request: {line}");
    assert_eq!(line["queue_wait_ms"], 0, "refused at once: {line}");
}

const ONE_RPM: &str = "rpm = 1, burst_seconds = 60";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_org_limit_is_named_with_its_figures() {
    let gate = gate(&policy("", "", &format!("[org]\nname = \"hq\"\nlimits = {{ {ONE_RPM} }}\n"), "")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["org", "hq", "rpm", "requests"], "1 RPM, 1 used, resets in 60 s").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_limit_is_named_with_its_figures() {
    let gate = gate(&policy("tenant", ONE_RPM, "", "")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["tenant", "acme", "rpm", "requests"], "1 RPM, 1 used, resets in 60 s").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_token_limit_is_named_with_its_figures() {
    // One request (~110 tokens: its input and 100 of output) fits in 150; a second does not.
    let gate = gate(&policy("team", "tpm = 150, burst_seconds = 60", "", "")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["team", "acme/search", "tpm", "tokens"], "150 TPM, 1").await;
    let message = refusal.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(" used, resets in ") && message.ends_with(" s; retry later"), "{message}");
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_limit_is_named_with_its_figures() {
    let gate = gate(&policy("key", ONE_RPM, "", "")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["api_key", "k", "rpm", "requests"], "1 RPM, 1 used, resets in 60 s").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_profile_limit_is_named_with_its_figures() {
    let gate = gate(&policy("model", ONE_RPM, "", "")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["model_profile", "fast", "rpm", "requests"], "1 RPM, 1 used, resets in 60 s").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_limit_is_named_with_its_figures() {
    let gate = gate(&policy("deployment", "rpm = 2, burst_seconds = 60", "", "")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["deployment", "d", "rpm", "requests"], "2 RPM, ").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_limit_is_named_with_its_figures() {
    let head = format!("[[accounts]]\nname = \"acct\"\nlimits = {{ {ONE_RPM} }}\n");
    let gate = gate(&policy("", "", &head, "account = \"acct\"\n")).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["account", "acct", "rpm", "requests"], "1 RPM, 1 used, resets in 60 s").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_money_budget_is_named_with_its_figures() {
    // 0.01 per output token: a day's 1.50 takes one answer of 100 tokens, not two.
    let price = "price = { input = 0.0, output = 10000.0 }\n";
    let gate = gate(&policy("tenant", "budget = { day = 1.5 }", "", price)).await;
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["tenant", "acme", "budget", "money"], "1.50 per day, 1.00 spent, resets in ").await;
    gate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_money_budget_set_through_the_admin_api_binds_like_the_files() {
    const ADMIN: &str = "sk-test-binding-admin";
    let price = "price = { input = 0.0, output = 10000.0 }\n";
    let head = format!("[admin]\nkey_sha256 = \"{}\"\n", sha(ADMIN));
    let gate = gate(&policy("", "", &head, price)).await;
    let put = |body: Value| {
        let request = gate.http.put(format!("{}/admin/limits/tenant/acme", gate.url)).bearer_auth(ADMIN);
        async move { request.json(&body).send().await.unwrap() }
    };
    let refused = put(json!({"budget": {"week": 1.5}})).await;
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert!(refused["error"]["param"].as_str().unwrap().ends_with("week"), "{refused}");
    let set = put(json!({"budget": {"day": 1.5}})).await;
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());
    let refusal = gate.until_refused().await;
    assert_named(&gate, &refusal, ["tenant", "acme", "budget", "money"], "1.50 per day, 1.00 spent, resets in ").await;
    gate.shutdown().await;
}

/// A team allowing one request a second, and a class that waits up to 1.5 s, on the
/// gateway's clock: the first request passes, the next three wait; at 1 s the first of
/// them has the refilled request, at 1.5 s the two others' waits run out. Both refusals
/// name the team — also the one that waited behind the other and was never tried itself —
/// with the wait and estimate in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_runs_out_names_the_scope_that_held_it_not_the_queue() {
    let policy = policy("team", "rpm = 60, burst_seconds = 1", "", "")
        .replace("name = \"now\"\nmax_wait = \"1ms\"", "name = \"now\"\nmax_wait = \"1500ms\"");
    let gate = Arc::new(gate(&policy).await);
    assert_eq!(gate.post("/v1/chat/completions", &chat()).await.status, 200);
    let depth = |n: f64| {
        let gate = Arc::clone(&gate);
        async move {
            for _ in 0..200 {
                if total(&gate.samples().await, "sluice_queue_depth", &[]) == n {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            false
        }
    };
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move { gate.post("/v1/chat/completions", &chat()).await })
        })
        .collect();
    assert!(depth(3.0).await, "all three wait");
    // The team's bucket gives one request a second: at 1 s the first waiter has it; the
    // others would need 2 s and 3 s, and at 1.5 s their waits are out.
    gate.clock.advance(Duration::from_millis(1_000));
    assert!(depth(2.0).await, "one admitted");
    gate.clock.advance(Duration::from_millis(500));
    let mut answers = Vec::new();
    for task in waiting {
        answers.push(task.await.unwrap());
    }
    answers.sort_by_key(|a| a.status);
    assert_eq!(answers[0].status, 200, "{}", answers[0].body);
    for refusal in &answers[1..] {
        assert_eq!(refusal.status, 429, "{}", refusal.body);
        let error = &refusal.body["error"];
        assert_eq!((error["scope"].as_str(), error["limiter"].as_str()), (Some("team"), Some("rpm")), "{error}");
        assert_eq!(error["scope_name"], "acme/search");
        let message = error["message"].as_str().unwrap();
        assert!(message.starts_with("rate limit `rpm` reached for team acme/search: 60 RPM, "), "{message}");
        assert_eq!(refusal.headers["x-sluice-ratelimit-scope"], "team");
        let line = logged(&refusal.trace).await;
        assert_eq!((line["scope_kind"].as_str(), line["scope"].as_str()), (Some("team"), Some("acme/search")));
        assert_eq!(line["queue_wait_ms"], 1_500, "the wait by the gateway's clock: {line}");
        assert!(line["tokens_estimated"].as_u64().unwrap() > ANSWER, "{line}");
    }
    let samples = gate.samples().await;
    let waits = [("scope_kind", "team"), ("dimension", "requests")];
    assert_eq!(total(&samples, "sluice_queue_wait_seconds_count", &waits), 3.0, "{samples:?}");
    let hits = [("limit_type", "rpm"), ("scope_kind", "team"), ("dimension", "requests")];
    assert_eq!(total(&samples, "sluice_rate_limit_hits_total", &hits), 2.0);
    assert_eq!(total(&samples, "sluice_rate_limit_hits_total", &[("limit_type", "queue_wait")]), 0.0);
    Arc::into_inner(gate).unwrap().shutdown().await;
}

/// The same key on both protocols: OpenAI's names on chat, Anthropic's on messages (with
/// RFC 3339 resets, by the gateway's clock), never both; a 429 on messages tells when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_answers_rate_limit_headers_in_its_protocols_convention() {
    let anthropic = "\n[[deployments]]\nname = \"c\"\nprovider = \"sim-anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
                     limits = { rpm = 100000 }\n\n[[models]]\nname = \"claude\"\ndeployment = \"c\"\n";
    let limits = "rpm = 3, input_tpm = 50000, output_tpm = 1000, tpm = 60000, burst_seconds = 60";
    let gate = gate(&format!("{}{anthropic}", policy("key", limits, "", ""))).await;
    let chat = gate.post("/v1/chat/completions", &chat()).await;
    assert_eq!(chat.status, 200, "{}", chat.body);
    assert_eq!(chat.headers["x-ratelimit-limit-requests"], "3");
    assert!(chat.headers.keys().all(|n| !n.as_str().starts_with("anthropic-ratelimit")), "{:?}", chat.headers);
    let message = json!({"model": "claude", "max_tokens": ANSWER, "messages": [{"role": "user", "content": "hi"}]});
    let answer = gate.post("/v1/messages", &message).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let h = &answer.headers;
    assert!(h.keys().all(|n| !n.as_str().starts_with("x-ratelimit-")), "{h:?}");
    let header = |name: &str| h.get(name).unwrap_or_else(|| panic!("no {name}: {h:?}")).to_str().unwrap().to_owned();
    assert_eq!(header("anthropic-ratelimit-requests-limit"), "3");
    assert_eq!(header("anthropic-ratelimit-requests-remaining"), "1");
    // The fake clock's wall time is 2023-11-14T22:13:20Z and does not move: two requests
    // of a 3-per-minute bucket are refilled 40 s later.
    assert_eq!(header("anthropic-ratelimit-requests-reset"), "2023-11-14T22:14:00Z");
    assert_eq!(header("anthropic-ratelimit-input-tokens-limit"), "50000");
    assert_eq!(header("anthropic-ratelimit-output-tokens-limit"), "1000");
    let output_remaining: u64 = header("anthropic-ratelimit-output-tokens-remaining").parse().unwrap();
    assert_eq!(output_remaining, 1000 - 2 * ANSWER, "two answers of {ANSWER}");
    // Tokens: the tightest token bucket, the output one.
    assert_eq!(header("anthropic-ratelimit-tokens-limit"), "1000");
    assert!(header("anthropic-ratelimit-output-tokens-reset").starts_with("2023-11-14T22:1"));
    assert!(header("anthropic-ratelimit-tokens-reset").ends_with('Z'));
    assert_eq!(header("x-sluice-ratelimit-scope"), "api_key");
    assert!(h.contains_key("ratelimit-policy") && h.contains_key("ratelimit"));
    // Counting tokens costs a request on the caller's own scopes, and says so the same way.
    let counted = gate.post("/v1/messages/count_tokens", &message).await;
    assert_eq!(counted.status, 200, "{}", counted.body);
    assert!(counted.body["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(counted.headers["anthropic-ratelimit-requests-remaining"], "0");
    assert!(counted.headers.keys().all(|n| !n.as_str().starts_with("x-ratelimit-")), "{:?}", counted.headers);
    let refused = gate.post("/v1/messages", &message).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.body["type"], "error");
    assert_eq!(refused.body["error"]["scope"], "api_key");
    assert!(refused.headers.contains_key("retry-after"), "{:?}", refused.headers);
    assert_eq!(refused.headers["anthropic-ratelimit-requests-remaining"], "0");
    assert!(!refused.headers.contains_key("x-ratelimit-remaining-requests"));
    gate.shutdown().await;
}

/// Work the gateway answers itself (a token count) is refused by the caller's own limits in
/// the same words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_count_refusal_names_the_key_with_its_figures() {
    let gate = gate(&policy("key", ONE_RPM, "", "")).await;
    let count = json!({"model": "fast", "messages": [{"role": "user", "content": "hello"}]});
    assert_eq!(gate.post("/v1/messages/count_tokens", &count).await.status, 200);
    let refusal = gate.post("/v1/messages/count_tokens", &count).await;
    assert_eq!(refusal.status, 429, "{}", refusal.body);
    let error = &refusal.body["error"];
    assert_eq!((error["scope"].as_str(), error["scope_name"].as_str()), (Some("api_key"), Some("k")));
    assert_eq!(error["dimension"], "requests");
    let message = error["message"].as_str().unwrap();
    assert_eq!(message, "rate limit `rpm` reached for api_key k: 1 RPM, 1 used, resets in 60 s; retry later");
    assert_eq!(refusal.headers["x-sluice-ratelimit-scope"], "api_key");
    gate.shutdown().await;
}

/// A request admitted after waiting names what held it: the team's requests limit, in the
/// wait metric's labels and its access-log line, with the wait by the gateway's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_admission_names_the_scope_that_held_it() {
    let policy = policy("team", "rpm = 60, burst_seconds = 1", "", "")
        .replace("name = \"now\"\nmax_wait = \"1ms\"", "name = \"now\"\nmax_wait = \"5s\"");
    let gate = Arc::new(gate(&policy).await);
    assert_eq!(gate.post("/v1/chat/completions", &chat()).await.status, 200);
    let waiting = {
        let gate = Arc::clone(&gate);
        tokio::spawn(async move { gate.post("/v1/chat/completions", &chat()).await })
    };
    for _ in 0..100 {
        if total(&gate.samples().await, "sluice_queue_depth", &[]) == 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The team's next request is a second away: the clock gets there, the queue admits it.
    gate.clock.advance(Duration::from_secs(1));
    let admitted = waiting.await.unwrap();
    assert_eq!(admitted.status, 200, "{}", admitted.body);
    let line = logged(&admitted.trace).await;
    assert_eq!(line["decision"], "queued", "{line}");
    assert_eq!((line["scope_kind"].as_str(), line["scope"].as_str()), (Some("team"), Some("acme/search")));
    assert_eq!(line["dimension"], "requests");
    assert_eq!(line["queue_wait_ms"], 1000, "{line}");
    let samples = gate.samples().await;
    let waits = [("priority", "now"), ("scope_kind", "team"), ("dimension", "requests")];
    assert_eq!(total(&samples, "sluice_queue_wait_seconds_count", &waits), 1.0, "{samples:?}");
    Arc::into_inner(gate).unwrap().shutdown().await;
}
