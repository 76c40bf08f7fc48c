//! Rate-limit headers for the caller's own budget, so well-behaved clients can pace
//! themselves: OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` and the
//! IETF `RateLimit-Policy` / `RateLimit` fields.
//!
//! Only the caller's own scopes count (tenant, team, key): shared scopes (org, model,
//! deployment) belong to everyone and the gateway queues for them. Per dimension the
//! tightest bucket wins (least remaining). `remaining` is what the bucket can give now
//! (at most its burst), `reset` the time until it is full again.
//!
//! [`around`] adds them to every response of the proxied endpoints (refusals included),
//! from the state the store returned with the grant, or else from one snapshot of at
//! most three scopes, read once the reservation is made (see [`Early`]) or, for a request
//! never admitted, when the response head is ready.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use parking_lot::Mutex;
use sluice_quota::{Dimension, QuotaStore, RateSnapshot, ScopeId, ScopeSnapshot};
use tokio::task::JoinHandle;

use crate::AppState;
use crate::auth::Authenticated;

/// The OpenAI header names of one dimension: limit, remaining, reset; static, so a
/// response's headers allocate only their values.
struct Names {
    dimension: &'static str,
    limit: HeaderName,
    remaining: HeaderName,
    reset: HeaderName,
}

const NAMES: [Names; 2] = [
    Names {
        dimension: "requests",
        limit: HeaderName::from_static("x-ratelimit-limit-requests"),
        remaining: HeaderName::from_static("x-ratelimit-remaining-requests"),
        reset: HeaderName::from_static("x-ratelimit-reset-requests"),
    },
    Names {
        dimension: "tokens",
        limit: HeaderName::from_static("x-ratelimit-limit-tokens"),
        remaining: HeaderName::from_static("x-ratelimit-remaining-tokens"),
        reset: HeaderName::from_static("x-ratelimit-reset-tokens"),
    },
];

/// The headers for a caller whose own scopes are in `snapshots` (shared scopes are
/// ignored). Empty when none of them limits requests or tokens.
#[must_use]
pub fn caller_headers(snapshots: &[ScopeSnapshot]) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(8);
    add_caller_headers(snapshots.iter(), &mut headers);
    headers
}

/// Adds [`caller_headers`] for `snapshots` to `headers` (a response's, written in place).
fn add_caller_headers<'a>(snapshots: impl Iterator<Item = &'a ScopeSnapshot> + Clone, headers: &mut HeaderMap) {
    let own = || snapshots.clone().filter(|s| !s.key.kind.is_shared()).flat_map(|s| &s.rates);
    let requests = tightest(own().filter(|r| dimension(r) == Dimension::Requests));
    let tokens = tightest(own().filter(|r| dimension(r) != Dimension::Requests));
    let mut policy = String::new();
    let mut current = String::new();
    for (names, rate) in NAMES.into_iter().zip([requests, tokens]).filter_map(|(n, r)| Some((n, r?))) {
        let period = period_of(rate).as_secs().max(1);
        headers.insert(names.limit, HeaderValue::from(rate.limit));
        headers.insert(names.remaining, HeaderValue::from(rate.remaining));
        insert(headers, names.reset, go_duration(rate.reset));
        let reset = rate.reset.as_millis().div_ceil(1000);
        let sep = if policy.is_empty() { "" } else { ", " };
        let name = names.dimension;
        // Writing to a String cannot fail.
        let _ = write!(policy, "{sep}\"{name}\";q={};w={period}", rate.limit);
        let _ = write!(current, "{sep}\"{name}\";r={};t={reset}", rate.remaining);
    }
    if !policy.is_empty() {
        insert(headers, RATELIMIT_POLICY, policy);
        insert(headers, RATELIMIT, current);
    }
}

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The headers for the caller owning `scopes`, from a fresh snapshot of them (one store
/// read; when it fails, no headers).
pub async fn for_scopes(store: &dyn QuotaStore, scopes: &[ScopeId]) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(8);
    add_for_scopes(store, scopes, &mut headers).await;
    headers
}

