//! What a job is: its identity, its request, its owner and where it stands.

use std::fmt;

use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// A job's public id: `job_` and 24 hex digits (96 random bits).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobId(pub String);

impl JobId {
    /// A new random id.
    #[must_use]
    pub fn random() -> Self {
        Self(format!("job_{:024x}", rand::rng().random::<u128>() >> 32))
    }

    /// Whether `text` looks like a job id (so arbitrary path segments never reach a store).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix("job_")?;
        (hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Self(text.to_owned()))
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The endpoint a job's request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endpoint {
    /// OpenAI `/v1/chat/completions`.
    ChatCompletions,
    /// Anthropic `/v1/messages`.
    Messages,
}

impl Endpoint {
    /// The HTTP path.
    #[must_use]
    pub const fn path(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/v1/chat/completions",
            Self::Messages => "/v1/messages",
        }
    }

    /// The endpoint of `path`, if jobs may use it.
    #[must_use]
    pub fn from_path(path: &str) -> Option<Self> {
        [Self::ChatCompletions, Self::Messages].into_iter().find(|e| e.path() == path)
    }
}

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Ready to be leased.
    Queued,
    /// Waiting for its `not_before` after a failed attempt.
    Delayed,
    /// Leased by a worker.
    Running,
    /// Done; the provider's answer is stored.
    Completed,
    /// Failed for good (a non-retryable error).
    Failed,
    /// Retryable failures exhausted the class's attempts (or the lease expired on the last one).
    DeadLetter,
}

impl JobState {
    /// The snake_case name, as stored in Redis.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Delayed => "delayed",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::DeadLetter => "dead_letter",
        }
    }

    /// The state named `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Queued, Self::Delayed, Self::Running, Self::Completed, Self::Failed, Self::DeadLetter]
            .into_iter()
            .find(|s| s.as_str() == name)
    }

    /// Whether the job will never change again.
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::DeadLetter)
    }
}

/// The provider's answer to a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobResult {
    /// The HTTP status.
    pub status: u16,
    /// The body (JSON text).
    pub body: String,
}

/// A job to submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// Its id (unless the idempotency key names an existing job).
    pub id: JobId,
    /// The owner's tenant.
    pub tenant: String,
    /// The submitting key's id.
    pub key_id: String,
    /// The client's `Idempotency-Key`, unique per tenant.
    pub idempotency_key: Option<String>,
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The request body (JSON text).
    pub body: String,
    /// The traffic class it runs in.
    pub class: String,
    /// Lower is leased first.
    pub priority: u8,
    /// Attempts before the dead letter.
    pub max_attempts: u32,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// The owner's tenant.
    pub tenant: String,
    /// The submitting key's id.
    pub key_id: String,
    /// The client's `Idempotency-Key`.
    pub idempotency_key: Option<String>,
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The request body (JSON text).
    pub body: String,
    /// The traffic class.
    pub class: String,
    /// Lower is leased first.
    pub priority: u8,
    /// Attempts before the dead letter.
    pub max_attempts: u32,
    /// Where it stands.
    pub state: JobState,
    /// Attempts counted so far (an attempt refused before sending is not counted).
    pub attempts: u32,
    /// The token of the latest lease: every lease gets a new one, so a worker whose lease
    /// was lost can no longer record anything.
    pub lease: u64,
    /// Submission order (ties between equal priorities).
    pub seq: u64,
    /// While delayed: not before this store time (ms).
    pub not_before: u64,
    /// While running: the lease ends at this store time (ms) unless renewed.
    pub lease_until: u64,
    /// Times the job was run again after a lease expired while running (a worker or its
    /// process died): the provider may have answered the lost attempt too.
    pub reruns: u32,
    /// The worker holding or last holding the lease.
    pub worker: String,
    /// The provider's answer, once completed.
    pub result: Option<JobResult>,
    /// Why it failed, once failed or dead-lettered (the last error while delayed).
    pub error: Option<String>,
}

impl Job {
    /// A newly submitted job, queued, number `seq` in submission order.
    #[must_use]
    pub fn new(new: NewJob, seq: u64) -> Self {
        Self {
            id: new.id,
            tenant: new.tenant,
            key_id: new.key_id,
            idempotency_key: new.idempotency_key,
            endpoint: new.endpoint,
            body: new.body,
            class: new.class,
            priority: new.priority,
            max_attempts: new.max_attempts,
            state: JobState::Queued,
            attempts: 0,
            lease: 0,
            seq,
            not_before: 0,
            lease_until: 0,
            reruns: 0,
            worker: String::new(),
            result: None,
            error: None,
        }
    }
}

/// How a failed attempt continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Not at all: the job fails (a 4xx, a request that never fits).
    Never,
    /// After `delay_ms`; `counted` attempts go toward the class's maximum (an attempt the
    /// gateway refused before sending is not counted).
    After {
        /// Delay from now, in ms.
        delay_ms: u64,
        /// Whether the attempt counts toward `max_attempts`.
        counted: bool,
    },
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong (shown to the owner).
    pub error: String,
    /// Whether and when to try again.
    pub retry: Retry,
}

/// A job a worker now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// The job, as leased (state `running`).
    pub job: Job,
    /// The lease token to renew, complete or fail it with.
    pub token: u64,
}

/// What one `lease_next` call did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseOutcome {
    /// The job leased, if any was ready.
    pub leased: Option<Leased>,
    /// Running jobs whose lease had expired and that were queued again (uncertain reruns).
    pub recovered: u32,
    /// Of those, jobs that had no attempts left and went to the dead letter.
    pub recovered_dead: u32,
}

/// A submission's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The job (the existing one when the idempotency key was known).
    pub job: Job,
    /// Whether this call created it.
    pub created: bool,
}

/// How many jobs are in each non-terminal state, and in the dead letter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Ready to run.
    pub queued: u64,
    /// Waiting for a retry.
    pub delayed: u64,
    /// Leased.
    pub running: u64,
    /// In the dead letter.
    pub dead_letter: u64,
}
