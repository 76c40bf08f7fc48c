//! The job state machine as pure functions of a job and the store's time (ms). The
//! embedded store applies them inside one write transaction; the Redis scripts implement
//! the same rules (the conformance suite holds both to them).
//!
//! ```text
//! queued ──lease──▶ running ──complete──▶ completed
//!   ▲  ▲              │ │ └──fail(never)──▶ failed
//!   │  └─lease expired┘ └──fail(retry)──▶ delayed ──not_before──▶ queued
//!   │    (rerun)           (attempts left)
//!   └── attempts exhausted ──▶ dead_letter
//! ```

use crate::job::{Failure, Job, JobResult, JobState, Retry};

/// A transition refused because the caller's lease is no longer the job's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the lease is no longer held (the job is {0:?})")]
pub struct Stale(pub JobState);

fn held(job: &Job, token: u64) -> Result<(), Stale> {
    if job.state == JobState::Running && job.lease == token { Ok(()) } else { Err(Stale(job.state)) }
}

/// Leases a queued job to `worker` until `now + visibility`; returns the new token.
#[must_use]
pub fn lease(job: &mut Job, worker: &str, now: u64, visibility_ms: u64) -> u64 {
    job.state = JobState::Running;
    job.attempts = job.attempts.saturating_add(1);
    job.lease = job.lease.saturating_add(1);
    job.lease_until = now.saturating_add(visibility_ms);
    job.worker = worker.to_owned();
    job.lease
}

/// Extends the lease held with `token`.
///
/// # Errors
/// [`Stale`] when the lease was lost (expired and recovered, or the job moved on).
pub fn renew(job: &mut Job, token: u64, now: u64, visibility_ms: u64) -> Result<(), Stale> {
    held(job, token)?;
    job.lease_until = now.saturating_add(visibility_ms);
    Ok(())
}

/// Records the provider's answer.
///
/// # Errors
/// [`Stale`] when the lease was lost: the answer is not recorded.
pub fn complete(job: &mut Job, token: u64, result: JobResult) -> Result<(), Stale> {
    held(job, token)?;
    job.state = JobState::Completed;
    job.result = Some(result);
    job.error = None;
    Ok(())
}

/// Records a failed attempt: delayed until `now + delay` while attempts are left, the
/// dead letter when they are exhausted, failed when the error is not retryable.
///
/// # Errors
/// [`Stale`] when the lease was lost.
pub fn fail(job: &mut Job, token: u64, failure: &Failure, now: u64) -> Result<JobState, Stale> {
    held(job, token)?;
    job.error = Some(failure.error.clone());
    job.state = match failure.retry {
        Retry::Never => JobState::Failed,
        Retry::After { counted: true, .. } if job.attempts >= job.max_attempts => JobState::DeadLetter,
        Retry::After { delay_ms, counted } => {
            if !counted {
                job.attempts = job.attempts.saturating_sub(1);
            }
            job.not_before = now.saturating_add(delay_ms);
            JobState::Delayed
        }
    };
    Ok(job.state)
}

/// Whether a delayed job may run again at `now`.
#[must_use]
pub fn due(job: &Job, now: u64) -> bool {
    job.state == JobState::Delayed && job.not_before <= now
}

/// Makes a delayed job ready.
pub fn ready(job: &mut Job) {
    if job.state == JobState::Delayed {
        job.state = JobState::Queued;
    }
}

/// Whether a running job's lease has ended at `now`.
#[must_use]
pub fn expired(job: &Job, now: u64) -> bool {
    job.state == JobState::Running && job.lease_until <= now
}

/// Takes a job back whose lease ended while it ran (its worker or process died): queued
/// again to be run once more, or dead-lettered when that was its last attempt. Either way
/// it counts as an uncertain rerun: the lost attempt may have reached the provider.
pub fn recover(job: &mut Job) -> JobState {
    job.reruns = job.reruns.saturating_add(1);
    if job.attempts >= job.max_attempts {
        job.state = JobState::DeadLetter;
        job.error = Some(format!("the lease expired on the last of {} attempts", job.max_attempts));
    } else {
        job.state = JobState::Queued;
    }
    job.state
}

/// Cancels a job that has not started: queued or delayed becomes failed (`cancelled`).
/// Returns whether it changed.
pub fn cancel(job: &mut Job) -> bool {
    if !matches!(job.state, JobState::Queued | JobState::Delayed) {
        return false;
    }
    job.state = JobState::Failed;
    job.error = Some(CANCELLED.to_owned());
    true
}

