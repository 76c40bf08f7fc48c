//! `sluice bench keys`: runtime keys at scale on three `sluice serve` processes sharing one
//! Redis. It creates `--keys` keys through the admin API (spread over the instances, as an
//! operator's tooling would), then rotates and revokes a sample of them, and reports:
//!
//! - the latency of create, rotate and revoke (the goal: p99 at most 20 ms at 100,000 keys);
//! - how long a revoke made on one instance takes to be refused on the two others (polled
//!   every 5 ms; the goal: at most 1 s);
//! - each instance's RSS growth per key;
//! - the request path's latency with a runtime key, before the keys and after (the goal:
//!   no change).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_redis::local::LocalRedis;
use sluice_sim::config::{Completion, Limits};
use sluice_sim::{ModelConfig, SimConfig, SimProvider};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::HttpClient;
use crate::fleet::Parts;
use crate::stats::{Samples, Summary};

/// The root admin key of the instances.
const ROOT: &str = "sk-bench-root-admin";
/// Instances sharing the Redis.
const INSTANCES: usize = 3;
/// Revokes whose propagation to the other instances is timed (one after the other).
const PROPAGATION_SAMPLES: usize = 100;
/// How often the other instances are asked whether a revoked secret still works.
const POLL: Duration = Duration::from_millis(5);

/// Arguments of `sluice bench keys`.
#[derive(Debug, Clone, clap::Args)]
pub struct KeysArgs {
    /// Runtime keys created.
    #[arg(long, default_value_t = 100_000)]
    pub keys: usize,
    /// Keys rotated, and keys revoked, once all are created.
    #[arg(long, default_value_t = 1_000)]
    pub sample: usize,
    /// Admin calls in flight at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Requests timed on the request path, before the keys and after.
    #[arg(long, default_value_t = 2_000)]
    pub requests: usize,
    /// The `sluice` binary to start (default: this one).
    #[arg(long)]
    pub binary: Option<std::path::PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct KeysReport {
    /// Keys created.
    pub keys: usize,
    /// Seconds the creation took.
    pub create_seconds: f64,
    /// Create latency, over every create.
    pub create: Summary,
    /// Create latency over the last tenth (the store at 90 % to 100 % of the keys).
    pub create_last_tenth: Summary,
    /// Rotate latency.
    pub rotate: Summary,
    /// Revoke latency.
    pub revoke: Summary,
    /// From a revoke's answer until both other instances refuse the secret.
    pub revoke_seen_everywhere: Summary,
    /// Admin calls answered other than 200/201.
    pub admin_failures: u64,
    /// Each instance's RSS growth per key, bytes.
    pub rss_per_key_bytes: Vec<f64>,
    /// Each instance's RSS before and after, KiB.
    pub rss_kib: Vec<(u64, u64)>,
    /// Request latency with a runtime key before the keys were created.
    pub request_before: Summary,
    /// The same after.
    pub request_after: Summary,
}

/// Runs the benchmark and prints its result.
///
/// # Errors
/// When Redis, the simulator or a gateway cannot start, or the admin API fails.
pub async fn run(args: KeysArgs) -> anyhow::Result<()> {
    let report = measure(&args).await?;
    let text = if args.json { serde_json::to_string_pretty(&report)? } else { summary(&report) };
    print(&text);
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the benchmark's result is its output")]
fn print(text: &str) {
    println!("{text}");
}

fn summary(r: &KeysReport) -> String {
    let line = |name: &str, s: &Summary| {
        let ms = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
        format!(
            "  {name:<32} n {:>6}  p50 {:>7} ms  p99 {:>7} ms  max {:>8} ms\n",
            s.count,
            ms(s.p50_ms),
            ms(s.p99_ms),
            ms(s.max_ms)
        )
    };
    let mut out = format!(
        "{} runtime keys on {INSTANCES} instances sharing Redis, created in {:.1} s\n",
        r.keys, r.create_seconds
    );
    out += &line("create (all)", &r.create);
    out += &line("create (last tenth)", &r.create_last_tenth);
    out += &line("rotate", &r.rotate);
    out += &line("revoke", &r.revoke);
    out += &line("revoke refused on the others", &r.revoke_seen_everywhere);
    out += &line("request, 1 runtime key", &r.request_before);
    out += &line(&format!("request, {} runtime keys", r.keys), &r.request_after);
    let per_key: Vec<String> = r.rss_per_key_bytes.iter().map(|b| format!("{b:.0}")).collect();
    let rss: Vec<String> = r.rss_kib.iter().map(|(a, b)| format!("{a}->{b}")).collect();
    out += &format!("  RSS per key (bytes): {}; RSS KiB: {}\n", per_key.join(", "), rss.join(", "));
    out += &format!("  admin calls failed: {}\n", r.admin_failures);
    out
}

/// Starts Redis, the simulator and the instances, and measures.
///
/// # Errors
/// When a piece cannot start or the admin API fails.
pub async fn measure(args: &KeysArgs) -> anyhow::Result<KeysReport> {
    let redis = tokio::task::spawn_blocking(LocalRedis::start).await??;
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 8 },
        ..ModelConfig::openai("gpt-4o-mini").with_limits(Limits::default())
    };
    let sim = SimProvider::start(SimConfig { models: vec![model], ..SimConfig::default() }).await?;
    let binary = crate::process::sluice_binary(args.binary.as_deref())?;
    let store = crate::fleet::redis_store(&redis.url(), &crate::deploy::run_prefix("keys"), "fail_closed");
    let tail = format!("[admin]\nkey_sha256 = \"{}\"\n", crate::harness::key_hash(ROOT));
    let limits = "rpm = 10000000, tpm = 10000000000";
    let parts = Parts { sim_url: &sim.url(), store: &store, limits, lease: "30s", deployment: "", tail: &tail };
    let gateways = crate::fleet::start(&binary, INSTANCES, &crate::fleet::config_with(&parts)).await?;
    let admin = Admin::new(&crate::fleet::urls(&gateways), &crate::fleet::admin_urls(&gateways))?;

