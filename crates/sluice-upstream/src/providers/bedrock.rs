//! AWS Bedrock on the provider seam: the Converse URL of a deployment, the SigV4 signature
//! (the maintained `aws-sigv4` crate; the keys never leave it), and the wire conversion
//! between the Anthropic shape the request road speaks and Converse (bodies, errors and
//! the event stream).

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http_body_util::Full;
use sluice_config::BedrockSurface;

use crate::secret::AwsKeys;

/// The service name requests to Bedrock's runtime are signed for.
const SERVICE: &str = "bedrock";

/// `{base_url}/model/{model}/converse` (or `converse-stream`; `invoke`,
/// `invoke-with-response-stream` on InvokeModel), the model id percent-encoded as AWS's
/// SDKs send it (`:` is `%3A`).
#[must_use]
pub fn url(base: &str, model: &str, surface: BedrockSurface, stream: bool) -> String {
    let action = match (surface, stream) {
        (BedrockSurface::Converse, false) => "converse",
        (BedrockSurface::Converse, true) => "converse-stream",
        (BedrockSurface::InvokeModel, false) => "invoke",
        (BedrockSurface::InvokeModel, true) => "invoke-with-response-stream",
    };
    format!("{base}/model/{}/{action}", encode_segment(model))
}

fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Signs `request` (its `body` as sent) for `region` at `unix_millis`: adds
/// `authorization`, `x-amz-date` and, for a role's session, `x-amz-security-token`.
///
/// # Errors
/// What the signer could not do (a URI or header it cannot read), in words without secrets.
pub fn sign_request(
    request: &mut http::Request<Full<Bytes>>,
    body: &[u8],
    keys: &AwsKeys,
    region: &str,
    unix_millis: u64,
) -> Result<(), &'static str> {
    let identity = keys.credentials().into();
    let time = SystemTime::UNIX_EPOCH + Duration::from_millis(unix_millis);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|_| "incomplete signing parameters")?
        .into();
    let uri = request.uri().to_string();
    let content_type = [("content-type", "application/json")];
    let signable = SignableRequest::new("POST", uri, content_type.into_iter(), SignableBody::Bytes(body))
        .map_err(|_| "a URI the signer cannot read")?;
    let (instructions, _signature) =
        sign(signable, &params).map_err(|_| "the signer refused the request")?.into_parts();
    instructions.apply_to_request_http1x(request);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_id_is_percent_encoded_in_the_converse_path() {
        let base = "https://bedrock-runtime.us-east-1.amazonaws.com";
        let url = url(base, "us.anthropic.claude-sonnet-4-20250514-v1:0", BedrockSurface::Converse, true);
        assert_eq!(
            url,
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
        );
        assert!(super::url("http://h", "a/b", BedrockSurface::Converse, false).ends_with("/model/a%2Fb/converse"));
        let invoke = super::url("http://h", "m", BedrockSurface::InvokeModel, true);
        assert!(invoke.ends_with("/model/m/invoke-with-response-stream"));
    }
}
