//! Faults upstream: retries that make flaky providers reliable without double billing,
//! fallbacks and a breaker when the primary is down, degradation of simple work.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Env, KEY, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, FaultConfig, LatencyConfig, Limits, ModelConfig, SimConfig};
use tokio::time::Instant;

fn policy(extra: &str) -> String {
    format!(
        r#"
[[deployments]]
name = "flaky"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 1000000, tpm = 100000000 }}
attempt_timeout = "400ms"
breaker_failures = 1000

[[deployments]]
name = "backup"
provider = "sim"
model = "gpt-4o"
limits = {{ rpm = 1000000, tpm = 100000000 }}

[[deployments]]
name = "local"
provider = "sim"
model = "llama-local"
limits = {{ concurrency = 4 }}

{extra}

[[tenants]]
name = "acme"

[[classes]]
name = "batch"
priority = 5
max_wait = "5m"
retry_attempts = 8
retry_within = "300s"

[[keys]]
id = "acme-batch"
tenant = "acme"
class = "batch"
sha256 = "{}"
"#,
        sha(KEY)
    )
}

fn with_marker(id: usize) -> Value {
    json!({"model": "fast", "max_tokens": 16,
           "messages": [{"role": "user", "content": format!("hello there req-id:{id}")}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flaky_provider_retries_succeed_and_bill_once() {
    let faults = FaultConfig { error_503: 0.10, reset: 0.05, hang: 0.02, hang_ms: 5_000, ..FaultConfig::default() };
    let flaky = ModelConfig {
        faults: Some(faults),
        completion: Completion::Fixed { tokens: 8 },
        ..ModelConfig::openai("gpt-4o-mini")
    };
    let sim = SimConfig { seed: Some(11), models: vec![flaky], ..SimConfig::default() };
    let env = Arc::new(start(sim, &policy("[[models]]\nname = \"fast\"\ndeployment = \"flaky\"\n")).await);
    let total = 2_000;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..32 {
        let (env, next) = (Arc::clone(&env), Arc::clone(&next));
        clients.push(tokio::spawn(async move {
            let mut ok = 0usize;
            loop {
                let id = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if id >= total {
                    return ok;
                }
                let response = env
                    .http
                    .post(format!("{}/v1/chat/completions", env.gateway.url()))
                    .bearer_auth(KEY)
                    .header("idempotency-key", format!("op-{id}"))
                    .json(&with_marker(id))
                    .send()
                    .await
                    .unwrap();
                if response.status() == 200 {
                    ok += 1;
                }
            }
        }));
    }
    let mut succeeded = 0;
    for client in clients {
        succeeded += client.await.unwrap();
    }
    let stats = env.sim.stats();
    let faults = stats.faults.error_503 + stats.faults.reset + stats.faults.hang;
    assert!(faults >= 200, "the provider was not flaky enough to test anything: {:?}", stats.faults);
    assert!(succeeded * 1000 >= total * 999, "{succeeded} of {total} succeeded");
    assert_eq!(stats.duplicate_completions, 0, "a request was completed twice at the provider");
    let metrics = env.metrics().await;
    assert!(metrics.contains("sluice_retries_total{"), "retries are not counted");
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_primary_falls_back_and_its_breaker_opens() {
    let down = FaultConfig { error_503: 1.0, ..FaultConfig::default() };
    let primary = ModelConfig { faults: Some(down), ..ModelConfig::openai("gpt-4o-mini") };
    let sim = SimConfig { models: vec![primary, ModelConfig::openai("gpt-4o")], ..SimConfig::default() };
    let models = "[[models]]\nname = \"fast\"\ndeployment = \"flaky\"\n\
                  fallbacks = [{ deployment = \"backup\", when = [\"provider_5xx\", \"primary_unavailable\"] }]\n";
    let text = policy(models).replace("breaker_failures = 1000", "breaker_failures = 3\nbreaker_cooldown = \"30s\"");
    let env = start(sim, &text).await;
    for id in 0..20 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &with_marker(id)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["model"], "gpt-4o", "not served by the fallback: {body}");
    }
    let stats = env.sim.stats();
    let primary_calls = stats.models["gpt-4o-mini"].requests;
    // The breaker opened after 3 failures; the first requests spent their retries on it.
    assert!(primary_calls <= 3 * 8, "the primary kept being called: {primary_calls}");
    assert_eq!(stats.models["gpt-4o"].served, 20);
    let metrics = env.metrics().await;
    // Both series exist from the start (declared for the configured fallback): one moved.
    let fell_back: f64 = ["provider_5xx", "primary_unavailable"]
        .iter()
        .filter_map(|reason| {
            let series =
                format!("sluice_fallbacks_total{{from_provider=\"sim\",to_provider=\"sim\",reason=\"{reason}\"}} ");
            metrics.lines().find_map(|l| l.strip_prefix(series.as_str())?.trim().parse::<f64>().ok())
        })
        .sum();
    assert!(fell_back >= 1.0, "{metrics}");
    // Every request is counted under the deployment that served it, not the primary.
    let counted = |model: &str| -> f64 {
        let label = format!("model=\"{model}\"");
        let line = metrics
            .lines()
            .find(|l| l.starts_with("sluice_requests_total{") && l.contains(&label) && l.contains("status=\"200\""));
        line.and_then(|l| l.split_whitespace().last()?.parse().ok()).unwrap_or(0.0)
    };
    assert_eq!((counted("gpt-4o"), counted("gpt-4o-mini")), (20.0, 0.0), "{metrics}");
    env.shutdown().await;
}

/// On tokio's paused clock, which the gateway follows: the breaker's cooldown passes
/// without a real wait.
#[tokio::test(start_paused = true)]
async fn the_breaker_half_opens_and_a_recovered_primary_serves_again() {
    // The primary is another simulator we can take down and bring back on the same port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let backup = SimConfig { models: vec![ModelConfig::openai("gpt-4o")], ..SimConfig::default() };
    let extra = format!(
        "[[providers]]\nname = \"primary\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}\"\napi_key_env = \"PATH\"\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"primary-mini\"\n\
         fallbacks = [{{ deployment = \"backup\", when = [\"primary_unavailable\", \"provider_5xx\"] }}]\n\n\
         [[deployments]]\nname = \"primary-mini\"\nprovider = \"primary\"\nmodel = \"gpt-4o-mini\"\n\
         limits = {{ rpm = 100000 }}\nbreaker_failures = 2\nbreaker_cooldown = \"1s\"\nattempt_timeout = \"1s\"\n"
    );
    let env = common::start_clocked(backup, &policy(&extra), common::TokioClock::new()).await;
    // Down: nothing listens on the primary's port; everything is served by the backup.
    for id in 0..6 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &with_marker(id)).await;
        assert_eq!((status, body["model"].as_str()), (200, Some("gpt-4o")), "{body}");
    }
    // The primary comes back; after the cooldown a probe finds it and it serves again.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let primary = SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() };
    let primary = sluice_sim::SimProvider::serve(primary, listener, Arc::new(sluice_sim::RealClock::new())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut back = false;
    while Instant::now() < deadline {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &with_marker(99)).await;
        assert_eq!(status, 200, "{body}");
        if body["model"] == "gpt-4o-mini" {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back, "the primary was never tried again after it recovered");
    assert!(primary.stats().served >= 1);
    primary.shutdown().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn premium_exhausted_classification_goes_local_and_analysis_waits() {
    let latency = LatencyConfig { ttft_ms: 5.0, ..LatencyConfig::default() };
    let premium = ModelConfig::openai("gpt-4o-mini").with_limits(Limits { rpm: Some(100_000), ..Limits::default() });
    let local = ModelConfig { latency: Some(latency), ..ModelConfig::openai("llama-local") };
    let sim = SimConfig { models: vec![premium, local], ..SimConfig::default() };
    let models = "[[models]]\nname = \"fast\"\ndeployment = \"flaky\"\n\
                  degrade_to = { deployment = \"local\", tasks = [\"classification\", \"routing\"] }\n";
    // The premium budget: 2 requests per minute on the premium deployment.
    let text = policy(models).replace(
        "limits = { rpm = 1000000, tpm = 100000000 }\nattempt_timeout",
        "limits = { rpm = 2, burst_seconds = 60 }\nattempt_timeout",
    );
    let env = start(sim, &text).await;
    let ask = |task: &'static str, env: &Env| {
        let request = env
            .http
            .post(format!("{}/v1/chat/completions", env.gateway.url()))
            .bearer_auth(KEY)
            .header("x-sluice-task", task)
            .json(&with_marker(1));
        async move {
            let started = Instant::now();
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (status, body, started.elapsed())
        }
    };
    for _ in 0..2 {
        let (status, body, _) = ask("analysis", &env).await;
        assert_eq!((status, body["model"].as_str()), (200, Some("gpt-4o-mini")));
    }
    // Premium budget gone: classification is served locally at once.
    let mut added = Vec::new();
    for _ in 0..5 {
        let (status, body, took) = ask("classification", &env).await;
        assert_eq!((status, body["model"].as_str()), (200, Some("llama-local")), "{body}");
        added.push(took.saturating_sub(Duration::from_millis(5)));
    }
    added.sort();
    assert!(added[2] <= Duration::from_millis(20), "sluice added {:?} (median) to degraded requests", added[2]);
    // Analysis is not degraded: it waits in the queue for the premium deployment.
    let waiting = tokio::time::timeout(Duration::from_secs(2), ask("analysis", &env)).await;
    assert!(waiting.is_err(), "analysis did not wait for the premium deployment");
    let metrics = env.metrics().await;
    assert!(metrics.contains("reason=\"degraded\""), "{metrics}");
    env.shutdown().await;
}
