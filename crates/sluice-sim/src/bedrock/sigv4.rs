//! SigV4 verification as Bedrock does it: the signature is computed again from the
//! request as received, with the maintained `aws-sigv4` crate, for the key the
//! `Authorization` header names, at the time its `x-amz-date` says.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_types::date_time::{DateTime, Format};
use http::{HeaderMap, Uri};

/// The access key id the simulated provider knows.
pub const SIM_ACCESS_KEY_ID: &str = "AKIDSLUICESIMULATED";
/// Its secret.
pub const SIM_SECRET_ACCESS_KEY: &str = "sluice-simulated-secret-access-key";

/// Why a request is not authenticated, in AWS's own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No (readable) `Authorization` header or `x-amz-date`.
    Missing,
    /// An access key the simulator does not know.
    UnknownKey,
    /// The signature does not match.
    BadSignature,
}

impl Denied {
    /// `x-amzn-ErrorType` and the message AWS answers with.
    #[must_use]
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Missing => ("MissingAuthenticationTokenException", "Missing Authentication Token"),
            Self::UnknownKey => {
                ("UnrecognizedClientException", "The security token included in the request is invalid.")
            }
            Self::BadSignature => (
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
            ),
        }
    }
}

/// The parts of an `Authorization: AWS4-HMAC-SHA256 …` header.
struct Authorization<'a> {
    key_id: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn parse(value: &str) -> Option<Authorization<'_>> {
    let rest = value.strip_prefix("AWS4-HMAC-SHA256")?.trim();
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',').map(str::trim) {
        match part.split_once('=')? {
            ("Credential", v) => credential = Some(v),
            ("SignedHeaders", v) => signed = Some(v),
            ("Signature", v) => signature = Some(v),
            _ => {}
        }
    }
    let mut scope = credential?.split('/');
    let key_id = scope.next()?;
    let (_date, region, service) = (scope.next()?, scope.next()?, scope.next()?);
    Some(Authorization { key_id, region, service, signed_headers: signed?.split(';').collect(), signature: signature? })
}

/// `20261201T180000Z` as a time.
fn amz_date(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if !text.is_ascii() || b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &text[0..4],
        &text[4..6],
        &text[6..8],
        &text[9..11],
        &text[11..13],
        &text[13..15]
    );
    SystemTime::try_from(DateTime::from_str(&iso, Format::DateTime).ok()?).ok()
}

/// Checks the request's SigV4 signature (`uri` as received, `body` as received).
///
/// # Errors
/// Why the request is refused.
pub fn verify(headers: &HeaderMap, uri: &Uri, body: &[u8]) -> Result<(), Denied> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let auth = text("authorization").and_then(parse).ok_or(Denied::Missing)?;
    let time = text("x-amz-date").and_then(amz_date).ok_or(Denied::Missing)?;
    if auth.key_id != SIM_ACCESS_KEY_ID {
        return Err(Denied::UnknownKey);
    }
    let token = text("x-amz-security-token").map(str::to_owned);
    let identity = Credentials::new(SIM_ACCESS_KEY_ID, SIM_SECRET_ACCESS_KEY, token, None, "sim").into();
    let mut settings = SigningSettings::default();
    settings.excluded_headers = None;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(auth.region)
        .name(auth.service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|_| Denied::BadSignature)?
        .into();
    // The signer adds host, x-amz-date and the session token itself.
    let own = ["host", "x-amz-date", "x-amz-security-token"];
    let signed: Vec<(&str, &str)> = auth
        .signed_headers
        .iter()
        .filter(|name| !own.contains(name))
        .filter_map(|name| Some((*name, text(name)?)))
        .collect();
    let url =
        format!("http://{}{}", text("host").unwrap_or("localhost"), uri.path_and_query().map_or("/", |p| p.as_str()));
    let request = SignableRequest::new("POST", url, signed.into_iter(), SignableBody::Bytes(body))
        .map_err(|_| Denied::BadSignature)?;
    let (_, signature) = sign(request, &params).map_err(|_| Denied::BadSignature)?.into_parts();
    if signature == auth.signature { Ok(()) } else { Err(Denied::BadSignature) }
}
