//! A strict RFC 3339 (`date-time`, §5.6) reader, for Anthropic's `*-reset` headers.
//!
//! Why our own and not a crate: the workspace's `httpdate` reads only HTTP dates, and a
//! full calendar library (`time`, `jiff`, `chrono`) is a large dependency for one fixed
//! format that needs no time zones beyond a numeric offset. The format is small enough
//! to read exactly: `YYYY-MM-DD` `T` `hh:mm:ss` [`.fraction`] (`Z` | `±hh:mm`). Lower-case
//! `t`/`z` and a space for `T` are accepted, as RFC 3339 allows; a leap second (`:60`)
//! counts as `:59`. Anything else, and any instant before 1970, is refused.

/// A byte cursor over the timestamp; every read is bounds-checked.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn next_if(&mut self, accept: impl Fn(u8) -> bool) -> Option<u8> {
        let byte = self.bytes.get(self.pos).copied().filter(|b| accept(*b))?;
        self.pos += 1;
        Some(byte)
    }

    fn expect(&mut self, wanted: u8) -> Option<()> {
        self.next_if(|b| b == wanted).map(drop)
    }

    /// Exactly `count` ASCII digits as a number.
    fn number(&mut self, count: usize) -> Option<i64> {
        (0..count).try_fold(0i64, |acc, _| {
            let byte = self.next_if(|b| b.is_ascii_digit())?;
            Some(acc * 10 + i64::from(byte - b'0'))
        })
    }

    /// Milliseconds of an optional `.fraction` (one digit or more; digits past the third are ignored).
    fn fraction_ms(&mut self) -> Option<i64> {
        if self.expect(b'.').is_none() {
            return Some(0);
        }
        let (mut ms, mut digits) = (0i64, 0);
        while let Some(byte) = self.next_if(|b| b.is_ascii_digit()) {
            if digits < 3 {
                ms = ms * 10 + i64::from(byte - b'0');
            }
            digits += 1;
        }
        match digits {
            0 => None,
            1 => Some(ms * 100),
            2 => Some(ms * 10),
            _ => Some(ms),
        }
    }

    /// The offset east of UTC in seconds.
    fn offset_secs(&mut self) -> Option<i64> {
        let sign = match self.next_if(|b| matches!(b, b'Z' | b'z' | b'+' | b'-'))? {
            b'Z' | b'z' => return Some(0),
            b'+' => 1,
            _ => -1,
        };
        let hours = self.number(2).filter(|h| *h < 24)?;
        self.expect(b':')?;
        let minutes = self.number(2).filter(|m| *m < 60)?;
        Some(sign * (hours * 3_600 + minutes * 60))
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (counting years from March,
/// so the leap day is the last day of its year).
fn days_since_epoch(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Parses an RFC 3339 timestamp such as `2024-09-02T18:45:30Z` or
/// `2024-09-02T20:45:30.250+02:00` into milliseconds since the Unix epoch.
///
/// Returns `None` for any other shape, an impossible date or time, or an instant before
/// 1970-01-01T00:00:00Z.
///
/// ```
/// use sluice_provider::parse_rfc3339_unix_ms;
///
/// assert_eq!(parse_rfc3339_unix_ms("1970-01-02T00:00:01.5Z"), Some(86_401_500));
/// assert_eq!(parse_rfc3339_unix_ms("2024-02-30T00:00:00Z"), None);
/// ```
#[must_use]
pub fn parse_rfc3339_unix_ms(text: &str) -> Option<u64> {
    let mut c = Cursor { bytes: text.trim().as_bytes(), pos: 0 };
    let year = c.number(4)?;
    c.expect(b'-')?;
    let month = c.number(2).filter(|m| (1..=12).contains(m))?;
    c.expect(b'-')?;
    let day = c.number(2).filter(|d| (1..=days_in_month(year, month)).contains(d))?;
    c.next_if(|b| matches!(b, b'T' | b't' | b' '))?;
    let hour = c.number(2).filter(|h| *h < 24)?;
    c.expect(b':')?;
    let minute = c.number(2).filter(|m| *m < 60)?;
    c.expect(b':')?;
    let second = c.number(2).filter(|s| *s <= 60)?.min(59);
    let millis = c.fraction_ms()?;
    let offset = c.offset_secs()?;
    if c.pos != c.bytes.len() {
        return None;
    }
    let secs = days_since_epoch(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second - offset;
    u64::try_from(secs.checked_mul(1_000)?.checked_add(millis)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_real_resets() {
        assert_eq!(parse_rfc3339_unix_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_unix_ms("2024-09-02T18:45:30Z"), Some(1_725_302_730_000));
        assert_eq!(parse_rfc3339_unix_ms("2024-09-02T20:45:30+02:00"), Some(1_725_302_730_000));
        assert_eq!(parse_rfc3339_unix_ms("2024-09-02t18:45:30.25z"), Some(1_725_302_730_250));
        assert_eq!(parse_rfc3339_unix_ms("2024-09-02 18:45:30.123456789Z"), Some(1_725_302_730_123));
        assert_eq!(parse_rfc3339_unix_ms("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        assert_eq!(parse_rfc3339_unix_ms("2000-03-01T00:00:00-00:30"), Some(951_870_600_000));
        assert_eq!(parse_rfc3339_unix_ms("2016-12-31T23:59:60Z"), Some(1_483_228_799_000));
    }

    #[test]
    fn refuses_near_misses() {
        for bad in [
            "",
            "2024-09-02",
            "2024-09-02T18:45:30",
            "2024-09-02T18:45Z",
            "2024-9-02T18:45:30Z",
            "2024-13-02T18:45:30Z",
            "2023-02-29T00:00:00Z",
            "2024-09-02T24:00:00Z",
            "2024-09-02T18:45:30.Z",
            "2024-09-02T18:45:30+0200",
            "2024-09-02T18:45:30Z trailing",
            "1969-12-31T23:59:59Z",
            "Mon, 02 Sep 2024 18:45:30 GMT",
            "２024-09-02T18:45:30Z",
        ] {
            assert_eq!(parse_rfc3339_unix_ms(bad), None, "{bad:?}");
        }
    }
}
