//! The provider seam: for each kind of upstream, where a request for an endpoint goes and
//! how it is authenticated. `outbound` asks it; each kind answers in one place, so a new
//! kind is one arm here rather than a condition spread over the request road.
//!
//! | api | URL of `/v1/chat/completions` | key |
//! |---|---|---|
//! | plain (OpenAI, Ollama) | `{base_url}/v1/chat/completions` | `Authorization: Bearer` |
//! | plain (Anthropic) | `{base_url}/v1/messages` | `x-api-key`, `anthropic-version` |
//! | Gemini (OpenAI-compatible) | `{base_url}/v1beta/openai/chat/completions` | `Authorization: Bearer` |
//! | Azure classic | `{base_url}/openai/deployments/{azure_deployment}/chat/completions?api-version=…` (Responses: `{base_url}/openai/responses?api-version=…`) | `api-key` or Bearer token file |
//! | Azure v1 | `{base_url}/openai/v1/chat/completions` | `api-key` or Bearer token file |
//! | Gemini native, Vertex AI | see [`google`](crate::google) | `x-goog-api-key`; OAuth Bearer |
//! | Bedrock (Converse) | `{base_url}/model/{model}/converse` (`converse-stream`) | SigV4 (`AWS_*` or a credentials file) |
//! | Bedrock (InvokeModel, Anthropic models) | `{base_url}/model/{model}/invoke` (`invoke-with-response-stream`) | SigV4 |
//!
//! A Bedrock deployment is reached through the Anthropic shape: its body, answer, errors
//! and stream are converted to and from Converse here ([`wire_body`], [`wire_response`],
//! [`wire_error`], [`wire_stream`]), and the request is signed last ([`sign`]).

pub mod bedrock;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::Full;
use sluice_config::{AzureSurface, BedrockSurface, ProviderApi, ProviderKind};
use sluice_provider::{ConverseToAnthropicStream, Protocol, ProviderFlavor, TranslateError};

use crate::secret::Credential;
use crate::target::Target;

/// The endpoints Azure OpenAI's classic surface serves under
/// `/openai/deployments/{deployment}/…`: the list the `AzureOpenAI` client routes there
/// (`_deployments_endpoints` in the openai SDK's `lib/azure.py`). Every other endpoint is
/// `/openai/{…}?api-version=…`, the deployment named by the body's `model`: the Responses
/// API and its retrieve, delete, cancel and input items
/// (<https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/responses>: `POST
/// {endpoint}/openai/responses?api-version=…` with `"model"` the deployment name, `GET` and
/// `DELETE {endpoint}/openai/responses/{response_id}?api-version=…`), files and batches.
const AZURE_DEPLOYMENT_ENDPOINTS: [&str; 8] = [
    "/completions",
    "/chat/completions",
    "/embeddings",
    "/audio/transcriptions",
    "/audio/translations",
    "/audio/speech",
    "/images/generations",
    "/images/edits",
];

/// The upstream URL of `endpoint` (a proxied path such as `/v1/chat/completions`) on
/// `target`; `stream` picks the streaming verb of Google and Bedrock.
pub fn upstream_url(target: &Target, endpoint: &str, stream: bool) -> String {
    let base = &target.base_url;
    // Every proxied path starts with `/v1`; the cloud surfaces put their own prefix there.
    let rest = endpoint.strip_prefix("/v1").unwrap_or(endpoint);
    match &target.api {
        ProviderApi::Plain => format!("{base}{endpoint}"),
        ProviderApi::GeminiOpenAi => format!("{base}/v1beta/openai{rest}"),
        ProviderApi::Azure(AzureSurface::V1) => format!("{base}/openai{endpoint}"),
        ProviderApi::Azure(AzureSurface::Classic { api_version }) if AZURE_DEPLOYMENT_ENDPOINTS.contains(&rest) => {
            let deployment = target.azure_deployment.as_deref().unwrap_or(&target.model);
            format!("{base}/openai/deployments/{deployment}{rest}?api-version={api_version}")
        }
        ProviderApi::Azure(AzureSurface::Classic { api_version }) => {
            format!("{base}/openai{rest}?api-version={api_version}")
        }
        ProviderApi::GeminiNative | ProviderApi::Vertex(_) => crate::google::url(target, stream).unwrap_or_default(),
        ProviderApi::Bedrock { surface, .. } => bedrock::url(base, &target.model, *surface, stream),
    }
}

