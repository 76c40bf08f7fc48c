//! Stored keys resolved against the configuration in force: their tenant, team and class
//! must exist there; their limits become the key's own scope in the quota store.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_config::Allowed;
use sluice_quota::{ScopeKey, ScopeKind};

use super::{Indexed, KeyRecord, Resolved, Role, Sharded, TenantRecord, unhex};
use crate::tenancy::{Caller, TeamEntry, Tenancy, TenantEntry};

/// The runtime tenants, their scopes registered with their limits. One whose name the file
/// took since, or whose limits no longer pass, is left out (and logged).
pub(super) fn tenants(records: &[TenantRecord], tenancy: Tenancy<'_>) -> HashMap<Arc<str>, TenantEntry> {
    let first_index = tenancy.directory.tenants.len();
    let mut out = HashMap::new();
    for (i, record) in records.iter().enumerate() {
        match tenant(record, tenancy, first_index.saturating_add(i)) {
            Ok(entry) => {
                out.insert(Arc::from(record.name.as_str()), entry);
            }
            Err(why) => tracing::warn!(tenant = %record.name, why, "runtime tenant not in force"),
        }
    }
    out
}

fn tenant(record: &TenantRecord, tenancy: Tenancy<'_>, index: usize) -> Result<TenantEntry, &'static str> {
    if tenancy.directory.tenants.contains_key(record.name.as_str()) {
        return Err("the configuration file has a tenant of that name");
    }
    let weight = std::num::NonZeroU32::new(record.weight).ok_or("weight 0")?;
    let store = tenancy.store;
    let limits = crate::limits_json::limits_of(&record.limits).map_err(|_| "its limits are not valid")?;
    let scope = store.register(ScopeKey::new(ScopeKind::Tenant, Arc::from(record.name.as_str())), limits);
    let mut teams = HashMap::new();
    for (name, limits) in &record.teams {
        let limits = crate::limits_json::limits_of(limits).map_err(|_| "a team's limits are not valid")?;
        let key = ScopeKey::new(ScopeKind::Team, format!("{}/{name}", record.name));
        let team = store.register(key, limits);
        store.keep_with(team, scope);
        teams.insert(Arc::from(name.as_str()), TeamEntry { scope: team, allowed: Allowed::default() });
    }
    let index = u32::try_from(index).unwrap_or(u32::MAX);
    Ok(TenantEntry { index, weight, scope, allowed: Allowed::default(), teams })
}

/// Every live secret of `records`, by hash. A key whose tenant, team, class or limits the
/// configuration no longer accepts is left out (and logged): it cannot authenticate.
pub(super) fn all(
    records: &Sharded<Arc<str>, Indexed>,
    tenancy: Tenancy<'_>,
    tenants: &HashMap<Arc<str>, TenantEntry>,
) -> Sharded<[u8; 32], Arc<Resolved>> {
    let mut map = Sharded::default();
    for key in records.values() {
        one(&key.record, (tenancy, tenants), key.index, &mut map);
    }
    map
}

/// Adds the live secrets of `record` (the `index`th runtime key) to `map`.
pub(super) fn one(
    record: &KeyRecord,
    (tenancy, tenants): (Tenancy<'_>, &HashMap<Arc<str>, TenantEntry>),
    index: usize,
    map: &mut Sharded<[u8; 32], Arc<Resolved>>,
) {
    if record.revoked_at.is_some() {
        return;
    }
    let caller = match record.role {
        Role::TenantAdmin => None,
        Role::Client => match caller(record, tenancy, tenants, tenancy.configured_keys.saturating_add(index)) {
            Ok(caller) => Some(caller),
            Err(why) => {
                tracing::warn!(key = %record.id, why, "runtime key not in force");
                return;
            }
        },
    };
    let expires = record.expires_at.map(|s| s.saturating_mul(1000));
    for secret in &record.secrets {
        let Some(hash) = unhex(&secret.sha256) else { continue };
        let until_ms = match (expires, secret.until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let key_id = Arc::from(record.id.as_str());
        map.insert(
            hash,
            Arc::new(Resolved { key_id, tenant: Arc::from(record.tenant.as_str()), caller: caller.clone(), until_ms }),
        );
    }
}

/// Removes the secrets of `record` from `map` (before its next version is added).
pub(super) fn forget(record: &KeyRecord, map: &mut Sharded<[u8; 32], Arc<Resolved>>) {
    for hash in record.secrets.iter().filter_map(|s| unhex(&s.sha256)) {
        if map.get(&hash).is_some_and(|r| *r.key_id == *record.id) {
            map.remove(&hash);
        }
    }
}

/// The caller of a client key.
fn caller(
    record: &KeyRecord,
    tenancy: Tenancy<'_>,
    tenants: &HashMap<Arc<str>, TenantEntry>,
    index: usize,
) -> Result<Caller, &'static str> {
    let directory = &tenancy.directory;
    let name = record.tenant.as_str();
    let found = directory.tenants.get_key_value(name).or_else(|| tenants.get_key_value(name));
    let (tenant_name, tenant) = found.ok_or("its tenant is not configured")?;
    let org = directory.org.ok_or("no org")?;
    let mut scopes = vec![org, tenant.scope];
    let (team, allowed) = match &record.team {
        None => (None, tenant.allowed.clone()),
        Some(name) => {
            let (team, entry) = tenant.teams.get_key_value(name.as_str()).ok_or("its team is not configured")?;
            scopes.push(entry.scope);
            (Some(Arc::clone(team)), entry.allowed.clone())
        }
    };
    let class_name = record.class.as_deref().unwrap_or(sluice_config::DEFAULT_CLASS);
    let class_index = directory.classes.iter().position(|c| *c.name == *class_name);
    let class_index = class_index.or(record.class.is_none().then_some(0)).ok_or("its class is not configured")?;
    let class = directory.classes.get(class_index).ok_or("no class")?.clone();
    let limits = crate::limits_json::limits_of(&record.limits).map_err(|_| "its limits are not valid")?;
    let key_id: Arc<str> = Arc::from(record.id.as_str());
    let key = tenancy.store.register(ScopeKey::new(ScopeKind::ApiKey, Arc::clone(&key_id)), limits);
    tenancy.store.keep_with(key, tenant.scope);
    scopes.push(key);
    Ok(Caller {
        key_id,
        tenant: Arc::clone(tenant_name),
        team,
        tenant_index: tenant.index,
        weight: tenant.weight,
        key_index: u32::try_from(index).unwrap_or(u32::MAX),
        class,
        class_index,
        scopes: scopes.into(),
        models: record.models.as_ref().map(|m| m.iter().map(|p| Arc::from(p.as_str())).collect()),
        allowed: allowed.narrowed(&record.allowed()),
    })
}
