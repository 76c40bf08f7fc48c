//! The part of answering a request that both shapes share: admission, then faults.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;

use crate::conn::{ConnCtl, abort};
use crate::errors::ApiError;
use crate::faults::{FaultConfig, FaultKind};
use crate::prompt_cache::CacheUse;
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
    /// Its prompt-cache lookup, when the model keeps a prompt cache.
    pub prompt_cache: Option<CacheUse>,
}

impl Prepared {
    /// Input tokens written to the prompt cache (Anthropic's `cache_creation_input_tokens`).
    #[must_use]
    pub fn cache_created(&self) -> u64 {
        self.prompt_cache.as_ref().map_or(0, |c| c.lookup.created)
    }

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
/// generating (a refusal, an injected error, a stalled or oversized answer, or an aborted
/// connection). `headers` are the request's (an `echo_key` error quotes its credential).
///
/// # Errors
/// The response that replaces generation.
pub async fn admit(sim: &Sim, ctl: Option<&ConnCtl>, p: &Prepared, headers: &HeaderMap) -> Result<Ticket, Response> {
    let ticket = sim.admit(&p.model, &p.ask).map_err(|refusal| crate::respond::refusal(sim, &p.model, &refusal))?;
    if let Some(cache) = &p.prompt_cache {
        sim.cache_commit(&p.model, cache);
    }
    let Some(kind) = ticket.fault else { return Ok(ticket) };
    let faults = p.model.faults();
    if let Some(status) = kind.status() {
        let note = error_note(&faults, headers);
        let err = ApiError::Fault(status);
        let mut response = crate::respond::noted_error(sim, p.model.flavor, Some(&ticket.snapshot), &err, &note);
        if kind == FaultKind::Error429 {
            crate::respond::hint(&mut response, Duration::from_millis(faults.error_429_retry_after_ms));
        }
        return Err(response);
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
        // Streams stall in the pacer, after their first chunks.
        FaultKind::Stall if !p.ask.stream => Err(stalled(sim, p, &ticket)),
        FaultKind::Oversize => Err(oversized(sim, p, &ticket)),
        _ => Ok(ticket),
    }
}

/// What an error fault appends to its message: the presented credential (`echo_key`) and
/// `error_padding_bytes` of filler.
fn error_note(faults: &FaultConfig, headers: &HeaderMap) -> String {
    let mut note = String::new();
    if faults.echo_key
        && let Some(key) = credential(headers)
    {
        note.push_str(&format!(" (request made with key {key})"));
    }
    let padding = usize::try_from(faults.error_padding_bytes).unwrap_or(0);
    if padding > 0 {
        note.push(' ');
        note.push_str(&".".repeat(padding));
    }
    note
}

/// The credential a request presented: `x-api-key`, else the bearer token.
fn credential(headers: &HeaderMap) -> Option<&str> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    text("x-api-key").or_else(|| text("authorization").map(|v| v.trim_start_matches("Bearer ").trim()))
}

/// A 200 whose headers go out at once and whose body never comes: after `stall_ms` the
/// connection is cut.
fn stalled(sim: &Sim, p: &Prepared, ticket: &Ticket) -> Response {
    let wait = Duration::from_millis(p.model.faults().stall_ms);
    let body = futures_util::stream::once(async move {
        tokio::time::sleep(wait).await;
        Err::<Bytes, _>(std::io::Error::other("answer stalled by an injected fault"))
    });
    crate::respond::json_body(sim, p.model.flavor, Some(&ticket.snapshot), Body::from_stream(body))
}

/// A 200 whose JSON body is `oversize_bytes` long, sent in 1 MiB pieces.
fn oversized(sim: &Sim, p: &Prepared, ticket: &Ticket) -> Response {
    const PIECE: usize = 1 << 20;
    let total = usize::try_from(p.model.faults().oversize_bytes).unwrap_or(usize::MAX);
    let filler = Bytes::from(vec![b' '; PIECE]);
    let pieces = total.saturating_sub(2).div_ceil(PIECE);
    let mut parts = vec![Bytes::from_static(b"{")];
    parts.extend(std::iter::repeat_n(filler, pieces));
    parts.push(Bytes::from_static(b"}"));
    let body = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    crate::respond::json_body(sim, p.model.flavor, Some(&ticket.snapshot), Body::from_stream(body))
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
