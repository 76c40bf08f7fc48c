//! The gateway side's deployment: one or more gateway instances in this process, each with
//! a store object of its own — in-process buckets, or a connection to one shared Redis
//! (started here with `redis-server` from PATH, or an existing one by URL).

use sluice_redis::local::LocalRedis;
use sluice_server::Running;

use crate::harness;

/// Where the gateways keep their buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Each instance its own in-process buckets.
    Memory,
    /// One Redis shared by every instance.
    Redis,
}

/// A Redis to use: an existing server, or one started for this run.
#[derive(Debug)]
pub enum Redis {
    /// A server given by URL.
    External(String),
    /// A local `redis-server` stopped when this is dropped.
    Local(LocalRedis),
}

impl Redis {
    /// `url` if given, else a `redis-server` started on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// When no URL is given and `redis-server` cannot be started.
    pub async fn obtain(url: Option<&str>) -> anyhow::Result<Self> {
        if let Some(url) = url {
            return Ok(Self::External(url.to_owned()));
        }
        let local = tokio::task::spawn_blocking(LocalRedis::start).await?;
        let local = local
            .map_err(|e| anyhow::anyhow!("the Redis store needs a Redis: {e}; or pass --redis redis://HOST:PORT"))?;
        Ok(Self::Local(local))
    }

    /// The server's URL.
    #[must_use]
    pub fn url(&self) -> String {
        match self {
            Self::External(url) => url.clone(),
            Self::Local(local) => local.url(),
        }
    }
}

/// A key prefix of its own for one run, so a reused Redis holds none of an earlier run's state.
#[must_use]
pub fn run_prefix(what: &str) -> String {
    format!("sluice-{what}-{:08x}", rand::random::<u32>())
}

/// Running gateway instances and the Redis they share (if any).
#[derive(Debug)]
pub struct Gateways {
    /// The instances.
    pub instances: Vec<Running>,
    redis: Option<Redis>,
}

impl Gateways {
    /// Starts `count` instances of `config(store_table)` on `store`.
    ///
    /// # Errors
    /// When Redis cannot be obtained or a gateway cannot start.
    pub async fn start(
        count: usize,
        store: StoreKind,
        redis_url: Option<&str>,
        config: impl Fn(&str) -> String,
    ) -> anyhow::Result<Self> {
        let (table, redis) = match store {
            StoreKind::Memory => (crate::scenario::memory_store(), None),
            StoreKind::Redis => {
                let redis = Redis::obtain(redis_url).await?;
                (crate::scenario::redis_store(&redis.url(), &run_prefix("demo"), count), Some(redis))
            }
        };
        let instances = harness::start_gateways(&config(&table), count).await?;
        Ok(Self { instances, redis })
    }

    /// Base URLs of the instances.
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.instances.iter().map(Running::url).collect()
    }

    /// Stops every instance, then the Redis this run started.
    pub async fn shutdown(self) {
        for running in self.instances {
            running.shutdown().await;
        }
        drop(self.redis);
    }
}
