//! Requests served by a deployment of the other protocol: an OpenAI-shaped request sent to
//! an Anthropic deployment (or the reverse) is translated on the way up, and its response
//! or stream on the way back, so the client's SDK never notices.

use serde_json::Value;
use sluice_config::ProviderKind;
use sluice_provider::{
    AnthropicToOpenAiStream, OpenAiToAnthropicStream, ParsedRequest, Protocol, StreamTap, TranslateError,
    anthropic_to_openai_request, anthropic_to_openai_response, openai_to_anthropic_request,
    openai_to_anthropic_response, upstream_body,
};

/// How a request crosses to its deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// Same protocol: passed through.
    Same,
    /// OpenAI client, Anthropic deployment.
    OpenAiToAnthropic,
    /// Anthropic client, OpenAI-compatible deployment.
    AnthropicToOpenAi,
}

impl Crossing {
    /// The crossing of a `client` request to a deployment of `kind`.
    #[must_use]
    pub fn of(client: Protocol, kind: ProviderKind) -> Self {
        match (client, kind) {
            (Protocol::OpenAiChat, ProviderKind::Anthropic) => Self::OpenAiToAnthropic,
            (Protocol::AnthropicMessages, ProviderKind::OpenAi | ProviderKind::Ollama) => Self::AnthropicToOpenAi,
            _ => Self::Same,
        }
    }

    /// The protocol spoken upstream.
    #[must_use]
    pub fn upstream(self, client: Protocol) -> Protocol {
        match self {
            Self::Same => client,
            Self::OpenAiToAnthropic => Protocol::AnthropicMessages,
            Self::AnthropicToOpenAi => Protocol::OpenAiChat,
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
            Self::AnthropicToOpenAi => anthropic_to_openai_request(request)?,
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
            Self::AnthropicToOpenAi => openai_to_anthropic_response(body, client_model),
        }
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
            Self::AnthropicToOpenAi => Pipe::ToAnthropic(OpenAiToAnthropicStream::new(client_model)),
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
}

impl Pipe {
    /// Bytes for the client from an upstream chunk.
    pub fn push(&mut self, chunk: &[u8]) -> bytes::Bytes {
        match self {
            Self::Tap(tap) => tap.push(chunk),
            Self::ToOpenAi(t) => t.push(chunk),
            Self::ToAnthropic(t) => t.push(chunk),
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
        }
    }

    /// The usage seen, in the upstream's terms, and (same protocol only) the content events.
    #[must_use]
    pub fn usage(&self) -> (Option<sluice_provider::Usage>, Option<u64>) {
        match self {
            Self::Tap(tap) => {
                let outcome = tap.outcome();
                (outcome.usage, Some(outcome.content_deltas))
            }
            Self::ToOpenAi(t) => (t.usage(), None),
            Self::ToAnthropic(t) => (t.usage(), None),
        }
    }
}
