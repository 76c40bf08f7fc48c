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
//! On a cluster `T` is one of [`TENANT_SLOTS`] tenant tags `{P:t<i>:<n>}` for a tenant and
//! the caller scopes kept beside it (its teams and keys,
//! [`sluice_quota::QuotaStore::keep_with`]): the tenant's name picks the tag (FNV-1a), and
//! the tags' slots lie evenly across the slot space, so tenants spread over the masters while
//! the tenants of one tag still share batch scripts ([`TenantGroups`]). `{P:c}` holds the
//! scopes many tenants share on the caller side (the org, model profiles, accounts) and a
//! team or key nobody placed; `{P:d:<deployment>}` each deployment (the upstream quota
//! domain). On a standalone server every scope lives in
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
    /// The group a scope's hash lives in on a cluster, unless it is a tenant's
    /// ([`TenantGroups`]) or was placed beside another scope: one per deployment, one for
    /// the rest.
    #[must_use]
    pub fn of(prefix: &str, key: &ScopeKey) -> Self {
        let tag = match key.kind {
            ScopeKind::Deployment => format!("{{{prefix}:d:{}}}", key.name),
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

/// How many tags (so slots) the tenants of a cluster are spread over.
pub const TENANT_SLOTS: u16 = 16;

/// The tenant groups of a cluster: [`TENANT_SLOTS`] tags, the `i`-th the first `{P:t<i>:<n>}`
/// whose slot lies in the `i`-th of as many equal ranges of the slot space. Masters that own
/// equal ranges (as `redis-cli --cluster create` assigns them) so get equal shares of the
/// tags, and each tag gathers enough tenants for their operations to share batch scripts.
/// Every instance with the same prefix computes the same tags.
#[derive(Debug, Clone)]
pub struct TenantGroups {
    groups: Vec<Group>,
}

impl TenantGroups {
    /// The tenant groups for `prefix`.
    #[must_use]
    pub fn new(prefix: &str) -> Self {
        let width = 16_384 / TENANT_SLOTS;
        let groups = (0..TENANT_SLOTS)
            .map(|i| {
                let range = i * width..(i + 1) * width;
                let tag = |n: u32| format!("{{{prefix}:t{i}:{n}}}");
                // About one tag in TENANT_SLOTS falls in a range: a few dozen tries.
                let n = (0..u32::MAX).find(|&n| range.contains(&slot(&tag(n)))).unwrap_or(0);
                Group { tag: tag(n) }
            })
            .collect();
        Self { groups }
    }

    /// The group of the tenant named `tenant`.
    #[must_use]
    pub fn of(&self, tenant: &str) -> Group {
        let hash = tenant.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
        let index = usize::try_from(hash % u32::from(TENANT_SLOTS)).unwrap_or(0);
        self.groups.get(index).cloned().unwrap_or_else(|| Group { tag: String::new() })
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
    fn each_deployment_has_its_own_group_and_shared_scopes_share_one() {
        let org = ScopeKey::new(ScopeKind::Org, "org");
        let profile = ScopeKey::new(ScopeKind::ModelProfile, "fast-chat");
        let deployment = ScopeKey::new(ScopeKind::Deployment, "gpt-4o-east");
        assert_eq!(Group::of("sluice", &org), Group::of("sluice", &profile));
        assert_eq!(Group::of("sluice", &org), Group::standalone("sluice"));
        let group = Group::of("sluice", &deployment);
        assert_eq!(group.tag, "{sluice:d:gpt-4o-east}");
        assert_eq!(group.state(), "{sluice:d:gpt-4o-east}:state");
        assert_eq!(Group::standalone("sluice").state(), "{sluice:c}:state");
        assert_eq!(group.leases(), "{sluice:d:gpt-4o-east}:leases");
        assert_eq!(group.window("d:gpt-4o-east"), "{sluice:d:gpt-4o-east}:window:d:gpt-4o-east");
    }

    #[test]
    fn slots_are_redis_clusters() {
        // Known answers of `CLUSTER KEYSLOT`.
        assert_eq!(slot("foo"), 12_182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        let group = TenantGroups::new("sluice").of("acme");
        assert_eq!(slot(&group.state()), group.slot());
        assert_eq!(slot(&group.leases()), group.slot());
    }

    #[test]
    fn tenant_groups_lie_evenly_across_the_slots_and_tenants_spread_over_them() {
        let groups = TenantGroups::new("sluice");
        let width = 16_384 / TENANT_SLOTS;
        for (i, group) in (0..TENANT_SLOTS).zip(&groups.groups) {
            assert_eq!(group.slot() / width, i, "{}", group.tag);
            assert!(group.tag.starts_with(&format!("{{sluice:t{i}:")), "{}", group.tag);
        }
        assert_eq!(groups.of("acme"), TenantGroups::new("sluice").of("acme"), "every instance agrees");
        assert_ne!(groups.of("acme").slot(), groups.of("globex").slot());
        // A hundred tenants over three masters owning equal ranges: none above 45 %.
        let mut per_master = [0_u32; 3];
        for t in 0..100 {
            let slot = usize::from(groups.of(&format!("tenant-{t}")).slot());
            per_master[slot * 3 / 16_384] += 1;
        }
        assert!(per_master.iter().all(|&n| n <= 45), "{per_master:?}");
    }
}
