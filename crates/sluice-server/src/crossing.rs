//! Requests served by a deployment of the other protocol: an OpenAI-shaped request (chat or
//! Responses) sent to an Anthropic deployment (or a messages request to an OpenAI one) is
//! translated on the way up, and its response or stream on the way back, so the client's
//! SDK never notices.

use serde_json::Value;
use sluice_config::{ProviderApi, ProviderKind};
use sluice_provider::{
    AnthropicToOpenAiStream, AnthropicToResponsesStream, ChatUpstream, OpenAiToAnthropicStream, ParsedRequest,
    Protocol, StreamTap, TranslateError, anthropic_to_openai_request, anthropic_to_openai_response,
    anthropic_to_responses_response, openai_error_type, openai_to_anthropic_request, openai_to_anthropic_response,
    responses_to_anthropic_request, upstream_body,
};

use sluice_upstream::Target;
use sluice_upstream::google::speaks_gemini;

use crate::error::{self, Envelope};

/// Anthropic's error type for an HTTP status.
fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 | 503 => "overloaded_error",
        _ => "api_error",
    }
}

/// How a request crosses to its deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// Same protocol: passed through.
    Same,
    /// OpenAI client, Anthropic deployment.
    OpenAiToAnthropic,
    /// Anthropic client, OpenAI-compatible deployment (a Gemini one through the Gemini
    /// layer, which takes thinking).
    AnthropicToOpenAi(ChatUpstream),
    /// OpenAI Responses client, Anthropic deployment.
    ResponsesToAnthropic,
}

impl Crossing {
    /// The crossing of a `client` request to a deployment reached at `target`.
    #[must_use]
    pub fn of(client: Protocol, target: &Target) -> Self {
        match (client, target.kind) {
            (Protocol::OpenAiChat, ProviderKind::Anthropic) => Self::OpenAiToAnthropic,
            (Protocol::OpenAiResponses, ProviderKind::Anthropic) => Self::ResponsesToAnthropic,
            (Protocol::AnthropicMessages, ProviderKind::OpenAi | ProviderKind::Ollama) => {
                let upstream = if speaks_gemini(target) { ChatUpstream::Gemini } else { ChatUpstream::OpenAi };
                Self::AnthropicToOpenAi(upstream)
            }
            _ => Self::Same,
        }
    }

    /// The protocol spoken upstream.
    #[must_use]
    pub fn upstream(self, client: Protocol) -> Protocol {
        match self {
            Self::Same => client,
            Self::OpenAiToAnthropic | Self::ResponsesToAnthropic => Protocol::AnthropicMessages,
            Self::AnthropicToOpenAi(_) => Protocol::OpenAiChat,
        }
    }

    /// The body to send upstream, with the deployment's `model`.
    ///
    /// # Errors
    /// When the request uses a feature the other protocol cannot express.
    pub fn request_body(
        self,
        request: &ParsedRequest,
        model: &str,
        default_max_tokens: u64,
        force_stream_usage: bool,
    ) -> Result<Vec<u8>, TranslateError> {
        let mut map = match self {
            Self::Same => return Ok(upstream_body(request, model, force_stream_usage)),
            Self::OpenAiToAnthropic => openai_to_anthropic_request(request, default_max_tokens)?,
            Self::AnthropicToOpenAi(upstream) => anthropic_to_openai_request(request, upstream)?,
            Self::ResponsesToAnthropic => responses_to_anthropic_request(request, default_max_tokens)?,
        };
        map.insert("model".into(), Value::String(model.to_owned()));
        Ok(serde_json::to_vec(&map).unwrap_or_default())
    }

    /// A non-stream success body in the client's protocol, naming the model it asked for.
    ///
    /// # Errors
    /// When the upstream body is not a response of its protocol.
    pub fn response_body(self, body: &[u8], client_model: &str, created: u64) -> Result<Vec<u8>, TranslateError> {
        match self {
            Self::Same => Ok(body.to_vec()),
            Self::OpenAiToAnthropic => anthropic_to_openai_response(body, client_model, created),
            Self::AnthropicToOpenAi(_) => openai_to_anthropic_response(body, client_model),
            Self::ResponsesToAnthropic => anthropic_to_responses_response(body, client_model, created),
        }
    }

