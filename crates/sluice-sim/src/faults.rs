//! Fault injection: each kind at a configured rate, drawn from an injected RNG.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;

/// Default bound on a hang before the connection is cut, real milliseconds.
pub const DEFAULT_HANG_MS: u64 = 300_000;
/// Default delay before headers for the slow-headers fault, real milliseconds.
pub const DEFAULT_SLOW_HEADERS_MS: u64 = 2_000;
/// Default number of chunks sent before a stream is cut.
pub const DEFAULT_STREAM_DROP_AFTER: u32 = 2;
/// Default bound on a stall after the headers before the connection is cut, real milliseconds.
pub const DEFAULT_STALL_MS: u64 = 300_000;
/// Default number of content chunks a stalling stream sends first.
pub const DEFAULT_STALL_AFTER: u32 = 1;
/// Default `retry-after` of the 429 fault, real milliseconds.
pub const DEFAULT_ERROR_429_RETRY_AFTER_MS: u64 = 1_000;
/// Default size of an oversized answer: more than any gateway should buffer.
pub const DEFAULT_OVERSIZE_BYTES: u64 = 80 * 1024 * 1024;

/// Rates (probability per request, 0..=1, summing to at most 1) of each fault kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// HTTP 500 in the provider's error shape.
    #[serde(default)]
    pub error_500: f64,
    /// HTTP 502.
    #[serde(default)]
    pub error_502: f64,
    /// HTTP 503.
    #[serde(default)]
    pub error_503: f64,
    /// HTTP 529 (`overloaded_error`).
    #[serde(default)]
    pub error_529: f64,
    /// HTTP 400 (`invalid_request_error`).
    #[serde(default)]
    pub error_400: f64,
    /// HTTP 429 carrying `retry-after`/`retry-after-ms` of `error_429_retry_after_ms`: a
    /// deployment that refuses everything for a while, whatever its own limits say.
    #[serde(default)]
    pub error_429: f64,
    /// HTTP 401 (an invalid key).
    #[serde(default)]
    pub error_401: f64,
    /// Connection reset before any response byte.
    #[serde(default)]
    pub reset: f64,
    /// No answer until `hang_ms`, then the connection is reset.
    #[serde(default)]
    pub hang: f64,
    /// Streams only: cut the connection after `stream_drop_after_chunks` chunks.
    #[serde(default)]
    pub stream_drop: f64,
    /// Wait `slow_headers_ms` before the (otherwise normal) response.
    #[serde(default)]
    pub slow_headers: f64,
    /// Send the headers (streams: and `stall_after_chunks` chunks), then nothing for
    /// `stall_ms`, then cut the connection: a dead peer or a stuck proxy mid-body.
    #[serde(default)]
    pub stall: f64,
    /// A 200 whose body is `oversize_bytes` long (JSON padded with spaces).
    #[serde(default)]
    pub oversize: f64,
    /// The wait the 429 fault hints, real milliseconds.
    #[serde(default = "default_error_429_retry_after_ms")]
    pub error_429_retry_after_ms: u64,
    /// Bound of a hang, real milliseconds.
    #[serde(default = "default_hang_ms")]
    pub hang_ms: u64,
    /// Delay of the slow-headers fault, real milliseconds.
    #[serde(default = "default_slow_headers_ms")]
    pub slow_headers_ms: u64,
    /// Chunks sent before a stream drop.
    #[serde(default = "default_stream_drop_after")]
    pub stream_drop_after_chunks: u32,
    /// A dropped stream is cut after a random number of its content chunks (from none to
    /// all of them, before its final events) instead of `stream_drop_after_chunks`.
    #[serde(default)]
    pub stream_drop_anywhere: bool,
    /// Bound of a stall, real milliseconds.
    #[serde(default = "default_stall_ms")]
    pub stall_ms: u64,
    /// Content chunks a stalling stream sends before it stalls.
    #[serde(default = "default_stall_after")]
    pub stall_after_chunks: u32,
    /// Size of an oversized answer.
    #[serde(default = "default_oversize_bytes")]
    pub oversize_bytes: u64,
    /// Error faults quote the credential the request presented in their message, as a
    /// careless provider or proxy might.
    #[serde(default)]
    pub echo_key: bool,
    /// Bytes of filler appended to the message of error faults (an oversized error body).
    #[serde(default)]
    pub error_padding_bytes: u64,
}

