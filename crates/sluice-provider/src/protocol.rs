//! The wire protocols sluice speaks on both sides of the gateway.

use std::fmt;

/// An API shape a client request (and the upstream call made for it) follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// OpenAI `POST /v1/chat/completions` (also Azure OpenAI, Ollama and other compatibles).
    OpenAiChat,
    /// OpenAI `POST /v1/responses`.
    OpenAiResponses,
    /// OpenAI `POST /v1/embeddings`.
    OpenAiEmbeddings,
    /// OpenAI's legacy `POST /v1/completions` (a `prompt`, answered with `choices[].text`).
    OpenAiCompletions,
    /// Anthropic `POST /v1/messages`.
    AnthropicMessages,
}

impl Protocol {
    /// A stable lower-case name, fit for metric labels and logs.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OpenAiChat => "openai_chat",
            Self::OpenAiResponses => "openai_responses",
            Self::OpenAiEmbeddings => "openai_embeddings",
            Self::OpenAiCompletions => "openai_completions",
            Self::AnthropicMessages => "anthropic_messages",
        }
    }

    /// Whether its streams are OpenAI `data:` chunks ending in `[DONE]`, with usage in a
    /// last chunk when `stream_options.include_usage` asks for it (chat, legacy completions).
    #[must_use]
    pub const fn is_openai_chunks(self) -> bool {
        matches!(self, Self::OpenAiChat | Self::OpenAiCompletions)
    }

    /// Whether responses of this protocol can be streamed as server-sent events.
    #[must_use]
    pub const fn can_stream(self) -> bool {
        !matches!(self, Self::OpenAiEmbeddings)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