    /// A provider's error body in the client's protocol (`None` when nothing crosses): the
    /// provider's message, and an error type both SDKs know for the status. A body that
    /// is not an error of the provider's protocol keeps its text as the message.
    #[must_use]
    pub fn error_body(self, status: u16, body: &[u8]) -> Option<Vec<u8>> {
        if self == Self::Same {
            return None;
        }
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        // Both shapes keep the details under `error` (Gemini's OpenAI endpoint wraps the
        // object in a one-element list).
        let error = parsed.as_ref().map(|v| match v {
            Value::Array(items) => items.first().and_then(|i| i.get("error")).unwrap_or(&Value::Null),
            other => other.get("error").unwrap_or(&Value::Null),
        });
        let field = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_str).map(str::to_owned);
        let message = field("message").unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() { format!("the provider answered {status}") } else { text.chars().take(2_000).collect() }
        });
        let upstream_type = field("type").filter(|t| !t.is_empty());
        let (envelope, kind) = match self {
            Self::AnthropicToOpenAi(_) => (Envelope::Anthropic, anthropic_error_type(status).to_owned()),
            Self::OpenAiToAnthropic | Self::ResponsesToAnthropic | Self::Same => {
                (Envelope::OpenAi, upstream_type.unwrap_or_else(|| openai_error_type(status).to_owned()))
            }
        };
        let body = error::plain_body(envelope, &kind, &message, None);
        Some(serde_json::to_vec(&body).unwrap_or_default())
    }

    /// What watches (and, crossing, translates) a stream on its way to the client.
    #[must_use]
    pub fn pipe(
        self,
        client: Protocol,
        client_model: &str,
        hide_usage: bool,
        include_usage: bool,
        created: u64,
    ) -> Pipe {
        match self {
            Self::Same => Pipe::Tap(StreamTap::new(client, hide_usage)),
            Self::OpenAiToAnthropic => {
                Pipe::ToOpenAi(AnthropicToOpenAiStream::new(client_model, include_usage, created))
            }
            Self::AnthropicToOpenAi(_) => Pipe::ToAnthropic(OpenAiToAnthropicStream::new(client_model)),
            Self::ResponsesToAnthropic => {
                Pipe::ToResponses(Box::new(AnthropicToResponsesStream::new(client_model, created)))
            }
        }
    }
}

/// A stream's way to the client.
pub enum Pipe {
    /// Same protocol: forwarded as is, usage read on the way.
    Tap(StreamTap),
    /// Anthropic events out as OpenAI chunks.
    ToOpenAi(AnthropicToOpenAiStream),
    /// OpenAI chunks out as Anthropic events.
    ToAnthropic(OpenAiToAnthropicStream),
    /// A provider's own stream shape (Gemini's) decoded into OpenAI chunks, then piped on.
    Decoded(Box<sluice_provider::GeminiToOpenAiStream>, Box<Pipe>),
    /// Anthropic events out as Responses API events (boxed: two translators deep).
    ToResponses(Box<AnthropicToResponsesStream>),
}

impl Pipe {
    /// Bytes for the client from an upstream chunk.
    pub fn push(&mut self, chunk: &[u8]) -> bytes::Bytes {
        match self {
            Self::Tap(tap) => tap.push(chunk),
            Self::ToOpenAi(t) => t.push(chunk),
            Self::ToAnthropic(t) => t.push(chunk),
            Self::Decoded(decoder, inner) => {
                let decoded = decoder.push(chunk);
                inner.push(&decoded)
            }
            Self::ToResponses(t) => t.push(chunk),
        }
    }

    /// The last bytes for the client: what is held, and, if the upstream stream ended
    /// without its terminal event, the interruption event of the client's protocol.
    pub fn end(&mut self, interruption: &[u8]) -> bytes::Bytes {
        match self {
            Self::Tap(tap) => {
                let mut tail = bytes::BytesMut::from(tap.flush().as_ref());
                let outcome = tap.outcome();
                if !outcome.completed && !outcome.error_event {
                    tail.extend_from_slice(interruption);
                }
                tail.freeze()
            }
            Self::ToOpenAi(t) => t.finish(),
            Self::ToAnthropic(t) => t.finish(),
            Self::Decoded(decoder, inner) => {
                let decoded = decoder.finish();
                let mut tail = bytes::BytesMut::from(inner.push(&decoded).as_ref());
                tail.extend_from_slice(&inner.end(interruption));
                tail.freeze()
            }
            Self::ToResponses(t) => t.finish(),
        }
    }

    /// The id of the Responses API response streamed (same protocol only), once named.
    #[must_use]
    pub fn response_id(&self) -> Option<&str> {
        match self {
            Self::Tap(tap) => tap.response_id(),
            Self::ToOpenAi(_) | Self::ToAnthropic(_) | Self::Decoded(..) | Self::ToResponses(_) => None,
        }
    }