    let probe = admin.create(0).await.context("creating the probe key")?.1;
    admin.until_everywhere(&probe, 200).await?;
    let request_before = admin.requests(&probe, args.requests).await;
    let rss_before: Vec<u64> = gateways.iter().map(|g| g.rss_kib().unwrap_or(0)).collect();

    let started = Instant::now();
    let (created, create, create_last_tenth) = admin.create_all(args.keys, args.concurrency).await;
    let create_seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(created.len() == args.keys, "{} of {} keys created", created.len(), args.keys);
    let last = created.last().map(|(_, secret)| secret.clone()).unwrap_or_default();
    admin.until_everywhere(&last, 200).await?;
    let rss_after: Vec<u64> = gateways.iter().map(|g| g.rss_kib().unwrap_or(0)).collect();

    let sample = args.sample.min(args.keys / 2);
    let rotated = created.iter().take(sample).map(|(id, _)| id.clone()).collect();
    let rotate = admin.changes(rotated, "rotate", args.concurrency).await;
    let to_revoke: Vec<(String, String)> = created.iter().skip(args.keys / 2).take(sample).cloned().collect();
    let (propagated, mut revoke) = admin.revokes_watched(&to_revoke[..PROPAGATION_SAMPLES.min(sample)]).await?;
    let rest = to_revoke.iter().skip(PROPAGATION_SAMPLES).map(|(id, _)| id.clone()).collect();
    revoke.merge(admin.changes(rest, "revoke", args.concurrency).await);
    let request_after = admin.requests(&probe, args.requests).await;

    #[expect(clippy::cast_precision_loss, reason = "KiB and counts far below 2^52")]
    let rss_per_key_bytes = rss_before
        .iter()
        .zip(&rss_after)
        .map(|(a, b)| b.saturating_sub(*a) as f64 * 1024.0 / args.keys.max(1) as f64)
        .collect();
    let report = KeysReport {
        keys: args.keys,
        create_seconds,
        create,
        create_last_tenth,
        rotate: rotate.summary(),
        revoke: revoke.summary(),
        revoke_seen_everywhere: propagated.summary(),
        admin_failures: admin.failures.load(Ordering::Relaxed),
        rss_per_key_bytes,
        rss_kib: rss_before.into_iter().zip(rss_after).collect(),
        request_before,
        request_after,
    };
    drop(gateways);
    sim.shutdown().await;
    drop(redis);
    Ok(report)
}

/// The admin API of the instances, and the request path through them.
#[derive(Clone)]
struct Admin {
    http: HttpClient,
    urls: Arc<Vec<String>>,
    /// The same instances' admin listeners.
    admin_urls: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    failures: Arc<AtomicU64>,
}

impl Admin {
    fn new(urls: &[String], admin_urls: &[String]) -> anyhow::Result<Self> {
        anyhow::ensure!(!urls.is_empty() && urls.len() == admin_urls.len(), "no instance");
        Ok(Self {
            http: HttpClient::new(),
            urls: Arc::new(urls.to_vec()),
            admin_urls: Arc::new(admin_urls.to_vec()),
            next: Arc::default(),
            failures: Arc::default(),
        })
    }

    /// `path` on an instance: on its admin listener for `/admin/...`.
    fn uri(&self, instance: usize, path: &str) -> http::Uri {
        let urls = if path.starts_with("/admin/") { &self.admin_urls } else { &self.urls };
        let url = &urls[instance % urls.len()];
        format!("{url}{path}").parse().unwrap_or_default()
    }

