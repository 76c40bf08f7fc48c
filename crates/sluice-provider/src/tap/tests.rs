use proptest::prelude::*;

use super::*;

/// A stream as OpenAI sends it when `stream_options.include_usage` is on.
const OPENAI_STREAM: &str = concat!(
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" wörld\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":3,\"total_tokens\":22,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n\n",
    "data: [DONE]\n\n",
);

/// The same stream as a client that did not ask for usage receives it.
const OPENAI_STREAM_WITHOUT_USAGE: &str = concat!(
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" wörld\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\r\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":2048,\"output_tokens\":2}}}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n",
    "event: ping\r\n",
    "data: {\"type\": \"ping\"}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Grüß\"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" dich\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\r\n\r\n",
    "event: message_delta\r\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\r\n\r\n",
    "event: message_stop\r\n",
    "data: {\"type\":\"message_stop\"}\r\n\r\n",
);

fn run(protocol: Protocol, hide: bool, chunks: &[&[u8]]) -> (Vec<u8>, StreamOutcome) {
    let mut tap = StreamTap::new(protocol, hide);
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&tap.push(chunk));
    }
    out.extend_from_slice(&tap.flush());
    (out, tap.outcome())
}

#[test]
fn openai_stream_passes_through_and_reports_usage() {
    let (out, outcome) = run(Protocol::OpenAiChat, false, &[OPENAI_STREAM.as_bytes()]);
    assert_eq!(out, OPENAI_STREAM.as_bytes());
    assert_eq!(
        outcome,
        StreamOutcome {
            usage: Some(Usage { input_tokens: 19, output_tokens: 3, ..Usage::default() }),
            usage_final: true,
            completed: true,
            error_event: false,
        }
    );
}

#[test]
fn openai_hidden_usage_gives_the_client_its_original_stream() {
    let (out, outcome) = run(Protocol::OpenAiChat, true, &[OPENAI_STREAM.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), OPENAI_STREAM_WITHOUT_USAGE);
    assert_eq!(outcome.usage.map(|u| u.output_tokens), Some(3));
    assert!(outcome.completed);
}

#[test]
fn strips_null_usage_wherever_it_sits() {
    let cases = [
        ("data: {\"usage\":null,\"choices\":[]}\n\n", "data: {\"choices\":[]}\n\n"),
        ("data: {\"usage\" : null , \"a\":1}\n\n", "data: {\"a\":1}\n\n"),
        ("data: {\"a\":1, \"usage\":null}\n\n", "data: {\"a\":1}\n\n"),
        ("data: {\"a\":\"\\\"usage\\\":null\"}\n\n", "data: {\"a\":\"\\\"usage\\\":null\"}\n\n"),
    ];
    for (input, expected) in cases {
        let (out, _) = run(Protocol::OpenAiChat, true, &[input.as_bytes()]);
        assert_eq!(String::from_utf8(out).unwrap(), expected, "{input}");
    }
}

#[test]
fn complete_events_are_never_delayed() {
    let mut tap = StreamTap::new(Protocol::OpenAiChat, false);
    let first = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
    let out = tap.push(format!("{first}data: {{\"choi").as_bytes());
    assert_eq!(out, first.as_bytes(), "the complete event goes out, the partial one waits");
    let out = tap.push(b"ces\":[]}\n");
    assert!(out.is_empty(), "still no blank line");
    assert_eq!(tap.push(b"\n"), "data: {\"choices\":[]}\n\n".as_bytes());
}

#[test]
fn openai_error_chunk_and_truncated_stream() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"con",
    );
    let (out, outcome) = run(Protocol::OpenAiChat, true, &[stream.as_bytes()]);
    assert_eq!(out, stream.as_bytes(), "the unterminated tail is flushed as is");
    assert!(outcome.error_event);
    assert!(!outcome.completed);
    assert_eq!(outcome.usage, None);
}

#[test]
fn event_error_line_is_an_error() {
    let (_, outcome) = run(Protocol::OpenAiChat, false, &[b"event: error\ndata: {\"message\":\"boom\"}\n\n"]);
    assert!(outcome.error_event);
}

#[test]
fn anthropic_stream_usage_and_completion() {
    let (out, outcome) = run(Protocol::AnthropicMessages, true, &[ANTHROPIC_STREAM.as_bytes()]);
    assert_eq!(out, ANTHROPIC_STREAM.as_bytes(), "Anthropic streams are never altered");
    assert_eq!(
        outcome,
        StreamOutcome {
            usage: Some(Usage {
                input_tokens: 472,
                output_tokens: 15,
                cache_read_input_tokens: 2048,
                cache_creation_input_tokens: 0,
                reasoning_tokens: 0,
            }),
            usage_final: true,
            completed: true,
            error_event: false,
        }
    );
}

#[test]
fn anthropic_error_event_mid_stream() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let (_, outcome) = run(Protocol::AnthropicMessages, false, &[stream.as_bytes()]);
    assert!(outcome.error_event);
    assert!(!outcome.completed);
    assert_eq!(outcome.usage, Some(Usage { input_tokens: 10, output_tokens: 1, ..Usage::default() }));
    assert!(!outcome.usage_final, "message_start's figures are the opening ones, not the final count");
}

#[test]
fn anthropic_without_event_lines_uses_the_data_type() {
    let stream = "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n";
    let (_, outcome) = run(Protocol::AnthropicMessages, false, &[stream.as_bytes()]);
    assert!(outcome.completed);
}

