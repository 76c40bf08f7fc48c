//! Runtime keys: gateway keys created, changed, rotated and revoked through the admin API
//! (`/admin/keys`), stored in the job store beside the configured keys (which stay
//! read-only).
//!
//! Hot path: authentication reads [`RuntimeKeys::lookup`], one lock-free load of an
//! `ArcSwap`ped map keyed by the secret's SHA-256 — no store read per request. [`refresh`]
//! brings the map up to the store whenever the keys' version (a counter the store bumps
//! with every write) changes: at once on the instance that made the change, and within
//! [`POLL`] on every other one sharing the store (Redis). It reads only the keys written
//! since the version it holds, each at its latest, with that version, at one instant
//! ([`JobStore::records_since`]), and patches them in; it reads every key only at start,
//! when the tenants changed (keys resolve against them), or when the store cannot say what
//! changed (a reader further behind than the store's change log).
//! Installs are serialized and never go back to an older version, so every instance ends
//! with the store's keys and a revoke is never undone by an older change. Expiry and a
//! rotated secret's grace are checked at lookup, against the wall clock.

pub mod poll;
mod record;
mod resolve;
mod sharded;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use sluice_jobs::JobStore;

pub use record::{
    AUDIT_KIND, AUDIT_OWNER, AuditEntry, KEY_KIND, KEY_OWNER, KeyRecord, RECORDS, Role, SecretHash, TENANT_KIND,
    TenantRecord, hex, unhex,
};
use sharded::Sharded;

use crate::tenancy::{Caller, Tenancy, TenantEntry};

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

/// A stored key and its index among the runtime keys (its caller's queue lane).
#[derive(Debug, Clone)]
struct Indexed {
    /// The key's index: its place in the last full load, or the next free one for a key
    /// first seen in a change.
    index: usize,
    /// The key as stored.
    record: Arc<KeyRecord>,
}

/// The runtime keys: as stored, and resolved against the configuration in force. Both maps
/// are sharded (`sharded.rs`), so a change copies only the shards it touches.
#[derive(Debug, Default)]
pub struct RuntimeKeys {
    records: ArcSwap<Sharded<Arc<str>, Indexed>>,
    resolved: ArcSwap<Sharded<[u8; 32], Arc<Resolved>>>,
    tenant_records: ArcSwap<Vec<TenantRecord>>,
    tenants: ArcSwap<HashMap<Arc<str>, TenantEntry>>,
    /// Serializes installs, and holds the keys' and the tenants' versions in force (a
    /// refresh that read an older version never replaces a newer one) and the next free
    /// key index.
    installing: parking_lot::Mutex<InForce>,
    /// Key records read from the store, and how many of those reads were of every key.
    loaded: AtomicU64,
    full_loads: AtomicU64,
    /// When (unix milliseconds) the store was last found to have lost its data; 0: never.
    reset_at_ms: AtomicU64,
}

/// What the installs so far left: the versions read and the next free key index.
#[derive(Debug, Default)]
struct InForce {
    versions: Versions,
    next_index: usize,
    /// The store's epoch the keys in force were read under (see `JobStore::epoch`).
    epoch: Option<String>,
}

/// The store versions the keys in force were read at.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// The keys' version.
    pub keys: u64,
    /// The tenants' version.
    pub tenants: u64,
}

impl RuntimeKeys {
    /// The live secret whose hash is `sha256`, at `now_ms` (unix milliseconds).
    #[must_use]
    pub fn lookup(&self, sha256: &[u8; 32], now_ms: u64) -> Option<Resolved> {
        let map = self.resolved.load();
        let found = map.get(sha256)?;
        found.until_ms.is_none_or(|until| now_ms < until).then(|| Resolved::clone(found))
    }

    /// The caller of the live client key `key_id` (an async job's key): through its
    /// record's secrets, without a scan.
    #[must_use]
    pub fn caller_by_id(&self, key_id: &str, now_ms: u64) -> Option<Caller> {
        let record = self.record(key_id)?;
        let map = self.resolved.load();
        let resolved = record.secrets.iter().filter_map(|s| map.get(&unhex(&s.sha256)?));
        let mut live = resolved.filter(|r| *r.key_id == *key_id && r.until_ms.is_none_or(|until| now_ms < until));
        live.find_map(|r| r.caller.clone())
    }

    /// The stored key `id` as last loaded.
    #[must_use]
    pub fn record(&self, id: &str) -> Option<Arc<KeyRecord>> {
        self.records.load().get(id).map(|k| Arc::clone(&k.record))
    }

