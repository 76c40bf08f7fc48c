//! Choosing the quota store from configuration: in-process, or Redis behind the
//! configured answer to Redis being unreachable.

use std::sync::Arc;

use crate::heartbeat::{Renewing, heartbeat_lease, renew_every};
use crate::{Auth, OnUnavailable, RedisConfig, RedisStore, ResilientStore, SentinelTarget, Tls, Topology};
use sluice_config::{SentinelStore, Store, StoreKind, Unavailable};
use sluice_quota::{Clock, MemoryStore, QuotaStore, SpendRecord};

/// Where the Redis of `settings` is and how to reach it: TLS and the credentials of
/// `[store] username`, `password_env`, `password_file` (the password read now); `None` for
/// the memory store. The quota store, the operation log and the job store all connect
/// through this.
#[must_use]
pub fn redis_target(settings: &Store) -> Option<(Topology, Tls)> {
    let topology = match &settings.kind {
        StoreKind::Memory => return None,
        StoreKind::Redis(url) => Topology::Standalone(url.clone()),
        StoreKind::RedisCluster(seeds) => Topology::Cluster(seeds.clone()),
        StoreKind::RedisSentinel(sentinel) => Topology::Sentinel(sentinel_target(sentinel)),
    };
    let tls = Tls { ca_file: settings.tls.ca_file.clone(), client: settings.tls.client.clone(), auth: auth(settings) };
    Some((topology, tls))
}

/// The store's credentials, the password read from its variable or file now. `sluice
/// serve` refuses to start when it cannot be read (`sluice_config::unavailable`); read
/// here without it, it is left out and the server's refusal is what the store reports.
fn auth(settings: &Store) -> Auth {
    let password = settings.auth.password.as_ref().and_then(|secret| match secret.read() {
        Ok(password) => Some(password),
        Err(e) => {
            tracing::warn!(error = %e, "the Redis password cannot be read; connecting without one");
            None
        }
    });
    Auth { username: settings.auth.username.clone(), password }
}

/// The sentinels and master of `[store.sentinel]` (the master's credentials are the
/// store's, [`auth`]).
fn sentinel_target(sentinel: &SentinelStore) -> SentinelTarget {
    SentinelTarget {
        nodes: sentinel.nodes.clone(),
        master: sentinel.master.clone(),
        db: sentinel.db,
        username: None,
        password: None,
    }
}

/// The store `settings` describe, reading time from `clock`; with `record` (the
/// `[ledger]`), Redis's money budgets are kept in it and restored from it.
#[must_use]
pub fn from_config(
    settings: &Store,
    clock: Arc<dyn Clock>,
    record: Option<Arc<dyn SpendRecord>>,
) -> Arc<dyn QuotaStore> {
    let Some((topology, tls)) = redis_target(settings) else { return Arc::new(MemoryStore::new(clock)) };
    let config = RedisConfig { topology, prefix: settings.prefix.clone(), timeout: settings.timeout, tls };
    // Reservations live a heartbeat at a time in Redis, renewed while their requests run: a
    // crashed instance's come back within one (`heartbeat`).
    let heartbeat = heartbeat_lease(settings.timeout);
    // Days and months of money budgets by Redis's clock: the fleet starts a period at one
    // instant, whatever each instance's clock says.
    let mut remote = RedisStore::new(config).with_heartbeat(heartbeat).with_store_periods(Arc::clone(&clock));
    if let Some(record) = record {
        remote = remote.with_record(record);
    }
    let mode = match settings.on_unavailable {
        Unavailable::FailClosed => OnUnavailable::FailClosed,
        Unavailable::FailOpenLocal => OnUnavailable::FailOpenLocal { instances: settings.instances },
    };
    let resilient = Arc::new(ResilientStore::new(remote, mode, Arc::clone(&clock)));
    Arc::new(Renewing::new(resilient, clock, renew_every(heartbeat)))
}