/// Adds [`for_scopes`] to `headers`.
async fn add_for_scopes(store: &dyn QuotaStore, scopes: &[ScopeId], headers: &mut HeaderMap) {
    let snapshots = store.snapshots(scopes).await.unwrap_or_default();
    add_caller_headers(snapshots.iter().flatten(), headers);
}

/// A request's headers, known as early as they mean something: the request path calls
/// [`Early::admitted`] once its reservation is made. A remote store returns the caller's
/// own scopes with the grant, so the headers cost no read; without it the read starts then and
/// overlaps the upstream call instead of following it. Never admitted (a refusal, an
/// error), the layer reads when the response is ready.
#[derive(Debug, Clone)]
pub struct Early(Arc<EarlyRead>);

#[derive(Debug)]
struct EarlyRead {
    store: Arc<dyn QuotaStore>,
    scopes: Vec<ScopeId>,
    known: Mutex<Known>,
}

/// What a request's headers are so far.
#[derive(Debug, Default)]
enum Known {
    /// Nothing yet: read when the response is ready.
    #[default]
    Nothing,
    /// A read under way.
    Reading(JoinHandle<HeaderMap>),
    /// Made from the state after the grant.
    Ready(HeaderMap),
}

impl Early {
    fn new(store: Arc<dyn QuotaStore>, scopes: Vec<ScopeId>) -> Self {
        Self(Arc::new(EarlyRead { store, scopes, known: Mutex::new(Known::Nothing) }))
    }

    /// A reservation was made, leaving the caller's own scopes as `after` (empty when the
    /// store did not say). The latest admission wins (a retry on a fallback deployment). With no
    /// state, a remote store's read starts now; an in-process store's is left to the end:
    /// it costs less than a task.
    pub fn admitted(&self, after: Vec<ScopeSnapshot>) {
        let mut known = self.0.known.lock();
        if !after.is_empty() {
            if let Known::Reading(read) = &*known {
                read.abort();
            }
            *known = Known::Ready(caller_headers(&after));
            return;
        }
        if self.0.store.reads_in_process() || !matches!(*known, Known::Nothing) {
            return;
        }
        let read = Arc::clone(&self.0);
        *known = Known::Reading(tokio::spawn(async move { for_scopes(read.store.as_ref(), &read.scopes).await }));
    }

    /// Adds the headers to `headers`: from the grant's state, the started read's, or a read
    /// made now.
    async fn add_to(&self, headers: &mut HeaderMap) {
        let known = std::mem::take(&mut *self.0.known.lock());
        match known {
            Known::Ready(known) => headers.extend(known),
            Known::Reading(read) => headers.extend(read.await.unwrap_or_default()),
            Known::Nothing => add_for_scopes(self.0.store.as_ref(), &self.0.scopes, headers).await,
        }
    }
}

/// Around every proxied endpoint's handler (each calls it; a plain call, not a router
/// layer, which would cost every request a boxed service and future): authenticates the
/// caller once, before the body is read, hands it on as [`Authenticated`], and adds the
/// caller's headers to the response `next` gives (refusals included).
pub async fn around<F>(state: &AppState, mut request: Request, next: impl FnOnce(Request) -> F) -> Response
where
    F: Future<Output = Response>,
{
    // The gateway in force: a reload may add, remove or move keys.
    let authenticated = Authenticated::of(state.current(), request.headers());
    let store = &authenticated.gateway.store;
    let early = authenticated
        .caller()
        .ok()
        .map(|caller| Early::new(Arc::clone(store), caller.scopes.iter().skip(1).copied().collect()));
    request.extensions_mut().insert(authenticated);
    if let Some(early) = &early {
        request.extensions_mut().insert(early.clone());
    }
    let mut response = next(request).await;
    if let Some(early) = early {
        early.add_to(response.headers_mut()).await;
    }
    response
}

fn dimension(rate: &RateSnapshot) -> Dimension {
    match rate.limiter {
        sluice_quota::LimiterName::Rate { dimension, .. } => dimension,
        _ => Dimension::Requests,
    }
}

