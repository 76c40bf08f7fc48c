//! How long requests take and how many are open: latency, upstream and time-to-first-token
//! histograms by deployment and class, requests and streams in flight, and the tokens
//! each tenant used. The access-log line of each request (see [`crate::access`]) feeds
//! them, so every proxied request is counted once, whichever way it ends.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use sluice_adapt::labels::{Route, TenantTokens};

/// Bucket bounds of the latency histograms, in seconds: 10 ms to 10 min.
const LATENCY_BUCKETS: [f64; 14] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 600.0];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

type Latency = Family<Route, Histogram, fn() -> Histogram>;

/// The request-timing metrics.
#[derive(Debug, Clone)]
pub struct Timing {
    /// `sluice_request_duration_seconds{deployment,class}`: arrival to the last byte sent.
    pub request: Latency,
    /// `sluice_upstream_duration_seconds{deployment,class}`: sending to the provider's
    /// response headers, per attempt that got an answer.
    pub upstream: Latency,
    /// `sluice_ttft_seconds{deployment,class}`: arrival to a stream's first piece.
    pub ttft: Latency,
    /// `sluice_requests_in_flight`: proxied requests not yet finished (streams included).
    pub in_flight: Gauge,
    /// `sluice_streams_open`: streams that sent their first piece and have not ended.
    pub streams_open: Gauge,
    /// `sluice_tokens_total{tenant,direction}`: tokens used, as settled.
    pub tokens: Family<TenantTokens, Counter>,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            request: Family::new_with_constructor(latency_histogram),
            upstream: Family::new_with_constructor(latency_histogram),
            ttft: Family::new_with_constructor(latency_histogram),
            in_flight: Gauge::default(),
            streams_open: Gauge::default(),
            tokens: Family::default(),
        }
    }
}

impl Timing {
    /// Registers every metric into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let histograms = [
            ("sluice_request_duration_seconds", "Request time, arrival to the last byte sent", &self.request),
            ("sluice_upstream_duration_seconds", "Provider time to response headers, per attempt", &self.upstream),
            ("sluice_ttft_seconds", "Time to a stream's first piece", &self.ttft),
        ];
        for (name, help, family) in histograms {
            registry.register(name, help, family.clone());
        }
        registry.register("sluice_requests_in_flight", "Proxied requests not yet finished", self.in_flight.clone());
        registry.register("sluice_streams_open", "Streams started and not yet ended", self.streams_open.clone());
        registry.register("sluice_tokens", "Tokens used, by tenant and direction", self.tokens.clone());
    }

    /// Observes `d` in `family` for `route`.
    pub fn observe(family: &Latency, route: &Route, d: Duration) {
        family.get_or_create(route).observe(d.as_secs_f64());
    }
}
