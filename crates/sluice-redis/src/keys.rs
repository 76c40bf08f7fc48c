//! The key layout. Every key carries a hash tag, so all keys one script touches share a
//! Redis Cluster slot:
//!
//! ```text
//! {T}:state                 HASH  every scope of the group, one field each (below)
//! {T}:leases                ZSET  open reservations of the group, scored by lease end (µs);
//!                                 each member is the reservation's id and the settlement
//!                                 its expiry applies (record.rs), so it needs no other key
//! {P:d:<deployment>}:fair   HASH  fair share: `t:<tenant>` virtual time, `@clock`, `@x`
//! {P:d:<deployment>}:asking ZSET  tenants asking lately, scored by expiry (µs)
//! {T}:window:<field>        STRING a deployment's learned short window (µs), shared by
//!                                 every instance; expires `hold` after the last shrink
//! ```
//!
//! On a cluster `T` is `{P:c}` for the caller scopes (org, tenant, team, api key, model
//! profile) and `{P:d:<deployment>}` for each deployment (the upstream quota domain); on a
//! standalone server every scope lives in the one group `{P:c}`, so a whole path is one
//! script. `P` is the configured prefix (default `sluice`).
//!
//! A state hash holds one field per scope, `<kind>:<name>` ([`crate::record::scope_id`]),
//! whose value is a MessagePack map: `<dimension code>:<period µs>` → the instant that
//! bucket is full again (µs; missing means full), `n` requests in flight, `p` paused until
//! (µs), `h` held by an operator; and `@x`, the instant the hash's expiry was last pushed
//! to. The hash expires when its group has been idle for ten minutes past what its
//! buckets, leases and pauses need.

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

    /// The group of every scope on a standalone server.
    #[must_use]
    pub fn standalone(prefix: &str) -> Self {
        Self { tag: format!("{{{prefix}:c}}") }
    }

    /// The group's state hash (every scope of the group).
    #[must_use]
    pub fn state(&self) -> String {
        format!("{}:state", self.tag)
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

    /// The learned short window of the scope whose field is `sid` (deployment scopes).
    #[must_use]
    pub fn window(&self, sid: &str) -> String {
        format!("{}:window:{sid}", self.tag)
    }

    /// The group's tenants currently asking, scored by expiry (deployment groups).
    #[must_use]
    pub fn asking(&self) -> String {
        format!("{}:asking", self.tag)
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
        assert_eq!(group.state(), "{sluice:d:gpt-4o-east}:state");
        assert_eq!(Group::of("sluice", &tenant).state(), "{sluice:c}:state");
        assert_eq!(Group::standalone("sluice"), Group::of("sluice", &tenant));
        assert_eq!(group.leases(), "{sluice:d:gpt-4o-east}:leases");
        assert_eq!(group.window("d:gpt-4o-east"), "{sluice:d:gpt-4o-east}:window:d:gpt-4o-east");
    }
}
