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

/// Headers left out of the signature: botocore's unsigned list (`user-agent`, `expect`,
/// `x-amzn-trace-id`), the trace context, and the signature's own header.
const UNSIGNED: [&str; 5] = ["user-agent", "expect", "x-amzn-trace-id", "traceparent", "authorization"];

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
    // Every header the request carries is signed, as botocore signs every header it sends
    // but `user-agent`, `expect` and `x-amzn-trace-id` (InvokeModel's `accept` and
    // `x-amzn-bedrock-accept` among them; SigV4 signs `host`, `x-amz-*` and any others the
    // signer lists, <https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html>).
    // sluice's `traceparent` is left out like botocore's trace header: a proxy may rewrite it.
    let signed: Vec<(&str, &str)> = request
        .headers()
        .iter()
        .filter(|(name, _)| !UNSIGNED.contains(&name.as_str()))
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let signable = SignableRequest::new("POST", uri, signed.into_iter(), SignableBody::Bytes(body))
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

    #[test]
    fn the_signature_lists_the_headers_sent_as_botocore_does() {
        let mut request = http::Request::new(Full::new(Bytes::from_static(b"{}")));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke".parse().unwrap();
        for (name, value) in [
            ("content-type", "application/json"),
            ("accept", "application/json"),
            ("user-agent", "sluice/0"),
            ("traceparent", "00-x"),
        ] {
            request.headers_mut().insert(name, http::HeaderValue::from_static(value));
        }
        let keys = AwsKeys::for_tests("AKIDTEST", "secret");
        sign_request(&mut request, b"{}", &keys, "us-east-1", 1_700_000_000_000).unwrap();
        let auth = request.headers()["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/20231114/us-east-1/bedrock/aws4_request"),
            "{auth}"
        );
        assert!(auth.contains("SignedHeaders=accept;content-type;host;x-amz-date,"), "{auth}");
    }
}
