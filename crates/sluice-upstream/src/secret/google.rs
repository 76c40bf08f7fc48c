//! OAuth access tokens minted from a Google service-account key file (Vertex AI): a JWT
//! signed RS256 with the account's key is exchanged at the key's `token_uri` (the JWT
//! bearer grant, RFC 7523) for an access token, kept until five minutes before it expires.
//!
//! `ring` (already linked for TLS) signs the assertion: the Google auth crates bring a
//! second HTTP client and credential discovery the gateway does not want, and the token
//! request goes through the gateway's own upstream client. The `token_uri` comes from the
//! key file, so a test (or the simulator) can mint tokens offline.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::HeaderValue;
use http_body_util::Full;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject as _;
use serde::Deserialize;
use serde_json::json;

use super::{ProviderKey, SecretError};
use crate::client::{self, Upstream};

/// The scope Vertex AI calls need.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// How long a minted assertion asks the token to live (Google's maximum).
const ASSERTION_LIFETIME_SECS: u64 = 3_600;
/// A token this close to its expiry is replaced before use.
pub const REFRESH_MARGIN_SECS: u64 = 300;
/// Longest wait for the token endpoint.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest token answer read.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;

/// The fields of a service-account key file the grant needs.
#[derive(Deserialize)]
struct KeyFile {
    client_email: String,
    private_key: String,
    private_key_id: Option<String>,
    token_uri: String,
}

/// A service account's signing key and its current access token.
pub struct ServiceAccount {
    email: String,
    token_uri: String,
    key_id: Option<String>,
    key: RsaKeyPair,
    held: parking_lot::Mutex<Option<Minted>>,
    /// One mint at a time: requests arriving meanwhile wait for its token.
    minting: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Minted {
    key: ProviderKey,
    expires_unix: u64,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount").field("email", &self.email).finish_non_exhaustive()
    }
}

/// Why no token could be minted (never the token or the key in the text).
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// The token endpoint could not be reached or did not answer in time.
    #[error("the token endpoint could not be reached")]
    Unreachable,
    /// The token endpoint refused the assertion.
    #[error("the token endpoint refused the service account ({0})")]
    Refused(u16),
    /// The answer held no access token, or the assertion could not be signed.
    #[error("no access token could be minted: {0}")]
    Broken(&'static str),
}

impl ServiceAccount {
    /// Reads and checks the key file at `path` (no token is minted yet).
    ///
    /// # Errors
    /// When the file is missing, is not a service-account key, or its key is no RSA key.
    pub fn open(provider: &str, path: &str) -> Result<Self, SecretError> {
        let bad = |reason: &'static str| SecretError::BadServiceAccount {
            provider: provider.to_owned(),
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read(path).map_err(|_| bad("it could not be read"))?;
        let file: KeyFile = serde_json::from_slice(&text).map_err(|_| bad("it is not a service-account key (JSON)"))?;
        let der = PrivatePkcs8KeyDer::from_pem_slice(file.private_key.as_bytes())
            .map_err(|_| bad("private_key is not a PEM PKCS#8 key"))?;
        let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).map_err(|_| bad("private_key is not an RSA key"))?;
        let token_uri = file.token_uri;
        let (email, key_id) = (file.client_email, file.private_key_id);
        let (held, minting) = (parking_lot::Mutex::new(None), tokio::sync::Mutex::new(()));
        Ok(Self { email, token_uri, key_id, key, held, minting })
    }

    /// The current token as `Bearer …`, if one was minted.
    #[must_use]
    pub fn current(&self) -> Option<ProviderKey> {
        self.held.lock().as_ref().map(|m| m.key.clone())
    }

    fn fresh(&self, now_unix: u64) -> bool {
        self.held.lock().as_ref().is_some_and(|m| now_unix.saturating_add(REFRESH_MARGIN_SECS) < m.expires_unix)
    }

    /// Mints a token through `upstream` unless the held one is good for more than the
    /// margin at `now_unix`.
    ///
    /// # Errors
    /// When the token endpoint is unreachable, refuses, or answers without a token.
    pub async fn refresh(&self, upstream: &Upstream, now_unix: u64) -> Result<(), MintError> {
        if self.fresh(now_unix) {
            return Ok(());
        }
        let _one = self.minting.lock().await;
        if self.fresh(now_unix) {
            return Ok(());
        }
        let minted = self.mint(upstream, now_unix).await?;
        *self.held.lock() = Some(minted);
        Ok(())
    }

    async fn mint(&self, upstream: &Upstream, now_unix: u64) -> Result<Minted, MintError> {
        let assertion = self.assertion(now_unix)?;
        let form = format!("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}");
        let request = http::Request::post(&self.token_uri)
            .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from(form)))
            .map_err(|_| MintError::Broken("the key file's token_uri is not a URL"))?;
        let response = upstream.send(request, TOKEN_TIMEOUT).await.map_err(|_| MintError::Unreachable)?;
        let status = response.status();
        let deadline = tokio::time::Instant::now() + TOKEN_TIMEOUT;
        let body = client::read_body(response.into_body(), MAX_TOKEN_ANSWER, tokio::time::sleep_until(deadline))
            .await
            .map_err(|_| MintError::Unreachable)?;
        if !status.is_success() {
            return Err(MintError::Refused(status.as_u16()));
        }
        token_of(&body, now_unix)
    }

    /// The signed JWT: `{header}.{claims}.{RS256 signature}`, base64url without padding.
    fn assertion(&self, now_unix: u64) -> Result<String, MintError> {
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": self.key_id});
        let claims = json!({
            "iss": self.email, "scope": SCOPE, "aud": self.token_uri,
            "iat": now_unix, "exp": now_unix + ASSERTION_LIFETIME_SECS,
        });
        let encode = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let signed = format!("{}.{}", encode(&header), encode(&claims));
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), signed.as_bytes(), &mut signature)
            .map_err(|_| MintError::Broken("the assertion could not be signed"))?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// The token of a token endpoint's answer, expiring `expires_in` after `now_unix`.
fn token_of(body: &[u8], now_unix: u64) -> Result<Minted, MintError> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: String,
        expires_in: Option<u64>,
    }
    let answer: Answer =
        serde_json::from_slice(body).map_err(|_| MintError::Broken("the answer held no access_token"))?;
    let mut value = HeaderValue::from_str(&format!("Bearer {}", answer.access_token.trim()))
        .map_err(|_| MintError::Broken("the access token is not a header value"))?;
    value.set_sensitive(true);
    let expires_unix = now_unix.saturating_add(answer.expires_in.unwrap_or(ASSERTION_LIFETIME_SECS));
    Ok(Minted { key: ProviderKey(value), expires_unix })
}
