//! Caps on open client connections: per process (`[server] max_connections`, kept below
//! the file-descriptor limit) and per peer address (`max_connections_per_peer`). A
//! connection past a cap is closed at once, before anything is read from it, so a flood
//! of idle or slow sockets cannot take the descriptors the gateway needs for Redis,
//! providers and the clients it does serve. `sluice_connections_open` and
//! `sluice_connections_refused_total{cap}` count them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Descriptors kept free below `RLIMIT_NOFILE` for everything that is not a client
/// connection: the listener, Redis and provider connections, the job store, logs.
pub const FD_RESERVE: u64 = 256;

/// Which cap refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The process has `max_connections` open.
    Process,
    /// The peer address has `max_connections_per_peer` open.
    Peer,
}

impl Refused {
    fn as_str(self) -> &'static str {
        match self {
            Self::Process => "process",
            Self::Peer => "peer",
        }
    }
}

/// `cap`: the cap that refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CapLabel {
    cap: &'static str,
}

#[derive(Debug, Default)]
struct Open {
    total: u64,
    by_peer: HashMap<IpAddr, u64>,
}

/// The open connections, counted against both caps.
#[derive(Debug, Clone)]
pub struct Caps {
    process: u64,
    peer: u64,
    open: Arc<Mutex<Open>>,
    open_gauge: Gauge,
    refused: Family<CapLabel, Counter>,
}

impl Caps {
    /// Caps of `process` connections in all and `peer` from one address.
    #[must_use]
    pub fn new(process: u64, peer: u64) -> Self {
        let open = Arc::new(Mutex::new(Open::default()));
        Self { process, peer, open, open_gauge: Gauge::default(), refused: Family::default() }
    }

    /// Registers the connection metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("sluice_connections_open", "Client connections open now", self.open_gauge.clone());
        registry.register(
            "sluice_connections_refused",
            "Client connections closed unread because a cap was reached, by cap (process, peer)",
            self.refused.clone(),
        );
    }

    /// The caps of `config`, the process cap lowered to the descriptor limit less
    /// [`FD_RESERVE`] when that is lower.
    #[must_use]
    pub fn from_config(config: &sluice_config::Server) -> Self {
        let configured = config.max_connections.get();
        let process = match fd_budget() {
            Some(budget) if budget < configured => {
                tracing::warn!(
                    max_connections = configured,
                    effective = budget,
                    "the file-descriptor limit (ulimit -n) is lower than max_connections; raise it to serve more"
                );
                budget
            }
            _ => configured,
        };
        Self::new(process, config.max_connections_per_peer.get().min(process))
    }

    /// The most connections open at once, in all.
    #[must_use]
    pub fn process_cap(&self) -> u64 {
        self.process
    }

    /// Counts a new connection from `peer`, or says which cap refuses it.
    ///
    /// # Errors
    /// [`Refused`] when either cap is reached; nothing is counted then.
    pub fn admit(&self, peer: IpAddr) -> Result<Slot, Refused> {
        let taken = self.take(peer);
        match taken {
            Ok(total) => {
                self.open_gauge.set(gauge(total));
            }
            Err(cap) => {
                self.refused.get_or_create(&CapLabel { cap: cap.as_str() }).inc();
            }
        }
        taken.map(|_| Slot { open: Arc::clone(&self.open), gauge: self.open_gauge.clone(), peer })
    }

    /// Counts a connection from `peer` if both caps allow; the new total.
    fn take(&self, peer: IpAddr) -> Result<u64, Refused> {
        let mut open = self.open.lock();
        if open.total >= self.process {
            return Err(Refused::Process);
        }
        let from_peer = open.by_peer.entry(peer).or_insert(0);
        if *from_peer >= self.peer {
            return Err(Refused::Peer);
        }
        *from_peer += 1;
        open.total += 1;
        Ok(open.total)
    }

    /// Connections open now.
    #[must_use]
    pub fn open(&self) -> u64 {
        self.open.lock().total
    }
}

/// One counted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Slot {
    open: Arc<Mutex<Open>>,
    gauge: Gauge,
    peer: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_peer.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_peer.remove(&self.peer);
            }
        }
        self.gauge.set(gauge(open.total));
    }
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The soft `RLIMIT_NOFILE` less [`FD_RESERVE`], if the limit is known and finite. The
/// soft limit is first raised to the hard one, as servers commonly do: many systems start
/// processes with a soft limit of 1,024 and a hard one far above it.
fn fd_budget() -> Option<u64> {
    let nofile = rustix::process::Resource::Nofile;
    let limit = rustix::process::getrlimit(nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        if let Err(e) = rustix::process::setrlimit(nofile, raised) {
            tracing::debug!(error = %e, "could not raise the soft file-descriptor limit");
        }
    }
    let soft = rustix::process::getrlimit(nofile).current?;
    Some(soft.saturating_sub(FD_RESERVE).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_caps_hold_and_a_closed_connection_frees_its_place() {
        let caps = Caps::new(3, 2);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let first = caps.admit(a).unwrap();
        let _second = caps.admit(a).unwrap();
        assert_eq!(caps.admit(a).unwrap_err(), Refused::Peer);
        let _third = caps.admit(b).unwrap();
        assert_eq!(caps.admit(b).unwrap_err(), Refused::Process);
        assert_eq!(caps.open(), 3);
        drop(first);
        assert_eq!(caps.open(), 2);
        assert!(caps.admit(a).is_ok(), "a's place is free again");
        let mut registry = Registry::default();
        caps.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("sluice_connections_open 2"), "{text}");
        assert!(text.contains("sluice_connections_refused_total{cap=\"peer\"} 1"), "{text}");
        assert!(text.contains("sluice_connections_refused_total{cap=\"process\"} 1"), "{text}");
    }
}
