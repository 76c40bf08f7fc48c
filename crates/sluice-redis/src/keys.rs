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
//! On a cluster `T` is `{P:t:<tenant>}` for a tenant and the caller scopes kept beside it
//! (its teams and keys, [`sluice_quota::QuotaStore::keep_with`]), so tenants spread over
//! the masters; `{P:c}` for the scopes many tenants share on the caller side (the org, model
//! profiles, accounts) and for a team or key nobody placed; and `{P:d:<deployment>}` for
//! each deployment (the upstream quota domain). On a standalone server every scope lives in
//! the one group `{P:c}`, so a whole path is one script. `P` is the configured prefix
//! (default `sluice`).
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
    /// The group a scope's hash lives in on a cluster, unless it was placed beside another
    /// scope: one per deployment, one per tenant, one for the rest of the caller side.
    #[must_use]
    pub fn of(prefix: &str, key: &ScopeKey) -> Self {
        let tag = match key.kind {
            ScopeKind::Deployment => format!("{{{prefix}:d:{}}}", key.name),
            ScopeKind::Tenant => format!("{{{prefix}:t:{}}}", key.name),
            _ => format!("{{{prefix}:c}}"),
        };
        Self { tag }
    }

    /// The group of every scope on a standalone server, and of the shared caller scopes
    /// on a cluster.
    #[must_use]
    pub fn standalone(prefix: &str) -> Self {
        Self { tag: format!("{{{prefix}:c}}") }
    }

    /// The Redis Cluster slot of the group's keys.
    #[must_use]
    pub fn slot(&self) -> u16 {
        slot(&self.tag)
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

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the text between the
/// first `{` and the next `}`, when not empty), or of the whole key, modulo 16,384.
#[must_use]
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(bytes) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 { crc << 1 } else { (crc << 1) ^ 0x1021 };
        }
    }
    crc % 16_384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tenant_and_each_deployment_has_its_own_group_and_shared_scopes_share_one() {
        let tenant = ScopeKey::new(ScopeKind::Tenant, "acme");
        let org = ScopeKey::new(ScopeKind::Org, "org");
        let profile = ScopeKey::new(ScopeKind::ModelProfile, "fast-chat");
        let deployment = ScopeKey::new(ScopeKind::Deployment, "gpt-4o-east");
        assert_eq!(Group::of("sluice", &org), Group::of("sluice", &profile));
        assert_eq!(Group::of("sluice", &org), Group::standalone("sluice"));
        let group = Group::of("sluice", &deployment);
        assert_eq!(group.tag, "{sluice:d:gpt-4o-east}");
        assert_eq!(group.state(), "{sluice:d:gpt-4o-east}:state");
        assert_eq!(Group::of("sluice", &tenant).state(), "{sluice:t:acme}:state");
        assert_eq!(Group::standalone("sluice").state(), "{sluice:c}:state");
        assert_eq!(group.leases(), "{sluice:d:gpt-4o-east}:leases");
        assert_eq!(group.window("d:gpt-4o-east"), "{sluice:d:gpt-4o-east}:window:d:gpt-4o-east");
    }

    #[test]
    fn slots_are_redis_clusters() {
        // Known answers of `CLUSTER KEYSLOT`.
        assert_eq!(slot("foo"), 12_182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        let group = Group::of("sluice", &ScopeKey::new(ScopeKind::Tenant, "acme"));
        assert_eq!(slot(&group.state()), group.slot());
        assert_eq!(slot(&group.leases()), group.slot());
    }
}
