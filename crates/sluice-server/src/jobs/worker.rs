//! Job workers: each leases one job at a time and runs it through the same admission
//! and upstream path as a live request (waiting in the deployment's queue with the job's
//! class), renews its lease while it runs, and records the answer the moment it arrives.
//!
//! Outcomes: a 2xx answer completes the job; a provider 429, 5xx, timeout or connection
//! failure is retried after exponential backoff with full jitter (the provider's
//! `Retry-After` as a floor) until the class's `max_attempts`, then dead-lettered; a
//! refusal before sending (the gateway's own 429, the store away) waits and does not count
//! as an attempt; anything else (a 4xx, a request that can never fit) fails the job.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use rand::Rng;
use sluice_jobs::{Failure, Job, JobResult, JobState, Leased, Retry, store::millis};
use sluice_quota::backoff::Backoff;
use tokio::task::JoinHandle;

use super::Jobs;
use crate::AppState;
use crate::error::GatewayError;
use crate::road;
use crate::state::{Caller, Gateway};
use crate::trace::Trace;

/// How long an idle worker waits before looking again (another instance's submissions,
/// delayed jobs coming due, expired leases); a submission here wakes it at once.
const IDLE_POLL: Duration = Duration::from_millis(200);
/// Pause after the job store failed.
const STORE_BACKOFF: Duration = Duration::from_secs(1);
/// Most tries to record an outcome while the store fails (losing it would mean a rerun).
const RECORD_TRIES: u32 = 10;
/// Largest answer body stored.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;
/// Longest provider error text kept in a job's `error`.
const MAX_ERROR_CHARS: usize = 2_000;
/// Wait after a refusal before sending that named no time.
const NOT_SENT_RETRY: Duration = Duration::from_secs(1);
/// How often the `sluice_jobs{state}` gauges are refreshed.
const GAUGE_REFRESH: Duration = Duration::from_secs(2);

/// Starts the workers of `state` (none without jobs), plus the gauge refresher. They stop
/// leasing once the gateway drains; a job already running finishes.
#[must_use]
pub fn spawn(state: &AppState) -> Vec<JoinHandle<()>> {
    let Some(jobs) = state.jobs.clone() else { return Vec::new() };
    let instance: u32 = rand::rng().random();
    let mut handles: Vec<JoinHandle<()>> = (0..jobs.workers)
        .map(|i| {
            let worker = Worker {
                name: format!("{}-{instance:08x}-{i}", std::process::id()),
                live: Arc::clone(&state.live),
                jobs: Arc::clone(&jobs),
                draining: Arc::clone(&state.draining),
            };
            tokio::spawn(worker.run())
        })
        .collect();
    handles.push(tokio::spawn(refresh_gauges(Arc::clone(&state.gateway), jobs, Arc::clone(&state.draining))));
    handles
}

