//! The operator surface of sluice: the admin API (`/admin/...`), the built-in live
//! dashboard (`/dashboard`, its page and assets) and the usage queries behind
//! `GET /admin/usage`. It is not the gateway: it reads and changes the gateway's services
//! (state, store, runtime keys, errors) through `sluice-server`'s public API, and the
//! gateway does not know it; whoever builds the [`AppState`] mounts it with
//! [`AppState::with_surface`] and [`surface`].
//!
//! Layout: `auth` checks the admin key (a bearer token, or the dashboard's session
//! cookie for reads), `view` renders live state as JSON, `counters` sums the request-path
//! metrics for the dashboard, `routes` are the handlers; `keys` (with `keys_input`, its
//! validation), `tenants` and `audit` manage runtime keys and tenants and their audit log,
//! and `usage` answers what was used and spent, for the root admin key or a tenant admin
//! key (`actor`); `dashboard` serves the page. The configured scopes and classes it names
//! are the gateway's ([`sluice_server::inventory`]).
//!
//! Semantics: without `[admin] key_sha256` every admin route answers 404; a missing or
//! wrong key gets the structured 401. A tenant pause is a store hold, so it holds on every
//! instance sharing the store (Redis); a class pause is per instance (each instance's
//! queues). Limit changes apply to the store of the instance that receives them: in
//! Redis mode every instance sends its own limits with each reservation, so change them
//! on every instance (or in the file, and restart). Responses carry names and numbers
//! only: never a provider key or a gateway key hash. Every error response is built by
//! `sluice-server`'s `error` module.
//!
//! Reload: the scopes and classes follow the configuration in force (the gateway's
//! inventory); the admin key and the dashboard sessions are bound when [`surface`] is made.

mod actor;
mod audit;
mod auth;
mod counters;
mod dashboard;
mod keys;
mod keys_input;
mod openapi;
mod page;
mod routes;
mod schemas;
mod table;
mod tenants;
mod throttle;
mod usage;
mod view;

use std::sync::Arc;

use axum::Router;
use sluice_config::Config;
use sluice_server::{AppState, Surface};

pub use actor::Actor;
pub use auth::AdminKey;
pub use counters::{Sample, parse_samples};
pub use throttle::{LoginThrottle, peer};

/// The operator surface for `config`: the admin API and the dashboard, to mount with
/// [`AppState::with_surface`]. Its admin key (and the dashboard sessions drawn from it)
/// and its failed-login record are made here, once, and shared by every router it gives.
#[must_use]
pub fn surface(config: &Config) -> Arc<dyn Surface> {
    let sessions = Sessions { key: config.admin.key_sha256.map(AdminKey::new), logins: LoginThrottle::default() };
    Arc::new(Console(Arc::new(sessions)))
}

/// Every route the operator surface serves, as `(METHOD, path)` with axum's `{param}`
/// placeholders (OpenAPI's too): the admin API's (`/admin/...`) and the dashboard's.
#[must_use]
pub fn route_table() -> Vec<(&'static str, &'static str)> {
    let mut listed = api_table().listed().to_vec();
    listed.extend_from_slice(dashboard::table().listed());
    listed
}

/// The admin API's routes (`/admin/...`), its OpenAPI document's included.
fn api_table() -> table::Table {
    routes::table().add(table::Verb::Get, "/admin/openapi.json", openapi::document)
}

pub use openapi::openapi;

/// What the surface binds at start.
#[derive(Debug)]
struct Sessions {
    /// The admin key, if configured; without it the admin surface does not exist.
    key: Option<AdminKey>,
    /// Failed dashboard logins per peer address.
    logins: LoginThrottle,
}

/// The operator surface: the admin API's and the dashboard's routes over its sessions.
#[derive(Debug)]
struct Console(Arc<Sessions>);

impl Surface for Console {
    fn router(&self, state: &AppState) -> Router<AppState> {
        let state = AdminState { app: state.clone(), sessions: Arc::clone(&self.0) };
        // The admin API behind the failed-authentication throttle; the dashboard's login
        // counts its failures itself.
        let api =
            api_table().router().route_layer(axum::middleware::from_fn_with_state(state.clone(), throttle::admin_api));
        api.merge(dashboard::table().router()).with_state(state)
    }
}

/// What the admin handlers work with: the gateway's [`AppState`] (through `Deref`) and
/// the surface's sessions.
#[derive(Debug, Clone)]
struct AdminState {
    app: AppState,
    sessions: Arc<Sessions>,
}

impl std::ops::Deref for AdminState {
    type Target = AppState;

    fn deref(&self) -> &AppState {
        &self.app
    }
}