#[test]
fn anthropic_cumulative_delta_usage_overrides() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"input_tokens\":7,\"cache_read_input_tokens\":3,\"output_tokens\":20}}\n\n",
    );
    let (_, outcome) = run(Protocol::AnthropicMessages, false, &[stream.as_bytes()]);
    assert_eq!(
        outcome.usage,
        Some(Usage {
            input_tokens: 7,
            output_tokens: 20,
            cache_read_input_tokens: 3,
            cache_creation_input_tokens: 0,
            reasoning_tokens: 0
        })
    );
}

#[test]
fn oversized_event_is_forwarded_not_hoarded() {
    let mut tap = StreamTap::new(Protocol::OpenAiChat, false);
    let big = vec![b'x'; MAX_HELD_EVENT_BYTES + 1];
    assert_eq!(tap.push(&big).len(), big.len());
    assert!(tap.flush().is_empty());
}

#[test]
fn invalid_utf8_passes_through() {
    let stream: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}\n\ndata: [DONE]\n\n";
    let (out, outcome) = run(Protocol::OpenAiChat, true, &[stream]);
    assert_eq!(out, stream);
    assert!(outcome.completed);
}

/// Cuts `stream` at the byte offsets the indexes pick.
fn split_at<'a>(stream: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut offsets: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
    offsets.sort_unstable();
    offsets.dedup();
    let mut chunks = Vec::new();
    let mut start = 0;
    for offset in offsets.into_iter().chain([stream.len()]) {
        chunks.push(&stream[start..offset]);
        start = offset;
    }
    chunks
}

fn streams() -> impl Strategy<Value = (Protocol, bool, &'static str)> {
    prop_oneof![
        Just((Protocol::OpenAiChat, false, OPENAI_STREAM)),
        Just((Protocol::OpenAiChat, true, OPENAI_STREAM)),
        Just((Protocol::AnthropicMessages, false, ANTHROPIC_STREAM)),
        // Mixed line endings, blank-line noise and an unterminated tail.
        Just((
            Protocol::OpenAiChat,
            true,
            "\n: ping\r\n\r\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\r\n\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\r\ndata: [DO"
        )),
    ]
}

proptest! {
    #[test]
    fn splitting_never_changes_output_or_outcome(
        (protocol, hide, stream) in streams(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let whole = run(protocol, hide, &[stream.as_bytes()]);
        let chunks = split_at(stream.as_bytes(), &cuts);
        let split = run(protocol, hide, &chunks);
        prop_assert_eq!(&split.0, &whole.0);
        prop_assert_eq!(split.1, whole.1);
    }

    #[test]
    fn byte_by_byte_equals_whole(hide in any::<bool>()) {
        let stream = OPENAI_STREAM.as_bytes();
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        prop_assert_eq!(run(Protocol::OpenAiChat, hide, &bytes), run(Protocol::OpenAiChat, hide, &[stream]));
    }

    #[test]
    fn without_hiding_output_is_input(noise in "[a-z:{}\" \r\n]{0,300}", cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20)) {
        for protocol in [Protocol::OpenAiChat, Protocol::AnthropicMessages] {
            let chunks = split_at(noise.as_bytes(), &cuts);
            prop_assert_eq!(run(protocol, false, &chunks).0, noise.as_bytes());
        }
    }
}

/// A Responses stream as OpenAI sends it (data trimmed to what matters).
const RESPONSES_STREAM: &str = concat!(
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hi\"}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"delta\":\" there\"}\n\n",
    "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":3,\"text\":\"Hi there\"}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":4,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":30,\"input_tokens_details\":{\"cached_tokens\":10},\"output_tokens\":12,\"output_tokens_details\":{\"reasoning_tokens\":8},\"total_tokens\":42}}}\n\n",
);

#[test]
fn responses_stream_passes_unchanged_and_reports_usage_from_completed() {
    let mut tap = StreamTap::new(Protocol::OpenAiResponses, true);
    let mut out = Vec::new();
    for piece in RESPONSES_STREAM.as_bytes().chunks(7) {
        out.extend_from_slice(&tap.push(piece));
    }
    out.extend_from_slice(&tap.flush());
    assert_eq!(out, RESPONSES_STREAM.as_bytes());
    let outcome = tap.outcome();
    assert!(outcome.completed && !outcome.error_event);
    let usage = outcome.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens), (30, 12, 10));
    assert_eq!(tap.response_id(), Some("resp_1"), "the response's id, for its continuations");
}

#[test]
fn a_responses_stream_names_its_response_from_its_first_event() {
    let mut tap = StreamTap::new(Protocol::OpenAiResponses, false);
    let created = RESPONSES_STREAM.split_inclusive("\n\n").next().unwrap();
    tap.push(created.as_bytes());
    assert_eq!(tap.response_id(), Some("resp_1"), "known before the stream completes");
    assert_eq!(StreamTap::new(Protocol::OpenAiChat, false).response_id(), None);
}

#[test]
fn responses_failed_and_error_events_are_errors_and_not_completions() {
    for event in [
        "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"usage\":null}}\n\n",
        "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\"}\n\n",
        "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\"}\n\n",
    ] {
        let mut tap = StreamTap::new(Protocol::OpenAiResponses, false);
        assert_eq!(&tap.push(event.as_bytes())[..], event.as_bytes());
        assert!(tap.outcome().error_event && !tap.outcome().completed, "{event}");
    }
}
