//! Reading a provider's "come back later" hints from response headers.

use std::time::Duration;

use axum::http::HeaderMap;

/// The wait a provider asks for: `retry-after-ms`, else `retry-after` in seconds.
#[must_use]
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    text("retry-after").and_then(|v| v.parse::<u64>().ok()).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_milliseconds_and_ignores_garbage() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        headers.insert("retry-after-ms", "soon".parse().unwrap());
        headers.insert("retry-after", "-1".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }
}
