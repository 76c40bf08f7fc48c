//! Utilization of the binding limit, from the simulated provider's per-second timeline.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use sluice_sim::SimHandle;
use sluice_sim::StatsSnapshot;
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

/// Tokens the provider charged the interactive users (tenants `user-…`) for the requests
/// it served so far: the prompt plus `max_tokens` each, as it charges on arrival.
#[must_use]
pub fn interactive_charged(stats: &StatsSnapshot, max_tokens: u64) -> u64 {
    let users = stats.tenants.iter().filter(|(name, _)| name.starts_with("user-"));
    users.map(|(_, u)| u.input_tokens + u.requests * max_tokens).sum()
}

/// Runs `work` while reading `probe(stats)` from the simulator once a second, the first
/// right away: sample `k` is taken about `k` seconds after the start.
pub async fn sampled<F: Future>(
    sim: &SimHandle,
    probe: impl Fn(&StatsSnapshot) -> u64,
    work: F,
) -> (F::Output, Vec<u64>) {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return (out, samples),
            _ = tick.tick() => samples.push(probe(&sim.stats())),
        }
    }
}

/// The batch's use of the capacity interactive traffic left over seconds `from..to`:
/// (tokens admitted − interactive tokens) ÷ (limit − interactive tokens), where the
/// interactive tokens are the difference of the once-a-second `interactive` samples.
/// `None` when the interval or the samples do not cover it.
#[must_use]
pub fn batch_of_leftover(timeline: &[Second], from: u64, to: u64, tps: f64, interactive: &[u64]) -> Option<f64> {
    let at = |second: u64| usize::try_from(second).ok().and_then(|i| interactive.get(i)).copied();
    let users = at(to)?.checked_sub(at(from)?)? as f64;
    if to <= from || tps <= 0.0 {
        return None;
    }
    let admitted: u64 = timeline.iter().filter(|s| (from..to).contains(&s.second)).map(|s| s.tokens).sum();
    let left = tps * (to - from) as f64 - users;
    (left > 0.0).then(|| (admitted as f64 - users) / left)
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
    fn batch_share_of_what_interactive_leaves() {
        let t = [second(1, 0, 900), second(2, 0, 950), second(3, 0, 1000)];
        // 100 interactive tokens a second of a 1000/s limit: the batch had 900/s.
        let users = [0, 0, 100, 200];
        let got = batch_of_leftover(&t, 1, 3, 1000.0, &users).unwrap();
        assert!((got - (1850.0 - 200.0) / 1800.0).abs() < 1e-9);
        assert_eq!(batch_of_leftover(&t, 1, 5, 1000.0, &users), None);
    }

    #[test]
    fn missing_seconds_count_as_idle() {
        let t = [second(1, 10, 1000)];
        assert!((over(&t, 1, 3, 10.0, 1000.0).unwrap().value - 0.5).abs() < 1e-9);
        assert_eq!(saturated_interval(25.7), (1, 25));
    }
}