/// The error of a cancelled job.
pub const CANCELLED: &str = "cancelled";

/// The ready-queue order: priority, then submission order.
#[must_use]
pub fn ready_key(job: &Job) -> (u8, u64) {
    (job.priority, job.seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Endpoint, JobId, NewJob};

    fn job(max_attempts: u32) -> Job {
        Job::new(
            NewJob {
                id: JobId::random(),
                tenant: "t".into(),
                key_id: "k".into(),
                idempotency_key: None,
                endpoint: Endpoint::ChatCompletions,
                body: "{}".into(),
                class: "batch".into(),
                priority: 1,
                max_attempts,
            },
            7,
        )
    }

    fn retry(delay_ms: u64, counted: bool) -> Failure {
        Failure { error: "503".into(), retry: Retry::After { delay_ms, counted } }
    }

    #[test]
    fn lease_then_complete_records_the_answer_once() {
        let mut j = job(3);
        let token = lease(&mut j, "w", 100, 50);
        assert_eq!((j.state, j.attempts, j.lease_until), (JobState::Running, 1, 150));
        let result = JobResult { status: 200, body: "{}".into() };
        assert_eq!(complete(&mut j, token, result.clone()), Ok(()));
        assert_eq!(j.result, Some(result.clone()));
        assert_eq!(complete(&mut j, token, result), Err(Stale(JobState::Completed)));
    }

    #[test]
    fn a_lost_lease_can_neither_renew_nor_record() {
        let mut j = job(3);
        let old = lease(&mut j, "w1", 0, 10);
        assert!(expired(&j, 10));
        assert!(!expired(&j, 9));
        assert_eq!(recover(&mut j), JobState::Queued);
        assert_eq!(j.reruns, 1);
        let new = lease(&mut j, "w2", 20, 10);
        assert_ne!(old, new);
        assert_eq!(renew(&mut j, old, 21, 10), Err(Stale(JobState::Running)));
        assert!(complete(&mut j, old, JobResult { status: 200, body: String::new() }).is_err());
        assert_eq!(renew(&mut j, new, 21, 10), Ok(()));
        assert_eq!(j.lease_until, 31);
    }

    #[test]
    fn retryable_failures_delay_until_attempts_run_out() {
        let mut j = job(2);
        let t = lease(&mut j, "w", 0, 10);
        assert_eq!(fail(&mut j, t, &retry(500, true), 5), Ok(JobState::Delayed));
        assert_eq!(j.not_before, 505);
        assert!(!due(&j, 504));
        assert!(due(&j, 505));
        ready(&mut j);
        let t = lease(&mut j, "w", 600, 10);
        assert_eq!(fail(&mut j, t, &retry(500, true), 601), Ok(JobState::DeadLetter));
        assert_eq!(j.error.as_deref(), Some("503"));
    }

    #[test]
    fn uncounted_failures_give_the_attempt_back_and_never_fail_permanently() {
        let mut j = job(1);
        for round in 0..5 {
            let t = lease(&mut j, "w", round * 100, 10);
            assert_eq!(fail(&mut j, t, &retry(10, false), round * 100 + 1), Ok(JobState::Delayed));
            assert_eq!(j.attempts, 0);
            ready(&mut j);
        }
        let t = lease(&mut j, "w", 1000, 10);
        let never = Failure { error: "400".into(), retry: Retry::Never };
        assert_eq!(fail(&mut j, t, &never, 1001), Ok(JobState::Failed));
    }

    #[test]
    fn only_jobs_not_started_are_cancelled() {
        let mut j = job(1);
        let t = lease(&mut j, "w", 0, 10);
        assert!(!cancel(&mut j));
        assert_eq!(fail(&mut j, t, &retry(10, false), 1), Ok(JobState::Delayed));
        assert!(cancel(&mut j));
        assert_eq!((j.state, j.error.as_deref()), (JobState::Failed, Some(CANCELLED)));
        assert!(!cancel(&mut j));
    }

    #[test]
    fn recovering_the_last_attempt_dead_letters() {
        let mut j = job(1);
        let _ = lease(&mut j, "w", 0, 10);
        assert_eq!(recover(&mut j), JobState::DeadLetter);
        assert!(j.error.as_deref().unwrap_or_default().contains("lease expired"));
    }
}
