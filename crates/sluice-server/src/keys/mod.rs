//! Runtime keys: gateway keys created, changed, rotated and revoked through the admin API
//! (`/admin/keys`), stored in the job store beside the configured keys (which stay
//! read-only).
//!
//! Hot path: authentication reads [`RuntimeKeys::lookup`], one lock-free load of an
//! `ArcSwap`ped map keyed by the secret's SHA-256 — no store read per request. The map is
//! rebuilt from the store by [`refresh`] whenever the keys' version (a counter the store
//! bumps with every write) changes: at once on the instance that made the change, and
//! within [`POLL`] on every other one sharing the store (Redis). Expiry and a rotated
//! secret's grace are checked at lookup, against the wall clock.

mod record;
mod resolve;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use sluice_jobs::JobStore;

pub use record::{
    AUDIT_KIND, AUDIT_OWNER, AuditEntry, KEY_KIND, KEY_OWNER, KeyRecord, Role, SecretHash, TENANT_KIND, TenantRecord,
    hex, unhex,
};

use crate::state::{Caller, Gateway, TenantEntry};

/// How often an instance asks the store whether the keys changed. A change made on one
/// instance is in force on every other within this plus one store round trip (under 1 s).
pub const POLL: Duration = Duration::from_millis(250);

/// A resolved runtime secret: who it authenticates, and until when.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The key's id.
    pub key_id: Arc<str>,
    /// Its tenant.
    pub tenant: Arc<str>,
    /// The caller, for a client key; `None` for a tenant-admin key.
    pub caller: Option<Caller>,
    /// Unix milliseconds after which the secret no longer authenticates.
    pub until_ms: Option<u64>,
}

/// The runtime keys: as stored, and resolved against the configuration in force.
#[derive(Debug, Default)]
pub struct RuntimeKeys {
    records: ArcSwap<Vec<KeyRecord>>,
    resolved: ArcSwap<HashMap<[u8; 32], Resolved>>,
    tenant_records: ArcSwap<Vec<TenantRecord>>,
    tenants: ArcSwap<HashMap<Arc<str>, TenantEntry>>,
    /// The keys' version plus the tenants' (both only grow).
    version: AtomicU64,
    /// Serializes installs: a refresh that read an older version never replaces a newer one.
    installing: parking_lot::Mutex<()>,
}

impl RuntimeKeys {
    /// The live secret whose hash is `sha256`, at `now_ms` (unix milliseconds).
    #[must_use]
    pub fn lookup(&self, sha256: &[u8; 32], now_ms: u64) -> Option<Resolved> {
        let map = self.resolved.load();
        let found = map.get(sha256)?;
        found.until_ms.is_none_or(|until| now_ms < until).then(|| found.clone())
    }

    /// The caller of the live client key `key_id` (an async job's key).
    #[must_use]
    pub fn caller_by_id(&self, key_id: &str, now_ms: u64) -> Option<Caller> {
        let map = self.resolved.load();
        let live = map.values().filter(|r| r.until_ms.is_none_or(|until| now_ms < until));
        live.filter(|r| *r.key_id == *key_id).find_map(|r| r.caller.clone())
    }

    /// The stored keys as last loaded.
    #[must_use]
    pub fn records(&self) -> Arc<Vec<KeyRecord>> {
        self.records.load_full()
    }

    /// The runtime tenants, as keys resolve against them.
    #[must_use]
    pub fn tenants(&self) -> Arc<HashMap<Arc<str>, TenantEntry>> {
        self.tenants.load_full()
    }

    /// The stored tenants as last loaded.
    #[must_use]
    pub fn tenant_records(&self) -> Arc<Vec<TenantRecord>> {
        self.tenant_records.load_full()
    }

    /// Installs `stored` (the store's at `version`), resolved against `gateway`, unless a
    /// newer version is in force already.
    pub fn install(&self, stored: Stored, version: u64, gateway: &Gateway) {
        let _one_at_a_time = self.installing.lock();
        if version < self.version.load(Ordering::Acquire) {
            return;
        }
        self.tenant_records.store(Arc::new(stored.tenants));
        self.records.store(Arc::new(stored.keys));
        self.resolve(gateway);
        self.version.store(version, Ordering::Release);
    }

