//! Failures below HTTP: the call died before (or while) a response came back.
//!
//! What matters for a retry is how far the request got (SPEC §5, "timeouts differ"):
//! - [`Phase::Connect`]: no connection, so nothing was sent — the provider never saw the
//!   request. Always safe to retry, here or elsewhere.
//! - [`Phase::BeforeHeaders`]: the request was sent, no response head came back. The
//!   provider may have run (and billed) it: the outcome is *uncertain*. Repeat only an
//!   idempotent operation — one whose operation log shows it did not complete, or whose
//!   idempotency key lets the provider or sluice deduplicate — preferring the same
//!   deployment.
//! - [`Phase::Streaming`]: the response had started, so the provider did the work; a
//!   repeat would bill twice and could splice two answers. Never retried transparently:
//!   the client gets an interruption event and usage is settled from what was seen.

use super::class::{ErrorClass, Phase};

/// A transport failure as the HTTP client reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportFailure {
    /// Connection refused or unreachable, DNS or TLS handshake failure.
    ConnectRefused,
    /// The connect timeout elapsed.
    ConnectTimeout,
    /// The connection was reset or closed after the request was sent, before a response head.
    ResetBeforeHeaders,
    /// The timeout for the response head elapsed.
    TimeoutBeforeHeaders,
    /// The connection was reset or closed while the body or stream was being read.
    ResetWhileStreaming,
    /// The stream went idle past its timeout, or the total timeout elapsed mid-body.
    TimeoutWhileStreaming,
}

/// The class of a transport failure; see the module docs for what each phase permits.
///
/// ```
/// use sluice_provider::{TransportFailure, classify_transport};
///
/// assert!(classify_transport(TransportFailure::ConnectTimeout).retryable());
/// let unsure = classify_transport(TransportFailure::TimeoutBeforeHeaders);
/// assert!(unsure.uncertain() && !unsure.retryable() && unsure.may_retry(true));
/// ```
#[must_use]
pub const fn classify_transport(failure: TransportFailure) -> ErrorClass {
    match failure {
        TransportFailure::ConnectRefused => ErrorClass::ConnectionReset { phase: Phase::Connect },
        TransportFailure::ConnectTimeout => ErrorClass::Timeout { phase: Phase::Connect },
        TransportFailure::ResetBeforeHeaders => ErrorClass::ConnectionReset { phase: Phase::BeforeHeaders },
        TransportFailure::TimeoutBeforeHeaders => ErrorClass::Timeout { phase: Phase::BeforeHeaders },
        TransportFailure::ResetWhileStreaming => ErrorClass::ConnectionReset { phase: Phase::Streaming },
        TransportFailure::TimeoutWhileStreaming => ErrorClass::Timeout { phase: Phase::Streaming },
    }
}
