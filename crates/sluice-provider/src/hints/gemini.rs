//! Gemini's 429 body: `error.details[]` entries typed `google.rpc.RetryInfo` (how long to
//! wait) and `google.rpc.QuotaFailure` (which quota tripped).

use std::time::Duration;

use serde_json::Value;

use super::duration::parse_proto_duration;
use super::headers::sane;

/// What a Gemini error body says about waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GeminiDetails {
    /// `RetryInfo.retryDelay`, when sane.
    pub(crate) retry_delay: Option<Duration>,
    /// A `QuotaFailure` violation names a per-day quota (`...PerDay...` in its `quotaId`).
    pub(crate) daily: bool,
}

/// The `@type` suffixes of the detail messages read here.
const RETRY_INFO: &str = "google.rpc.RetryInfo";
const QUOTA_FAILURE: &str = "google.rpc.QuotaFailure";

/// Reads the details of `{"error": {..., "details": [...]}}`, or of the one-element array
/// some Gemini endpoints wrap it in. Anything unrecognised contributes nothing.
pub(crate) fn details(body: &Value) -> GeminiDetails {
    let body = body.as_array().and_then(|items| items.first()).unwrap_or(body);
    let entries = body.pointer("/error/details").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    entries.iter().fold(GeminiDetails::default(), |mut acc, entry| {
        let kind = entry.get("@type").and_then(Value::as_str).unwrap_or_default();
        if kind.ends_with(RETRY_INFO) {
            let delay = entry.get("retryDelay").and_then(Value::as_str).and_then(parse_proto_duration);
            acc.retry_delay = acc.retry_delay.or(delay.and_then(sane));
        } else if kind.ends_with(QUOTA_FAILURE) {
            acc.daily |= names_daily_quota(entry);
        }
        acc
    })
}

fn names_daily_quota(quota_failure: &Value) -> bool {
    let violations = quota_failure.get("violations").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    violations.iter().any(|v| v.get("quotaId").and_then(Value::as_str).is_some_and(|id| id.contains("PerDay")))
}
