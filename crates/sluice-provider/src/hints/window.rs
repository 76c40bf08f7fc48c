//! One rate-limit dimension as a provider reports it ([`Window`]), and the longest reset or
//! delay taken from a provider ([`MAX_HINT_DURATION`]): what the header and body readers
//! build on.

use std::time::Duration;

/// The longest reset or delay taken from a provider; longer values are dropped as garbage.
pub const MAX_HINT_DURATION: Duration = Duration::from_secs(86_400);

/// One rate-limit dimension as the provider reports it after a response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// The provider's limit for this dimension (per minute for OpenAI and Anthropic).
    pub limit: Option<u64>,
    /// What the provider says is left, never above `limit`.
    pub remaining: Option<u64>,
    /// How far the truth may be from `remaining`: 0 when exact, 500 for Anthropic token
    /// counts (rounded to the nearest thousand). Tighten local state to
    /// `remaining + remaining_error` to never undercut the provider by rounding alone.
    pub remaining_error: u64,
    /// Time from the response until the window is fully replenished.
    pub reset: Option<Duration>,
}
