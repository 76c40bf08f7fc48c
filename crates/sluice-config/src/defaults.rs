//! Named defaults for everything the file may leave out.

use std::time::Duration;

/// Listen address.
pub const LISTEN: &str = "127.0.0.1:8080";
/// The admin listener's port (on loopback by default).
pub const ADMIN_PORT: u16 = 9090;
/// Largest request body: 4 MiB (prompts with images fit; a 10 MB body does not).
pub const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;
/// Time allowed for an upstream attempt (with `attempt_timeout`, the shorter wins).
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// Time allowed to connect upstream.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Reservation lease: a call that never reports back is refunded after this.
pub const LEASE: Duration = Duration::from_secs(660);
/// Grace period for in-flight requests at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Output reservation when a client sends no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u64 = 4_096;
/// Input tokens reserved for the earlier turns a Responses request's `previous_response_id`
/// or `conversation` makes the provider add (the gateway cannot see them; settled exactly).
pub const CONTEXT_RESERVE_TOKENS: u64 = 8_192;
/// The OpenAI endpoints beyond chat, Responses and embeddings a profile serves when its
/// `passthrough` is left out: legacy completions (admitted on tokens, like chat) and
/// moderations (one request). Images, audio and the rest must be listed.
pub const PASSTHROUGH: [crate::Passthrough; 2] = [crate::Passthrough::Completions, crate::Passthrough::Moderations];
/// Input estimate factor for families without an exact local tokenizer.
pub const APPROX_SAFETY_FACTOR: f64 = 1.1;
/// How much of a per-minute rate a provider-facing scope (a deployment, a provider account
/// or region) passes at once when its `burst_seconds` is left out: one second's worth, the
/// shortest window a major provider documents enforcing a per-minute limit over, so that
/// sluice's own bursts never earn a provider 429.
pub const PROVIDER_BURST: Duration = Duration::from_secs(sluice_quota::limit::DEFAULT_BURST_SECONDS);
/// How much of a per-minute rate a caller scope (the org, a tenant, team, API key or model
/// profile) passes at once when its `burst_seconds` is left out: the whole minute. A caller's
/// limit is a promise over its window, not a provider's short window, so a team with
/// 20,000 TPM may send one 15,000-token request at once; per-day limits use the day.
pub const CALLER_BURST: Duration = Duration::from_secs(60);
/// The class of keys that name none.
pub const CLASS: &str = "interactive";
/// The longest an interactive request waits for capacity.
pub const INTERACTIVE_MAX_WAIT: Duration = Duration::from_secs(2);
/// The part of shared bursts (org, model profile, account, deployment) a class below the
/// highest priority may use when it names no `share`, in thousandths: a batch flood leaves
/// a quarter of every short provider window to the classes above it, so their requests
/// never wait behind it, while a lower class alone still gets the whole rate (a bucket
/// refills at its full rate whoever uses it).
pub const LOWER_CLASS_SHARE_PERMILLE: u16 = 750;
/// Key prefix in Redis.
pub const REDIS_PREFIX: &str = "sluice";
/// Bound on each Redis call: admission must stay fast even when Redis is not.
pub const STORE_TIMEOUT: Duration = Duration::from_millis(250);
/// Most requests of a class waiting per deployment.
pub const MAX_QUEUE: u64 = 10_000;
/// Attempts of an async job before it goes to the dead letter.
pub const MAX_ATTEMPTS: u64 = 5;
/// The embedded job store's file, relative to the working directory.
pub const JOBS_PATH: &str = "sluice-jobs.redb";
/// Job workers per instance.
pub const JOB_WORKERS: u64 = 4;
/// Largest file accepted by `POST /v1/files` (50 MiB).
pub const MAX_FILE_BYTES: u64 = 50 << 20;
/// Bytes of stored files (uploads and batch results) one tenant may keep (1 GiB).
pub const MAX_TENANT_FILE_BYTES: u64 = 1 << 30;
/// Most requests in one batch's input file.
pub const MAX_BATCH_LINES: u64 = 50_000;
/// How long a leased job stays invisible without a heartbeat.
pub const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);
/// Time one upstream attempt may take (to its headers; non-stream: to its last byte)
/// before it counts as hung.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest silence between two pieces of a streamed answer before it counts as stalled.
pub const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stream whose client left is read on for the provider's final usage.
pub const STREAM_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `stream_drain_timeout` accepted: a drained stream holds its concurrency
/// slot and an upstream connection.
pub const MAX_STREAM_DRAIN_TIMEOUT: Duration = Duration::from_secs(600);
/// Consecutive failures that open a deployment's breaker.
pub const BREAKER_FAILURES: u32 = 5;
/// How long an open breaker holds a deployment back.
pub const BREAKER_COOLDOWN: Duration = Duration::from_secs(10);
/// Upstream attempts of one live request, first included.
pub const RETRY_ATTEMPTS: u32 = 3;
/// Time a live request may spend on retries.
pub const RETRY_WITHIN: Duration = Duration::from_secs(8);
/// How long completed operations are remembered for idempotency.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a repeat waits for the same operation in flight.
pub const IDEMPOTENCY_WAIT: Duration = Duration::from_secs(30);
/// How long a request body may take to arrive before the deadline's extension for what
/// it has sent (see [`BODY_MIN_RATE`]); then `408` and the connection is closed.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes per second a body must keep up, on average, once [`BODY_READ_TIMEOUT`] has
/// passed: every `BODY_MIN_RATE` bytes received extend the deadline by one second.
pub const BODY_MIN_RATE: u64 = 8 * 1024;
/// Most client connections open at once, per process (also kept below the file-descriptor
/// limit at start).
pub const MAX_CONNECTIONS: u64 = 10_000;
/// Most client connections open at once from one peer address (at most `max_connections`):
/// a tenth of the process cap, so one address cannot take every connection. One client
/// rarely needs more (an HTTP/2 connection carries 256 requests at once); a load balancer
/// in front, whose address every client shares, may, and is set higher.
pub const MAX_CONNECTIONS_PER_PEER: u64 = 1_000;
/// The price tables' currency.
pub const CURRENCY: &str = "USD";
/// Days a daily usage rollup is kept: a year and a month, so last year's same month can
/// still be compared.
pub const USAGE_RETENTION_DAYS: u64 = 400;
/// How often each instance writes its counted usage to the store.
pub const USAGE_FLUSH_INTERVAL: Duration = Duration::from_secs(1);
