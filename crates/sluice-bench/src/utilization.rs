//! Utilization of the binding limit, from the simulated provider's per-second timeline.

use serde::Serialize;
use sluice_sim::stats::Second;

/// Admitted ÷ limit over an interval of whole seconds, for the limit that binds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Utilization {
    /// The binding limit: `tpm` or `rpm` (the one closer to its ceiling).
    pub binding_limit: &'static str,
    /// Admitted per second ÷ limit per second, averaged over the interval.
    pub value: f64,
    /// First second of the interval (since the side started).
    pub from_second: u64,
    /// End of the interval (exclusive).
    pub to_second: u64,
}

/// Utilization over seconds `from..to` of `timeline`, against `rps` and `tps` (limits per
/// real second); `None` when the interval holds no whole second.
#[must_use]
pub fn over(timeline: &[Second], from: u64, to: u64, rps: f64, tps: f64) -> Option<Utilization> {
    if to <= from || rps <= 0.0 || tps <= 0.0 {
        return None;
    }
    let (mut requests, mut tokens) = (0u64, 0u64);
    for s in timeline.iter().filter(|s| (from..to).contains(&s.second)) {
        requests += s.requests;
        tokens += s.tokens;
    }
    let seconds = (to - from) as f64;
    let by_requests = requests as f64 / (rps * seconds);
    let by_tokens = tokens as f64 / (tps * seconds);
    let (binding_limit, value) = if by_tokens >= by_requests { ("tpm", by_tokens) } else { ("rpm", by_requests) };
    Some(Utilization { binding_limit, value, from_second: from, to_second: to })
}

/// The saturated interval of a side: the whole seconds while the batch job ran, without
/// the first (ramp-up) and the one it ended in.
#[must_use]
pub fn saturated_interval(batch_running_secs: f64) -> (u64, u64) {
    (1, batch_running_secs.max(0.0).floor() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(second: u64, requests: u64, tokens: u64) -> Second {
        Second { second, requests, tokens }
    }

    #[test]
    fn picks_the_limit_closest_to_its_ceiling() {
        let t = [second(0, 1, 10), second(1, 5, 900), second(2, 5, 1000), second(3, 9, 10)];
        let u = over(&t, 1, 3, 10.0, 1000.0).unwrap();
        assert_eq!(u.binding_limit, "tpm");
        assert!((u.value - 0.95).abs() < 1e-9);
        let u = over(&t, 3, 4, 10.0, 1000.0).unwrap();
        assert_eq!((u.binding_limit, u.value), ("rpm", 0.9));
        assert_eq!(over(&t, 2, 2, 10.0, 1000.0), None);
    }

    #[test]
    fn missing_seconds_count_as_idle() {
        let t = [second(1, 10, 1000)];
        assert!((over(&t, 1, 3, 10.0, 1000.0).unwrap().value - 0.5).abs() < 1e-9);
        assert_eq!(saturated_interval(25.7), (1, 25));
    }
}
