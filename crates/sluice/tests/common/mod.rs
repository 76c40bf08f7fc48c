//! Harness for the distributed tests: `sluice serve` as real child processes (killed when
//! dropped), their configuration, and bounded client loops that record every attempt.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test harness that fails loudly"
)]

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

/// The gateway key every test client uses.
pub const KEY: &str = "sk-distributed-test";
/// The environment variable that carries the provider key to the gateways.
const PROVIDER_KEY_ENV: &str = "SLUICE_TEST_PROVIDER_KEY";
/// Most attempts one client loop makes, whatever the time left.
const MAX_ATTEMPTS_PER_CLIENT: usize = 50_000;
/// Bound on one HTTP attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

fn temp_path(what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("sluice-distributed-{}-{n}-{what}", std::process::id()))
}

/// One `sluice serve` process; killed (SIGKILL) and reaped when dropped.
pub struct Gateway {
    pub url: String,
    child: Child,
    _stdout: Option<BufReader<ChildStdout>>,
    log: PathBuf,
    config: PathBuf,
    jobs: String,
}

impl Gateway {
    /// Starts `sluice serve --config FILE` and waits for its `sluice listening on` line.
    pub fn start(config: &str) -> Self {
        let file = temp_path("sluice.toml");
        // Without a `[jobs] path`, each instance keeps its embedded job store beside its own
        // config, not in a directory shared with the other instances.
        let jobs = if config.contains("[jobs]") {
            String::new()
        } else {
            format!("[jobs]\npath = \"{}\"\n", temp_path("jobs.redb").display())
        };
        std::fs::write(&file, format!("{jobs}{config}")).unwrap();
        let log = temp_path("gateway.log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("serve")
            .arg("--config")
            .arg(&file)
            .env("SLUICE_LOG", std::env::var("SLUICE_TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .env(PROVIDER_KEY_ENV, "sk-provider-distributed-test")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut gateway = Self { url: String::new(), child, _stdout: None, log, config: file, jobs };
        let stdout = gateway.child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        tokio::task::block_in_place(|| reader.read_line(&mut line)).unwrap();
        let Some(url) = line.trim().strip_prefix("sluice listening on ") else {
            panic!("sluice serve did not start: {line:?}\n{}", gateway.stderr());
        };
        gateway.url = url.to_owned();
        gateway._stdout = Some(reader);
        gateway
    }

    /// Rewrites the configuration file and sends SIGHUP: the gateway reloads it.
    pub fn reload(&self, config: &str) {
        std::fs::write(&self.config, format!("{}{config}", self.jobs)).unwrap();
        let status = Command::new("kill").arg("-HUP").arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "could not signal the gateway");
    }

    /// What the process logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(&self.config);
    }
}

/// The gateway config: one OpenAI-shaped deployment on the simulator with `limits`, one
/// model profile `chat`, one tenant and key, and the given `[store]` table.
pub fn config(sim_url: &str, store: &str, limits: &str, lease: &str) -> String {
    let sha = hex::encode(sluice_config::hash_key(KEY));
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nlease = \"{lease}\"\n\n{store}\n\n\
         [[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{sim_url}\"\napi_key_env = \"{PROVIDER_KEY_ENV}\"\n\n\
         [[deployments]]\nname = \"sim-mini\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ {limits} }}\n\n\
         [[models]]\nname = \"chat\"\ndeployment = \"sim-mini\"\ndefault_max_tokens = 8\n\n\
         [[tenants]]\nname = \"acme\"\n\n\
         [[keys]]\nid = \"acme-1\"\ntenant = \"acme\"\nsha256 = \"{sha}\"\n",
    )
}

/// A `[store]` table for one Redis server.
pub fn redis_store(url: &str, prefix: &str, on_unavailable: &str) -> String {
    format!(
        "[store]\nkind = \"redis\"\nurl = \"{url}\"\nprefix = \"{prefix}\"\n\
         on_unavailable = \"{on_unavailable}\"\ninstances = 3\ntimeout = \"250ms\""
    )
}

/// A `[store]` table for a Redis Cluster.
pub fn cluster_store(urls: &[String], prefix: &str) -> String {
    let seeds: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!("[store]\nkind = \"redis\"\ncluster = [{}]\nprefix = \"{prefix}\"", seeds.join(", "))
}

/// Starts `n` gateways with the same config.
pub fn gateways(n: usize, config: &str) -> Vec<Gateway> {
    (0..n).map(|_| Gateway::start(config)).collect()
}