/// The body as `target`'s wire takes it: Converse for Bedrock (InvokeModel: Anthropic's
/// own with Bedrock's `anthropic_version`), Gemini's `generateContent` shape for Gemini's
/// native API and Vertex (Claude on Vertex: the messages body without `model`), else as
/// it is. `protocol` is the road's upstream protocol. Bedrock takes the client's
/// `anthropic-beta` flags (in `client_headers`) in the body, not as a header.
///
/// # Errors
/// A request Converse cannot carry (the field is named).
pub fn wire_body(
    target: &Target,
    protocol: Protocol,
    client_headers: &HeaderMap,
    body: Vec<u8>,
) -> Result<Vec<u8>, TranslateError> {
    // Claude refuses the Gemini signatures an Anthropic client may carry from an earlier
    // turn a Gemini deployment answered.
    let body =
        if protocol == Protocol::AnthropicMessages { sluice_provider::without_gemini_thinking(body) } else { body };
    match &target.api {
        ProviderApi::Bedrock { surface: BedrockSurface::InvokeModel, .. } => {
            sluice_provider::anthropic_to_invoke_request(&body, &beta_flags(client_headers))
        }
        ProviderApi::Bedrock { .. } => {
            sluice_provider::anthropic_to_converse_request(&body, &beta_flags(client_headers))
        }
        _ => crate::google::request_body(target, protocol, body),
    }
}

/// The flags of every `anthropic-beta` header (each a comma-separated list), in order.
fn beta_flags(headers: &HeaderMap) -> Vec<&str> {
    headers
        .get_all(&ANTHROPIC_BETA)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|flag| !flag.is_empty())
        .collect()
}

/// The headers of `target`'s wire beyond the key and the content type: `accept:
/// application/json` where the provider's own SDK sends it (OpenAI, Anthropic, Azure,
/// Claude on Vertex, Gemini's OpenAI surface), InvokeModel's
/// `accept: application/json` (InvokeModelWithResponseStream's `x-amzn-bedrock-accept`),
/// the MIME type of the model's answer, as AWS's SDKs send it
/// (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html>,
/// `API_runtime_InvokeModelWithResponseStream.html`).
#[must_use]
pub fn wire_headers(target: &Target, stream: bool) -> Vec<(HeaderName, HeaderValue)> {
    const JSON: HeaderValue = HeaderValue::from_static("application/json");
    match (&target.api, stream) {
        (ProviderApi::Bedrock { surface: BedrockSurface::InvokeModel, .. }, false) => {
            vec![(http::header::ACCEPT, JSON)]
        }
        (ProviderApi::Bedrock { surface: BedrockSurface::InvokeModel, .. }, true) => {
            vec![(HeaderName::from_static("x-amzn-bedrock-accept"), JSON)]
        }
        // The OpenAI and Anthropic SDKs (`AzureOpenAI` and `AnthropicVertex` among them) send
        // `accept: application/json` on every request, streams too (their `_base_client`'s
        // default headers); Converse, Gemini's native API and google-genai send none.
        (ProviderApi::Plain | ProviderApi::GeminiOpenAi | ProviderApi::Azure(_), _) => {
            vec![(http::header::ACCEPT, JSON)]
        }
        (ProviderApi::Vertex(_), _) if target.kind == ProviderKind::Anthropic => vec![(http::header::ACCEPT, JSON)],
        _ => Vec::new(),
    }
}

/// A success body back in the road's shape: Bedrock's Converse answer as Anthropic's
/// (named `model`, its id Bedrock's request id), Gemini's as OpenAI chat's (`created`).
///
/// # Errors
/// An answer that is not Converse's.
pub fn wire_response(
    target: &Target,
    headers: &HeaderMap,
    bytes: Bytes,
    model: &str,
    created: u64,
) -> Result<Bytes, TranslateError> {
    match &target.api {
        ProviderApi::Bedrock { surface: BedrockSurface::Converse, .. } => {
            let id = format!("msg_bdrk_{}", header_text(headers, "x-amzn-requestid").unwrap_or_default());
            sluice_provider::converse_to_anthropic_response(&bytes, model, &id).map(Bytes::from)
        }
        _ => crate::google::response_body(target, bytes, model, created),
    }
}

