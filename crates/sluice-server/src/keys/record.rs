//! A runtime key as stored: one JSON document per key (kind `key`, owner `runtime`) in the
//! job store, and the audit entries (kind `audit`, owner `admin`). Neither ever holds a
//! secret: a key's secrets are kept as SHA-256 hashes, like the configured keys'.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The document kind of runtime keys.
pub const KEY_KIND: &str = "key";
/// The one owner runtime keys are stored under (tenancy is a field, checked by the API).
pub const KEY_OWNER: &str = "runtime";
/// The document kind of runtime tenants (same owner as the keys).
pub const TENANT_KIND: &str = "tenant";
/// The document kind of audit entries.
pub const AUDIT_KIND: &str = "audit";
/// The one owner audit entries are stored under.
pub const AUDIT_OWNER: &str = "admin";
/// Every kind of record the gateway writes, with its owner: what a ledger keeps in Postgres.
pub const RECORDS: [(&str, &str); 3] = [(KEY_KIND, KEY_OWNER), (TENANT_KIND, KEY_OWNER), (AUDIT_KIND, AUDIT_OWNER)];

/// What a runtime key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Calls the proxied API as its tenant.
    #[default]
    Client,
    /// Manages its own tenant's keys through the admin API (never proxies).
    TenantAdmin,
}

/// One valid secret of a key, as its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretHash {
    /// SHA-256 of the secret, hex.
    pub sha256: String,
    /// Unix milliseconds after which it no longer authenticates (a rotated-out secret's
    /// grace); `None` for the current secret.
    pub until: Option<u64>,
}

/// A runtime key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Public id (never the secret).
    pub id: String,
    /// Its tenant (configured).
    pub tenant: String,
    /// Its team in the tenant, if any.
    pub team: Option<String>,
    /// Its traffic class (`None`: the default class).
    pub class: Option<String>,
    /// The key's own limits, as the admin API's limits object (`{"rpm": 60}`).
    pub limits: Map<String, Value>,
    /// The limits the root admin set last: a tenant admin may tighten the key's limits
    /// but never clear or loosen one of these.
    #[serde(default)]
    pub root_limits: Map<String, Value>,
    /// Free operator metadata (string values).
    pub metadata: Map<String, Value>,
    /// Model profiles it may name (`None`: all).
    pub models: Option<Vec<String>>,
    /// Regions one of which a deployment serving it must be in, besides its tenant's and
    /// team's constraints (`None`: theirs alone). Only the root admin sets it.
    #[serde(default)]
    pub regions: Option<Vec<String>>,
    /// Labels a deployment serving it must all carry, besides its tenant's and team's.
    /// Only the root admin sets it.
    #[serde(default)]
    pub labels: Option<Vec<String>>,
    /// Unix seconds after which it no longer authenticates.
    pub expires_at: Option<u64>,
    /// Unix seconds when it was revoked; a revoked key never authenticates again.
    pub revoked_at: Option<u64>,
    /// Unix seconds of creation.
    pub created_at: u64,
    /// Unix seconds of the last change.
    pub updated_at: u64,
    /// Client or tenant admin.
    pub role: Role,
    /// The secrets that authenticate it.
    pub secrets: Vec<SecretHash>,
    /// Grows by one with every change: each change is written only over the version it
    /// was made from (a compare-and-set), so concurrent changes are ordered.
    #[serde(default)]
    pub version: u64,
}

impl KeyRecord {
    /// Its own `regions` and `labels` (its tenant's and team's still apply).
    #[must_use]
    pub fn allowed(&self) -> sluice_config::Allowed {
        let names =
            |list: &Option<Vec<String>>| list.as_ref().map(|l| l.iter().map(|n| Arc::from(n.as_str())).collect());
        sluice_config::Allowed { regions: names(&self.regions), labels: names(&self.labels) }
    }

    /// `active`, `expired` or `revoked` at `now_ms`.
    #[must_use]
    pub fn status(&self, now_ms: u64) -> &'static str {
        if self.revoked_at.is_some() {
            "revoked"
        } else if self.expires_at.is_some_and(|at| at.saturating_mul(1000) <= now_ms) {
            "expired"
        } else {
            "active"
        }
    }

    /// The key as the admin API shows it: everything but the secrets' hashes.
    #[must_use]
    pub fn view(&self, now_ms: u64) -> Value {
        let grace: Vec<u64> = self.secrets.iter().filter_map(|s| s.until).filter(|u| *u > now_ms).collect();
        serde_json::json!({
            "id": self.id, "source": "runtime", "role": self.role, "status": self.status(now_ms),
            "tenant": self.tenant, "team": self.team, "class": self.class, "limits": self.limits,
            "root_limits": self.root_limits, "metadata": self.metadata, "models": self.models, "regions": self.regions,
            "labels": self.labels, "expires_at": self.expires_at,
            "revoked_at": self.revoked_at, "created_at": self.created_at, "updated_at": self.updated_at,
            "previous_secret_valid_until_ms": grace.into_iter().max(), "version": self.version,
        })
    }
}

/// A tenant created through the admin API (the file's tenants stay read-only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord {
    /// Its name (no file tenant has it).
    pub name: String,
    /// Its weight in fair sharing.
    pub weight: u32,
    /// Its limits, as the admin API's limits object.
    pub limits: Map<String, Value>,
    /// Its teams: name → limits.
    pub teams: std::collections::BTreeMap<String, Map<String, Value>>,
    /// Unix seconds of creation.
    pub created_at: u64,
    /// Unix seconds of the last change.
    pub updated_at: u64,
}

impl TenantRecord {
    /// The tenant as the admin API shows it.
    #[must_use]
    pub fn view(&self) -> Value {
        serde_json::json!({
            "name": self.name, "source": "runtime", "weight": self.weight, "limits": self.limits,
            "teams": self.teams, "created_at": self.created_at, "updated_at": self.updated_at,
        })
    }
}

/// One admin change, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Its id (its place in the log).
    pub id: String,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// `root`, or the tenant admin key's id.
    pub actor: String,
    /// e.g. `key.create`, `key.revoke`.
    pub action: String,
    /// The key changed (`None` for a change of a tenant).
    pub key_id: Option<String>,
    /// The key's tenant, or the tenant changed (a tenant admin reads only its own
    /// tenant's entries).
    pub tenant: String,
    /// Names of the fields changed (never their secret values).
    pub fields: Vec<String>,
}

/// Lower-case hex of `bytes`.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32 bytes whose hex is `text`.
#[must_use]
pub fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_bad_text() {
        let bytes = sluice_config::hash_key("k");
        assert_eq!(unhex(&hex(&bytes)), Some(bytes));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(&"g".repeat(64)), None);
    }
}
