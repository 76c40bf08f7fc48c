//! Rate-limit headers for the caller's own budget, so well-behaved clients can pace
//! themselves, in the convention of the route's protocol: OpenAI's
//! `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` on OpenAI routes, Anthropic's
//! `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`
//! (reset as an RFC 3339 instant) on `/v1/messages`; the IETF `RateLimit-Policy` /
//! `RateLimit` fields on both, and `x-sluice-ratelimit-scope`, the kind of the caller's
//! binding scope.
//!
//! Only the caller's own scopes count (tenant, team, key): shared scopes (org, model,
//! deployment) belong to everyone and the gateway queues for them. Per dimension the
//! tightest bucket wins (least remaining). `remaining` is what the bucket can give now
//! (at most its burst), `reset` the time until it is full again. The binding scope is the
//! one whose bucket is closest to empty (least remaining as a share of its burst); on a
//! refusal, the refusing scope ([`crate::error`] sets it, and it is kept).
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
use sluice_provider::Protocol;
use sluice_quota::{Clock, Dimension, QuotaStore, RateSnapshot, ScopeId, ScopeSnapshot};
use tokio::task::JoinHandle;

use crate::AppState;
use crate::auth::Authenticated;

pub use crate::error::SCOPE;

/// Whose header names a route's rate-limit headers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    /// `x-ratelimit-*`, resets as durations (`1.5s`).
    OpenAi,
    /// `anthropic-ratelimit-*`, resets as RFC 3339 instants.
    Anthropic,
}

impl Convention {
    /// The convention of the route serving `protocol`.
    #[must_use]
    pub fn of(protocol: Protocol) -> Self {
        match protocol {
            Protocol::AnthropicMessages => Self::Anthropic,
            Protocol::OpenAiChat
            | Protocol::OpenAiResponses
            | Protocol::OpenAiEmbeddings
            | Protocol::OpenAiCompletions => Self::OpenAi,
        }
    }
}

/// The header names of one dimension: limit, remaining, reset; static, so a response's
/// headers allocate only their values.
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

/// Anthropic's names, in the order requests, tokens, input tokens, output tokens.
const ANTHROPIC: [Names; 4] = [
    Names {
        dimension: "requests",
        limit: HeaderName::from_static("anthropic-ratelimit-requests-limit"),
        remaining: HeaderName::from_static("anthropic-ratelimit-requests-remaining"),
        reset: HeaderName::from_static("anthropic-ratelimit-requests-reset"),
    },
    Names {
        dimension: "tokens",
        limit: HeaderName::from_static("anthropic-ratelimit-tokens-limit"),
        remaining: HeaderName::from_static("anthropic-ratelimit-tokens-remaining"),
        reset: HeaderName::from_static("anthropic-ratelimit-tokens-reset"),
    },
    Names {
        dimension: "input_tokens",
        limit: HeaderName::from_static("anthropic-ratelimit-input-tokens-limit"),
        remaining: HeaderName::from_static("anthropic-ratelimit-input-tokens-remaining"),
        reset: HeaderName::from_static("anthropic-ratelimit-input-tokens-reset"),
    },
    Names {
        dimension: "output_tokens",
        limit: HeaderName::from_static("anthropic-ratelimit-output-tokens-limit"),
        remaining: HeaderName::from_static("anthropic-ratelimit-output-tokens-remaining"),
        reset: HeaderName::from_static("anthropic-ratelimit-output-tokens-reset"),
    },
];

/// When the headers are made: the route's convention and the wall-clock time (Unix ms),
/// from which Anthropic's resets are instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    /// The route's convention.
    pub convention: Convention,
    /// Now, in ms since the Unix epoch.
    pub unix_millis: u64,
}

/// The headers for a caller whose own scopes are in `snapshots` (shared scopes are
/// ignored), at `moment`. Empty when none of them limits requests or tokens.
#[must_use]
pub fn caller_headers(snapshots: &[ScopeSnapshot], moment: Moment) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(8);
    add_caller_headers(snapshots.iter(), moment, &mut headers);
    headers
}

/// Adds [`caller_headers`] for `snapshots` to `headers` (a response's, written in place).
fn add_caller_headers<'a>(
    snapshots: impl Iterator<Item = &'a ScopeSnapshot> + Clone,
    moment: Moment,
    headers: &mut HeaderMap,
) {
    let own_scopes = || snapshots.clone().filter(|s| !s.key.kind.is_shared());
    let own = || own_scopes().flat_map(|s| &s.rates);
    let of = |d: Dimension| tightest(own().filter(move |r| dimension(r) == d));
    let requests = of(Dimension::Requests);
    let tokens = tightest(own().filter(|r| dimension(r) != Dimension::Requests));
    match moment.convention {
        Convention::OpenAi => {
            for (names, rate) in NAMES.iter().zip([requests, tokens]).filter_map(|(n, r)| Some((n, r?))) {
                add_one(headers, names, rate, go_duration(rate.reset));
            }
        }
        Convention::Anthropic => {
            let rates = [requests, tokens, of(Dimension::InputTokens), of(Dimension::OutputTokens)];
            for (names, rate) in ANTHROPIC.iter().zip(rates).filter_map(|(n, r)| Some((n, r?))) {
                add_one(headers, names, rate, rfc3339(moment.unix_millis, rate.reset));
            }
        }
    }
    add_ietf(headers, requests, tokens);
    let binding = own_scopes()
        .flat_map(|s| s.rates.iter().map(move |r| (s.key.kind, r)))
        .max_by(|(_, a), (_, b)| emptiness(a).total_cmp(&emptiness(b)).then(a.reset.cmp(&b.reset)));
    if let Some((kind, _)) = binding {
        headers.entry(SCOPE).or_insert(HeaderValue::from_static(kind.as_str()));
    }
}

