//! The road of a proxied request (`POST /v1/chat/completions`, `/v1/embeddings`,
//! `/v1/messages`), one file per step, in order. No file imports one listed before it.
//!
//! 1. [`inbound`]: the caller (authenticated once, before the body, by the rate-limit
//!    header layer), the body, the parse, the profile, the idempotency key.
//! 2. [`attempt`]: the attempts — each asks routing where to go, is admitted, sent, and
//!    its answer read (a provider 429 in `provider_429`).
//! 3. [`routing`]: pure decisions: fallback order, `when` conditions, degradation, the
//!    retry decision.
//! 4. [`admission`]: price ([`admission::Quote`]), reserve or wait, or the refusal.
//! 5. [`outbound`]: the proxied paths, the upstream request, the bounded send; the
//!    upstream URL and authentication come from the provider seam
//!    (`sluice_upstream::providers`).
//! 6. [`relay`]: the provider's answer to the client, streams chunk by chunk.
//! 7. [`settle`]: the terms a reservation is settled on, and the guard that settles it.
//!
//! [`context`] is the request's context every step reads; it imports nothing of the road.
//! `scripts/import-cycles --road request/inbound.rs … request/settle.rs request/context.rs`
//! checks the order (the full command is in `docs/ARCHITECTURE.md`).

mod admission;
mod attempt;
mod context;
mod inbound;
mod outbound;
mod relay;
mod routing;
mod settle;

pub(crate) use admission::check_fits;
pub(crate) use admission::estimate_input;
pub(crate) use inbound::hidden_context;
pub use inbound::{ModelFromPath, count, finished, forward, handle, named_by_path, read_body};
pub use outbound::endpoint_path;
pub(crate) use relay::pass_through;
