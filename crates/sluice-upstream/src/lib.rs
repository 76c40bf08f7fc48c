//! The provider seam of sluice: everything that touches a provider's wire except the
//! decision to send. [`client`] is the HTTP client toward providers (pooled keep-alive
//! connections, rustls, a bounded body read, an optional `CONNECT` proxy from [`proxy`]);
//! [`providers`] answers, for each kind of upstream, where a request goes, how it is
//! authenticated and signed, and how its body, answer, errors and stream are put in and
//! taken out of the provider's wire shape ([`google`]: Gemini's native API and Vertex AI);
//! it reads a deployment as a [`Target`].
//! [`secret`] holds provider credentials (keys from the environment or files, Bearer
//! token files re-read as they rotate, AWS keys for SigV4, Google service accounts minting
//! OAuth tokens), never printed; [`scrub`] takes anything credential-like out of provider
//! text before a tenant reads it.
//!
//! Nothing here admits, queues or settles: the gateway's road calls in with a request it
//! already decided to send.

pub mod client;
pub mod google;
pub mod providers;
pub mod proxy;
pub mod scrub;
pub mod secret;
pub mod target;

pub use client::{BodyError, Reach, Upstream, UpstreamError, Wired};
pub use proxy::Proxy;
pub use secret::{Credential, ProviderKey, SecretError};
pub use target::Target;