/// One HTTP attempt as a client saw it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Which of the load's URLs it went to.
    pub instance: usize,
    /// Sent at, since the load's origin.
    pub sent: Duration,
    /// Until the response was read (or the attempt failed).
    pub took: Duration,
    /// HTTP status, 0 when no response came.
    pub status: u16,
    /// `error.gateway_decision`, else `error.code`, else empty.
    pub decision: String,
}

impl Attempt {
    /// When the answer came, since the load's origin.
    pub fn done(&self) -> Duration {
        self.sent + self.took
    }
}

/// How a client loop behaves.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Concurrent client loops.
    pub clients: usize,
    /// How long they run.
    pub run: Duration,
    /// Cap on any wait between attempts (the gateway's `retry-after-ms` is honoured up to it).
    pub max_wait: Duration,
}

fn chat_body(client: usize) -> Value {
    json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 8,
        "user": format!("client-{client}"),
    })
}

async fn attempt(http: &reqwest::Client, url: &str, key: &str, body: &Value) -> (u16, String, Option<Duration>) {
    let sent = http.post(format!("{url}/v1/chat/completions")).bearer_auth(key).json(body).send().await;
    let Ok(response) = sent else { return (0, String::new(), None) };
    let status = response.status().as_u16();
    let wait = response
        .headers()
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .map(Duration::from_millis);
    let value: Value = response.json().await.unwrap_or(Value::Null);
    let error = &value["error"];
    let decision = error["gateway_decision"].as_str().or_else(|| error["code"].as_str()).unwrap_or_default();
    (status, decision.to_owned(), wait)
}

/// Runs `load.clients` loops from `origin`; client `c`'s `n`-th attempt goes to
/// `urls[(c + n) % len]`. Every loop stops at `origin + load.run` or after
/// [`MAX_ATTEMPTS_PER_CLIENT`] attempts.
pub async fn run_load(urls: Vec<String>, load: Load, origin: Instant) -> Vec<Attempt> {
    run_load_as(urls, load, origin, KEY, chat_body).await
}

/// [`run_load`] with gateway key `key` and client `c` sending `body(c)`.
pub async fn run_load_as(
    urls: Vec<String>,
    load: Load,
    origin: Instant,
    key: &'static str,
    body: fn(usize) -> Value,
) -> Vec<Attempt> {
    let http = reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT).build().unwrap();
    let end = origin + load.run;
    let mut tasks = Vec::new();
    for client in 0..load.clients {
        let (http, urls) = (http.clone(), urls.clone());
        tasks.push(tokio::spawn(async move {
            let body = body(client);
            let mut seen = Vec::new();
            for n in 0..MAX_ATTEMPTS_PER_CLIENT {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let instance = (client + n) % urls.len();
                let (status, decision, wait) = attempt(&http, &urls[instance], key, &body).await;
                let took = now.elapsed();
                seen.push(Attempt { instance, sent: now - origin, took, status, decision });
                let pause = match status {
                    200 => Duration::ZERO,
                    0 => Duration::from_millis(100),
                    _ => wait.unwrap_or(Duration::from_millis(100)),
                };
                tokio::time::sleep_until((Instant::now() + pause.min(load.max_wait)).min(end)).await;
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_by_key(|a| a.sent);
    all
}

/// Admitted requests per second in the simulator's timeline seconds `from..to`.
pub fn admitted_rate(stats: &sluice_sim::stats::StatsSnapshot, from: u64, to: u64) -> f64 {
    let sum: u64 = stats.timeline.iter().filter(|s| s.second >= from && s.second < to).map(|s| s.requests).sum();
    sum as f64 / (to - from) as f64
}

/// Counts attempts by `(status, decision)`, for failure messages and the log.
pub fn summary(attempts: &[Attempt]) -> std::collections::BTreeMap<(u16, String), usize> {
    let mut counts = std::collections::BTreeMap::new();
    for a in attempts {
        *counts.entry((a.status, a.decision.clone())).or_insert(0) += 1;
    }
    counts
}

/// `DBSIZE` of the Redis server on `port` (None while it does not answer).
pub fn redis_keys(port: u16) -> Option<u64> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    stream.write_all(b"DBSIZE\r\n").ok()?;
    let mut buffer = [0u8; 64];
    let n = stream.read(&mut buffer).ok()?;
    std::str::from_utf8(&buffer[..n]).ok()?.trim().strip_prefix(':')?.parse().ok()
}