    /// The usage seen, in the upstream's terms.
    #[must_use]
    pub fn usage(&self) -> Option<sluice_provider::Usage> {
        match self {
            Self::Tap(tap) => tap.outcome().usage,
            Self::ToOpenAi(t) => t.usage(),
            Self::ToAnthropic(t) => t.usage(),
            Self::Decoded(_, inner) => inner.usage(),
            Self::ToResponses(t) => t.usage(),
        }
    }

    /// The usage seen is the provider's final count (a translated stream: the upstream
    /// reached its terminal event, which comes after its last usage).
    #[must_use]
    pub fn usage_final(&self) -> bool {
        match self {
            Self::Tap(tap) => tap.outcome().usage_final,
            Self::ToOpenAi(t) => t.completed(),
            Self::ToAnthropic(t) => t.completed(),
            Self::Decoded(_, inner) => inner.usage_final(),
            Self::ToResponses(t) => t.completed(),
        }
    }

    /// The upstream reached its terminal event (or an error event): nothing more comes.
    #[must_use]
    pub fn ended(&self) -> bool {
        match self {
            Self::Tap(tap) => {
                let outcome = tap.outcome();
                outcome.completed || outcome.error_event
            }
            Self::ToOpenAi(t) => t.completed(),
            Self::ToAnthropic(t) => t.completed(),
            Self::Decoded(_, inner) => inner.ended(),
            Self::ToResponses(t) => t.completed(),
        }
    }
}

/// A Google-addressed provider's error body in the shape the rest of the gateway reads: OpenAI's for a
/// Gemini route; Anthropic's for Vertex's own refusals (quota, credentials: Google's
/// envelope) on a Claude route; unchanged otherwise.
#[must_use]
pub fn google_error_body(api: &ProviderApi, kind: ProviderKind, status: u16, body: bytes::Bytes) -> bytes::Bytes {
    if sluice_upstream::google::gemini_wire(api, kind) {
        return bytes::Bytes::from(sluice_provider::gemini_error_to_openai(status, &body));
    }
    if matches!(api, ProviderApi::Vertex(_)) && is_google_error(&body) {
        let openai = sluice_provider::gemini_error_to_openai(status, &body);
        return Crossing::AnthropicToOpenAi(ChatUpstream::OpenAi)
            .error_body(status, &openai)
            .map_or(body, bytes::Bytes::from);
    }
    body
}

/// Google's envelope: `error.status` a canonical code name.
fn is_google_error(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| v.pointer("/error/status").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use sluice_config::{ProviderApi, ProviderKind, VertexLocation};

    use super::{ChatUpstream, Crossing, google_error_body};

    fn parsed(body: Option<Vec<u8>>) -> Value {
        serde_json::from_slice(&body.unwrap_or_default()).unwrap_or(Value::Null)
    }

    #[test]
    fn an_openai_error_reaches_an_anthropic_client_in_its_shape() {
        let upstream = json!({"error": {"message": "The model `x` does not exist", "type": "invalid_request_error", "param": null, "code": "model_not_found"}});
        let body =
            parsed(Crossing::AnthropicToOpenAi(ChatUpstream::OpenAi).error_body(404, upstream.to_string().as_bytes()));
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": "not_found_error", "message": "The model `x` does not exist"}})
        );
    }

    #[test]
    fn an_anthropic_error_reaches_an_openai_client_in_its_shape() {
        let upstream = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_1"});
        let body = parsed(Crossing::OpenAiToAnthropic.error_body(529, upstream.to_string().as_bytes()));
        assert_eq!(
            body,
            json!({"error": {"message": "Overloaded", "type": "overloaded_error", "param": null, "code": null}})
        );
    }

    #[test]
    fn a_body_that_is_no_error_keeps_its_text_and_nothing_crosses_on_the_same_protocol() {
        let body = parsed(Crossing::OpenAiToAnthropic.error_body(502, b"<html>Bad gateway</html>\n"));
        assert_eq!(body["error"]["message"], "<html>Bad gateway</html>");
        assert_eq!(body["error"]["type"], "server_error");
        let empty = parsed(Crossing::AnthropicToOpenAi(ChatUpstream::OpenAi).error_body(500, b""));
        assert_eq!(empty["error"]["message"], "the provider answered 500");
        assert_eq!(empty["error"]["type"], "api_error");
        assert_eq!(Crossing::Same.error_body(400, b"{}"), None);
    }

    fn shaped(api: &ProviderApi, kind: ProviderKind, status: u16, body: &Value) -> Value {
        let bytes = bytes::Bytes::from(body.to_string());
        serde_json::from_slice(&google_error_body(api, kind, status, bytes)).unwrap_or(Value::Null)
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
