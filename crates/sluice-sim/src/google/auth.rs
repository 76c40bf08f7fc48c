//! Google's credentials as the simulator checks them: Gemini API keys (`x-goog-api-key`),
//! and OAuth access tokens it issues itself at `POST /token` for a JWT bearer assertion
//! signed (RS256) by a configured service account, as Google's token endpoint does.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use parking_lot::Mutex;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use serde::Deserialize;
use serde_json::Value;

/// The grant type of a service-account assertion.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// What Google's credentials look like to the simulator (`[google]` in its config).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GoogleConfig {
    /// Gemini API keys accepted; empty: any non-empty key.
    #[serde(default)]
    pub api_keys: Vec<String>,
    /// Service accounts whose assertions `/token` accepts.
    #[serde(default)]
    pub service_accounts: Vec<ServiceAccount>,
    /// Lifetime of an issued access token, seconds (default 3600).
    #[serde(default)]
    pub token_ttl_secs: Option<u64>,
    /// Requests per minute of each Vertex project and region, shared by its models.
    #[serde(default)]
    pub vertex_rpm: Option<u64>,
}

/// A service account: its email (the assertion's `iss`) and its public key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccount {
    /// `client_email` of the key file.
    pub client_email: String,
    /// The public key, PEM `RSA PUBLIC KEY` (PKCS#1).
    pub public_key_pem: String,
}

/// Issued tokens and the configuration they are checked against.
#[derive(Debug, Default)]
pub struct Auth {
    config: GoogleConfig,
    /// Access token → expiry, simulated-clock Unix seconds.
    issued: Mutex<HashMap<String, u64>>,
}

/// Why a token request or a call was refused, in Google's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub &'static str);

impl Auth {
    /// The checker of `config`.
    #[must_use]
    pub fn new(config: GoogleConfig) -> Self {
        Self { config, issued: Mutex::new(HashMap::new()) }
    }

    /// Whether `key` is a Gemini API key the simulator accepts.
    #[must_use]
    pub fn key_ok(&self, key: Option<&str>) -> bool {
        let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else { return false };
        self.config.api_keys.is_empty() || self.config.api_keys.iter().any(|k| k == key)
    }

    /// Whether `token` is one this simulator issued and that is still valid at `now`.
    #[must_use]
    pub fn token_ok(&self, token: Option<&str>, now: u64) -> bool {
        token.is_some_and(|t| self.issued.lock().get(t).is_some_and(|expiry| now < *expiry))
    }

    /// How many tokens were issued.
    #[must_use]
    pub fn issued(&self) -> usize {
        self.issued.lock().len()
    }

    /// A token for a form-encoded JWT bearer grant, checked at `now`: `(token, lifetime)`.
    ///
    /// # Errors
    /// The `error_description` of Google's `invalid_grant` answer.
    pub fn grant(&self, form: &str, now: u64, serial: &str) -> Result<(String, u64), Refused> {
        let field = |name: &str| {
            form.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('=')).map(percent_decode)
        };
        if field("grant_type").as_deref() != Some(JWT_BEARER) {
            return Err(Refused("Invalid grant_type"));
        }
        let assertion = field("assertion").ok_or(Refused("Missing assertion"))?;
        let claims = self.verify(&assertion)?;
        let number = |k: &str| claims.get(k).and_then(Value::as_u64);
        let (Some(iat), Some(exp)) = (number("iat"), number("exp")) else {
            return Err(Refused("Invalid JWT: missing iat or exp"));
        };
        if exp <= now || iat > now + 60 || exp > iat + 3_600 {
            return Err(Refused(
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe",
            ));
        }
        if claims.get("scope").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(Refused("Invalid JWT: no scope"));
        }
        let ttl = self.config.token_ttl_secs.unwrap_or(3_600);
        let token = format!("ya29.sim-{serial}");
        self.issued.lock().insert(token.clone(), now + ttl);
        Ok((token, ttl))
    }

    /// The claims of an assertion whose RS256 signature a configured account's key checks.
    fn verify(&self, assertion: &str) -> Result<Value, Refused> {
        let mut pieces = assertion.split('.');
        let (Some(head), Some(body), Some(signature), None) =
            (pieces.next(), pieces.next(), pieces.next(), pieces.next())
        else {
            return Err(Refused("Invalid JWT: not header.claims.signature"));
        };
        let json = |piece: &str| -> Option<Value> { serde_json::from_slice(&URL_SAFE_NO_PAD.decode(piece).ok()?).ok() };
        let (Some(header), Some(claims)) = (json(head), json(body)) else {
            return Err(Refused("Invalid JWT: not JSON"));
        };
        if header.get("alg").and_then(Value::as_str) != Some("RS256") {
            return Err(Refused("Invalid JWT: alg must be RS256"));
        }
        let iss = claims.get("iss").and_then(Value::as_str).unwrap_or_default();
        let account = self.config.service_accounts.iter().find(|a| a.client_email == iss);
        let key = account.and_then(|a| pem_der(&a.public_key_pem)).ok_or(Refused("Invalid JWT Signature."))?;
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| Refused("Invalid JWT Signature."))?;
        let signed = format!("{head}.{body}");
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key)
            .verify(signed.as_bytes(), &signature)
            .map_err(|_| Refused("Invalid JWT Signature."))?;
        Ok(claims)
    }
}

/// The DER inside a PEM block.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    STANDARD.decode(body).ok()
}

/// `application/x-www-form-urlencoded` value decoding (`+` and `%XX`).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let (mut out, mut i) = (Vec::with_capacity(bytes.len()), 0);
    while let Some(&b) = bytes.get(i) {
        let hex = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        let (byte, width) = match (b, hex) {
            (_, Some(byte)) => (byte, 3),
            (b'+', None) => (b' ', 1),
            (other, None) => (other, 1),
        };
        out.push(byte);
        i += width;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    fn jwt(header: &str, claims: &str) -> String {
        format!("{}.{}.c2ln", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims))
    }

    fn form(assertion: &str) -> String {
        format!("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}")
    }

    #[test]
    fn assertions_without_a_verified_signature_get_no_token() {
        let auth = Auth::new(GoogleConfig::default());
        let claims = r#"{"iss":"sa@p.iam.gserviceaccount.com","scope":"s","iat":100,"exp":200}"#;
        let refused = |form: &str| auth.grant(form, 150, "t").unwrap_err().0;
        assert_eq!(refused("grant_type=client_credentials"), "Invalid grant_type");
        assert_eq!(refused(&form("not-a-jwt")), "Invalid JWT: not header.claims.signature");
        assert_eq!(refused(&form(&jwt(r#"{"alg":"none"}"#, claims))), "Invalid JWT: alg must be RS256");
        assert_eq!(refused(&form(&jwt(r#"{"alg":"RS256"}"#, claims))), "Invalid JWT Signature.", "unknown account");
        assert_eq!(auth.issued(), 0);
        assert!(!auth.token_ok(Some("ya29.sim-guess"), 150));
    }

    #[test]
    fn keys_and_form_values_are_read_as_google_does() {
        let open = Auth::new(GoogleConfig::default());
        assert!(open.key_ok(Some("anything")) && !open.key_ok(Some(" ")) && !open.key_ok(None));
        let strict = Auth::new(GoogleConfig { api_keys: vec!["AIza-1".into()], ..GoogleConfig::default() });
        assert!(strict.key_ok(Some("AIza-1")) && !strict.key_ok(Some("AIza-2")));
        assert_eq!(percent_decode("a%3Ab+c%2"), "a:b c%2");
    }
}
