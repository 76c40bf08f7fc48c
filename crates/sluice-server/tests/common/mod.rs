//! Harness: the strict simulated provider and an in-process gateway, both on 127.0.0.1.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test harness that fails loudly"
)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_quota::SystemClock;
use sluice_server::{AppState, Running};
use sluice_sim::config::SimConfig;
use sluice_sim::server::SimHandle;

pub const KEY: &str = "sk-test-interactive";
pub const BATCH_KEY: &str = "sk-test-batch";

pub struct Env {
    pub sim: SimHandle,
    pub gateway: Running,
    pub http: reqwest::Client,
}

/// The provider key file every test gateway reads: one file in Cargo's scratch directory
/// for integration tests (under `target/`), written once and atomically (a gateway of a
/// concurrent test never reads it half written), so no run leaves files behind in `/tmp`.
fn key_file() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join("sluice-test-provider-key");
        if !path.exists() {
            let staged = dir.join(format!("sluice-test-provider-key.{}", std::process::id()));
            std::fs::write(&staged, "sk-provider-planted-secret-0000").unwrap();
            std::fs::rename(&staged, &path).unwrap();
        }
        path.display().to_string()
    })
    .clone()
}

pub fn sha(key: &str) -> String {
    hex::encode(sluice_config::hash_key(key))
}

/// One deployment `d` of `gpt-4o-mini` on the sim (1,000 RPM), its profile `fast`, one
/// tenant and [`KEY`] with `key_limits` (a TOML table, or empty for none).
pub fn one_deployment(key_limits: &str) -> String {
    let limits = if key_limits.is_empty() { String::new() } else { format!("limits = {key_limits}\n") };
    format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ rpm = 1000 }}\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n[[tenants]]\nname = \"t\"\n\n\
         [[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n{limits}",
        sha(KEY)
    )
}

/// Starts the sim with `sim`, then a gateway whose config is `policy` (deployments,
/// models, tenants, keys; `{SIM}` and `{KEYFILE}` are substituted) under a provider
/// section pointing at the sim.
pub async fn start(sim: SimConfig, policy: &str) -> Env {
    start_with(sim, "", policy).await
}

/// [`start`] with a `[store]` (or other process) section before the policy; the store is
/// built from the configuration as `sluice serve` builds it.
pub async fn start_with(sim: SimConfig, process: &str, policy: &str) -> Env {
    let sim = sluice_sim::SimProvider::start(sim).await.unwrap();
    let config = config(&sim, process, policy);
    let store = sluice_redis::choose::from_config(&config.store, Arc::new(SystemClock::new()), None);
    let gateway = running(&config, store, Arc::new(SystemClock::new())).await;
    Env { sim, gateway, http: reqwest::Client::new() }
}

/// [`start`] with the gateway and its memory store on `clock` (a fake clock that moves only
/// when the test says: waits, refills and retry hints are then exact).
pub async fn start_clocked(sim: SimConfig, policy: &str, clock: Arc<dyn sluice_quota::Clock>) -> Env {
    let sim = sluice_sim::SimProvider::start(sim).await.unwrap();
    let config = config(&sim, "", policy);
    let store = Arc::new(sluice_quota::MemoryStore::new(Arc::clone(&clock)));
    let gateway = running(&config, store, clock).await;
    Env { sim, gateway, http: reqwest::Client::new() }
}

/// `config`'s gateway on `store` and `clock`, serving on a free port of 127.0.0.1 with the
/// operator surface (admin API, dashboard) mounted, as `sluice serve` mounts it.
pub async fn running(
    config: &sluice_config::Config,
    store: Arc<dyn sluice_quota::QuotaStore>,
    clock: Arc<dyn sluice_quota::Clock>,
) -> Running {
    let state = AppState::build_with_clock(config, store, clock)
        .unwrap()
        .with_tls(config)
        .unwrap()
        .with_surface(sluice_admin::surface(config));
    Running::start_state(state, "127.0.0.1:0".parse().unwrap(), config.server.shutdown_grace).await.unwrap()
}

/// The gateway's clock on tokio's timeline: with `#[tokio::test(start_paused = true)]`, time
/// moves only when every task waits (queue deadlines, refills and retry hints then agree
/// with `tokio::time::Instant` exactly, and no test sleeps in real time).
#[derive(Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { origin: tokio::time::Instant::now() })
    }
}