fn period_of(rate: &RateSnapshot) -> Duration {
    match rate.limiter {
        sluice_quota::LimiterName::Rate { period, .. } => period,
        _ => Duration::from_secs(60),
    }
}

fn tightest<'a>(rates: impl Iterator<Item = &'a RateSnapshot>) -> Option<&'a RateSnapshot> {
    rates.min_by(|a, b| a.remaining.cmp(&b.remaining).then(b.reset.cmp(&a.reset)))
}

fn insert(headers: &mut HeaderMap, name: HeaderName, value: String) {
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.insert(name, value);
    }
}

/// A duration as OpenAI writes resets: `250ms`, `1.5s`, `6m0s`, `1h2m3s`.
fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let frac = format!("{:.3}", f64::from(d.subsec_millis()) / 1000.0);
    let frac = frac.trim_start_matches('0').trim_end_matches('0').trim_end_matches('.');
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}{frac}s"),
        (0, _) => format!("{m}m{s}{frac}s"),
        _ => format!("{h}h{m}m{s}{frac}s"),
    }
}

#[cfg(test)]
mod tests {
    use sluice_quota::{LimiterName, ScopeKey, ScopeKind};

    use super::*;

    fn rate(dimension: Dimension, limit: u64, remaining: u64, reset_ms: u64) -> RateSnapshot {
        RateSnapshot {
            limiter: LimiterName::Rate { dimension, period: Duration::from_secs(60) },
            limit,
            burst: limit / 20,
            remaining,
            reset: Duration::from_millis(reset_ms),
        }
    }

    fn scope(kind: ScopeKind, rates: Vec<RateSnapshot>) -> ScopeSnapshot {
        ScopeSnapshot { key: ScopeKey::new(kind, "x"), rates, in_flight: (0, None), held: false, budgets: Vec::new() }
    }

    #[test]
    fn the_tightest_own_bucket_wins_per_dimension() {
        let snapshots = [
            scope(
                ScopeKind::Tenant,
                vec![rate(Dimension::Requests, 600, 30, 0), rate(Dimension::TotalTokens, 60_000, 900, 2_100)],
            ),
            scope(ScopeKind::ApiKey, vec![rate(Dimension::Requests, 60, 2, 1_500)]),
            // Shared scopes never show: they are everyone's, and the gateway queues for them.
            scope(ScopeKind::Deployment, vec![rate(Dimension::Requests, 10_000, 0, 90_000)]),
        ];
        let h = caller_headers(&snapshots);
        assert_eq!(h["x-ratelimit-limit-requests"], "60");
        assert_eq!(h["x-ratelimit-remaining-requests"], "2");
        assert_eq!(h["x-ratelimit-reset-requests"], "1.5s");
        assert_eq!(h["x-ratelimit-limit-tokens"], "60000");
        assert_eq!(h["x-ratelimit-remaining-tokens"], "900");
        assert_eq!(h["x-ratelimit-reset-tokens"], "2.1s");
        assert_eq!(h["ratelimit-policy"], "\"requests\";q=60;w=60, \"tokens\";q=60000;w=60");
        assert_eq!(h["ratelimit"], "\"requests\";r=2;t=2, \"tokens\";r=900;t=3");
    }

    #[test]
    fn no_own_limits_means_no_headers_and_durations_read_like_openai() {
        assert!(caller_headers(&[scope(ScopeKind::Tenant, vec![])]).is_empty());
        let only_tokens = caller_headers(&[scope(ScopeKind::Team, vec![rate(Dimension::OutputTokens, 100, 7, 0)])]);
        assert!(only_tokens.get("x-ratelimit-limit-requests").is_none());
        assert_eq!(only_tokens["ratelimit"], "\"tokens\";r=7;t=0");
        let ms = Duration::from_millis;
        assert_eq!(go_duration(ms(0)), "0ms");
        assert_eq!(go_duration(ms(250)), "250ms");
        assert_eq!(go_duration(ms(1_000)), "1s");
        assert_eq!(go_duration(ms(360_000)), "6m0s");
        assert_eq!(go_duration(ms(3_723_400)), "1h2m3.4s");
    }
}
