//! UTC calendar days as day numbers since 1970-01-01, and the `from` / `to` values of a
//! usage query: a date (`2026-11-01`) or an RFC 3339 timestamp (`2026-11-01T10:00:00Z`,
//! `2026-11-01T12:00:00+02:00`).

use sluice_jobs::Day;

/// The date of a day number, as `YYYY-MM-DD`.
#[must_use]
pub fn civil(day: Day) -> String {
    let (y, m, d) = sluice_quota::budget::civil_from_days(i64::from(day));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Seconds since the epoch of a date or RFC 3339 timestamp; `None` when it is neither
/// (or before 1970). A date is its midnight, UTC.
#[must_use]
pub fn parse_instant(text: &str) -> Option<i64> {
    let ms = if text.len() == 10 {
        sluice_provider::parse_rfc3339_unix_ms(&format!("{text}T00:00:00Z"))?
    } else {
        sluice_provider::parse_rfc3339_unix_ms(text)?
    };
    i64::try_from(ms / 1000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip_through_the_calendar() {
        assert_eq!(civil(0), "1970-01-01");
        assert_eq!(civil(11_017), "2000-03-01");
        assert_eq!(civil(20_453), "2025-12-31");
        for date in ["2024-02-29", "2026-12-01", "1999-12-31"] {
            let day = Day::try_from(parse_instant(date).unwrap() / 86_400).unwrap();
            assert_eq!(civil(day), date);
        }
    }

    #[test]
    fn dates_and_rfc3339_timestamps_parse_in_utc() {
        assert_eq!(parse_instant("1970-01-02"), Some(86_400));
        assert_eq!(parse_instant("1970-01-02T01:00:00Z"), Some(90_000));
        assert_eq!(parse_instant("1970-01-02T01:00:00.250Z"), Some(90_000));
        assert_eq!(parse_instant("1970-01-02T03:00:00+02:00"), Some(90_000));
        assert_eq!(parse_instant("1970-01-01T23:00:00-02:00"), Some(90_000));
        for bad in [
            "",
            "2026-02-30",
            "2026-13-01",
            "2026-1-01",
            "yesterday",
            "2026-01-01T25:00:00Z",
            "2026-01-01T10:00:00",
            "2026-01-01T10:00:00.Z",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
    }
}
