//! Streaming translation: upstream SSE bytes of one protocol in, client SSE bytes of the
//! other out.
//!
//! Like [`StreamTap`](crate::StreamTap), the translators frame the upstream bytes into
//! complete events (chunk boundaries may fall anywhere) and act per complete event, so the
//! output does not depend on how the stream was cut. Each event is translated as soon as it
//! is complete; only an unterminated trailing event is held, bounded by
//! [`MAX_HELD_EVENT_BYTES`](crate::MAX_HELD_EVENT_BYTES) (past it the stream counts as
//! broken).
//!
//! `finish` ends the stream: if the upstream's terminal event (`message_stop` / `data:
//! [DONE]`) or an error event never came, the client gets its protocol's interruption event
//! (the same bytes the gateway's relay sends for an untranslated stream), never a
//! fabricated ending.

mod framer;
mod from_gemini;
mod pipe;
mod to_anthropic;
mod to_gemini;
mod to_openai;
mod to_responses;

pub use self::from_gemini::GeminiToOpenAiStream;
pub use self::to_anthropic::OpenAiToAnthropicStream;
pub use self::to_gemini::{GeminiFraming, OpenAiToGeminiStream};
pub use self::to_openai::AnthropicToOpenAiStream;
pub use self::to_responses::AnthropicToResponsesStream;