    /// Resolves the loaded tenants and keys again against `gateway` (after a reload).
    pub fn reresolve(&self, gateway: &Gateway) {
        let _one_at_a_time = self.installing.lock();
        self.resolve(gateway);
    }

    fn resolve(&self, gateway: &Gateway) {
        let tenants = resolve::tenants(&self.tenant_records.load(), gateway);
        self.resolved.store(Arc::new(resolve::all(&self.records.load(), gateway, &tenants)));
        self.tenants.store(Arc::new(tenants));
    }
}

/// Loads the keys from `store` into `gateway` when their version changed (or `force`).
///
/// # Errors
/// When the store cannot answer; the keys in force stay.
pub async fn refresh(store: &dyn JobStore, gateway: &Gateway, force: bool) -> Result<(), sluice_jobs::JobStoreError> {
    let keys = &gateway.runtime_keys;
    let version = store.doc_version(KEY_KIND).await?.saturating_add(store.doc_version(TENANT_KIND).await?);
    if !force && version == keys.version.load(Ordering::Acquire) {
        return Ok(());
    }
    let stored = Stored { keys: load(store, KEY_KIND).await?, tenants: load(store, TENANT_KIND).await? };
    keys.install(stored, version, gateway);
    Ok(())
}

/// The runtime tenants and keys, as stored.
#[derive(Debug, Default)]
pub struct Stored {
    /// The keys.
    pub keys: Vec<KeyRecord>,
    /// The tenants.
    pub tenants: Vec<TenantRecord>,
}

async fn load<T: serde::de::DeserializeOwned>(
    store: &dyn JobStore,
    kind: &str,
) -> Result<Vec<T>, sluice_jobs::JobStoreError> {
    let docs = store.list_docs(kind, KEY_OWNER).await?;
    let mut records = Vec::with_capacity(docs.len());
    for doc in docs {
        match serde_json::from_slice::<T>(&doc.body) {
            Ok(record) => records.push(record),
            Err(e) => tracing::warn!(kind, id = %doc.id, error = %e, "runtime record unreadable; skipped"),
        }
    }
    Ok(records)
}

/// Polls the store every [`POLL`] until the gateway drains, so that a change made on
/// another instance is in force here within a second. Without a job store there are no
/// runtime keys and nothing is spawned.
pub fn spawn_refresh(state: &crate::AppState) -> Option<tokio::task::JoinHandle<()>> {
    let jobs = state.jobs.clone()?;
    let state = state.clone();
    Some(tokio::spawn(async move {
        let mut failing = false;
        loop {
            let result = refresh(jobs.store.as_ref(), &state.current(), false).await;
            if result.is_err() != failing {
                failing = result.is_err();
                match result {
                    Err(e) => tracing::warn!(error = %e, "runtime keys cannot be refreshed; the last loaded stay"),
                    Ok(()) => tracing::info!("runtime keys refreshed again"),
                }
            }
            if state.draining.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(until_ms: Option<u64>) -> Resolved {
        Resolved { key_id: Arc::from("k"), tenant: Arc::from("t"), caller: None, until_ms }
    }

    #[test]
    fn a_secret_authenticates_until_its_expiry_or_grace_and_not_at_it() {
        let keys = RuntimeKeys::default();
        let (forever, expiring) = (sluice_config::hash_key("a"), sluice_config::hash_key("b"));
        keys.resolved.store(Arc::new(HashMap::from([(forever, entry(None)), (expiring, entry(Some(5_000)))])));
        assert!(keys.lookup(&forever, u64::MAX).is_some());
        assert!(keys.lookup(&expiring, 4_999).is_some());
        assert!(keys.lookup(&expiring, 5_000).is_none(), "expired at its instant");
        assert!(keys.lookup(&sluice_config::hash_key("c"), 0).is_none());
    }
}