impl sluice_quota::Clock for TokioClock {
    fn now(&self) -> sluice_quota::Nanos {
        sluice_quota::Nanos(sluice_quota::clock::duration_ns(self.origin.elapsed()))
    }

    fn unix_millis(&self) -> u64 {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap();
        sluice_quota::clock::FAKE_UNIX_ORIGIN_MS + ms
    }

    fn sleep_until(&self, deadline: sluice_quota::Nanos) -> sluice_quota::clock::Wait {
        Box::pin(tokio::time::sleep_until(self.origin + Duration::from_nanos(deadline.0)))
    }
}

/// The configuration [`start_with`] builds: `process` and `policy` under provider sections
/// pointing at `sim` (also for reloading a running gateway with another policy). The
/// admin plane is served beside the API (`[admin] listen = "shared"`): these tests reach
/// `/admin` and `/metrics` on the gateway's one port; `admin_plane.rs` tests the split.
pub fn config(sim: &SimHandle, process: &str, policy: &str) -> sluice_config::Config {
    let file = key_file();
    let policy = policy.replace("{SIM}", &sim.url()).replace("{KEYFILE}", &file);
    let text = format!(
        "{process}\n[[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{url}\"\napi_key_file = \"{file}\"\n\n\
         [[providers]]\nname = \"sim-anthropic\"\nkind = \"anthropic\"\nbase_url = \"{url}\"\napi_key_file = \"{file}\"\n\n{policy}",
        url = sim.url(),
    );
    let mut config = sluice_config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    config.admin.listen = sluice_config::AdminListen::Shared;
    config
}

impl Env {
    pub async fn post(&self, path: &str, key: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
        let response =
            self.http.post(format!("{}{path}", self.gateway.url())).bearer_auth(key).json(body).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, headers, value)
    }

    /// Posts until the gateway admits it, waiting as its `retry-after-ms` says, until `deadline_ms`.
    pub async fn post_patiently(&self, key: &str, body: &Value, clock: &Deadline) -> Option<(u16, Value)> {
        self.post_patiently_to("/v1/chat/completions", key, body, clock).await
    }

    /// [`Env::post_patiently`] to `path`.
    pub async fn post_patiently_to(
        &self,
        path: &str,
        key: &str,
        body: &Value,
        clock: &Deadline,
    ) -> Option<(u16, Value)> {
        loop {
            let (status, headers, value) = self.post(path, key, body).await;
            if status != 429 || value["error"]["gateway_decision"] != "rejected_before_send" {
                return Some((status, value));
            }
            let wait: u64 = headers.get("retry-after-ms").unwrap().to_str().unwrap().parse().unwrap();
            if !clock.sleep(Duration::from_millis(wait)).await {
                return None;
            }
        }
    }

    pub async fn metrics(&self) -> String {
        let response = self.http.get(format!("{}/metrics", self.gateway.url())).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    }

    pub async fn shutdown(self) {
        self.gateway.shutdown().await;
        self.sim.shutdown().await;
    }
}

/// A bounded test duration.
pub struct Deadline {
    end: tokio::time::Instant,
}

impl Deadline {
    pub fn after(d: Duration) -> Self {
        Self { end: tokio::time::Instant::now() + d }
    }

    pub fn passed(&self) -> bool {
        tokio::time::Instant::now() >= self.end
    }

    /// Sleeps `d` unless that passes the deadline; false if the deadline came first.
    pub async fn sleep(&self, d: Duration) -> bool {
        let wake = tokio::time::Instant::now() + d;
        if wake >= self.end {
            tokio::time::sleep_until(self.end).await;
            return false;
        }
        tokio::time::sleep_until(wake).await;
        true
    }
}