/// One dimension's limit, remaining and `reset` (already written in the convention).
fn add_one(headers: &mut HeaderMap, names: &Names, rate: &RateSnapshot, reset: String) {
    headers.insert(names.limit.clone(), HeaderValue::from(rate.limit));
    headers.insert(names.remaining.clone(), HeaderValue::from(rate.remaining));
    insert(headers, names.reset.clone(), reset);
}

/// The IETF `RateLimit-Policy` and `RateLimit` fields of the requests and tokens buckets.
fn add_ietf(headers: &mut HeaderMap, requests: Option<&RateSnapshot>, tokens: Option<&RateSnapshot>) {
    let mut policy = String::new();
    let mut current = String::new();
    for (names, rate) in NAMES.iter().zip([requests, tokens]).filter_map(|(n, r)| Some((n, r?))) {
        let period = period_of(rate).as_secs().max(1);
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

/// How close a bucket is to refusing: the share of its burst already taken.
fn emptiness(rate: &RateSnapshot) -> f64 {
    1.0 - rate.remaining as f64 / rate.burst.max(1) as f64
}

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The headers for the caller owning `scopes`, from a fresh snapshot of them (one store
/// read; when it fails, no headers), in `convention` at the time of `clock`.
pub async fn for_scopes(
    store: &dyn QuotaStore,
    scopes: &[ScopeId],
    convention: Convention,
    clock: &dyn Clock,
) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(8);
    add_for_scopes(store, scopes, convention, clock, &mut headers).await;
    headers
}

/// Adds [`for_scopes`] to `headers`.
async fn add_for_scopes(
    store: &dyn QuotaStore,
    scopes: &[ScopeId],
    convention: Convention,
    clock: &dyn Clock,
    headers: &mut HeaderMap,
) {
    let snapshots = store.snapshots(scopes).await.unwrap_or_default();
    let moment = Moment { convention, unix_millis: clock.unix_millis() };
    add_caller_headers(snapshots.iter().flatten(), moment, headers);
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
    clock: Arc<dyn Clock>,
    convention: Convention,
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
    fn new(store: Arc<dyn QuotaStore>, clock: Arc<dyn Clock>, convention: Convention, scopes: Vec<ScopeId>) -> Self {
        Self(Arc::new(EarlyRead { store, clock, convention, scopes, known: Mutex::new(Known::Nothing) }))
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
            let moment = Moment { convention: self.0.convention, unix_millis: self.0.clock.unix_millis() };
            *known = Known::Ready(caller_headers(&after, moment));
            return;
        }
        if self.0.store.reads_in_process() || !matches!(*known, Known::Nothing) {
            return;
        }
        let read = Arc::clone(&self.0);
        *known = Known::Reading(tokio::spawn(async move {
            for_scopes(read.store.as_ref(), &read.scopes, read.convention, read.clock.as_ref()).await
        }));
    }

    /// Adds the headers to `headers`: from the grant's state, the started read's, or a read
    /// made now.
    async fn add_to(&self, headers: &mut HeaderMap) {
        let known = std::mem::take(&mut *self.0.known.lock());
        let read = &self.0;
        match known {
            Known::Ready(known) => merge(headers, known),
            Known::Reading(task) => merge(headers, task.await.unwrap_or_default()),
            Known::Nothing => {
                add_for_scopes(read.store.as_ref(), &read.scopes, read.convention, read.clock.as_ref(), headers).await;
            }
        }
    }
}

/// Adds `known` to `headers`, keeping a binding scope already there (a refusal's).
fn merge(headers: &mut HeaderMap, mut known: HeaderMap) {
    if headers.contains_key(SCOPE) {
        known.remove(SCOPE);
    }
    headers.extend(known);
}

/// Around every proxied endpoint's handler (each calls it; a plain call, not a router
/// layer, which would cost every request a boxed service and future): authenticates the
/// caller once, before the body is read, hands it on as [`Authenticated`], and adds the
/// caller's headers, in the convention of the route's `protocol`, to the response `next`
/// gives (refusals included).
pub async fn around<F>(
    state: &AppState,
    protocol: Protocol,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response
where
    F: Future<Output = Response>,
{
    // The gateway in force: a reload may add, remove or move keys.
    let authenticated = Authenticated::of(state.current(), request.headers());
    let (store, clock) = (&authenticated.gateway.services.store, &authenticated.gateway.services.clock);
    let early = authenticated.caller().ok().map(|caller| {
        let own = caller.scopes.iter().skip(1).copied().collect();
        Early::new(Arc::clone(store), Arc::clone(clock), Convention::of(protocol), own)
    });
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

/// The instant `reset` after `unix_millis`, as Anthropic writes resets: RFC 3339 in UTC to
/// the second, rounded up (`2026-12-03T14:30:05Z`).
fn rfc3339(unix_millis: u64, reset: Duration) -> String {
    let at = unix_millis.saturating_add(u64::try_from(reset.as_millis()).unwrap_or(u64::MAX)).div_ceil(1000);
    let secs = i64::try_from(at).unwrap_or(i64::MAX / 2);
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = sluice_quota::budget::civil_from_days(days);
    let (h, m, s) = (of_day / 3600, of_day % 3600 / 60, of_day % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
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

    const OPENAI: Moment = Moment { convention: Convention::OpenAi, unix_millis: 0 };

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
        let h = caller_headers(&snapshots, OPENAI);
        assert_eq!(h["x-ratelimit-limit-requests"], "60");
        assert_eq!(h["x-ratelimit-remaining-requests"], "2");
        assert_eq!(h["x-ratelimit-reset-requests"], "1.5s");
        assert_eq!(h["x-ratelimit-limit-tokens"], "60000");
        assert_eq!(h["x-ratelimit-remaining-tokens"], "900");
        assert_eq!(h["x-ratelimit-reset-tokens"], "2.1s");
        assert_eq!(h["ratelimit-policy"], "\"requests\";q=60;w=60, \"tokens\";q=60000;w=60");
        assert_eq!(h["ratelimit"], "\"requests\";r=2;t=2, \"tokens\";r=900;t=3");
        // The tenant's 900 of 3,000 tokens left is the closest to refusing of the own buckets.
        assert_eq!(h["x-sluice-ratelimit-scope"], "tenant");
        assert!(h.keys().all(|name| !name.as_str().starts_with("anthropic-")));
    }

    #[test]
    fn anthropic_routes_get_anthropic_names_with_instants_and_no_openai_ones() {
        let snapshots = [
            scope(
                ScopeKind::Tenant,
                vec![
                    rate(Dimension::Requests, 600, 30, 0),
                    rate(Dimension::InputTokens, 40_000, 1_500, 2_100),
                    rate(Dimension::OutputTokens, 8_000, 390, 4_000),
                ],
            ),
            scope(ScopeKind::Team, vec![rate(Dimension::TotalTokens, 20_000, 200, 59_000)]),
        ];
        // 2026-12-03T14:30:00.250Z
        let moment = Moment { convention: Convention::Anthropic, unix_millis: 1_796_308_200_250 };
        let h = caller_headers(&snapshots, moment);
        assert_eq!(h["anthropic-ratelimit-requests-limit"], "600");
        assert_eq!(h["anthropic-ratelimit-requests-reset"], "2026-12-03T14:30:01Z");
        assert_eq!(h["anthropic-ratelimit-input-tokens-limit"], "40000");
        assert_eq!(h["anthropic-ratelimit-input-tokens-remaining"], "1500");
        assert_eq!(h["anthropic-ratelimit-input-tokens-reset"], "2026-12-03T14:30:03Z");
        assert_eq!(h["anthropic-ratelimit-output-tokens-remaining"], "390");
        assert_eq!(h["anthropic-ratelimit-output-tokens-reset"], "2026-12-03T14:30:05Z");
        // Tokens: the tightest token bucket of any dimension, here the team's.
        assert_eq!(h["anthropic-ratelimit-tokens-limit"], "20000");
        assert_eq!(h["anthropic-ratelimit-tokens-remaining"], "200");
        assert_eq!(h["anthropic-ratelimit-tokens-reset"], "2026-12-03T14:31:00Z");
        assert_eq!(h["x-sluice-ratelimit-scope"], "team");
        assert!(h.keys().all(|name| !name.as_str().starts_with("x-ratelimit-")), "{h:?}");
        assert!(h.contains_key("ratelimit-policy"));
        assert_eq!(rfc3339(0, Duration::ZERO), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_825_600_000, Duration::from_millis(1)), "2000-02-29T12:00:01Z");
    }

    #[test]
    fn no_own_limits_means_no_headers_and_durations_read_like_openai() {
        assert!(caller_headers(&[scope(ScopeKind::Tenant, vec![])], OPENAI).is_empty());
        let only_tokens =
            caller_headers(&[scope(ScopeKind::Team, vec![rate(Dimension::OutputTokens, 100, 7, 0)])], OPENAI);
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
