//! Tenants flooding one deployment share it fairly by token cost, in proportion to their
//! weights; a tenant alone borrows the idle capacity and gives it back at once.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Env, sha, start};
use serde_json::json;
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};
use tokio::time::Instant;

/// 600,000 TPM = 10,000 tokens/s; RPM never binds.
fn sim() -> SimConfig {
    let limits = Limits { rpm: Some(1_000_000), tpm: Some(600_000), ..Limits::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 50 },
        ..ModelConfig::openai("gpt-4o-mini").with_limits(limits)
    };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

fn key(tenant: &str) -> String {
    format!("sk-fair-{tenant}")
}

fn policy(weights: &[(&str, u32)]) -> String {
    let mut text = String::from(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n\
         limits = { rpm = 1000000, tpm = 600000, burst_seconds = 1 }\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n\
         [[classes]]\nname = \"interactive\"\nmax_wait = \"30s\"\n\n",
    );
    for (tenant, weight) in weights {
        text.push_str(&format!(
            "[[tenants]]\nname = \"{tenant}\"\nweight = {weight}\n\n[[keys]]\nid = \"{tenant}-key\"\ntenant = \"{tenant}\"\nsha256 = \"{}\"\n\n",
            sha(&key(tenant))
        ));
    }
    text
}

/// Completed requests of one tenant: (when, tokens).
type Log = Vec<(Duration, u64)>;

/// `clients` loops for `tenant`, each sending `prompt_words`-word requests from `from` to `until`.
fn flood(
    env: &Arc<Env>,
    tenant: &'static str,
    clients: usize,
    prompt_words: usize,
    from: Duration,
    until: Duration,
    origin: Instant,
) -> tokio::task::JoinHandle<Log> {
    let env = Arc::clone(env);
    tokio::spawn(async move {
        tokio::time::sleep_until(origin + from).await;
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let env = Arc::clone(&env);
            tasks.push(tokio::spawn(async move {
                let mut log = Log::new();
                let content = "lorem ipsum ".repeat(prompt_words / 2);
                let body = json!({"model": "fast", "user": tenant, "max_tokens": 50,
                                  "messages": [{"role": "user", "content": content}]});
                while origin.elapsed() < until {
                    let (status, _, reply) = env.post("/v1/chat/completions", &key(tenant), &body).await;
                    assert_eq!(status, 200, "{reply}");
                    log.push((origin.elapsed(), reply["usage"]["total_tokens"].as_u64().unwrap()));
                }
                log
            }));
        }
        let mut all = Log::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    })
}

/// `sluice_fair_tokens_total` and `sluice_fair_reclaims_total` per tenant, from one scrape.
struct Shares(Vec<sluice_admin::Sample>);

impl Shares {
    fn of(text: &str) -> Self {
        Self(sluice_admin::parse_samples(text))
    }

    fn sum(&self, name: &str, tenant: &str, kind: Option<&str>) -> f64 {
        let keep = |s: &&sluice_admin::Sample| {
            s.name == name && s.label("tenant") == tenant && kind.is_none_or(|k| s.label("kind") == k)
        };
        self.0.iter().filter(keep).map(|s| s.value).sum()
    }

    fn guaranteed(&self, tenant: &str) -> f64 {
        self.sum("sluice_fair_tokens_total", tenant, Some("guaranteed"))
    }

    fn borrowed(&self, tenant: &str) -> f64 {
        self.sum("sluice_fair_tokens_total", tenant, Some("borrowed"))
    }

    fn reclaims(&self, tenant: &str) -> f64 {
        self.sum("sluice_fair_reclaims_total", tenant, None)
    }
}

fn tokens_between(log: &Log, from: Duration, to: Duration) -> f64 {
    log.iter().filter(|(at, _)| *at >= from && *at < to).map(|(_, t)| *t as f64).sum()
}

fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    sum * sum / (values.len() as f64 * values.iter().map(|v| v * v).sum::<f64>())
}

const RUN: Duration = Duration::from_secs(7);
const WARM: Duration = Duration::from_secs(2);