/// An error body back in the road's shape: Bedrock's `{"message"}` and its
/// `x-amzn-ErrorType` as Anthropic's error.
#[must_use]
pub fn wire_error(target: &Target, status: u16, headers: &HeaderMap, bytes: Vec<u8>) -> Vec<u8> {
    match &target.api {
        ProviderApi::Bedrock { .. } => {
            sluice_provider::converse_error_to_anthropic(status, header_text(headers, "x-amzn-errortype"), &bytes)
        }
        _ => bytes,
    }
}

/// What reads `target`'s stream into the road's shape: Bedrock's event stream as Anthropic SSE.
#[must_use]
pub fn wire_stream(target: &Target, headers: &HeaderMap, model: &str) -> Option<ConverseToAnthropicStream> {
    match &target.api {
        ProviderApi::Bedrock { surface: BedrockSurface::Converse, .. } => {
            let id = format!("msg_bdrk_{}", header_text(headers, "x-amzn-requestid").unwrap_or_default());
            Some(ConverseToAnthropicStream::new(model, &id))
        }
        ProviderApi::Bedrock { surface: BedrockSurface::InvokeModel, .. } => {
            Some(ConverseToAnthropicStream::invoke(model))
        }
        _ => None,
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Signs `request` (its `body` as sent) when `target` needs a signature (Bedrock's SigV4,
/// at `unix_millis`). A request that cannot be signed goes unsigned: the provider's 403
/// then says so, and the operator's log names the deployment (never the keys).
pub fn sign(target: &Target, request: &mut http::Request<Full<Bytes>>, body: &[u8], unix_millis: u64) {
    if let (ProviderApi::Bedrock { region, .. }, Credential::Aws(source)) = (&target.api, &target.key) {
        let keys = source.current();
        if let Err(reason) = bedrock::sign_request(request, body, &keys, region, unix_millis) {
            tracing::warn!(deployment = %target.name, reason, "could not sign the Bedrock request");
        }
    }
}

/// The headers that authenticate a request to `target` and carry its protocol's version:
/// the key (Bearer; Anthropic's `x-api-key`; Azure's `api-key` unless it is a token file's
/// Bearer token), and for Anthropic the client's `anthropic-version` (a default when
/// absent) and `anthropic-beta` (Bedrock takes both in the body: [`wire_body`]).
pub fn auth_headers(target: &Target, client_headers: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::with_capacity(3);
    if let Some(key) = target.key.current() {
        headers.push((key_header(target), key.header().clone()));
    }
    if target.kind == ProviderKind::Anthropic {
        // Vertex takes Claude's version in the body, Bedrock in the body or not at all.
        if !matches!(target.api, ProviderApi::Vertex(_) | ProviderApi::Bedrock { .. }) {
            let version = client_headers.get(&ANTHROPIC_VERSION).cloned();
            headers.push((ANTHROPIC_VERSION, version.unwrap_or(HeaderValue::from_static("2023-06-01"))));
        }
        if let Some(beta) =
            client_headers.get(&ANTHROPIC_BETA).filter(|_| !matches!(target.api, ProviderApi::Bedrock { .. }))
        {
            headers.push((ANTHROPIC_BETA, beta.clone()));
        }
    }
    headers
}

const ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");
const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");
const API_KEY: HeaderName = HeaderName::from_static("api-key");
const X_GOOG_API_KEY: HeaderName = HeaderName::from_static("x-goog-api-key");
const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

fn key_header(target: &Target) -> HeaderName {
    match (&target.api, &target.key) {
        (_, Credential::Refreshed(_) | Credential::Minted(_)) => http::header::AUTHORIZATION,
        (ProviderApi::Azure(_), _) => API_KEY,
        (ProviderApi::GeminiNative, _) => X_GOOG_API_KEY,
        _ if target.kind == ProviderKind::Anthropic => X_API_KEY,
        _ => http::header::AUTHORIZATION,
    }
}

/// Whose words a provider's errors and retry hints are read in: Azure's and Gemini's
/// differ from OpenAI's though they speak its protocol (Azure's "high demand" 429 is an
/// overload, not a quota; Gemini's quota errors are `RESOURCE_EXHAUSTED`).
#[must_use]
pub fn error_flavor(kind: ProviderKind, api: &ProviderApi) -> ProviderFlavor {
    match (api, kind) {
        (ProviderApi::Azure(_), _) => ProviderFlavor::Azure,
        (ProviderApi::GeminiOpenAi | ProviderApi::GeminiNative | ProviderApi::Vertex(_), _) => ProviderFlavor::Gemini,
        // Bedrock's errors are read once turned into Anthropic's (`wire_error`).
        (ProviderApi::Bedrock { .. }, _) => ProviderFlavor::Anthropic,
        (ProviderApi::Plain, ProviderKind::OpenAi) => ProviderFlavor::OpenAi,
        (ProviderApi::Plain, ProviderKind::Anthropic) => ProviderFlavor::Anthropic,
        (ProviderApi::Plain, ProviderKind::Ollama) => ProviderFlavor::Ollama,
    }
}

#[cfg(test)]
mod tests {
    use sluice_provider::{ErrorClass, classify_with_hints, parse_hints};

    use super::*;

    fn target(kind: ProviderKind, api: ProviderApi, azure_deployment: Option<&str>) -> Target {
        Target {
            name: "d".into(),
            kind,
            base_url: "https://host".into(),
            model: "gpt-4o".into(),
            key: Credential::None,
            api,
            azure_deployment: azure_deployment.map(str::to_owned),
        }
    }

    #[test]
    fn azure_classic_names_the_deployment_in_the_path_only_where_the_azure_client_does() {
        let classic = ProviderApi::Azure(AzureSurface::Classic { api_version: "2025-04-01-preview".into() });
        let azure = target(ProviderKind::OpenAi, classic, Some("gpt4o-east"));
        let url = |endpoint: &str| upstream_url(&azure, endpoint, false);
        assert_eq!(
            url("/v1/chat/completions"),
            "https://host/openai/deployments/gpt4o-east/chat/completions?api-version=2025-04-01-preview"
        );
        assert_eq!(
            url("/v1/embeddings"),
            "https://host/openai/deployments/gpt4o-east/embeddings?api-version=2025-04-01-preview"
        );
        assert_eq!(url("/v1/responses"), "https://host/openai/responses?api-version=2025-04-01-preview");
        assert_eq!(url("/v1/responses/resp_1"), "https://host/openai/responses/resp_1?api-version=2025-04-01-preview");
        assert_eq!(
            url("/v1/responses/resp_1/cancel"),
            "https://host/openai/responses/resp_1/cancel?api-version=2025-04-01-preview"
        );
        let v1 = target(ProviderKind::OpenAi, ProviderApi::Azure(AzureSurface::V1), Some("gpt4o-east"));
        assert_eq!(upstream_url(&v1, "/v1/responses", false), "https://host/openai/v1/responses");
        assert_eq!(
            (azure.body_model(), v1.body_model()),
            ("gpt4o-east", "gpt4o-east"),
            "Azure reads the deployment from `model`"
        );
        assert_eq!(target(ProviderKind::OpenAi, ProviderApi::Plain, None).body_model(), "gpt-4o");
    }

    #[test]
    fn vertex_claude_streams_without_alt_and_gemini_with_sse() {
        let at = sluice_config::VertexLocation { project: "p".into(), region: "us-east5".into() };
        let claude = target(ProviderKind::Anthropic, ProviderApi::Vertex(at.clone()), None);
        let base = "https://host/v1/projects/p/locations/us-east5/publishers";
        assert_eq!(
            upstream_url(&claude, "/v1/messages", true),
            format!("{base}/anthropic/models/gpt-4o:streamRawPredict")
        );
        assert_eq!(upstream_url(&claude, "/v1/messages", false), format!("{base}/anthropic/models/gpt-4o:rawPredict"));
        let gemini = target(ProviderKind::OpenAi, ProviderApi::Vertex(at), None);
        assert_eq!(
            upstream_url(&gemini, "/v1/chat/completions", true),
            format!("{base}/google/models/gpt-4o:streamGenerateContent?alt=sse")
        );
    }

    #[test]
    fn cloud_errors_are_read_in_their_providers_words() {
        let bad_key = br#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#;
        let hints = parse_hints(&HeaderMap::new(), Some(bad_key), None);
        let flavor = error_flavor(ProviderKind::OpenAi, &ProviderApi::GeminiOpenAi);
        assert_eq!(classify_with_hints(400, &hints, bad_key, flavor), ErrorClass::Auth, "not the client's bad request");
        let azure = ProviderApi::Azure(AzureSurface::V1);
        assert_eq!(error_flavor(ProviderKind::OpenAi, &azure), ProviderFlavor::Azure);
        assert_eq!(error_flavor(ProviderKind::Anthropic, &ProviderApi::Plain), ProviderFlavor::Anthropic);
    }

    fn bedrock(surface: BedrockSurface) -> Target {
        target(ProviderKind::Anthropic, ProviderApi::Bedrock { region: "us-east-1".into(), surface }, None)
    }

    fn betas() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers
            .append(ANTHROPIC_BETA, HeaderValue::from_static("context-1m-2025-08-07, interleaved-thinking-2025-05-14"));
        headers.append(ANTHROPIC_BETA, HeaderValue::from_static("token-efficient-tools-2025-02-19"));
        headers
    }

    #[test]
    fn bedrock_takes_the_clients_beta_flags_in_the_body_not_as_a_header() {
        let body = br#"{"model":"claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}"#.to_vec();
        let flags = ["context-1m-2025-08-07", "interleaved-thinking-2025-05-14", "token-efficient-tools-2025-02-19"];
        let converse = bedrock(BedrockSurface::Converse);
        let sent = wire_body(&converse, Protocol::AnthropicMessages, &betas(), body.clone()).unwrap_or_default();
        let sent: serde_json::Value = serde_json::from_slice(&sent).unwrap_or_default();
        assert_eq!(sent["additionalModelRequestFields"]["anthropic_beta"], serde_json::json!(flags));
        let invoke = bedrock(BedrockSurface::InvokeModel);
        let sent = wire_body(&invoke, Protocol::AnthropicMessages, &betas(), body).unwrap_or_default();
        let sent: serde_json::Value = serde_json::from_slice(&sent).unwrap_or_default();
        assert_eq!(sent["anthropic_beta"], serde_json::json!(flags));
        for target in [converse, invoke] {
            assert!(auth_headers(&target, &betas()).iter().all(|(name, _)| name != ANTHROPIC_BETA));
        }
    }

    #[test]
    fn invoke_model_asks_for_json_as_botocore_does() {
        let invoke = bedrock(BedrockSurface::InvokeModel);
        let names =
            |stream| wire_headers(&invoke, stream).into_iter().map(|(n, v)| (n.to_string(), v)).collect::<Vec<_>>();
        assert_eq!(names(false), [("accept".to_owned(), HeaderValue::from_static("application/json"))]);
        assert_eq!(names(true), [("x-amzn-bedrock-accept".to_owned(), HeaderValue::from_static("application/json"))]);
        assert!(wire_headers(&bedrock(BedrockSurface::Converse), false).is_empty());
    }

    #[test]
    fn accept_json_goes_where_the_providers_sdk_sends_it() {
        let accept = [("accept".to_owned(), HeaderValue::from_static("application/json"))];
        let names = |t: &Target, stream| {
            wire_headers(t, stream).into_iter().map(|(n, v)| (n.to_string(), v)).collect::<Vec<_>>()
        };
        let location = sluice_config::VertexLocation { project: "p".into(), region: "r".into() };
        for t in [
            target(ProviderKind::OpenAi, ProviderApi::Plain, None),
            target(ProviderKind::Anthropic, ProviderApi::Plain, None),
            target(ProviderKind::OpenAi, ProviderApi::Azure(sluice_config::AzureSurface::V1), None),
            target(ProviderKind::Anthropic, ProviderApi::Vertex(location.clone()), None),
        ] {
            assert_eq!(names(&t, false), accept, "{:?}", t.api);
            assert_eq!(names(&t, true), accept, "{:?}", t.api);
        }
        assert!(names(&target(ProviderKind::OpenAi, ProviderApi::GeminiNative, None), false).is_empty());
        assert!(names(&target(ProviderKind::OpenAi, ProviderApi::Vertex(location), None), true).is_empty());
    }
}
