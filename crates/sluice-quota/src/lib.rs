//! The admission core of sluice: hierarchical, multi-dimensional quota without IO.
//!
//! A request's quota path runs `org > tenant > team > api_key > model_profile >
//! deployment`; each scope on it may limit requests, input, output and total tokens over
//! any period (per minute, per day) and requests in flight. A request is admitted only
//! if *every* bucket on its path can take its cost, and then all are debited at once
//! (all-or-nothing). The debit is a reservation ([`Grant`]), settled later with the real
//! usage: unused capacity returns, overruns become debt. A reservation never settled
//! expires after its lease and is refunded (its request and input stay counted).
//!
//! Layout:
//! - [`clock`]: the [`Clock`] trait (monotonic and wall-clock time), the real clock and a
//!   fake one for tests.
//! - [`limit`]: dimensions, costs, rate limits with bursts, concurrency caps.
//! - [`bucket`]: the pure arithmetic of one bucket (GCRA on nanoseconds).
//! - [`budget`]: money budgets per calendar day or month, and the calendar they count in.
//! - [`ledger`]: the state machine over many scopes; every call takes `now`.
//! - [`decision`]: grants, rejections ("not until" vs "never"), and the outcomes the
//!   policy layers build on them (queue, reroute).
//! - [`shares`]: fair shares of a deployment between tenants, inside the decision.
//! - [`waiting`]: the waiting order when requests queue for capacity (priority, weighted
//!   fair queuing between tenants, FIFO within one).
//! - [`store`] and [`memory`]: the store trait and the in-process store.
//! - [`queue`]: one deployment's waiting requests, served in the [`waiting`] order by a
//!   dispatcher task that exists only while requests wait (async over the store, no IO).
//! - [`guarantee`]: each admission's tokens split into guaranteed and borrowed share, and
//!   why a request was held back (for metrics).
//! - [`backoff`] and [`retry`]: backoff with full jitter, the retry budget per deployment
//!   and the breaker.
//!
//! Failure semantics: a refusal debits nothing; settling twice is a no-op; time never
//! comes from inside the core.
//!
//! # Example: limiting a Rust program's own calls
//! A program that calls a provider directly can pace itself with the same core the
//! gateway uses — here 500 requests and 30,000 tokens per minute on one deployment, and
//! a tighter 10,000 tokens per minute for a batch team:
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use sluice_quota::{Cost, Dimension, FakeClock, Limits, MemoryStore, RateLimit, ScopeKey, ScopeKind, Settlement};
//!
//! let clock = FakeClock::default();
//! let store = MemoryStore::new(Arc::new(clock.clone()));
//! use sluice_quota::QuotaStore as _;
//! let upstream = store.register(
//!     ScopeKey::new(ScopeKind::Deployment, "openai-gpt-4o"),
//!     Limits::unlimited()
//!         .with_rate(RateLimit::per_minute(Dimension::Requests, 500).unwrap())
//!         .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 30_000).unwrap()),
//! );
//! let team = store.register(
//!     ScopeKey::new(ScopeKind::Team, "batch"),
//!     Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::TotalTokens, 10_000).unwrap()),
//! );
//! let path = [team, upstream];
//!
//! // 200 prompt tokens, up to 300 completion tokens: reserve 500 before sending.
//! let grant = store.reserve_now(&path, Cost::request(200, 300), Duration::from_secs(60)).unwrap();
//! // ... call the provider; it reports 200 + 40 tokens: settle, 260 tokens come back.
//! store.settle_now(grant.id, Settlement::exact(Cost::request(200, 40)));
//!
//! // A burst larger than the team's bucket is told when to come back.
//! let err = store.reserve_now(&path, Cost::request(2_000, 1_000), Duration::from_secs(60)).unwrap_err();
//! let sluice_quota::ReserveError::Rejected(rejection) = err else { unreachable!() };
//! assert_eq!(rejection.limiter.to_string(), "tpm");
//! assert_eq!(rejection.scope.to_string(), "team:batch");
//! clock.advance(rejection.retry_after().unwrap());
//! assert!(store.reserve_now(&path, Cost::request(2_000, 1_000), Duration::from_secs(60)).is_ok());
//! ```

pub mod backoff;
pub mod bucket;
pub mod budget;
pub mod clock;
pub mod decision;
pub mod drain;
pub mod guarantee;
pub mod ledger;
pub mod limit;
pub mod memory;
pub mod placement;
pub mod queue;
pub mod retry;
pub mod scope;
pub mod shares;
pub mod snapshot;
pub mod store;
pub mod waiting;

pub use bucket::{Claimer, Share};
pub use budget::{Budget, BudgetPeriod, Calendar, Period, Spent};
pub use clock::{Clock, FakeClock, Nanos, SystemClock};
pub use decision::{Demand, FairShare, Grant, Outcome, Rejection, RejectionKind};
pub use ledger::{HOLD_RETRY, IN_FLIGHT_RETRY, Ledger, Settled};
pub use limit::{Cost, Dimension, LimiterName, Limits, RateLimit, Settlement};
pub use memory::MemoryStore;
pub use scope::{ReservationId, ScopeId, ScopeKey, ScopeKind};
pub use snapshot::{BudgetSnapshot, RateSnapshot, ScopeSnapshot};
pub use store::{QuotaStore, ReserveError, SpendRecord, SpentInPeriods, StoreError, StoreFuture, StoreHealth};