async fn refresh_gauges(gateway: Arc<Gateway>, jobs: Arc<Jobs>, draining: Arc<AtomicBool>) {
    let states = &gateway.services.metrics.jobs.states;
    while !draining.load(Ordering::Relaxed) {
        if let Ok(counts) = jobs.store.counts().await {
            let pairs = [
                ("queued", counts.queued),
                ("delayed", counts.delayed),
                ("running", counts.running),
                ("dead_letter", counts.dead_letter),
            ];
            for (state, n) in pairs {
                states
                    .get_or_create(&crate::metrics::JobStateLabel { state })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        tokio::time::sleep(GAUGE_REFRESH).await;
    }
}

struct Worker {
    name: String,
    /// The gateway in force: each job runs on the latest one (keys and classes a reload
    /// added included).
    live: Arc<arc_swap::ArcSwap<Gateway>>,
    jobs: Arc<Jobs>,
    draining: Arc<AtomicBool>,
}

impl Worker {
    async fn run(self) {
        while !self.draining.load(Ordering::Relaxed) {
            match self.jobs.store.lease_next(&self.name, self.jobs.visibility).await {
                Ok(outcome) => {
                    let gateway = self.live.load_full();
                    let metrics = &gateway.services.metrics.jobs;
                    metrics.uncertain_reruns.inc_by(u64::from(outcome.recovered));
                    metrics.dead_lettered.inc_by(u64::from(outcome.recovered_dead));
                    if outcome.recovered > 0 {
                        tracing::warn!(jobs = outcome.recovered, "re-running jobs whose lease expired while running");
                    }
                    match outcome.leased {
                        Some(leased) => self.run_job(leased).await,
                        None => self.idle().await,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "job store failed on lease");
                    tokio::time::sleep(STORE_BACKOFF).await;
                }
            }
        }
    }

    async fn idle(&self) {
        tokio::select! {
            () = self.jobs.wake.notified() => {}
            () = tokio::time::sleep(IDLE_POLL) => {}
        }
    }

    async fn run_job(&self, leased: Leased) {
        let gateway = self.live.load_full();
        let started = gateway.services.clock.now();
        let attempt = tokio::select! {
            attempt = execute(&gateway, &self.jobs, &leased.job) => attempt,
            // The lease is gone: another worker runs the job now. The attempt stops here
            // (its outcome would be refused anyway); a call in flight is dropped, which a
            // provider that stops work for callers that left counts as never served.
            () = self.heartbeat(&leased) => return,
        };
        self.jobs.observe_run(gateway.services.clock.now().since(started));
        self.jobs.attempt_ended(&gateway, &leased.job);
        self.record(&gateway, &leased, attempt).await;
    }

    /// Renews the lease at a third of the visibility timeout; returns only when the lease
    /// was lost.
    async fn heartbeat(&self, leased: &Leased) {
        let every = self.jobs.visibility / 3;
        loop {
            tokio::time::sleep(every).await;
            match self.jobs.store.renew(&leased.job.id, leased.token, self.jobs.visibility).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(job = %leased.job.id, "job lease lost while running; abandoning the attempt");
                    return;
                }
                Err(e) => tracing::warn!(error = %e, job = %leased.job.id, "could not renew a job lease"),
            }
        }
    }

    async fn record(&self, gateway: &Gateway, leased: &Leased, attempt: Attempt) {
        let (store, id, token) = (&self.jobs.store, &leased.job.id, leased.token);
        let metrics = &gateway.services.metrics.jobs;
        for _ in 0..RECORD_TRIES {
            let recorded = match &attempt {
                Attempt::Answered(result) => store.complete(id, token, result.clone()).await.inspect(|&done| {
                    if done {
                        metrics.completed.inc();
                    }
                }),
                Attempt::Failed(failure) => store.fail(id, token, failure.clone()).await.map(|state| {
                    match state {
                        Some(JobState::Delayed) => metrics.retried.inc(),
                        Some(JobState::Failed) => metrics.failed.inc(),
                        Some(JobState::DeadLetter) => metrics.dead_lettered.inc(),
                        _ => 0,
                    };
                    state.is_some()
                }),
            };
            match recorded {
                Ok(true) => return,
                Ok(false) => {
                    tracing::warn!(job = %id, "job outcome not recorded: the lease was lost");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, job = %id, "could not record a job outcome; retrying");
                    tokio::time::sleep(STORE_BACKOFF).await;
                }
            }
        }
    }
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// The provider answered 2xx.
    Answered(JobResult),
    /// It did not.
    Failed(Failure),
}

/// How a failed attempt goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Not retryable.
    Never,
    /// Retry after backoff (at least `floor`); counts as an attempt.
    Retry(Option<Duration>),
    /// Nothing was sent: wait `wait`; does not count.
    NotSent(Duration),
}