    /// How many stored keys are loaded (revoked ones included).
    #[must_use]
    pub fn count(&self) -> usize {
        self.records.load().len()
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

    /// Key records read from the store since start, and how many refreshes read every key.
    #[must_use]
    pub fn loaded(&self) -> (u64, u64) {
        (self.loaded.load(Ordering::Relaxed), self.full_loads.load(Ordering::Relaxed))
    }

    /// The versions in force.
    #[must_use]
    pub fn versions(&self) -> Versions {
        self.installing.lock().versions
    }

    /// Installs `stored` (the store's at `version`, under `epoch`), resolved against
    /// `gateway`, unless a newer version is in force already. Under another epoch than the
    /// keys in force (the store lost its data and started its versions over) it installs
    /// whatever the version, and a key revoked in force stays revoked: a store that lost
    /// or rolled back a revocation never makes the key valid again on this instance.
    /// Returns whether the epoch changed.
    pub fn install(&self, mut stored: Stored, version: Versions, epoch: Option<String>, tenancy: Tenancy<'_>) -> bool {
        let mut in_force = self.installing.lock();
        self.loaded.fetch_add(stored.keys.len() as u64, Ordering::Relaxed);
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        let reset = in_force.epoch.is_some() && epoch.is_some() && in_force.epoch != epoch;
        if !reset && (version.keys < in_force.versions.keys || version.tenants < in_force.versions.tenants) {
            return false;
        }
        if reset {
            let revoked = self.records.load();
            for record in &mut stored.keys {
                if record.revoked_at.is_none()
                    && let Some(old) = revoked.get(record.id.as_str())
                    && old.record.revoked_at.is_some()
                {
                    record.revoked_at = old.record.revoked_at;
                    record.secrets.clear();
                }
            }
        }
        let count = stored.keys.len();
        let records = stored.keys.into_iter().enumerate();
        let records =
            records.map(|(index, record)| (Arc::from(record.id.as_str()), Indexed { index, record: Arc::new(record) }));
        self.tenant_records.store(Arc::new(stored.tenants));
        self.records.store(Arc::new(records.collect()));
        self.resolve(tenancy);
        *in_force = InForce { versions: version, next_index: count, epoch: epoch.or(in_force.epoch.take()) };
        reset
    }

    /// Whether `epoch` is another than the keys in force were read under.
    fn epoch_changed(&self, epoch: Option<&str>) -> bool {
        let in_force = self.installing.lock();
        matches!((in_force.epoch.as_deref(), epoch), (Some(known), Some(now)) if known != now)
    }

    /// When the store was last found to have lost its data (unix milliseconds), if ever.
    #[must_use]
    pub fn store_reset_at_ms(&self) -> Option<u64> {
        Some(self.reset_at_ms.load(Ordering::Relaxed)).filter(|at| *at > 0)
    }

    /// Patches in `changed` (each key written after `since`, at its latest as of the keys'
    /// version `version`), unless that version is in force already. Keys not in `changed`
    /// are neither read nor resolved again.
    pub fn apply(&self, changed: Vec<KeyRecord>, since: u64, version: u64, tenancy: Tenancy<'_>) {
        let mut in_force = self.installing.lock();
        self.loaded.fetch_add(changed.len() as u64, Ordering::Relaxed);
        // Over any version from `since` on, the keys as of `version` are the keys written
        // since `since`, at their latest, over the rest.
        if version <= in_force.versions.keys || in_force.versions.keys < since {
            return;
        }
        let mut records = Sharded::clone(&self.records.load());
        let mut resolved = Sharded::clone(&self.resolved.load());
        let tenants = self.tenants.load();
        for record in changed {
            let index = match records.get(record.id.as_str()) {
                Some(old) => {
                    resolve::forget(&old.record, &mut resolved);
                    old.index
                }
                None => {
                    let index = in_force.next_index;
                    in_force.next_index += 1;
                    index
                }
            };
            resolve::one(&record, (tenancy, &tenants), index, &mut resolved);
            records.insert(Arc::from(record.id.as_str()), Indexed { index, record: Arc::new(record) });
        }
        self.records.store(Arc::new(records));
        self.resolved.store(Arc::new(resolved));
        in_force.versions.keys = version;
    }

    /// Resolves the loaded tenants and keys again against `tenancy` (after a reload).
    pub fn reresolve(&self, tenancy: Tenancy<'_>) {
        let _one_at_a_time = self.installing.lock();
        self.resolve(tenancy);
    }

    fn resolve(&self, tenancy: Tenancy<'_>) {
        let tenants = resolve::tenants(&self.tenant_records.load(), tenancy);
        self.resolved.store(Arc::new(resolve::all(&self.records.load(), tenancy, &tenants)));
        self.tenants.store(Arc::new(tenants));
    }
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
    Ok(parse(docs.into_iter().map(|doc| (doc.id, doc.body)), kind))
}

/// The readable records of `bodies` (id, body); an unreadable one is logged and skipped.
fn parse<T: serde::de::DeserializeOwned>(bodies: impl Iterator<Item = (String, Vec<u8>)>, kind: &str) -> Vec<T> {
    let mut records = Vec::new();
    for (id, body) in bodies {
        match serde_json::from_slice::<T>(&body) {
            Ok(record) => records.push(record),
            Err(e) => tracing::warn!(kind, %id, error = %e, "runtime record unreadable; skipped"),
        }
    }
    records
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
        let entries = [(forever, Arc::new(entry(None))), (expiring, Arc::new(entry(Some(5_000))))];
        keys.resolved.store(Arc::new(entries.into_iter().collect()));
        assert!(keys.lookup(&forever, u64::MAX).is_some());
        assert!(keys.lookup(&expiring, 4_999).is_some());
        assert!(keys.lookup(&expiring, 5_000).is_none(), "expired at its instant");
        assert!(keys.lookup(&sluice_config::hash_key("c"), 0).is_none());
    }
}
