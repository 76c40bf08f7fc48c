//! The part of answering a request that both shapes share: admission, then faults.

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;

use crate::conn::{ConnCtl, abort};
use crate::errors::ApiError;
use crate::faults::FaultKind;
use crate::sim::{Ask, ModelState, Sim, Ticket};
use crate::stats::Served;

/// A parsed, counted request ready for admission.
#[derive(Debug)]
pub struct Prepared {
    /// Its model.
    pub model: Arc<ModelState>,
    /// What admission is asked for.
    pub ask: Ask,
    /// Input tokens (cache reads included).
    pub input: u64,
    /// Of which cache reads.
    pub cached: u64,
    /// Tenant.
    pub tenant: String,
    /// `req-id:` marker of the last message.
    pub marker: Option<String>,
}

impl Prepared {
    /// The accounting record of this request having produced `output` tokens.
    #[must_use]
    pub fn served(&self, output: u64) -> Served<'_> {
        Served {
            model: &self.model.config.name,
            tenant: &self.tenant,
            marker: self.marker.as_deref(),
            input: self.input,
            cached: self.cached,
            output,
        }
    }
}

/// Admits the request and applies its fault. `Err` is the response to send instead of
/// generating (a refusal, an injected error, or an aborted connection).
///
/// # Errors
/// The response that replaces generation.
pub async fn admit(sim: &Sim, ctl: Option<&ConnCtl>, p: &Prepared) -> Result<Ticket, Response> {
    let ticket = sim.admit(&p.model, &p.ask).map_err(|refusal| crate::respond::refusal(sim, &p.model, &refusal))?;
    let faults = &p.model.faults;
    let Some(kind) = ticket.fault else { return Ok(ticket) };
    if let Some(status) = kind.status() {
        return Err(crate::respond::error(sim, p.model.flavor, Some(&ticket.snapshot), &ApiError::Fault(status)));
    }
    match kind {
        FaultKind::Reset => Err(aborted(ctl)),
        FaultKind::Hang => {
            tokio::time::sleep(Duration::from_millis(faults.hang_ms)).await;
            Err(aborted(ctl))
        }
        FaultKind::SlowHeaders => {
            tokio::time::sleep(Duration::from_millis(faults.slow_headers_ms)).await;
            Ok(ticket)
        }
        _ => Ok(ticket),
    }
}

fn aborted(ctl: Option<&ConnCtl>) -> Response {
    abort(ctl);
    let mut response = Response::default();
    *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// Waits the whole generation time of a non-streamed answer.
pub async fn generate(ticket: &Ticket) {
    let total = ticket.delays.total(ticket.output);
    if !total.is_zero() {
        tokio::time::sleep(total).await;
    }
}