async fn execute(gateway: &Gateway, jobs: &Jobs, job: &Job) -> Attempt {
    let Some(caller) = caller_for(gateway, jobs, job) else {
        return failed(job, "the key that submitted the job no longer exists".into(), Next::Never);
    };
    let protocol = match job.endpoint {
        sluice_jobs::Endpoint::ChatCompletions => sluice_provider::Protocol::OpenAiChat,
        sluice_jobs::Endpoint::Messages => sluice_provider::Protocol::AnthropicMessages,
    };
    let headers = HeaderMap::new();
    let trace = Trace::from_headers(&headers);
    let sent = road::forward(gateway, &caller, protocol, &headers, job.body.as_bytes(), &trace, None).await;
    if let Some(access) = &sent.access {
        road::finished(access, &sent.result);
    }
    let response = match sent.result {
        Ok(response) => response,
        // The provider's own error answer after the live attempts: judged like any answer.
        Err(crate::error::GatewayError::Upstream(response)) => *response,
        Err(error) => {
            road::count(gateway, sent.deployment, error.status());
            let (message, next) = classify_error(&error);
            return failed(job, message, next);
        }
    };
    let status = response.status();
    road::count(gateway, sent.deployment, status);
    let now_ms = gateway.services.clock.unix_millis();
    let floor = sluice_provider::parse_hints(response.headers(), None, Some(now_ms)).retry_after;
    let Ok(body) = Limited::new(response.into_body(), MAX_ANSWER_BYTES).collect().await.map(|c| c.to_bytes()) else {
        return failed(job, "the provider's answer broke off".into(), Next::Retry(None));
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    if status.is_success() {
        return Attempt::Answered(JobResult { status: status.as_u16(), body });
    }
    let retryable = status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS;
    let text: String = body.chars().take(MAX_ERROR_CHARS).collect();
    let next = if retryable { Next::Retry(floor) } else { Next::Never };
    failed(job, format!("the provider answered {}: {text}", status.as_u16()), next)
}

/// The job's caller: its key's, in the job's class.
fn caller_for(gateway: &Gateway, jobs: &Jobs, job: &Job) -> Option<Caller> {
    let caller = gateway.callers.values().find(|c| *c.key_id == *job.key_id).cloned();
    let caller = caller
        .or_else(|| gateway.services.runtime_keys.caller_by_id(&job.key_id, gateway.services.clock.unix_millis()))?;
    let class = jobs.class(job.class.as_str()).unwrap_or_else(|| caller.class.clone());
    Some(Caller { class, ..caller })
}

fn failed(job: &Job, error: String, next: Next) -> Attempt {
    Attempt::Failed(failure(error, next, job.attempts, &mut rand::rng()))
}

/// The stored failure for `next` after `attempts` attempts.
fn failure(error: String, next: Next, attempts: u32, rng: &mut impl Rng) -> Failure {
    let retry = match next {
        Next::Never => Retry::Never,
        Next::Retry(floor) => {
            Retry::After { delay_ms: millis(Backoff::JOBS.delay(attempts, floor, rng)), counted: true }
        }
        Next::NotSent(wait) => Retry::After { delay_ms: millis(wait), counted: false },
    };
    Failure { error, retry }
}

/// Whether and how a gateway error is retried.
fn classify_error(error: &GatewayError) -> (String, Next) {
    let next = match error {
        GatewayError::RateLimited(info) if info.gateway_decision == "rejected_before_send" => {
            Next::NotSent(info.retry_after.unwrap_or(NOT_SENT_RETRY))
        }
        GatewayError::RateLimited(info) => Next::Retry(info.retry_after),
        GatewayError::StoreUnavailable | GatewayError::ShuttingDown => Next::NotSent(NOT_SENT_RETRY),
        GatewayError::ProviderUnavailable { retry_after, .. } => Next::NotSent(*retry_after),
        // A stalled call was cut: the job goes back, delayed, like any timeout. Refused
        // credentials back off too: the operator may fix the key before the dead letter.
        GatewayError::UpstreamUnreachable(_)
        | GatewayError::UpstreamTimeout(_)
        | GatewayError::UpstreamStalled(_)
        | GatewayError::UpstreamAuthFailed(_) => Next::Retry(None),
        _ => Next::Never,
    };
    (error.to_string(), next)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn gateway_errors_are_classified() {
        let retry = |e: GatewayError| classify_error(&e).1;
        assert_eq!(retry(GatewayError::UpstreamTimeout("p".into())), Next::Retry(None));
        assert_eq!(retry(GatewayError::StoreUnavailable), Next::NotSent(NOT_SENT_RETRY));
        assert_eq!(retry(GatewayError::UnknownModel("m".into())), Next::Never);
    }

    #[test]
    fn failures_back_off_with_the_hint_as_floor_and_uncounted_waits_keep_the_attempt() {
        let mut rng = StdRng::seed_from_u64(3);
        let floor = Duration::from_secs(4);
        let f = failure("503".into(), Next::Retry(Some(floor)), 1, &mut rng);
        assert!(matches!(f.retry, Retry::After { delay_ms, counted: true } if delay_ms >= 4_000));
        let f = failure("429".into(), Next::NotSent(Duration::from_millis(250)), 3, &mut rng);
        assert_eq!(f.retry, Retry::After { delay_ms: 250, counted: false });
        assert_eq!(failure("400".into(), Next::Never, 1, &mut rng).retry, Retry::Never);
    }
}
