//! Async jobs over HTTP: submit (`POST /v1/jobs`, `Prefer: respond-async`), poll,
//! idempotency, ownership, bad input, and retries to the dead letter — against the strict
//! simulated provider, with the embedded job store in a temp dir and real workers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_jobs::EmbeddedJobStore;
use sluice_quota::{MemoryStore, SystemClock};
use sluice_server::AppState;
use sluice_sim::{SimConfig, SimHandle, SimProvider};

const ACME: &str = "sk-jobs-acme";
const ACME_BATCH: &str = "sk-jobs-acme-batch";
const GLOBEX: &str = "sk-jobs-globex";

struct Env {
    sim: SimHandle,
    url: String,
    http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The running gateway's state and configuration text, for reloads.
    state: AppState,
    text: String,
    _dir: tempfile::TempDir,
}

fn sha(key: &str) -> String {
    hex::encode(sluice_config::hash_key(key))
}

async fn start(sim_models: &str, max_attempts: u32) -> Env {
    start_on(sim_models, max_attempts, Arc::new(SystemClock::new())).await
}

/// [`start`] with the gateway and its job store on `clock` (tokio's, for a test on paused
/// time: a retry's backoff then passes without waiting in real time).
async fn start_on(sim_models: &str, max_attempts: u32, clock: Arc<dyn sluice_quota::Clock>) -> Env {
    let sim = SimProvider::start(SimConfig::from_toml_str(&format!("seed = 1\n{sim_models}")).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("provider-key");
    std::fs::write(&key_file, "sk-provider-jobs").unwrap();
    let text = format!(
        r#"
[[providers]]
name = "sim"
kind = "openai"
base_url = "{url}"
api_key_file = "{file}"

[[providers]]
name = "sim-anthropic"
kind = "anthropic"
base_url = "{url}"
api_key_file = "{file}"

[[deployments]]
name = "oa"
provider = "sim"
model = "gpt-4o-mini"
breaker_failures = 1000
limits = {{ tpm = 10000000, input_tpm = 100000 }}

[[deployments]]
name = "claude"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"

[[models]]
name = "chat"
deployment = "oa"
default_max_tokens = 16

[[models]]
name = "smart"
deployment = "claude"

[[deployments]]
name = "ghost"
provider = "sim"
model = "not-served-by-the-sim"

[[models]]
name = "ghost"
deployment = "ghost"
default_max_tokens = 8

[[tenants]]
name = "acme"

[[tenants]]
name = "globex"

[[classes]]
name = "batch"
max_wait = "10m"
priority = 5
max_attempts = {max_attempts}
# Job attempts are counted here: one upstream attempt per job attempt.
retry_attempts = 1

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{acme}"

[[keys]]
id = "acme-batch"
tenant = "acme"
class = "batch"
sha256 = "{acme_batch}"

[[keys]]
id = "globex-1"
tenant = "globex"
sha256 = "{globex}"

[jobs]
workers = 2
visibility_timeout = "3s"
"#,
        url = sim.url(),
        file = key_file.display(),
        acme = sha(ACME),
        acme_batch = sha(ACME_BATCH),
        globex = sha(GLOBEX),
    );
    let mut config = sluice_config::parse(&text).unwrap();
    // `/metrics` on the gateway's one port.
    config.admin.listen = sluice_config::AdminListen::Shared;
    let jobs = EmbeddedJobStore::open(&dir.path().join("jobs.redb"), Arc::clone(&clock)).unwrap();
    let store = Arc::new(MemoryStore::new(Arc::clone(&clock)));
    let state = AppState::build_with_clock(&config, store, clock).unwrap().with_jobs(Arc::new(jobs), &config);
    let _workers = sluice_server::jobs::worker::spawn(&state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(sluice_server::serve(listener, state.clone(), async {
        let _ = stopped.await;
    }));
    Env { sim, url, http: reqwest::Client::new(), stop: Some(stop), state, text, _dir: dir }
}

const OPENAI_SIM: &str = "[[models]]\nname = \"gpt-4o-mini\"\nshape = \"openai\"\n\
    [[models]]\nname = \"claude-sonnet-4-5\"\nshape = \"anthropic\"\n";

fn chat(marker: &str) -> Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": format!("hello req-id:{marker}")}], "max_tokens": 8})
}

impl Env {
    async fn send(&self, request: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        (status, headers, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn submit(&self, key: &str, body: &Value, idempotency: Option<&str>) -> (u16, Value) {
        let mut request = self.http.post(format!("{}/v1/jobs", self.url)).bearer_auth(key).json(body);
        if let Some(k) = idempotency {
            request = request.header("Idempotency-Key", k);
        }
        let (status, _, value) = self.send(request).await;
        (status, value)
    }

    async fn get(&self, key: &str, id: &str) -> (u16, Value) {
        let (status, _, value) = self.send(self.http.get(format!("{}/v1/jobs/{id}", self.url)).bearer_auth(key)).await;
        (status, value)
    }

    /// Polls until the job is no longer queued or running (at most `within`).
    async fn settled(&self, key: &str, id: &str, within: Duration) -> Value {
        let polls = within.as_millis() / 50;
        for _ in 0..polls {
            let (status, job) = self.get(key, id).await;
            assert_eq!(status, 200, "{job}");
            if job["status"] != "queued" && job["status"] != "running" {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("job {id} did not finish within {within:?}: {}", self.get(key, id).await.1);
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.sim.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_job_runs_and_its_owner_reads_the_answer() {
    let env = start(OPENAI_SIM, 5).await;
    let (status, accepted) = env
        .submit(ACME, &json!({"endpoint": "/v1/chat/completions", "body": chat("a1"), "class": "batch"}), None)
        .await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["status"], "queued");
    assert!(accepted["eta_sec"].as_u64().is_some(), "{accepted}");
    let id = accepted["job_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("job_"));
    let job = env.settled(ACME, &id, Duration::from_secs(10)).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!((job["attempts"].as_u64(), job["class"].as_str()), (Some(1), Some("batch")));
    assert_eq!(job["result"]["status"], 200);
    assert_eq!(job["result"]["body"]["object"], "chat.completion", "{job}");
    assert!(job["result"]["body"]["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    let stats = env.sim.stats();
    assert_eq!((stats.markers, stats.duplicates), (1, 0));
    // How far its first attempt's end was from the ETA it was given: one observation.
    let text = env.http.get(format!("{}/metrics", env.url)).send().await.unwrap().text().await.unwrap();
    let samples = sluice_admin::parse_samples(&text);
    let eta = |name: &str| -> f64 {
        let keep = |s: &&sluice_admin::Sample| s.label("source") == "job" && s.label("class") == "batch";
        samples.iter().filter(|s| s.name == name).filter(keep).map(|s| s.value).sum()
    };
    assert_eq!(eta("sluice_queue_eta_error_seconds_count"), 1.0, "{text}");
    let error = eta("sluice_queue_eta_error_seconds_sum");
    let given = accepted["eta_sec"].as_f64().unwrap();
    assert!(error <= given.max(1.0) + 1.0, "an error of {error}s for an ETA of {given}s");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_respond_async_turns_both_endpoints_into_jobs() {
    let env = start(OPENAI_SIM, 5).await;
    let post = |path: &str, body: Value| {
        env.http.post(format!("{}{path}", env.url)).bearer_auth(ACME).header("Prefer", "respond-async").json(&body)
    };
    let (status, headers, accepted) = env.send(post("/v1/chat/completions", chat("p1"))).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["job_id"].as_str().unwrap().to_owned();
    assert_eq!(headers["location"].to_str().unwrap(), format!("/v1/jobs/{id}"));
    let messages =
        json!({"model": "smart", "max_tokens": 8, "messages": [{"role": "user", "content": "hi req-id:p2"}]});
    let (status, _, accepted) = env.send(post("/v1/messages", messages)).await;
    assert_eq!(status, 202, "{accepted}");
    let anthropic = accepted["job_id"].as_str().unwrap().to_owned();
    assert_eq!(env.settled(ACME, &id, Duration::from_secs(10)).await["result"]["body"]["object"], "chat.completion");
    let job = env.settled(ACME, &anthropic, Duration::from_secs(10)).await;
    assert_eq!(job["result"]["body"]["type"], "message", "{job}");
    // A streaming request cannot be a job.
    let streamed = json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, refused) = env.send(post("/v1/chat/completions", streamed)).await;
    assert_eq!((status, refused["error"]["param"].as_str()), (400, Some("stream")), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("streaming requests cannot run as async jobs"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_is_idempotent_per_tenant_and_jobs_are_private_to_it() {
    let env = start(OPENAI_SIM, 5).await;
    let request = json!({"endpoint": "/v1/chat/completions", "body": chat("i1")});
    let (first_status, first) = env.submit(ACME, &request, Some("order-42")).await;
    assert_eq!(first_status, 202);
    let id = first["job_id"].as_str().unwrap().to_owned();
    // Same tenant (another of its keys), same key: the same job, 200.
    let (status, again) = env.submit(ACME_BATCH, &request, Some("order-42")).await;
    assert_eq!((status, again["job_id"].as_str()), (200, Some(id.as_str())), "{again}");
    // Same key, another request: refused.
    let other = json!({"endpoint": "/v1/chat/completions", "body": chat("i2")});
    let (status, refused) = env.submit(ACME, &other, Some("order-42")).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("idempotency_key_reused")));
    // Another tenant may use the same key for its own job.
    let theirs = json!({"endpoint": "/v1/chat/completions", "body": chat("i3")});
    let (status, theirs) = env.submit(GLOBEX, &theirs, Some("order-42")).await;
    assert_eq!(status, 202);
    assert_ne!(theirs["job_id"], first["job_id"]);

    env.settled(ACME, &id, Duration::from_secs(10)).await;
    assert_eq!(env.get(ACME_BATCH, &id).await.0, 200, "any key of the owning tenant sees it");
    let (status, hidden) = env.get(GLOBEX, &id).await;
    assert_eq!((status, hidden["error"]["code"].as_str()), (404, Some("job_not_found")));
    let (unknown_status, unknown) = env.get(GLOBEX, "job_000000000000000000000000").await;
    assert_eq!(unknown_status, status, "existence does not leak");
    assert_eq!(unknown["error"]["code"], hidden["error"]["code"]);
    assert_eq!(unknown["error"]["message"], hidden["error"]["message"]);
    assert_eq!(env.get(ACME, "../../etc/passwd").await.0, 404);
    let (status, _, _) = env.send(env.http.get(format!("{}/v1/jobs/{id}", env.url))).await;
    assert_eq!(status, 401);
    let (status, _) = env.submit("sk-nobody", &request, None).await;
    assert_eq!(status, 401);
    // The idempotent repeat after completion reports the current status.
    let (status, done) = env.submit(ACME, &request, Some("order-42")).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("completed")));
    assert_eq!(env.sim.stats().duplicates, 0);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_cannot_lift_its_jobs_above_its_class() {
    let env = start(OPENAI_SIM, 5).await;
    let job = |extra: Value| {
        let mut request = json!({"endpoint": "/v1/chat/completions", "body": chat("c")});
        request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        request
    };
    // A batch key (priority 5) asks for the interactive class, or a more urgent number.
    let refused = [
        (ACME_BATCH, json!({"class": "interactive", "priority": 0}), "class"),
        (ACME_BATCH, json!({"class": "interactive"}), "class"),
        (ACME_BATCH, json!({"priority": 0}), "priority"),
        (ACME, json!({"class": "batch", "priority": 4}), "priority"),
    ];
    for (key, extra, param) in refused {
        let (status, body) = env.submit(key, &job(extra.clone()), None).await;
        assert_eq!(status, 403, "{key} {extra} -> {body}");
        assert_eq!(body["error"]["code"].as_str(), Some("class_not_allowed"), "{body}");
        assert_eq!(body["error"]["param"].as_str(), Some(param), "{body}");
    }
    // Its own class, a less urgent number within it, and a step down for an interactive key.
    let allowed = [
        (ACME_BATCH, json!({"priority": 9}), "batch", 9),
        (ACME_BATCH, json!({"class": "batch"}), "batch", 5),
        (ACME, json!({"class": "batch"}), "batch", 5),
    ];
    for (key, extra, class, priority) in allowed {
        let (status, body) = env.submit(key, &job(extra.clone()), None).await;
        assert_eq!(status, 202, "{key} {extra} -> {body}");
        let (_, seen) = env.get(key, body["job_id"].as_str().unwrap()).await;
        assert_eq!((seen["class"].as_str(), seen["priority"].as_u64()), (Some(class), Some(priority)), "{seen}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_job_requests_are_refused_with_the_field_named() {
    let env = start(OPENAI_SIM, 5).await;
    let cases = [
        (json!({"endpoint": "/v1/embeddings", "body": chat("x")}), 400, "endpoint"),
        (json!({"endpoint": "/v1/chat/completions", "body": chat("x"), "class": "vip"}), 400, "class"),
        (json!({"endpoint": "/v1/chat/completions", "body": chat("x"), "priority": 300}), 400, "body"),
        (json!({"endpoint": "/v1/chat/completions", "body": chat("x"), "extra": 1}), 400, "body"),
        (json!({"endpoint": "/v1/chat/completions", "body": {"model": "chat"}}), 400, "messages"),
        (
            json!({"endpoint": "/v1/chat/completions", "body": {"model": "nope", "messages": [{"role": "user", "content": "x"}]}}),
            404,
            "model",
        ),
        (json!({"endpoint": "/v1/messages", "body": chat("x")}), 400, "model"),
        (
            json!({"endpoint": "/v1/chat/completions", "body": {"model": "chat", "stream": true, "messages": [{"role": "user", "content": "x"}]}}),
            400,
            "stream",
        ),
    ];
    for (request, status, param) in cases {
        let (got, body) = env.submit(ACME, &request, None).await;
        assert_eq!(got, status, "{request} -> {body}");
        assert_eq!(body["error"]["param"].as_str(), Some(param), "{request} -> {body}");
    }
    let (status, _, body) =
        env.send(env.http.post(format!("{}/v1/jobs", env.url)).bearer_auth(ACME).body("{not json")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_json")));
    assert_eq!(env.sim.stats().requests, 0, "nothing reached the provider");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_can_never_fit_is_refused_at_once_like_the_live_request() {
    let env = start(OPENAI_SIM, 5).await;
    let huge_output = json!({"model": "chat", "max_tokens": 1_000_000_000_000_000_000u64,
                             "messages": [{"role": "user", "content": "x"}]});
    // About 120,000 input tokens: more than the deployment's input_tpm of 100,000.
    let huge_input = json!({"model": "chat", "messages": [{"role": "user", "content": "word ".repeat(120_000)}]});
    for (body, limiter) in [(huge_output, "tpm"), (huge_input, "input_tpm")] {
        let (live, _, live_body) =
            env.send(env.http.post(format!("{}/v1/chat/completions", env.url)).bearer_auth(ACME).json(&body)).await;
        assert_eq!((live, live_body["error"]["code"].as_str()), (400, Some("request_exceeds_limit")), "{live_body}");
        let (status, reply) = env.submit(ACME, &json!({"endpoint": "/v1/chat/completions", "body": body}), None).await;
        assert_eq!(status, 400, "{reply}");
        assert_eq!(reply["error"]["code"], "request_exceeds_limit");
        assert_eq!(reply["error"]["limiter"], limiter);
        assert_eq!(reply["error"]["scope"], "deployment");
    }
    // A request within the limits is still accepted.
    let (status, reply) =
        env.submit(ACME, &json!({"endpoint": "/v1/chat/completions", "body": chat("ok")}), None).await;
    assert_eq!(status, 202, "{reply}");
    env.stop().await;
}

/// On tokio's paused clock, which the gateway and its job store follow: the backoff between
/// the two attempts passes without a real wait.
#[tokio::test(start_paused = true)]
async fn provider_errors_are_retried_then_dead_lettered_and_client_errors_fail_at_once() {
    let failing = "[[models]]\nname = \"gpt-4o-mini\"\nshape = \"openai\"\nfaults = { error_503 = 1.0 }\n\
        [[models]]\nname = \"claude-sonnet-4-5\"\nshape = \"anthropic\"\n";
    let env = start_on(failing, 2, common::TokioClock::new()).await;
    let (_, accepted) = env
        .submit(ACME, &json!({"endpoint": "/v1/chat/completions", "body": chat("d1"), "class": "batch"}), None)
        .await;
    let id = accepted["job_id"].as_str().unwrap().to_owned();
    // Two attempts, one backoff of at most 1 s between them.
    let job = env.settled(ACME, &id, Duration::from_secs(10)).await;
    assert_eq!(job["status"], "dead_letter", "{job}");
    assert_eq!(job["attempts"], 2);
    assert!(job["error"].as_str().unwrap().contains("503"), "{job}");
    assert_eq!(env.sim.stats().faults.error_503, 2, "exactly max_attempts calls");
    // A request the provider refuses as a client error (a model it does not serve: 404) fails at once.
    let ghost = json!({"model": "ghost", "messages": [{"role": "user", "content": "hi"}]});
    let (status, accepted) = env.submit(ACME, &json!({"endpoint": "/v1/chat/completions", "body": ghost}), None).await;
    assert_eq!(status, 202, "{accepted}");
    let job = env.settled(ACME, accepted["job_id"].as_str().unwrap(), Duration::from_secs(10)).await;
    assert_eq!((job["status"].as_str(), job["attempts"].as_u64()), (Some("failed"), Some(1)), "{job}");
    assert!(job["error"].as_str().unwrap().contains("the provider answered 404"), "{job}");
    let metrics = env.http.get(format!("{}/metrics", env.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("sluice_jobs_dead_lettered_total 1"), "{metrics}");
    assert!(metrics.contains("sluice_jobs_failed_total 1"), "{metrics}");
    assert!(metrics.contains("sluice_jobs_submitted_total 2"), "{metrics}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_follow_a_reload_a_key_and_a_class_added_by_it_work() {
    const LATE: &str = "sk-jobs-late";
    let env = start(OPENAI_SIM, 5).await;
    let added = format!(
        "[[classes]]\nname = \"nightly\"\nmax_wait = \"10m\"\npriority = 7\n\n\
         [[keys]]\nid = \"late-1\"\ntenant = \"acme\"\nsha256 = \"{}\"\n\n[jobs]",
        sha(LATE)
    );
    let reloaded = sluice_config::parse(&env.text.replacen("[jobs]", &added, 1)).unwrap();
    env.state.reload(&reloaded).unwrap();
    let (status, accepted) = env
        .submit(LATE, &json!({"endpoint": "/v1/chat/completions", "body": chat("late-1"), "class": "nightly"}), None)
        .await;
    assert_eq!(status, 202, "the new key and class are known at submission: {accepted}");
    let id = accepted["job_id"].as_str().unwrap().to_owned();
    let job = env.settled(LATE, &id, Duration::from_secs(10)).await;
    assert_eq!(job["status"], "completed", "the workers run it on the configuration in force: {job}");
    assert_eq!((job["class"].as_str(), job["priority"].as_u64()), (Some("nightly"), Some(7)));
    env.stop().await;
}
