//! Durations as providers write them: Go `time.Duration` strings (OpenAI and its
//! compatibles), plain decimal seconds or milliseconds (Azure, `retry-after`), and protobuf
//! JSON durations (Gemini `RetryInfo.retryDelay`).
//!
//! Every parser here is total: any input yields `Some` or `None`, never a panic, never a
//! negative or overflowing value. Signs are refused (a negative wait is meaningless), and
//! fraction digits past the eighteenth are read but ignored.

use std::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;
const NANOS_PER_MILLI: u128 = 1_000_000;
/// Fraction digits kept; 10⁻¹⁸ s is far below anything a rate limiter can act on.
const MAX_FRACTION_DIGITS: u32 = 18;

/// A non-negative decimal number split at its point: `int + frac / 10^frac_digits`.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    int: u64,
    frac: u64,
    frac_digits: u32,
}

impl Decimal {
    /// The value times `unit_nanos`, in nanoseconds; `None` on overflow.
    fn nanos(self, unit_nanos: u128) -> Option<u128> {
        let whole = u128::from(self.int).checked_mul(unit_nanos)?;
        let scale = 10u128.checked_pow(self.frac_digits)?;
        let part = u128::from(self.frac).checked_mul(unit_nanos)? / scale;
        whole.checked_add(part)
    }
}

fn digit(byte: u8) -> Option<u64> {
    byte.is_ascii_digit().then(|| u64::from(byte - b'0'))
}

/// Splits a leading `digits[.digits]` (at least one digit in all) off `s`.
fn leading_decimal(s: &str) -> Option<(Decimal, &str)> {
    let bytes = s.as_bytes();
    let (mut i, mut int, mut digits) = (0, 0u64, 0);
    while let Some(d) = bytes.get(i).copied().and_then(digit) {
        int = int.checked_mul(10)?.checked_add(d)?;
        i += 1;
        digits += 1;
    }
    let (mut frac, mut frac_digits) = (0u64, 0u32);
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        while let Some(d) = bytes.get(i).copied().and_then(digit) {
            if frac_digits < MAX_FRACTION_DIGITS {
                frac = frac * 10 + d;
                frac_digits += 1;
            }
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    Some((Decimal { int, frac, frac_digits }, s.get(i..)?))
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        // Go accepts the micro sign (U+00B5) and the Greek mu (U+03BC) alike.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => NANOS_PER_MILLI,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3_600 * NANOS_PER_SEC,
        _ => return None,
    })
}

fn duration_from_nanos(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / NANOS_PER_SEC).ok()?;
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).ok()?;
    Some(Duration::new(secs, subsec))
}

/// Parses a Go `time.Duration` string such as `1s`, `6m0s`, `12ms`, `2m59.56s` or
/// `1h2m3.5s` (units `h`, `m`, `s`, `ms`, `us`/`µs`, `ns`; fractions on any unit; a bare
/// `0`; an optional leading `+`).
///
/// Returns `None` for anything else, including negative durations, a missing or unknown
/// unit, and values that overflow [`Duration`].
///
/// ```
/// use std::time::Duration;
/// use sluice_provider::parse_go_duration;
///
/// assert_eq!(parse_go_duration("2m59.56s"), Some(Duration::from_millis(179_560)));
/// assert_eq!(parse_go_duration("12ms"), Some(Duration::from_millis(12)));
/// assert_eq!(parse_go_duration("-1s"), None);
/// ```
#[must_use]
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let trimmed = text.trim();
    let s = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let (mut rest, mut total) = (s, 0u128);
    while !rest.is_empty() {
        let (value, after) = leading_decimal(rest)?;
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        total = total.checked_add(value.nanos(unit_nanos(unit)?)?)?;
        rest = after;
    }
    duration_from_nanos(total)
}

/// A whole text that is one unsigned decimal number, scaled by `unit_nanos`.
fn parse_decimal(text: &str, unit_nanos: u128) -> Option<Duration> {
    let (value, rest) = leading_decimal(text.trim())?;
    if !rest.is_empty() {
        return None;
    }
    duration_from_nanos(value.nanos(unit_nanos)?)
}

/// `"30"` or `"1.5"` seconds (the `retry-after` delay form, Azure's integer resets).
pub(crate) fn parse_seconds(text: &str) -> Option<Duration> {
    parse_decimal(text, NANOS_PER_SEC)
}

/// `"1500"` or `"12.5"` milliseconds (`retry-after-ms`, `x-ms-retry-after-ms`).
pub(crate) fn parse_millis(text: &str) -> Option<Duration> {
    parse_decimal(text, NANOS_PER_MILLI)
}

/// A protobuf JSON `Duration`: decimal seconds with an `s` suffix, such as `"37s"` or
/// `"1.5s"` (Gemini `RetryInfo.retryDelay`).
pub(crate) fn parse_proto_duration(text: &str) -> Option<Duration> {
    parse_seconds(text.trim().strip_suffix('s')?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    #[test]
    fn go_durations_from_the_wild() {
        assert_eq!(parse_go_duration("1s"), ms(1_000));
        assert_eq!(parse_go_duration("6m0s"), ms(360_000));
        assert_eq!(parse_go_duration("12ms"), ms(12));
        assert_eq!(parse_go_duration("2m59.56s"), ms(179_560));
        assert_eq!(parse_go_duration("1h2m3.5s"), ms(3_723_500));
        assert_eq!(parse_go_duration("0s"), ms(0));
        assert_eq!(parse_go_duration("0"), ms(0));
        assert_eq!(parse_go_duration("+1.5h"), ms(5_400_000));
        assert_eq!(parse_go_duration(".5s"), ms(500));
        assert_eq!(parse_go_duration("5.s"), ms(5_000));
        assert_eq!(parse_go_duration("1.5µs"), Some(Duration::from_nanos(1_500)));
        assert_eq!(parse_go_duration("7us3ns"), Some(Duration::from_nanos(7_003)));
        assert_eq!(parse_go_duration(" 9ms "), ms(9));
    }

    #[test]
    fn go_durations_rejected() {
        for bad in ["", "s", "1", "-1s", "1sec", "1.2.3s", "1 s", "ms", ".s", "1h-2m", "1d", "∞s", "0x10s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
        assert_eq!(parse_go_duration("99999999999999999999h"), None);
        assert_eq!(parse_go_duration(&format!("{}h", u64::MAX)), None);
    }

    #[test]
    fn decimal_forms() {
        assert_eq!(parse_seconds("30"), ms(30_000));
        assert_eq!(parse_seconds("1.5"), ms(1_500));
        assert_eq!(parse_millis("1500"), ms(1_500));
        assert_eq!(parse_millis("12.5"), Some(Duration::from_micros(12_500)));
        assert_eq!(parse_proto_duration("37s"), ms(37_000));
        assert_eq!(parse_proto_duration("1.5s"), ms(1_500));
        for bad in ["", "-1", "1e3", "NaN", "inf", "1.5s", " ", "+"] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
        }
        assert_eq!(parse_proto_duration("37"), None);
    }
}
