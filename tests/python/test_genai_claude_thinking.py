"""Extended thinking with tool use from the official `google-genai` SDK, through sluice, to
Claude (Anthropic, Bedrock Converse and InvokeModel, Claude on Vertex; the simulated
providers sign thinking and verify every signature sent back).

The client asks with `thinking_config` (a budget, thoughts included) and talks through the
SDK's own chat session, which keeps the model's turns as it got them. sluice hands Claude's
thinking out as `thought` parts: the thinking text, and the whole signed block wrapped in
the part's `thought_signature`, which the session sends back, so Claude gets its thinking
blocks again on the turn that answers its tool call. Three turns with a tool call each,
whole and streamed; an altered block is refused by the provider.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_openai_thinking import KEY, PROFILES, QUESTIONS, start_gateway


@pytest.fixture(scope="module")
def gateway(start_sim, processes) -> str:
    return start_gateway(start_sim, processes, "genai-think")


def chat(gateway: str, profile: str) -> tuple[Any, Any, Any]:
    """The client (kept: its HTTP client closes with it), the config, and a chat session."""
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=gateway))
    decl = types.FunctionDeclaration(
        name="get_weather", description="The weather of a city",
        parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    config = types.GenerateContentConfig(
        max_output_tokens=2048,
        tools=[types.Tool(function_declarations=[decl])],
        thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    return client, config, client.chats.create(model=profile, config=config)


def send(session, message: Any, stream: bool) -> list:
    """One turn; the parts the model answered (all chunks' parts, streamed)."""
    if not stream:
        return list(session.send_message(message).candidates[0].content.parts)
    parts = []
    for chunk in session.send_message_stream(message):
        if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
            parts += chunk.candidates[0].content.parts
    return parts


def check_call_turn(parts: list) -> Any:
    """Thought parts (the text shown, one carrying the signed block), then the call."""
    thoughts = [p for p in parts if p.thought]
    calls = [p.function_call for p in parts if p.function_call]
    assert "".join(p.text or "" for p in thoughts), "the thinking is shown"
    assert any(p.thought_signature for p in thoughts), "the signed block rides a thought part"
    assert [c.name for c in calls] == ["get_weather"], parts
    return calls[0]


def result(call: Any, question: str | None) -> list:
    from google.genai import types

    parts = [types.Part.from_function_response(name=call.name, response={"result": "sunny"})]
    if question:
        parts.append(types.Part.from_text(text=question))
    return parts


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("profile", list(PROFILES))
def test_three_turns_of_thinking_and_tool_calls_from_google_genai(gateway: str, profile: str, stream: bool) -> None:
    _client, _, session = chat(gateway, profile)
    message: Any = QUESTIONS[0]
    for question in QUESTIONS[1:] + [None]:
        # Turns 2 and 3 go back with the session's history: the provider verifies every
        # signature and refuses a tool answer whose call's turn lost its thinking.
        call = check_call_turn(send(session, message, stream))
        message = result(call, question)
    final = send(session, message, stream)
    assert "".join(p.text or "" for p in final if not p.thought), final


@pytest.mark.parametrize("profile", list(PROFILES))
def test_an_altered_thinking_block_is_refused_by_the_provider(gateway: str, profile: str) -> None:
    from google.genai import errors, types

    client, config, session = chat(gateway, profile)
    call = check_call_turn(send(session, QUESTIONS[0], stream=False))
    history = session.get_history()
    prefix = b"sluice.thinking_block:"
    for part in history[-1].parts:
        if part.thought_signature:
            assert part.thought_signature.startswith(prefix), part
            block = json.loads(part.thought_signature[len(prefix) :])
            block["thinking"] += " (edited)"
            part.thought_signature = prefix + json.dumps(block).encode()
    contents = [*history, types.Content(role="user", parts=result(call, None))]
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model=profile, contents=contents, config=config)
    assert refused.value.code == 400 and "signature" in str(refused.value)
