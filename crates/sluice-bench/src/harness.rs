//! Starting the pieces in-process on 127.0.0.1: gateways in front of the simulated
//! provider, each with the quota store its config names (its own memory store, or a
//! connection of its own to a shared Redis).

use std::path::PathBuf;
use std::sync::Arc;

use sluice_quota::SystemClock;
use sluice_server::{AppState, Running};

/// The provider key the gateway presents to the simulator (which accepts any).
const SIM_PROVIDER_KEY: &str = "sk-sim-provider";

/// A gateway serving on a free port of 127.0.0.1.
///
/// `config` is the TOML text with `{key_file}` where the provider's `api_key_file` goes;
/// the key file exists only while the gateway starts (keys are read at build time).
///
/// # Errors
/// When the configuration is invalid or the gateway cannot start.
pub async fn start_gateway(config: &str) -> anyhow::Result<Running> {
    let mut all = start_gateways(config, 1).await?;
    all.pop().ok_or_else(|| anyhow::anyhow!("no gateway started"))
}

/// `count` gateways with the same config, each with a store object of its own (as separate
/// processes would have), serving on free ports of 127.0.0.1.
///
/// # Errors
/// When the configuration is invalid or a gateway cannot start (those started are stopped).
pub async fn start_gateways(config: &str, count: usize) -> anyhow::Result<Vec<Running>> {
    let key_file = KeyFile::write(SIM_PROVIDER_KEY)?;
    let text = config.replace("{key_file}", &key_file.path.display().to_string());
    let config = sluice_config::parse(&text).map_err(|e| anyhow::anyhow!("gateway config: {e}"))?;
    let mut started = Vec::with_capacity(count);
    for _ in 0..count.max(1) {
        let store = sluice_redis::choose::from_config(&config.store, Arc::new(SystemClock::new()), None);
        match start(&config, store).await {
            Ok(running) => started.push(running),
            Err(e) => {
                for running in started {
                    running.shutdown().await;
                }
                return Err(e.into());
            }
        }
    }
    Ok(started)
}

/// `config`'s gateway on `store`, serving on a free port of 127.0.0.1 with the operator
/// surface (admin API, dashboard) mounted, as `sluice serve` mounts it.
async fn start(
    config: &sluice_config::Config,
    store: Arc<dyn sluice_quota::QuotaStore>,
) -> Result<Running, sluice_server::StartError> {
    let state = AppState::build(config, store)?.with_tls(config)?.with_surface(sluice_admin::surface(config));
    Running::start_state(state, ([127, 0, 0, 1], 0).into(), config.server.shutdown_grace).await
}

/// The hex SHA-256 of a gateway key, as the config's `keys[].sha256` wants it.
#[must_use]
pub fn key_hash(key: &str) -> String {
    hex::encode(sluice_config::hash_key(key))
}

/// A temporary file holding a provider key; removed on drop.
struct KeyFile {
    path: PathBuf,
}

impl KeyFile {
    fn write(key: &str) -> std::io::Result<Self> {
        let n: u64 = rand::random();
        let path = std::env::temp_dir().join(format!("sluice-bench-{}-{n:016x}.key", std::process::id()));
        std::fs::write(&path, key)?;
        Ok(Self { path })
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
