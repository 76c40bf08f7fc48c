//! What the sluice fleet remembers of requests it already relayed, per tenant: the
//! idempotency operation log ([`oplog`]: one record per `Idempotency-Key`, so a repeat is
//! answered from the log instead of reaching the provider again) and the owners of
//! Responses API responses and passthrough objects ([`remembered`]: which tenant and
//! deployment created each id, and the context a continuation reserves). Each keeps its
//! records in this process or, when the quota store is Redis, in Redis, shared by every
//! instance.
//!
//! Not here: HTTP answers. Outcomes are this crate's own errors
//! ([`oplog::BeginError`], [`remembered::Unowned`]); the gateway turns them into its error
//! responses. Where Redis is (its topology and TLS) is handed in by the caller.

pub mod oplog;
pub mod remembered;
