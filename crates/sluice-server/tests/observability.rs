//! What an operator sees: a scripted run moves every request-path metric as expected, the
//! shipped Grafana dashboard only queries metrics sluice exports, and every proxied
//! response tells the caller its own budget.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{Env, KEY, chat, sha};
use serde_json::Value;
use sluice_admin::{Sample, parse_samples};
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};
use sluice_sim::faults::FaultConfig;

const NO_RETRY: &str = "sk-test-obs-no-retry";
const TIGHT: &str = "sk-test-obs-tight";
const BULK: &str = "sk-test-obs-bulk";

async fn env() -> Env {
    env_with("").await
}

/// [`env`] with a process section (`[store]`) before the policy.
async fn env_with(process: &str) -> Env {
    let mini = ModelConfig { completion: Completion::Fixed { tokens: 6 }, ..ModelConfig::openai("gpt-4o-mini") };
    // The provider allows 60 RPM; the `misconfigured` deployment believes 100,000.
    let tight = ModelConfig::openai("gpt-4o").with_limits(Limits { rpm: Some(60), ..Limits::default() });
    // Half of this model's answers are 503s: retried by the gateway.
    let faults = FaultConfig { error_503: 0.5, ..FaultConfig::default() };
    let flaky = ModelConfig { faults: Some(faults), ..ModelConfig::openai("gpt-4.1-mini") };
    let sim = SimConfig { seed: Some(7), models: vec![mini, tight, flaky], ..SimConfig::default() };
    let policy = format!(
        r#"
[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[deployments]]
name = "unguarded"
provider = "sim"
model = "gpt-4o"
limits = {{ rpm = 100000 }}

[[deployments]]
name = "flaky"
provider = "sim"
model = "gpt-4.1-mini"
limits = {{ rpm = 10000 }}

[[models]]
name = "fast"
deployment = "mini"
default_max_tokens = 40

[[models]]
name = "flaky"
deployment = "flaky"

[[deployments]]
name = "narrow"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 60, tpm = 10000000, burst_seconds = 1 }}

[[models]]
name = "narrow"
deployment = "narrow"
default_max_tokens = 8

[[models]]
name = "misconfigured"
deployment = "unguarded"

[[models]]
name = "misconfigured-with-fallback"
deployment = "unguarded"

[[models.fallbacks]]
deployment = "mini"
when = ["rate_limit_after_retry_budget"]

[[classes]]
name = "interactive"
max_wait = "3s"

[[classes]]
name = "single"
retry_attempts = 1
max_wait = "1ms"

[[classes]]
name = "bulk"
priority = 1
max_wait = "5s"

[[tenants]]
name = "acme"
limits = {{ rpm = 6000, tpm = 1000000, budget = {{ day = 1000.0 }} }}

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{key}"
limits = {{ rpm = 600, tpm = 100000, burst_seconds = 3 }}

[[keys]]
id = "acme-tight"
tenant = "acme"
sha256 = "{tight}"
limits = {{ rpm = 120, burst_seconds = 1 }}

[[keys]]
id = "acme-bulk"
tenant = "acme"
class = "bulk"
sha256 = "{bulk}"

[[keys]]
id = "acme-no-retry"
tenant = "acme"
class = "single"
sha256 = "{no_retry}"
"#,
        key = sha(KEY),
        tight = sha(TIGHT),
        no_retry = sha(NO_RETRY),
        bulk = sha(BULK),
    );
    common::start_with(sim, process, &policy).await
}