pub fn chat(model: &str, words: usize, max_tokens: u64) -> Value {
    let content = "lorem ipsum ".repeat(words / 2);
    json!({"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens})
}

/// Mean admitted per second over the timeline's seconds `from..to` (real seconds).
pub fn mean_rate(sim: &SimHandle, from: u64, to: u64, tokens: bool) -> f64 {
    let stats = sim.stats();
    let picked: Vec<u64> = stats
        .timeline
        .iter()
        .filter(|s| s.second >= from && s.second < to)
        .map(|s| if tokens { s.tokens } else { s.requests })
        .collect();
    assert!(!picked.is_empty(), "no timeline seconds in {from}..{to}: {:?}", stats.timeline);
    picked.iter().sum::<u64>() as f64 / (to - from) as f64
}

/// Runs `clients` concurrent loops, each posting `body` patiently until `run` has passed.
pub async fn saturate(
    env: &Arc<Env>,
    key: &'static str,
    body: Value,
    clients: usize,
    run: Duration,
) -> Vec<(u16, Value)> {
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let env = Arc::clone(env);
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let deadline = Deadline::after(run);
            let mut seen = Vec::new();
            while !deadline.passed() {
                match env.post_patiently(key, &body, &deadline).await {
                    Some(outcome) => seen.push(outcome),
                    None => break,
                }
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// A gateway with async jobs (embedded job store in a temp dir, real workers) in front of
/// the sim.
pub struct JobsEnv {
    pub sim: SimHandle,
    pub url: String,
    pub http: reqwest::Client,
    workers: Vec<tokio::task::JoinHandle<()>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

/// Starts the sim with `sim` and a gateway with jobs whose policy is `policy` (with its
/// `[jobs]` section), as [`start`] does.
pub async fn start_jobs(sim: SimConfig, policy: &str) -> JobsEnv {
    let dir = tempfile::tempdir().unwrap();
    let sim = sluice_sim::SimProvider::start(sim).await.unwrap();
    let config = config(&sim, "", policy);
    let clock = Arc::new(SystemClock::new());
    let jobs = sluice_jobs::EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock.clone()).unwrap();
    let store = Arc::new(sluice_quota::MemoryStore::new(clock));
    let state = AppState::build(&config, store)
        .unwrap()
        .with_jobs(Arc::new(jobs), &config)
        .with_surface(sluice_admin::surface(&config));
    let workers = sluice_server::jobs::worker::spawn(&state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(sluice_server::serve(listener, state, std::future::pending()));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    JobsEnv { sim, url, http, workers, server, _dir: dir }
}

impl JobsEnv {
    /// Submits a chat-completions job; its id.
    pub async fn submit(&self, key: &str, body: &Value) -> String {
        let job = json!({"endpoint": "/v1/chat/completions", "body": body, "class": "batch"});
        let response = self.http.post(format!("{}/v1/jobs", self.url)).bearer_auth(key).json(&job).send().await;
        let accepted: Value = response.unwrap().json().await.unwrap();
        accepted["job_id"].as_str().unwrap_or_else(|| panic!("not accepted: {accepted}")).to_owned()
    }

    /// The job as its owner reads it.
    pub async fn job(&self, key: &str, id: &str) -> Value {
        let response = self.http.get(format!("{}/v1/jobs/{id}", self.url)).bearer_auth(key).send().await;
        response.unwrap().json().await.unwrap()
    }

    /// Polls the job until `done` holds (at most `within`); the job last read.
    pub async fn wait_for(&self, key: &str, id: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Deadline::after(within);
        loop {
            let job = self.job(key, id).await;
            if done(&job) || !deadline.sleep(Duration::from_millis(100)).await {
                return job;
            }
        }
    }

    pub async fn shutdown(self) {
        for worker in self.workers {
            worker.abort();
        }
        self.server.abort();
        self.sim.shutdown().await;
    }
}

/// A tenant `acme` (key [`KEY`]) with a daily money budget of `day` on model `fast`, whose
/// requests cost 0.10 each (10 output tokens at 10,000 per million), after `before` (more
/// settings, e.g. `[budgets]`).
pub fn priced_policy(before: &str, day: f64) -> String {
    format!(
        r#"{before}
[[deployments]]
name = "d"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 100000 }}
price = {{ input = 0.0, output = 10000.0 }}

[[models]]
name = "fast"
deployment = "d"

[[tenants]]
name = "acme"
limits = {{ budget = {{ day = {day:?} }} }}

[[keys]]
id = "k"
tenant = "acme"
sha256 = "{sha}"
"#,
        sha = sha(KEY)
    )
}

/// One request of 10 output tokens to `fast` on `url` under [`KEY`]; its status.
pub async fn ask_fast(http: &reqwest::Client, url: &str) -> u16 {
    let body = serde_json::json!({"model": "fast", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let request = http.post(format!("{url}/v1/chat/completions")).bearer_auth(KEY).json(&body);
    request.send().await.unwrap().status().as_u16()
}
