//! Converse's names for what the Anthropic shape names otherwise: image formats and stop
//! reasons. Shared by the request, response and stream translators.

/// An image's media type as Converse names its format (`png`, `jpeg`, `gif`, `webp`).
pub(super) fn image_format(media_type: &str) -> Option<&'static str> {
    match media_type {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// Converse's stop reason for an Anthropic one, and back.
pub(super) fn stop_to_converse(reason: &str) -> &'static str {
    match reason {
        "max_tokens" => "max_tokens",
        "stop_sequence" => "stop_sequence",
        "tool_use" => "tool_use",
        "refusal" => "content_filtered",
        _ => "end_turn",
    }
}

pub(super) fn stop_to_anthropic(reason: &str) -> &'static str {
    match reason {
        "max_tokens" => "max_tokens",
        "stop_sequence" => "stop_sequence",
        "tool_use" => "tool_use",
        "guardrail_intervened" | "content_filtered" => "refusal",
        _ => "end_turn",
    }
}