/// Traffic that moves the request-path metrics: successes, requests that wait in the
/// queue (`acme-tight`: 2 per second, 2 at once), a request that never fits, provider
/// 429s, a retry, a fallback and a suppressed duplicate.
async fn traffic(env: &Arc<Env>) {
    for _ in 0..5 {
        assert_eq!(env.post("/v1/chat/completions", KEY, &chat("fast", 30, 20)).await.0, 200);
    }
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let env = Arc::clone(env);
            tokio::spawn(async move { env.post("/v1/chat/completions", TIGHT, &chat("fast", 4, 8)).await.0 })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200, "queued requests are admitted within their max_wait");
    }
    // `narrow` takes one request a second. A bulk request waits for it, then an interactive
    // one arrives and goes first when capacity returns: the bulk request is reclaimed.
    assert_eq!(env.post("/v1/chat/completions", KEY, &chat("narrow", 4, 8)).await.0, 200);
    let mut waiting = Vec::new();
    for (ahead, key) in [BULK, KEY].into_iter().enumerate() {
        let sent = Arc::clone(env);
        waiting
            .push(tokio::spawn(async move { sent.post("/v1/chat/completions", key, &chat("narrow", 4, 8)).await.0 }));
        // In the queue before the next one comes (looked for a bounded while).
        let queued = common::Deadline::after(std::time::Duration::from_secs(2));
        let depth = async || sample(&parse_samples(&env.metrics().await), "sluice_queue_depth", &[]);
        while depth().await < (ahead + 1) as f64 && queued.sleep(std::time::Duration::from_millis(10)).await {}
    }
    for task in waiting {
        assert_eq!(task.await.unwrap(), 200);
    }
    // Larger than the key's whole token budget per minute: never fits (400, counted).
    assert_eq!(env.post("/v1/chat/completions", KEY, &chat("fast", 4, 200_000)).await.0, 400);
    let mut provider_429 = false;
    for _ in 0..200 {
        let (status, _, body) = env.post("/v1/chat/completions", NO_RETRY, &chat("misconfigured", 4, 8)).await;
        if status == 429 {
            assert_eq!(body["error"]["gateway_decision"], "admitted_then_provider_rejected");
            provider_429 = true;
            break;
        }
    }
    assert!(provider_429, "the provider never refused");
    // 503s are retried (three attempts per request).
    for _ in 0..10 {
        let _status = env.post("/v1/chat/completions", KEY, &chat("flaky", 4, 8)).await.0;
    }
    // With one attempt and a fallback for that case, the request goes to `mini` instead.
    let mut fell_back = false;
    for _ in 0..100 {
        // While the provider's cooldown holds `unguarded`, the gateway refuses before
        // sending (no fallback reason); the loop goes on until the provider itself refuses.
        let _status = env.post("/v1/chat/completions", NO_RETRY, &chat("misconfigured-with-fallback", 4, 8)).await;
        // Present at zero from the start (declared for the configured fallback): it must move.
        if total(&parse_samples(&env.metrics().await), "sluice_fallbacks_total", |_| true) > 0.0 {
            fell_back = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(fell_back, "no fallback happened");
    // The same Idempotency-Key twice: the second is answered from the log, not sent again.
    for _ in 0..2 {
        let url = format!("{}/v1/chat/completions", env.gateway.url());
        let sent = env.http.post(url).bearer_auth(KEY).header("idempotency-key", "obs-1").json(&chat("fast", 4, 8));
        assert_eq!(sent.send().await.unwrap().status(), 200);
    }
}

fn total(samples: &[Sample], name: &str, keep: impl Fn(&Sample) -> bool) -> f64 {
    samples.iter().filter(|s| s.name == name && keep(s)).map(|s| s.value).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_run_moves_the_metrics_and_the_grafana_dashboard_queries_only_exported_ones() {
    let env = Arc::new(env().await);
    traffic(&env).await;
    let text = env.metrics().await;
    let samples = parse_samples(&text);

    assert!(total(&samples, "sluice_requests_total", |s| s.label("status") == "200") >= 11.0);
    assert!(total(&samples, "sluice_retries_total", |s| s.label("model") == "gpt-4.1-mini") >= 1.0, "{text}");
    let fallbacks = total(&samples, "sluice_fallbacks_total", |s| s.label("reason") == "rate_limit_after_retry_budget");
    assert!(fallbacks >= 1.0, "{text}");
    assert_eq!(total(&samples, "sluice_duplicate_suppressed_total", |_| true), 1.0, "{text}");
    let hits = |limit_type: &str| {
        total(&samples, "sluice_rate_limit_hits_total", |s| {
            s.label("limit_type") == limit_type && s.label("model") == "gpt-4o"
        })
    };
    assert!(hits("provider") >= 1.0, "provider 429s are counted as hits: {text}");
    assert!(total(&samples, "sluice_decisions_total", |s| s.label("decision") == "never_fits") >= 1.0);
    let waited = total(&samples, "sluice_queue_wait_seconds_count", |s| s.label("priority") == "interactive");
    assert!(waited >= 1.0, "the tight key's burst made requests wait: {text}");
    assert!(total(&samples, "sluice_queue_wait_seconds_sum", |_| true) > 0.0);
    assert_eq!(total(&samples, "sluice_queue_depth", |_| true), 0.0, "nothing waits at the end");
    let reserved = total(&samples, "sluice_tokens_reserved_total", |s| s.label("model") == "gpt-4o-mini");
    let used = total(&samples, "sluice_tokens_used_total", |s| s.label("model") == "gpt-4o-mini");
    assert!(used > 0.0 && reserved > used, "reserved {reserved} vs used {used}");
    let bucket = |kind: &str, scope: &str, limiter: &str| {
        samples.iter().any(|s| {
            s.name == "sluice_bucket_remaining"
                && s.label("scope_kind") == kind
                && s.label("scope") == scope
                && s.label("limiter") == limiter
        })
    };
    assert!(
        bucket("deployment", "mini", "tpm") && bucket("tenant", "acme", "rpm") && bucket("api_key", "acme-1", "tpm")
    );
    let limit = total(&samples, "sluice_bucket_limit", |s| s.label("scope") == "acme-1" && s.label("limiter") == "rpm");
    assert_eq!(limit, 600.0);
    assert_eq!(total(&samples, "sluice_reservations_open", |_| true), 0.0);
    // Guaranteed vs borrowed: acme is the only tenant, so its share is the whole deployment.
    let fair = |kind: &str| {
        total(&samples, "sluice_fair_tokens_total", |s| s.label("tenant") == "acme" && s.label("kind") == kind)
    };
    assert!(fair("guaranteed") > 0.0 && fair("borrowed") == 0.0, "{text}");
    let reclaimed = total(&samples, "sluice_fair_reclaims_total", |s| {
        (s.label("deployment"), s.label("class"), s.label("by")) == ("narrow", "bulk", "class")
    });
    assert_eq!(reclaimed, 1.0, "{text}");
    let by_tenant = total(&samples, "sluice_fair_reclaims_total", |s| s.label("by") == "tenant");
    assert_eq!(by_tenant, 0.0, "one tenant is never held back for another");
    // ETA quality of every request admitted after waiting: the tight key's beyond its
    // burst of two, and both waiting on `narrow`.
    let etas = |class: &str| {
        total(&samples, "sluice_queue_eta_error_seconds_count", |s| {
            s.label("source") == "request" && s.label("class") == class
        })
    };
    assert!(etas("interactive") >= 4.0 && etas("bulk") == 1.0, "{text}");

    // Every metric the shipped dashboard queries is exported.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/sluice.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let titles: Vec<String> = panels(&dashboard).iter().map(|p| p["title"].as_str().unwrap().to_owned()).collect();
    for panel in ["Queue wait p50 / p95", "Rate-limit hits by provider and model", "Tokens reserved vs used"] {
        assert!(titles.iter().any(|t| t == panel), "missing panel {panel}: {titles:?}");
    }
    assert!(titles.iter().any(|t| t.starts_with("Fallback rate by reason")));
    let names = metric_names(&dashboard);
    assert!(names.len() >= 12, "{names:?}");
    assert!(names.contains("sluice_queue_wait_seconds_bucket") && names.contains("sluice_bucket_remaining"));
    assert!(!names.iter().any(|n| n.starts_with("llm_")), "the dashboard queries the sluice_ names: {names:?}");
    // The old `llm_*` aliases are off unless `[metrics] legacy_aliases = true` (unit tests in
    // `metrics.rs` turn them on).
    assert!(!samples.iter().any(|s| s.name.starts_with("llm_")), "llm_ aliases exported by default:\n{text}");
    for name in names.iter().filter(|n| !NOT_IN_THE_SCRIPTED_RUN.contains(&n.as_str())) {
        assert!(exported(&text, name), "the dashboard queries `{name}`, which /metrics does not export:\n{text}");
    }
    // Streams, async jobs and adaptive limits are not in the scripted run (an empty family
    // exports nothing): the list stays in step with the dashboard, and the time to first
    // token is checked after a stream below.
    for name in NOT_IN_THE_SCRIPTED_RUN {
        assert!(names.contains(*name), "{name} is no longer on the dashboard: drop it from the list");
    }
    for variable in ["datasource", "instance", "tenant"] {
        let list = dashboard["templating"]["list"].as_array().unwrap();
        assert!(list.iter().any(|v| v["name"] == variable), "no `{variable}` variable");
    }
    Arc::into_inner(env).unwrap().shutdown().await;
}

/// Dashboard metrics that need a stream, a job store or adaptive limits to have samples.
const NOT_IN_THE_SCRIPTED_RUN: &[&str] = &[
    "sluice_ttft_seconds_bucket",
    "sluice_streams_open",
    "sluice_jobs",
    "sluice_jobs_failed_total",
    "sluice_jobs_dead_lettered_total",
    "sluice_jobs_retried_total",
    "sluice_adaptive_factor_permille",
    "sluice_adaptive_decreases_total",
];

fn panels(dashboard: &Value) -> Vec<&Value> {
    let top = dashboard["panels"].as_array().unwrap();
    let nested = top.iter().filter_map(|p| p["panels"].as_array()).flatten();
    top.iter().chain(nested).filter(|p| p["type"] != "row").collect()
}

/// Every `llm_*` / `sluice_*` name in the panels' PromQL.
fn metric_names(dashboard: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("llm_").into_iter().chain(rest.find("sluice_")).min() {
                let word: String =
                    rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
                rest = &rest[at + word.len()..];
                names.insert(word);
            }
        }
    }
    names
}

