//! The key layout. Every key carries a hash tag, so all keys one script touches share a
//! Redis Cluster slot:
//!
//! ```text
//! {P:c}:s:<kind>:<name>     HASH  a caller-side scope (org, tenant, team, api_key, model_profile)
//! {P:d:<deployment>}:s:deployment:<deployment>
//!                           HASH  the deployment's scope (the upstream quota domain)
//! {T}:leases                ZSET  open reservations of the group, scored by lease end (µs)
//! {T}:r:<id>                STRING the reservation record (JSON: cost, scopes, limits)
//! {T}:fair                  HASH  fair share: `t:<tenant>` virtual time, `@clock`
//! {T}:asking                ZSET  tenants asking lately, scored by expiry (µs)
//! ```
//!
//! A scope hash holds one field per limit (`<dimension>:<period µs>` → the instant the
//! bucket is full again, µs), `n` (requests in flight) and `p` (paused until, µs).
//! `P` is the configured prefix (default `sluice`), `T` the group's tag.

use sluice_quota::{ScopeKey, ScopeKind};

/// A hash-tag group: the keys of one Redis Cluster slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Group {
    /// The hash tag, braces included.
    pub tag: String,
}

impl Group {
    /// The group a scope's hash lives in: one per deployment, one for all caller scopes.
    #[must_use]
    pub fn of(prefix: &str, key: &ScopeKey) -> Self {
        let tag = match key.kind {
            ScopeKind::Deployment => format!("{{{prefix}:d:{}}}", key.name),
            _ => format!("{{{prefix}:c}}"),
        };
        Self { tag }
    }

    /// The scope hash of `key` in this group.
    #[must_use]
    pub fn scope_key(&self, key: &ScopeKey) -> String {
        format!("{}:s:{}:{}", self.tag, key.kind.as_str(), key.name)
    }

    /// The group's lease set.
    #[must_use]
    pub fn leases(&self) -> String {
        format!("{}:leases", self.tag)
    }

    /// The group's fair-share virtual times (deployment groups).
    #[must_use]
    pub fn fair(&self) -> String {
        format!("{}:fair", self.tag)
    }

    /// The group's tenants currently asking, scored by expiry (deployment groups).
    #[must_use]
    pub fn asking(&self) -> String {
        format!("{}:asking", self.tag)
    }

    /// The prefix of the group's reservation records.
    #[must_use]
    pub fn record_prefix(&self) -> String {
        format!("{}:r:", self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_scopes_share_a_slot_and_each_deployment_has_its_own() {
        let tenant = ScopeKey::new(ScopeKind::Tenant, "acme");
        let key = ScopeKey::new(ScopeKind::ApiKey, "k1");
        let deployment = ScopeKey::new(ScopeKind::Deployment, "gpt-4o-east");
        assert_eq!(Group::of("sluice", &tenant), Group::of("sluice", &key));
        let group = Group::of("sluice", &deployment);
        assert_eq!(group.tag, "{sluice:d:gpt-4o-east}");
        assert_eq!(group.scope_key(&deployment), "{sluice:d:gpt-4o-east}:s:deployment:gpt-4o-east");
        assert_eq!(Group::of("sluice", &tenant).scope_key(&tenant), "{sluice:c}:s:tenant:acme");
        assert_eq!(group.leases(), "{sluice:d:gpt-4o-east}:leases");
    }
}