    fn next_instance(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Creates a client key of tenant `acme` on `instance`: its id and secret.
    async fn create(&self, instance: usize) -> anyhow::Result<(String, String)> {
        let body = Bytes::from(json!({"tenant": "acme"}).to_string());
        let reply = self.http.post_json(&self.uri(instance, "/admin/keys"), Some(ROOT), body).await?;
        anyhow::ensure!(reply.status == 201, "create answered {}", reply.status);
        let value: Value = serde_json::from_slice(&reply.body)?;
        let id = value["key"]["id"].as_str().context("the key's id")?.to_owned();
        let secret = value["secret"].as_str().context("the secret")?.to_owned();
        Ok((id, secret))
    }

    /// Creates `n` keys, `concurrency` at a time: the keys (id, secret), the latency of
    /// every create, and of the last tenth.
    async fn create_all(&self, n: usize, concurrency: usize) -> (Vec<(String, String)>, Summary, Summary) {
        let counter = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..concurrency.max(1) {
            let (admin, counter) = (self.clone(), Arc::clone(&counter));
            tasks.spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = counter.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return done;
                    }
                    let sent = Instant::now();
                    match admin.create(admin.next_instance()).await {
                        Ok(key) => done.push((i, key, sent.elapsed())),
                        Err(_) => _ = admin.failures.fetch_add(1, Ordering::Relaxed),
                    }
                }
            });
        }
        let mut all = Vec::with_capacity(n);
        while let Some(done) = tasks.join_next().await {
            all.extend(done.unwrap_or_default());
        }
        all.sort_by_key(|(i, _, _)| *i);
        let (mut every, mut last) = (Samples::default(), Samples::default());
        for (i, _, took) in &all {
            every.record(*took);
            if *i >= n - n / 10 {
                last.record(*took);
            }
        }
        (all.into_iter().map(|(_, key, _)| key).collect(), every.summary(), last.summary())
    }

    /// `POST /admin/keys/{id}/{action}` for each id, `concurrency` at a time: the latencies.
    async fn changes(&self, ids: Vec<String>, action: &'static str, concurrency: usize) -> Samples {
        let ids = Arc::new(ids);
        let counter = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..concurrency.max(1) {
            let (admin, ids, counter) = (self.clone(), Arc::clone(&ids), Arc::clone(&counter));
            tasks.spawn(async move {
                let mut samples = Samples::default();
                while let Some(id) = ids.get(counter.fetch_add(1, Ordering::Relaxed)) {
                    let sent = Instant::now();
                    if admin.change(admin.next_instance(), id, action).await {
                        samples.record(sent.elapsed());
                    }
                }
                samples
            });
        }
        let mut all = Samples::default();
        while let Some(done) = tasks.join_next().await {
            all.merge(done.unwrap_or_default());
        }
        all
    }

    async fn change(&self, instance: usize, id: &str, action: &str) -> bool {
        let uri = self.uri(instance, &format!("/admin/keys/{id}/{action}"));
        let ok =
            matches!(self.http.post_json(&uri, Some(ROOT), Bytes::from_static(b"{}")).await, Ok(r) if r.status == 200);
        if !ok {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Revokes each key on one instance, one after the other, and times how long until the
    /// other instances refuse its secret: those times, and the revokes' latencies.
    async fn revokes_watched(&self, keys: &[(String, String)]) -> anyhow::Result<(Samples, Samples)> {
        let (mut seen, mut latency) = (Samples::default(), Samples::default());
        for (n, (id, secret)) in keys.iter().enumerate() {
            let sent = Instant::now();
            anyhow::ensure!(self.change(n, id, "revoke").await, "revoking {id} failed");
            let answered = Instant::now();
            latency.record(answered - sent);
            for other in (1..self.urls.len()).map(|k| n + k) {
                self.until(other, secret, 401).await?;
            }
            seen.record(answered.elapsed());
        }
        Ok((seen, latency))
    }

    /// The status of `GET /v1/models` on `instance` with `secret`.
    async fn models(&self, instance: usize, secret: &str) -> u16 {
        self.http.get(&self.uri(instance, "/v1/models"), Some(secret)).await.map_or(0, |r| r.status)
    }

    /// Waits (at most 10 s) until `instance` answers `status` for `secret`.
    async fn until(&self, instance: usize, secret: &str, status: u16) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.models(instance, secret).await != status {
            anyhow::ensure!(Instant::now() < deadline, "instance {instance} never answered {status}");
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    async fn until_everywhere(&self, secret: &str, status: u16) -> anyhow::Result<()> {
        for instance in 0..self.urls.len() {
            self.until(instance, secret, status).await?;
        }
        Ok(())
    }

    /// `n` chat requests one after the other on the first instance with `secret`: their
    /// latency.
    async fn requests(&self, secret: &str, n: usize) -> Summary {
        let uri = self.uri(0, "/v1/chat/completions");
        let body =
            Bytes::from_static(br#"{"model":"chat","messages":[{"role":"user","content":"hello"}],"max_tokens":8}"#);
        let mut samples = Samples::default();
        for _ in 0..n {
            let sent = Instant::now();
            match self.http.post_json(&uri, Some(secret), body.clone()).await {
                Ok(reply) if reply.status == 200 => samples.record(sent.elapsed()),
                _ => _ = self.failures.fetch_add(1, Ordering::Relaxed),
            }
        }
        samples.summary()
    }
}