/// Whether `/metrics` has samples of `name` (histograms as `_bucket`/`_count`/`_sum`).
fn exported(text: &str, name: &str) -> bool {
    text.lines().any(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with('{') || r.starts_with(' ')))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxied_responses_tell_the_caller_its_own_budget() {
    tell_the_caller_its_own_budget(env().await, false).await;
}

/// On Redis the headers come with the grant (no read of their own): the same figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxied_responses_tell_the_caller_its_own_budget_on_redis() {
    let redis = sluice_redis::local::LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let store = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\nprefix = \"headers\"\n", redis.url());
    tell_the_caller_its_own_budget(env_with(&store).await, true).await;
}

/// `at_grant`: the store returns the path's state with the grant, so the headers show the
/// buckets at that instant, before any refill.
async fn tell_the_caller_its_own_budget(env: Env, at_grant: bool) {
    let (status, headers, _) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
    assert_eq!(status, 200);
    // acme-1's 600 RPM (30 burst) is tighter than acme's 6,000; its 100,000 TPM likewise.
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("x-ratelimit-limit-requests"), "600");
    let remaining: u64 = header("x-ratelimit-remaining-requests").parse().unwrap();
    assert!((28..30).contains(&remaining), "one of 30 taken: {remaining}");
    if at_grant {
        // acme-1's burst of 5,000 tokens less this request's reservation (8 output tokens
        // and its input), with no refill since: the state right after the grant.
        let tokens: u64 = header("x-ratelimit-remaining-tokens").parse().unwrap();
        assert!(tokens <= 5_000 - 8, "the request's own tokens are not counted: {tokens}");
    }
    assert!(header("x-ratelimit-reset-requests").ends_with('s'));
    assert_eq!(header("x-ratelimit-limit-tokens"), "100000");
    assert_eq!(header("ratelimit-policy"), "\"requests\";q=600;w=60, \"tokens\";q=100000;w=60");
    assert!(header("ratelimit").starts_with("\"requests\";r="));
    // Refusals carry them too; unauthenticated requests and other routes do not.
    let (status, headers, _) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 200_000)).await;
    assert_eq!(status, 400);
    assert!(headers.contains_key("x-ratelimit-remaining-tokens"));
    let (status, headers, _) = env.post("/v1/chat/completions", "sk-nobody", &chat("fast", 4, 8)).await;
    assert_eq!(status, 401);
    assert!(!headers.contains_key("x-ratelimit-limit-requests"));
    let models = env.http.get(format!("{}/v1/models", env.gateway.url())).bearer_auth(KEY).send().await.unwrap();
    assert!(!models.headers().contains_key("ratelimit"));
    // Every proxied endpoint carries them, whatever it answers; another method on one does not.
    let embedding = serde_json::json!({"model": "fast", "input": "hello"});
    let (_, headers, _) = env.post("/v1/embeddings", KEY, &embedding).await;
    assert!(headers.contains_key("x-ratelimit-limit-requests"), "{headers:?}");
    let message =
        serde_json::json!({"model": "fast", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let (_, headers, _) = env.post("/v1/messages", KEY, &message).await;
    // In Anthropic's names there, never OpenAI's.
    assert!(headers.contains_key("anthropic-ratelimit-requests-limit"), "{headers:?}");
    assert!(!headers.contains_key("x-ratelimit-limit-requests"), "{headers:?}");
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let get = env.http.get(url).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert!(!get.headers().contains_key("ratelimit"));
    env.shutdown().await;
}

/// The value of the sample `name` with exactly `labels`, or 0.
fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    total(samples, name, |s| labels.iter().all(|(k, v)| s.label(k) == *v))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_time_to_first_token_in_flight_and_tenant_tokens_are_measured_per_request() {
    let env = env().await;
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let buffered = env.http.post(&url).bearer_auth(KEY).json(&chat("fast", 4, 8)).send().await.unwrap();
    assert_eq!(buffered.status(), 200);
    let mut streamed = chat("fast", 4, 8);
    streamed["stream"] = Value::Bool(true);
    let stream = env.http.post(&url).bearer_auth(KEY).json(&streamed).send().await.unwrap();
    assert!(stream.text().await.unwrap().contains("[DONE]"));
    let route = [("deployment", "mini"), ("class", "interactive")];
    // A stream's line is let go just after its last byte: wait for it, boundedly.
    let mut samples = Vec::new();
    for _ in 0..100 {
        samples = parse_samples(&env.metrics().await);
        if sample(&samples, "sluice_request_duration_seconds_count", &route) >= 2.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(sample(&samples, "sluice_request_duration_seconds_count", &route), 2.0);
    assert_eq!(sample(&samples, "sluice_upstream_duration_seconds_count", &route), 2.0);
    assert_eq!(sample(&samples, "sluice_ttft_seconds_count", &route), 1.0, "only the stream has a first piece");
    let ttft = sample(&samples, "sluice_ttft_seconds_sum", &route);
    assert!(ttft > 0.0 && ttft <= sample(&samples, "sluice_request_duration_seconds_sum", &route));
    assert_eq!(sample(&samples, "sluice_requests_in_flight", &[]), 0.0);
    assert_eq!(sample(&samples, "sluice_streams_open", &[]), 0.0);
    let text = env.metrics().await;
    for name in ["sluice_ttft_seconds_bucket", "sluice_streams_open", "sluice_requests_in_flight"] {
        assert!(exported(&text, name), "the dashboard queries `{name}`, which /metrics does not export");
    }
    let tokens = |direction| sample(&samples, "sluice_tokens_total", &[("tenant", "acme"), ("direction", direction)]);
    assert!(tokens("input") > 0.0, "{samples:?}");
    assert!(tokens("output") > 0.0, "{samples:?}");
    env.shutdown().await;
}
