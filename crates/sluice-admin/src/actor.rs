//! Who makes an admin request: the root admin key (`[admin] key_sha256`), or a tenant
//! admin key (a runtime key with role `tenant_admin`) that sees only its own tenant.

use std::sync::Arc;

use axum::http::HeaderMap;
use sluice_config::hash_key;

use super::auth::bearer;
use super::routes::Refused;
use crate::AdminState;

/// The author of an admin request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// The root admin key: everything.
    Root,
    /// A tenant admin: its own tenant's keys and audit entries only.
    Tenant {
        /// The admin key's id (written in the audit log).
        key_id: Arc<str>,
        /// The tenant it manages.
        tenant: Arc<str>,
    },
}

impl Actor {
    /// The name the audit log records: `root` or the tenant admin key's id.
    #[must_use]
    pub fn name(&self) -> String {
        match self {
            Self::Root => "root".to_owned(),
            Self::Tenant { key_id, .. } => key_id.to_string(),
        }
    }

    /// Whether the actor may see and manage what belongs to `tenant`.
    #[must_use]
    pub fn sees(&self, tenant: &str) -> bool {
        match self {
            Self::Root => true,
            Self::Tenant { tenant: own, .. } => **own == *tenant,
        }
    }
}

/// The tenant admin behind the request's bearer token, if it is a live one.
pub(super) fn tenant_admin(state: &AdminState, headers: &HeaderMap) -> Option<Actor> {
    let token = bearer(headers)?.trim();
    let gateway = state.current();
    let found = gateway.services.runtime_keys.lookup(&hash_key(token), gateway.services.clock.unix_millis())?;
    // A client key is no admin key.
    found.caller.is_none().then_some(Actor::Tenant { key_id: found.key_id, tenant: found.tenant })
}

/// The actor of an admin request.
///
/// # Errors
/// [`Refused::NoAdmin`] without an admin key configured, [`Refused::BadKey`] without a
/// root or tenant admin key.
pub(super) fn actor(state: &AdminState, headers: &HeaderMap) -> Result<Actor, Refused> {
    let Some(key) = &state.sessions.key else { return Err(Refused::NoAdmin) };
    if key.bearer_ok(headers) {
        return Ok(Actor::Root);
    }
    tenant_admin(state, headers).ok_or(Refused::BadKey)
}
