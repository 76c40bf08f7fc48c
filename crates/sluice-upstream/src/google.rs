//! Google's part of the provider seam: the Gemini API's native surface and Vertex AI.
//!
//! A Gemini deployment (native, or Gemini on Vertex) speaks the OpenAI chat protocol to the
//! rest of the gateway: the chat body is rewritten into Gemini's `generateContent` shape on
//! the way up, and the answer, its stream and its errors back into OpenAI's (an Anthropic
//! client crosses once more, as for any OpenAI deployment). Claude on Vertex is an Anthropic
//! deployment whose body names no `model` and carries Vertex's `anthropic_version`.
//!
//! | api | URL | auth |
//! |---|---|---|
//! | Gemini native | `{base}/v1beta/models/{model}:generateContent` (`:streamGenerateContent?alt=sse`) | `x-goog-api-key` |
//! | Vertex, Gemini | `{base}/v1/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent` (stream as above) | OAuth Bearer |
//! | Vertex, Claude | `…/publishers/anthropic/models/{model}:rawPredict` (`:streamRawPredict`) | OAuth Bearer |

use serde_json::Value;
use sluice_config::{ProviderApi, ProviderKind};
use sluice_provider::{GeminiToOpenAiStream, Protocol, TranslateError};

use crate::target::Target;

/// The `anthropic_version` Vertex AI wants in the body of a Claude request.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Whether `target` speaks Gemini's `generateContent` wire shape upstream.
#[must_use]
pub fn speaks_gemini(target: &Target) -> bool {
    gemini_wire(&target.api, target.kind)
}

/// Whether a deployment of `api` and `kind` speaks Gemini's `generateContent` wire shape.
#[must_use]
pub fn gemini_wire(api: &ProviderApi, kind: ProviderKind) -> bool {
    match api {
        ProviderApi::GeminiNative => true,
        ProviderApi::Vertex(_) => kind != ProviderKind::Anthropic,
        _ => false,
    }
}

/// The upstream URL of a Google-addressed route (`None` for the others).
///
/// Gemini's stream is asked for as SSE (`alt=sse`,
/// <https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>).
/// Claude's `:streamRawPredict` takes no `alt`: its answer is Anthropic's own SSE stream
/// (the request of <https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude>,
/// and what `AnthropicVertex` sends).
#[must_use]
pub fn url(target: &Target, stream: bool) -> Option<String> {
    let (base, model) = (&target.base_url, &target.model);
    let verb = match (target.kind, stream) {
        (ProviderKind::Anthropic, false) => "rawPredict",
        (ProviderKind::Anthropic, true) => "streamRawPredict",
        (_, false) => "generateContent",
        (_, true) => "streamGenerateContent?alt=sse",
    };
    match &target.api {
        ProviderApi::GeminiNative => Some(format!("{base}/v1beta/models/{model}:{verb}")),
        ProviderApi::Vertex(at) => {
            let publisher = if target.kind == ProviderKind::Anthropic { "anthropic" } else { "google" };
            let (project, region) = (&at.project, &at.region);
            Some(format!(
                "{base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{verb}"
            ))
        }
        _ => None,
    }
}

/// The body sent upstream, from the one in the route's client-facing `protocol`: Gemini's
/// `generateContent` body for a Gemini route, Vertex's messages body for Claude on Vertex,
/// and an OpenAI chat body without the `extra_body` only Google reads for any other
/// OpenAI-shaped deployment.
///
/// # Errors
/// For a Gemini route, a request that is no chat completion or that Gemini cannot carry.
pub fn request_body(target: &Target, protocol: Protocol, body: Vec<u8>) -> Result<Vec<u8>, TranslateError> {
    if speaks_gemini(target) {
        if protocol != Protocol::OpenAiChat {
            return Err(TranslateError::WrongProtocol { expected: Protocol::OpenAiChat, found: protocol });
        }
        return sluice_provider::openai_to_gemini_request(&body);
    }
    match target.api {
        ProviderApi::Vertex(_) => Ok(vertex_anthropic_body(body)),
        // Google's compatibility layer reads `extra_body.google` itself.
        ProviderApi::GeminiOpenAi => Ok(body),
        _ if protocol == Protocol::OpenAiChat => Ok(sluice_provider::without_extra_body(body)),
        _ => Ok(body),
    }
}

/// A messages body as Vertex takes it: the model is in the URL, the version in the body.
fn vertex_anthropic_body(body: Vec<u8>) -> Vec<u8> {
    let Ok(Value::Object(mut map)) = serde_json::from_slice::<Value>(&body) else { return body };
    map.remove("model");
    map.insert("anthropic_version".into(), Value::from(VERTEX_ANTHROPIC_VERSION));
    serde_json::to_vec(&map).unwrap_or(body)
}

/// A non-stream success body in the OpenAI chat shape, answering as `model`.
///
/// # Errors
/// When a Gemini answer is not JSON.
pub fn response_body(
    target: &Target,
    body: bytes::Bytes,
    model: &str,
    created: u64,
) -> Result<bytes::Bytes, TranslateError> {
    if !speaks_gemini(target) {
        return Ok(body);
    }
    sluice_provider::gemini_to_openai_response(&body, model, created).map(bytes::Bytes::from)
}

/// The decoder of a Gemini route's stream into OpenAI chat chunks.
#[must_use]
pub fn stream_decoder(target: &Target, model: &str, created: u64) -> Option<GeminiToOpenAiStream> {
    speaks_gemini(target).then(|| GeminiToOpenAiStream::new(model, created))
}
