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

use crate::crossing::Crossing;
use crate::state::Route;

/// The `anthropic_version` Vertex AI wants in the body of a Claude request.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Whether `route` speaks Gemini's `generateContent` wire shape upstream.
#[must_use]
pub fn speaks_gemini(route: &Route) -> bool {
    gemini_wire(&route.api, route.kind)
}

fn gemini_wire(api: &ProviderApi, kind: ProviderKind) -> bool {
    match api {
        ProviderApi::GeminiNative => true,
        ProviderApi::Vertex(_) => kind != ProviderKind::Anthropic,
        _ => false,
    }
}

/// The upstream URL of a Google-addressed route (`None` for the others).
#[must_use]
pub fn url(route: &Route, stream: bool) -> Option<String> {
    let (base, model) = (&route.base_url, &route.model);
    let verb = match (route.kind, stream) {
        (ProviderKind::Anthropic, false) => "rawPredict",
        (ProviderKind::Anthropic, true) => "streamRawPredict?alt=sse",
        (_, false) => "generateContent",
        (_, true) => "streamGenerateContent?alt=sse",
    };
    match &route.api {
        ProviderApi::GeminiNative => Some(format!("{base}/v1beta/models/{model}:{verb}")),
        ProviderApi::Vertex(at) => {
            let publisher = if route.kind == ProviderKind::Anthropic { "anthropic" } else { "google" };
            let (project, region) = (&at.project, &at.region);
            Some(format!(
                "{base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{verb}"
            ))
        }
        _ => None,
    }
}

/// The body sent upstream, from the one in the route's client-facing `protocol`.
///
/// # Errors
/// For a Gemini route, a request that is no chat completion or that Gemini cannot carry.
pub fn request_body(route: &Route, protocol: Protocol, body: Vec<u8>) -> Result<Vec<u8>, TranslateError> {
    if speaks_gemini(route) {
        if protocol != Protocol::OpenAiChat {
            return Err(TranslateError::WrongProtocol { expected: Protocol::OpenAiChat, found: protocol });
        }
        return sluice_provider::openai_to_gemini_request(&body);
    }
    if matches!(route.api, ProviderApi::Vertex(_)) {
        return Ok(vertex_anthropic_body(body));
    }
    Ok(body)
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
    route: &Route,
    body: bytes::Bytes,
    model: &str,
    created: u64,
) -> Result<bytes::Bytes, TranslateError> {
    if !speaks_gemini(route) {
        return Ok(body);
    }
    sluice_provider::gemini_to_openai_response(&body, model, created).map(bytes::Bytes::from)
}

/// A provider error body in the shape the rest of the gateway reads: OpenAI's for a
/// Gemini route; Anthropic's for Vertex's own refusals (quota, credentials: Google's
/// envelope) on a Claude route; unchanged otherwise.
#[must_use]
pub fn error_body(api: &ProviderApi, kind: ProviderKind, status: u16, body: bytes::Bytes) -> bytes::Bytes {
    if gemini_wire(api, kind) {
        return bytes::Bytes::from(sluice_provider::gemini_error_to_openai(status, &body));
    }
    if matches!(api, ProviderApi::Vertex(_)) && is_google_error(&body) {
        let openai = sluice_provider::gemini_error_to_openai(status, &body);
        return Crossing::AnthropicToOpenAi.error_body(status, &openai).map_or(body, bytes::Bytes::from);
    }
    body
}

/// Google's envelope: `error.status` a canonical code name.
fn is_google_error(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| v.pointer("/error/status").is_some_and(Value::is_string))
}

/// The decoder of a Gemini route's stream into OpenAI chat chunks.
#[must_use]
pub fn stream_decoder(route: &Route, model: &str, created: u64) -> Option<GeminiToOpenAiStream> {
    speaks_gemini(route).then(|| GeminiToOpenAiStream::new(model, created))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};
    use sluice_config::{ProviderApi, ProviderKind, VertexLocation};

    use super::error_body;

    fn shaped(api: &ProviderApi, kind: ProviderKind, status: u16, body: &Value) -> Value {
        let bytes = bytes::Bytes::from(body.to_string());
        serde_json::from_slice(&error_body(api, kind, status, bytes)).unwrap()
    }

    #[test]
    fn google_errors_are_read_in_the_shape_of_the_routes_protocol() {
        let quota = json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}});
        let vertex = ProviderApi::Vertex(VertexLocation { project: "p".into(), region: "r".into() });
        let gemini = shaped(&ProviderApi::GeminiNative, ProviderKind::OpenAi, 429, &quota);
        assert_eq!(gemini["error"]["message"], "Quota exceeded");
        assert_eq!(gemini["error"]["type"], "rate_limit_error");
        let claude = shaped(&vertex, ProviderKind::Anthropic, 429, &quota);
        assert_eq!(
            claude,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Quota exceeded"}})
        );
        let anthropic = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(shaped(&vertex, ProviderKind::Anthropic, 529, &anthropic), anthropic, "Claude's own errors pass");
        assert_eq!(shaped(&ProviderApi::Plain, ProviderKind::OpenAi, 429, &quota), quota);
    }
}