fn default_error_429_retry_after_ms() -> u64 {
    DEFAULT_ERROR_429_RETRY_AFTER_MS
}
fn default_hang_ms() -> u64 {
    DEFAULT_HANG_MS
}
fn default_slow_headers_ms() -> u64 {
    DEFAULT_SLOW_HEADERS_MS
}
fn default_stream_drop_after() -> u32 {
    DEFAULT_STREAM_DROP_AFTER
}
fn default_stall_ms() -> u64 {
    DEFAULT_STALL_MS
}
fn default_stall_after() -> u32 {
    DEFAULT_STALL_AFTER
}
fn default_oversize_bytes() -> u64 {
    DEFAULT_OVERSIZE_BYTES
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            error_500: 0.0,
            error_502: 0.0,
            error_503: 0.0,
            error_529: 0.0,
            error_400: 0.0,
            error_401: 0.0,
            error_429: 0.0,
            error_429_retry_after_ms: DEFAULT_ERROR_429_RETRY_AFTER_MS,
            reset: 0.0,
            hang: 0.0,
            stream_drop: 0.0,
            slow_headers: 0.0,
            stall: 0.0,
            oversize: 0.0,
            hang_ms: DEFAULT_HANG_MS,
            slow_headers_ms: DEFAULT_SLOW_HEADERS_MS,
            stream_drop_after_chunks: DEFAULT_STREAM_DROP_AFTER,
            stream_drop_anywhere: false,
            stall_ms: DEFAULT_STALL_MS,
            stall_after_chunks: DEFAULT_STALL_AFTER,
            oversize_bytes: DEFAULT_OVERSIZE_BYTES,
            echo_key: false,
            error_padding_bytes: 0,
        }
    }
}

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// HTTP 500.
    Error500,
    /// HTTP 502.
    Error502,
    /// HTTP 503.
    Error503,
    /// HTTP 529.
    Error529,
    /// HTTP 400.
    Error400,
    /// HTTP 401.
    Error401,
    /// HTTP 429 with a `retry-after` hint.
    Error429,
    /// Connection reset.
    Reset,
    /// Hang, then reset.
    Hang,
    /// Stream cut mid-way.
    StreamDrop,
    /// Delay before headers.
    SlowHeaders,
    /// Headers (and a first chunk), then silence.
    Stall,
    /// An answer too large to buffer.
    Oversize,
}

impl FaultKind {
    /// The HTTP status of an error fault.
    #[must_use]
    pub fn status(self) -> Option<u16> {
        match self {
            Self::Error500 => Some(500),
            Self::Error502 => Some(502),
            Self::Error503 => Some(503),
            Self::Error529 => Some(529),
            Self::Error400 => Some(400),
            Self::Error401 => Some(401),
            Self::Error429 => Some(429),
            _ => None,
        }
    }
}

impl FaultConfig {
    fn table(&self) -> [(FaultKind, f64); 13] {
        [
            (FaultKind::Error500, self.error_500),
            (FaultKind::Error502, self.error_502),
            (FaultKind::Error503, self.error_503),
            (FaultKind::Error529, self.error_529),
            (FaultKind::Error400, self.error_400),
            (FaultKind::Error401, self.error_401),
            (FaultKind::Error429, self.error_429),
            (FaultKind::Reset, self.reset),
            (FaultKind::Hang, self.hang),
            (FaultKind::StreamDrop, self.stream_drop),
            (FaultKind::SlowHeaders, self.slow_headers),
            (FaultKind::Stall, self.stall),
            (FaultKind::Oversize, self.oversize),
        ]
    }

    pub(crate) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        let table = self.table();
        if table.iter().any(|(_, r)| !(0.0..=1.0).contains(r)) {
            return Err(ConfigError(format!("{at}: fault rates must be within 0..=1")));
        }
        let sum: f64 = table.iter().map(|(_, r)| r).sum();
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError(format!("{at}: fault rates sum to {sum}, more than 1")));
        }
        Ok(())
    }

    /// Whether no fault is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.table().iter().all(|(_, r)| *r <= 0.0)
    }

    /// Draws at most one fault for a request (`stream_drop` only for streams, `oversize`
    /// only for non-streams).
    pub fn draw(&self, rng: &mut impl Rng, stream: bool) -> Option<FaultKind> {
        if self.is_empty() {
            return None;
        }
        let u: f64 = rng.random();
        let mut acc = 0.0;
        for (kind, rate) in self.table() {
            acc += rate;
            if u < acc {
                let fits = match kind {
                    FaultKind::StreamDrop => stream,
                    FaultKind::Oversize => !stream,
                    _ => true,
                };
                return fits.then_some(kind);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn draws_follow_the_rates() {
        let cfg = FaultConfig { error_500: 0.1, reset: 0.05, stream_drop: 0.2, ..FaultConfig::default() };
        let mut rng = StdRng::seed_from_u64(3);
        let n = 20_000;
        let (mut e500, mut reset, mut drop) = (0, 0, 0);
        for _ in 0..n {
            match cfg.draw(&mut rng, true) {
                Some(FaultKind::Error500) => e500 += 1,
                Some(FaultKind::Reset) => reset += 1,
                Some(FaultKind::StreamDrop) => drop += 1,
                Some(other) => panic!("unexpected {other:?}"),
                None => {}
            }
        }
        assert!((1800..2200).contains(&e500), "{e500}");
        assert!((850..1150).contains(&reset), "{reset}");
        assert!((3700..4300).contains(&drop), "{drop}");
    }

    #[test]
    fn stream_drop_never_hits_non_streams() {
        let cfg = FaultConfig { stream_drop: 1.0, ..FaultConfig::default() };
        let mut rng = StdRng::seed_from_u64(3);
        assert!((0..100).all(|_| cfg.draw(&mut rng, false).is_none()));
        assert_eq!(cfg.draw(&mut rng, true), Some(FaultKind::StreamDrop));
    }

    #[test]
    fn same_seed_same_faults() {
        let cfg = FaultConfig { error_503: 0.5, ..FaultConfig::default() };
        let a: Vec<_> = {
            let mut rng = StdRng::seed_from_u64(9);
            (0..50).map(|_| cfg.draw(&mut rng, false)).collect()
        };
        let mut rng = StdRng::seed_from_u64(9);
        let b: Vec<_> = (0..50).map(|_| cfg.draw(&mut rng, false)).collect();
        assert_eq!(a, b);
    }
}
