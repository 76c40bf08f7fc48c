//! The versioned server-side scripts, loaded by SHA and reloaded when Redis lost them.

use redis::Script;

/// Version of the script set; part of every script's text, so a change of the scripts
/// never meets an old cached SHA.
pub const VERSION: &str = "sluice-quota-v8";

const COMMON: &str = include_str!("lua/common.lua");

/// The batch (reservations and settlements), renew, pause, hold, tighten, sent, withdraw,
/// peek and window scripts.
#[derive(Debug)]
pub struct Scripts {
    /// Reservations (each all or nothing) and settlements (idempotent) of one group.
    pub batch: Script,
    /// Renewal of the leases of reservations still held.
    pub renew: Script,
    /// Coordinated pause.
    pub pause: Script,
    /// An operator's hold (or its release).
    pub hold: Script,
    /// Tightening to what the provider reported.
    pub tighten: Script,
    /// Re-anchoring at the instant a request went to the provider.
    pub sent: Script,
    /// Withdrawing the claims of a request that went.
    pub withdraw: Script,
    /// A scope's state for a snapshot.
    pub peek: Script,
    /// A deployment's learned short window, shared by every instance.
    pub window: Script,
    /// Money budgets brought up to the store of record.
    pub restore: Script,
}

impl Scripts {
    /// Builds the scripts (hashing only; loading happens on first use).
    #[must_use]
    pub fn new() -> Self {
        let build = |body: &str| Script::new(&format!("-- {VERSION}\n{COMMON}\n{body}"));
        Self {
            batch: build(include_str!("lua/batch.lua")),
            renew: build(include_str!("lua/renew.lua")),
            pause: build(include_str!("lua/pause.lua")),
            tighten: build(include_str!("lua/tighten.lua")),
            hold: build(include_str!("lua/hold.lua")),
            sent: build(include_str!("lua/sent.lua")),
            withdraw: build(include_str!("lua/withdraw.lua")),
            peek: build(include_str!("lua/peek.lua")),
            window: build(include_str!("lua/window.lua")),
            restore: build(include_str!("lua/restore.lua")),
        }
    }
}

impl Default for Scripts {
    fn default() -> Self {
        Self::new()
    }
}
