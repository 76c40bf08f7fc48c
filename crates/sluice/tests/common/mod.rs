//! Harness for the multi-process tests: `sluice serve` as real child processes (killed when
//! dropped), their configuration, and bounded client loops that record every attempt — the
//! pieces live in `sluice-bench` (`process`, `fleet`, `attempts`), shared with the chaos
//! runner and the soak; this file binds them to the binary under test.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test harness that fails loudly"
)]

use std::path::Path;

use serde_json::{Value, json};
pub use sluice_bench::attempts::{Attempt, Load, redis_keys, summary};
pub use sluice_bench::fleet::{KEY, cluster_store, config, redis_store};
use sluice_bench::process::GatewayProcess;
use tokio::time::Instant;

/// One `sluice serve` process of the binary under test; killed (SIGKILL) and reaped when dropped.
pub struct Gateway {
    pub url: String,
    /// The admin listener's (`/admin`, `/metrics`), a free port of its own.
    pub admin_url: String,
    process: GatewayProcess,
}

impl Gateway {
    /// Starts `sluice serve --config FILE` and waits until it listens.
    pub fn start(config: &str) -> Self {
        let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
        let process = tokio::task::block_in_place(|| GatewayProcess::start(binary, config)).unwrap();
        Self { url: process.url().to_owned(), admin_url: process.admin_url().to_owned(), process }
    }

    /// Rewrites the configuration file and sends SIGHUP: the gateway reloads it.
    pub fn reload(&self, config: &str) {
        self.process.reload(config).unwrap();
    }

    /// What the process logged so far.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.process.alive()
    }
}

/// Starts `n` gateways with the same config.
pub fn gateways(n: usize, config: &str) -> Vec<Gateway> {
    (0..n).map(|_| Gateway::start(config)).collect()
}

fn chat_body(client: usize) -> Value {
    json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 8,
        "user": format!("client-{client}"),
    })
}

/// Runs `load.clients` loops from `origin` with [`KEY`]; client `c`'s `n`-th attempt goes to
/// `urls[(c + n) % len]`.
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
    sluice_bench::attempts::run_load(urls, load, origin, key, body).await
}

/// Admitted requests per second in the simulator's timeline seconds `from..to`.
pub fn admitted_rate(stats: &sluice_sim::stats::StatsSnapshot, from: u64, to: u64) -> f64 {
    let sum: u64 = stats.timeline.iter().filter(|s| s.second >= from && s.second < to).map(|s| s.requests).sum();
    sum as f64 / (to - from) as f64
}
