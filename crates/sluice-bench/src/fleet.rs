//! Configuration of the child gateways the soak, the chaos runner and the multi-process
//! tests start ([`crate::process`]): one OpenAI-shaped deployment on the simulated provider,
//! one tenant and key, a `[store]` table, and whatever a scenario adds.

use std::path::Path;

use crate::process::{GatewayProcess, PROVIDER_KEY_ENV};

/// The gateway key of [`config`]'s tenant.
pub const KEY: &str = "sk-distributed-test";

/// One OpenAI-shaped deployment `sim-mini` (model `gpt-4o-mini`) on the simulator at
/// `sim_url` with `limits` (TOML inline-table contents), a model profile `chat`, tenant
/// `acme` with key [`KEY`] (default class), the `[store]` table `store`, and `[server] lease`.
#[must_use]
pub fn config(sim_url: &str, store: &str, limits: &str, lease: &str) -> String {
    config_with(&Parts { sim_url, store, limits, lease, deployment: "", tail: "" })
}

/// What [`config_with`] assembles.
#[derive(Debug, Clone, Copy, Default)]
pub struct Parts<'a> {
    /// The simulated provider's base URL.
    pub sim_url: &'a str,
    /// The `[store]` table.
    pub store: &'a str,
    /// The deployment's limits (inline-table contents).
    pub limits: &'a str,
    /// `[server] lease`.
    pub lease: &'a str,
    /// More lines of the deployment's table (`attempt_timeout = "1s"`).
    pub deployment: &'a str,
    /// Tables appended at the end (`[[classes]]`, `[jobs]`).
    pub tail: &'a str,
}

/// [`config`] with more deployment settings and tables of its own.
#[must_use]
pub fn config_with(p: &Parts<'_>) -> String {
    let sha = crate::harness::key_hash(KEY);
    let Parts { sim_url, store, limits, lease, deployment, tail } = p;
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nlease = \"{lease}\"\n\n{store}\n\n\
         [[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{sim_url}\"\napi_key_env = \"{PROVIDER_KEY_ENV}\"\n\n\
         [[deployments]]\nname = \"sim-mini\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ {limits} }}\n{deployment}\n\n\
         [[models]]\nname = \"chat\"\ndeployment = \"sim-mini\"\ndefault_max_tokens = 8\n\n\
         [[tenants]]\nname = \"acme\"\n\n\
         [[keys]]\nid = \"acme-1\"\ntenant = \"acme\"\nsha256 = \"{sha}\"\n\n{tail}\n",
    )
}

/// A `[store]` table for one Redis server shared by 3 instances, each call bounded by 250 ms.
#[must_use]
pub fn redis_store(url: &str, prefix: &str, on_unavailable: &str) -> String {
    format!(
        "[store]\nkind = \"redis\"\nurl = \"{url}\"\nprefix = \"{prefix}\"\n\
         on_unavailable = \"{on_unavailable}\"\ninstances = 3\ntimeout = \"250ms\""
    )
}

/// A `[store]` table for a Redis Cluster.
#[must_use]
pub fn cluster_store(urls: &[String], prefix: &str) -> String {
    let seeds: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!("[store]\nkind = \"redis\"\ncluster = [{}]\nprefix = \"{prefix}\"", seeds.join(", "))
}

/// Starts `n` gateways of `binary` with the same config, one after the other.
///
/// # Errors
/// When one cannot start (those started are killed).
pub async fn start(binary: &Path, n: usize, config: &str) -> anyhow::Result<Vec<GatewayProcess>> {
    let (binary, config) = (binary.to_owned(), config.to_owned());
    tokio::task::spawn_blocking(move || (0..n).map(|_| GatewayProcess::start(&binary, &config)).collect()).await?
}

/// The base URLs of `gateways`.
#[must_use]
pub fn urls(gateways: &[GatewayProcess]) -> Vec<String> {
    gateways.iter().map(|g| g.url().to_owned()).collect()
}

/// The admin plane's base URLs of `gateways` (`/admin`, `/metrics`).
#[must_use]
pub fn admin_urls(gateways: &[GatewayProcess]) -> Vec<String> {
    gateways.iter().map(|g| g.admin_url().to_owned()).collect()
}
