//! Keeps the runtime keys in force up to the job store: every [`POLL`] the keys changed
//! since the version in force, everything again when the store says it lost its data.

use std::sync::atomic::Ordering;

use sluice_jobs::JobStore;

use super::{KEY_KIND, KEY_OWNER, POLL, Stored, TENANT_KIND, Versions, load, parse};
use crate::state::Gateway;

/// Brings the keys in `gateway` up to `store`: the keys changed since the version in force,
/// or every key (and tenant) at `force`, when the tenants changed, when the store cannot
/// say which keys changed, or when the store's epoch changed (it lost its data: its
/// versions started over, so no version in force can be trusted; logged, counted in
/// `sluice_store_resets_total` and shown by `/readyz`).
///
/// # Errors
/// When the store cannot answer; the keys in force stay.
pub async fn refresh(store: &dyn JobStore, gateway: &Gateway, force: bool) -> Result<(), sluice_jobs::JobStoreError> {
    let keys = &gateway.services.runtime_keys;
    let epoch = store.epoch().await?;
    let in_force = keys.versions();
    let tenants = store.doc_version(TENANT_KIND).await?;
    let epoch_changed = keys.epoch_changed(epoch.as_deref());
    if !force && !epoch_changed && tenants == in_force.tenants {
        let changes = store.records_since(KEY_KIND, KEY_OWNER, in_force.keys).await?;
        if changes.version == in_force.keys {
            return Ok(());
        }
        if let Some(docs) = changes.docs {
            let bodies = docs.into_iter().filter_map(|(id, body)| Some((id, body?)));
            keys.apply(parse(bodies, KEY_KIND), in_force.keys, changes.version, gateway.tenancy());
            return Ok(());
        }
    }
    let version = Versions { keys: store.doc_version(KEY_KIND).await?, tenants };
    let stored = Stored { keys: load(store, KEY_KIND).await?, tenants: load(store, TENANT_KIND).await? };
    if keys.install(stored, version, epoch, gateway.tenancy()) {
        keys.reset_at_ms.store(gateway.services.clock.unix_millis().max(1), Ordering::Relaxed);
        gateway.services.metrics.store_resets.inc();
        tracing::error!(
            "the job store lost its data (its epoch changed): runtime keys and tenants were read again, \
             keys revoked here stay revoked; usage, audit and jobs it held are gone"
        );
    }
    Ok(())
}

/// Polls the store every [`POLL`] until the gateway drains, so that a change made on
/// another instance is in force here within a second. Without a job store there are no
/// runtime keys and nothing is spawned.
pub fn spawn(state: &crate::AppState) -> Option<tokio::task::JoinHandle<()>> {
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
