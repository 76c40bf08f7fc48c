//! The Redis quota store of sluice: many gateway instances, one source of truth.
//!
//! Every admission is atomic over all buckets of its path (per hash-tag group, see
//! [`keys`]), decided by a server-side script on the Redis server's clock; a group's
//! admissions and settlements share scripts under load ([`batch`]). Settlement, release and
//! lease expiry are scripts too, idempotent on the reservation id. Scripts are sent by SHA
//! and reloaded automatically when Redis lost them (a restart, a failover).
//!
//! Layout: [`keys`] (the key layout and hash tags), [`record`] (what a reservation stores),
//! [`scripts`] and `lua/` (the scripts), [`batch`] (batching per group), [`conn`] (standalone, cluster or [`sentinel`] connections), [`tls`] (`rediss://` certificates and credentials),
//! [`store`] ([`RedisStore`]), [`resilient`] (what happens when Redis is unreachable),
//! [`oplog`] (the gateway's idempotency records, shared by its instances), [`heartbeat`]
//! (renewing this instance's reservations while their requests run), [`choose`] (the quota
//! store `[store]` describes: in-process, or Redis behind [`ResilientStore`] and
//! [`heartbeat::Renewing`]).
//!
//! Failure semantics: a call that fails or times out is a [`sluice_quota::StoreError`];
//! [`ResilientStore`] turns that into a refusal (`fail_closed`) or a local limiter at
//! this instance's share of every limit (`fail_open_local`) until Redis answers again.

pub mod batch;
pub mod choose;
pub mod conn;
pub mod heartbeat;
pub mod keys;
pub mod local;
pub mod oplog;
pub mod record;
pub mod resilient;
pub mod restore;
pub mod scripts;
pub mod sentinel;
pub mod store;
pub mod tls;
#[cfg(any(test, feature = "test-util"))]
pub mod watched;

pub use conn::Topology;
pub use resilient::{OnUnavailable, ResilientStore};
pub use sentinel::SentinelTarget;
pub use store::{RedisConfig, RedisStore};
pub use tls::{Auth, Tls};
