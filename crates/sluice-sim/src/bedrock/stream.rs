//! The simulated ConverseStream: the Anthropic SSE the simulator renders, re-framed as AWS
//! event-stream messages as they come.

use bytes::Bytes;
use serde_json::Value;

/// Turns Anthropic SSE bytes (any chunking) into ConverseStream frames.
#[derive(Debug, Default)]
pub struct SseToFrames {
    held: Vec<u8>,
    usage: Value,
    invoke: bool,
}

impl SseToFrames {
    /// Frames of ConverseStream, or (`invoke`) InvokeModelWithResponseStream's `chunk`s.
    #[must_use]
    pub fn new(invoke: bool) -> Self {
        Self { invoke, ..Self::default() }
    }

    /// The frames of the events `chunk` completes.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.held.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = self.held.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.held.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
            let (Some(kind), Some(data)) = (field("event:"), field("data:")) else { continue };
            let data: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            if self.invoke {
                out.extend(sluice_provider::anthropic_event_to_invoke(kind, &data));
            } else {
                out.extend(sluice_provider::anthropic_event_to_converse(kind, &data, &mut self.usage));
            }
        }
        Bytes::from(out)
    }
}
