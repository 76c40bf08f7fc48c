//! Work the gateway answers itself (a token count) still costs the caller one request on
//! its own scopes (tenant, team, key) and no tokens: its request limits and concurrency
//! bound how much CPU it may ask of the gateway. Shared scopes (org, model, deployment)
//! are not charged, as nothing goes to a provider. Calls that do go to a provider but
//! carry no tokens ([`run_upstream`]) cost one request on the whole path and the deployment.

use std::future::Future;
use std::time::Duration;

use sluice_quota::{Cost, Demand, Rejection, RejectionKind, ReserveError, ScopeId, Settlement};

use crate::error::{GatewayError, RateLimitInfo};
use crate::metrics::Bound;
use crate::state::{Caller, Gateway};

/// The suggested wait when every concurrency slot of the caller is busy.
const SLOT_RETRY: Duration = Duration::from_secs(1);

/// Runs `work` once one request is reserved on `caller`'s own scopes; the request stays
/// counted (and its concurrency slot held until `work` ends).
///
/// # Errors
/// The structured 429 when a limit refuses, 503 when the store cannot decide, or what
/// `work` fails with.
pub async fn run<T>(
    gateway: &Gateway,
    caller: &Caller,
    work: impl Future<Output = Result<T, GatewayError>>,
) -> Result<T, GatewayError> {
    // The caller's scopes run from the org down to the key; the org is shared.
    let own = caller.scopes.get(1..).unwrap_or_default();
    run_on(gateway, caller, own, work).await
}

/// Runs `work`, a call to `deployment` that carries no tokens (reading, cancelling or
/// deleting a stored response; a moderation; an image), once one request is reserved on
/// the caller's whole path (org included) and the deployment: their request limits, and
/// a concurrency slot held until `work` ends.
///
/// # Errors
/// As [`run`].
pub async fn run_upstream<T>(
    gateway: &Gateway,
    caller: &Caller,
    deployment: ScopeId,
    work: impl Future<Output = Result<T, GatewayError>>,
) -> Result<T, GatewayError> {
    let path: Vec<ScopeId> = caller.scopes.iter().copied().chain([deployment]).collect();
    run_on(gateway, caller, &path, work).await
}

async fn run_on<T>(
    gateway: &Gateway,
    caller: &Caller,
    path: &[ScopeId],
    work: impl Future<Output = Result<T, GatewayError>>,
) -> Result<T, GatewayError> {
    let (cost, store) = (Cost::request(0, 0), &gateway.services.store);
    let grant = match store.admit(Demand::new(path, cost, gateway.lease)).await {
        Ok(grant) => grant,
        Err(ReserveError::Store(e)) => {
            tracing::debug!(error = %e, "quota store failed");
            return Err(GatewayError::StoreUnavailable);
        }
        Err(ReserveError::Rejected(rejection)) => {
            let limiter = rejection.limiter.to_string();
            gateway.services.metrics.bound_decision("rejected", &limiter, Bound::of(&rejection));
            let retry_after = match rejection.kind {
                RejectionKind::SlotsBusy => Some(SLOT_RETRY),
                _ => rejection.retry_after(),
            };
            let binding = crate::binding::read_and_describe(store.as_ref(), gateway.calendar(), path, &rejection).await;
            let info = RateLimitInfo { binding, ..refusal(caller, limiter, &rejection, retry_after) };
            return Err(GatewayError::RateLimited(Box::new(info)));
        }
    };
    let result = work.await;
    if let Err(e) = store.settle(grant.id, Settlement::exact(cost)).await {
        // The lease ends the reservation instead (refunding the request).
        tracing::debug!(error = %e, "settling a metered request failed");
    }
    result
}

fn refusal(caller: &Caller, limiter: String, rejection: &Rejection, retry_after: Option<Duration>) -> RateLimitInfo {
    let Bound { scope_kind, dimension } = Bound::of(rejection);
    RateLimitInfo {
        limiter,
        scope: scope_kind,
        scope_name: rejection.scope.name.to_string(),
        dimension,
        binding: String::new(),
        provider: String::new(),
        model_profile: String::new(),
        provider_model: String::new(),
        retry_after,
        tenant_id: caller.tenant.to_string(),
        api_key_id: caller.key_id.to_string(),
        request_class: caller.class.name.to_string(),
        estimated_input_tokens: 0,
        estimated_output_tokens: 0,
        gateway_decision: "rejected_before_send",
    }
}