async fn run(weights: &[(&'static str, u32)], prompt_words: &[usize]) -> (Arc<Env>, HashMap<&'static str, f64>) {
    let env = Arc::new(start(sim(), &policy(weights)).await);
    let origin = Instant::now();
    let floods: Vec<_> = weights
        .iter()
        .zip(prompt_words)
        .map(|((tenant, _), words)| (*tenant, flood(&env, tenant, 6, *words, Duration::ZERO, RUN, origin)))
        .collect();
    let mut served = HashMap::new();
    for (tenant, task) in floods {
        served.insert(tenant, tokens_between(&task.await.unwrap(), WARM, RUN));
    }
    (env, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_weights_share_tokens_fairly_whatever_the_request_sizes() {
    let (env, served) = run(&[("a", 1), ("b", 1), ("c", 1)], &[40, 400, 1_200]).await;
    let values: Vec<f64> = ["a", "b", "c"].iter().map(|t| served[t]).collect();
    let index = jain(&values);
    assert!(index >= 0.99, "Jain's index {index:.4} over {values:?}");
    // Together they use the deployment: 10,000 tokens/s.
    let rate = values.iter().sum::<f64>() / (RUN - WARM).as_secs_f64();
    assert!(rate >= 9_000.0, "served {rate:.0} tokens/s of 10,000");
    assert_eq!(env.sim.stats().rate_limited.total(), 0);
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_two_one_one_give_half_a_quarter_a_quarter() {
    let (env, served) = run(&[("a", 2), ("b", 1), ("c", 1)], &[200, 200, 200]).await;
    let total: f64 = served.values().sum();
    for (tenant, want) in [("a", 0.5), ("b", 0.25), ("c", 0.25)] {
        let share = served[tenant] / total;
        assert!((share - want).abs() <= 0.03, "tenant {tenant}: {share:.3} of {total:.0} tokens");
    }
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_tenant_borrows_all_and_gives_half_back_within_a_second() {
    let env = Arc::new(start(sim(), &policy(&[("a", 1), ("b", 1)])).await);
    let origin = Instant::now();
    let late = Duration::from_secs(4);
    let a = flood(&env, "a", 6, 200, Duration::ZERO, RUN, origin);
    let b = flood(&env, "b", 6, 200, late, RUN, origin);
    // The fair-share metrics just before b arrives, a second after, and at the end.
    let scrapes = {
        let env = Arc::clone(&env);
        tokio::spawn(async move {
            let mut scrapes = Vec::new();
            for at in [late - Duration::from_millis(300), late + Duration::from_secs(1), RUN] {
                tokio::time::sleep_until(origin + at).await;
                scrapes.push(Shares::of(&env.metrics().await));
            }
            scrapes
        })
    };
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let scrapes = scrapes.await.unwrap();
    let (alone, joined, end) = (&scrapes[0], &scrapes[1], &scrapes[2]);
    // Alone, a borrows what its guaranteed half leaves idle: about half of what it takes.
    let borrowed = alone.borrowed("a") / (alone.guaranteed("a") + alone.borrowed("a"));
    assert!((0.35..=0.65).contains(&borrowed), "alone, a borrowed {borrowed:.3} of its tokens");
    assert_eq!(alone.reclaims("a"), 0.0, "nobody took anything back from a lone tenant");
    // Sharing, both stay within their guaranteed halves, and a's borrowing was reclaimed.
    for tenant in ["a", "b"] {
        let guaranteed = end.guaranteed(tenant) - joined.guaranteed(tenant);
        let borrowed = end.borrowed(tenant) - joined.borrowed(tenant);
        let part = borrowed / (guaranteed + borrowed);
        assert!(part <= 0.2, "sharing, {tenant} still borrowed {part:.3} of its tokens");
    }
    assert!(end.reclaims("a") >= 1.0, "a was never held back for b");
    let alone = tokens_between(&a, Duration::from_secs(1), late) / (late - Duration::from_secs(1)).as_secs_f64();
    assert!(alone >= 9_500.0, "alone, tenant a used {alone:.0} of 10,000 tokens/s");
    // From one second after b arrives, they share equally.
    let shared_from = late + Duration::from_secs(1);
    let (a_then, b_then) = (tokens_between(&a, shared_from, RUN), tokens_between(&b, shared_from, RUN));
    let b_share = b_then / (a_then + b_then);
    assert!((b_share - 0.5).abs() <= 0.05, "one second after arriving, b gets {b_share:.3}");
    assert_eq!(env.sim.stats().rate_limited.total(), 0);
    Arc::into_inner(env).unwrap().shutdown().await;
}
