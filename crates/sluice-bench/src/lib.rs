//! Load scenarios for sluice: `sluice demo` (the seed-000 story: a gateway in front of a
//! strict simulated provider vs. uncoordinated workers with their own backoff) and
//! `sluice bench` (the latency the gateway adds, open loop, against the same provider
//! called directly).
//!
//! Layout: [`harness`] starts gateways in-process on 127.0.0.1, [`deploy`] one or more of
//! them on memory stores or one shared Redis; [`baseline`] measures the provider's own
//! latency; [`client`] is the HTTP client; [`workload`] the users and batch job;
//! [`drive`] runs one side over a [`drive::Transport`] — [`sluiced`] (through the gateway,
//! honouring `retry-after-ms`) or [`naive`] (workers with their own backoff);
//! [`utilization`] and [`report`] turn the provider's stats into the table; [`demo`] wires
//! it together. [`bench`] and [`loadgen`] are the added-latency benchmark; [`stats`] the
//! percentiles; [`plot`] draws the SVG charts. [`soak`] (with [`mix`] and
//! [`soak_report`]) and [`chaos`] run `sluice serve` as child processes ([`process`],
//! configured by [`fleet`]) under closed-loop clients that record every attempt
//! ([`attempts`]); [`windows`] runs three workloads against providers enforcing short
//! windows; [`sizes`] runs mixed request sizes with closed-loop clients on the gateway's
//! defaults; [`deadlines`] runs clients stating their deadlines against a saturated
//! deployment; [`listener`] holds unauthenticated connections against one `sluice serve`
//! and [`keys`] creates, rotates and revokes runtime keys at scale; [`commands`] is `sluice bench`'s command line.
//!
//! Everything binds 127.0.0.1, every load loop is bounded in count and time, and every
//! server started is shut down before a command returns.

pub mod attempts;
pub mod baseline;
pub mod bedrock;
pub mod bench;
pub mod chained;
pub mod chaos;
pub mod chaos_check;
pub mod chaos_faults;
pub mod chaos_kill;
pub mod chaos_redis;
pub mod client;
pub mod commands;
pub mod deadlines;
pub mod demo;
pub mod deploy;
pub mod drive;
pub mod fleet;
pub mod harness;
pub mod keys;
pub mod listener;
pub mod loadgen;
pub mod mix;
pub mod naive;
pub mod plot;
pub mod process;
pub mod report;
pub mod scenario;
pub mod sizes;
pub mod sluiced;
pub mod soak;
pub mod soak_report;
pub mod stats;
pub mod utilization;
pub mod windows;
pub mod workload;
