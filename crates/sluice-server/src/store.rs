//! Choosing the quota store from configuration: in-process, or Redis behind the
//! configured answer to Redis being unreachable.

use std::sync::Arc;

use sluice_config::{Store, StoreKind, Unavailable};
use sluice_quota::{Clock, MemoryStore, QuotaStore};
use sluice_redis::{OnUnavailable, RedisConfig, RedisStore, ResilientStore, Topology};

/// The store `settings` describe, reading time from `clock`.
#[must_use]
pub fn from_config(settings: &Store, clock: Arc<dyn Clock>) -> Arc<dyn QuotaStore> {
    let topology = match &settings.kind {
        StoreKind::Memory => return Arc::new(MemoryStore::new(clock)),
        StoreKind::Redis(url) => Topology::Standalone(url.clone()),
        StoreKind::RedisCluster(seeds) => Topology::Cluster(seeds.clone()),
    };
    let remote = RedisStore::new(RedisConfig { topology, prefix: settings.prefix.clone(), timeout: settings.timeout });
    let mode = match settings.on_unavailable {
        Unavailable::FailClosed => OnUnavailable::FailClosed,
        Unavailable::FailOpenLocal => OnUnavailable::FailOpenLocal { instances: settings.instances },
    };
    Arc::new(ResilientStore::new(remote, mode, clock))
}
