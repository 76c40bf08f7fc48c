//! Time formats on the wire: Go-style durations (OpenAI), RFC 3339 (Anthropic), and
//! `retry-after` values.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

/// Formats a duration the way Go's `time.Duration.String()` does, rounded to milliseconds:
/// `0s`, `12ms`, `1s`, `1.5s`, `6m0s`, `2m59.56s`, `1h0m0s`.
#[must_use]
pub fn go_duration(d: Duration) -> String {
    let ms = round_ms(d);
    let mut out = String::with_capacity(12);
    if ms == 0 {
        out.push_str("0s");
    } else if ms < 1000 {
        let _ = write!(out, "{ms}ms");
    } else {
        let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (m, rest) = (rest / 60_000, rest % 60_000);
        if h > 0 {
            let _ = write!(out, "{h}h");
        }
        if h > 0 || m > 0 {
            let _ = write!(out, "{m}m");
        }
        push_seconds(&mut out, rest);
    }
    out
}

fn push_seconds(out: &mut String, ms: u128) {
    let (s, frac) = (ms / 1000, ms % 1000);
    let _ = write!(out, "{s}");
    if frac > 0 {
        let digits = format!("{frac:03}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
    out.push('s');
}

fn round_ms(d: Duration) -> u128 {
    (d.as_nanos() + 500_000) / 1_000_000
}

/// Formats a time given as a duration since the UNIX epoch as RFC 3339 (seconds, UTC).
#[must_use]
pub fn rfc3339(since_epoch: Duration) -> String {
    let secs = Duration::from_secs(since_epoch.as_secs());
    humantime::format_rfc3339_seconds(UNIX_EPOCH + secs).to_string()
}

/// `retry-after` in whole seconds, rounded up (at least 1 for any positive wait).
#[must_use]
pub fn retry_after_secs(d: Duration) -> u64 {
    let secs = d.as_secs();
    if d.subsec_nanos() > 0 { secs + 1 } else { secs }
}

/// `retry-after-ms` in whole milliseconds, rounded up.
#[must_use]
pub fn retry_after_ms(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000_000)
}

/// Converts simulated seconds to a real wall-clock duration under `time_scale`.
#[must_use]
pub fn real_duration(sim_secs: f64, time_scale: f64) -> Duration {
    let real = sim_secs / time_scale;
    if real.is_finite() && real > 0.0 { Duration::from_secs_f64(real.min(1e9)) } else { Duration::ZERO }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn go_durations_match_go() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_micros(400)), "0s");
        assert_eq!(go_duration(ms(12)), "12ms");
        assert_eq!(go_duration(ms(999)), "999ms");
        assert_eq!(go_duration(ms(1000)), "1s");
        assert_eq!(go_duration(ms(1500)), "1.5s");
        assert_eq!(go_duration(ms(360_000)), "6m0s");
        assert_eq!(go_duration(ms(179_560)), "2m59.56s");
        assert_eq!(go_duration(ms(3_600_000)), "1h0m0s");
        assert_eq!(go_duration(ms(3_723_004)), "1h2m3.004s");
        assert_eq!(go_duration(Duration::from_micros(11_600)), "12ms");
    }

    #[test]
    fn rfc3339_is_utc_seconds() {
        assert_eq!(rfc3339(Duration::from_secs(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(Duration::from_millis(1_700_000_000_900)), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(ms(1)), 1);
        assert_eq!(retry_after_secs(ms(1000)), 1);
        assert_eq!(retry_after_secs(ms(1001)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 0);
        assert_eq!(retry_after_ms(Duration::from_micros(1001)), 2);
    }

    #[test]
    fn time_scale_shrinks_sim_durations() {
        assert_eq!(real_duration(60.0, 10.0), Duration::from_secs(6));
        assert_eq!(real_duration(-1.0, 1.0), Duration::ZERO);
        assert_eq!(real_duration(f64::INFINITY, 1.0), Duration::ZERO);
    }
}
