"""Each official SDK served by the other provider's simulated endpoint, through the gateway.

`gpt-via-claude` is an OpenAI-shaped name whose deployment is an Anthropic-shaped model;
`claude-via-gpt` the reverse. Plain answers, streams, tool definitions, forced tool calls
(plain and streamed) and tool results in a second turn must all look native to the SDK.
`gpt-fallback` / `claude-fallback` have a primary that always answers 503 and a fallback of
the other protocol: the SDK call succeeds as if nothing happened. `claude-via-nowhere` /
`gpt-via-nowhere` name a model the other protocol's provider does not serve: its error
reaches the SDK in the SDK's own shape.
"""

from __future__ import annotations

import json
import urllib.request

import anthropic
import openai
import pytest
from conftest import key_sha256, sim_providers

KEY = "sk-cross-provider-acme"

# Output lengths differ per model, so usage tells which model really answered.
GPT_TOKENS = 7
CLAUDE_TOKENS = 5
ARGUMENTS = {"query": "sluice"}

SIM = """
seed = 17
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 7 }
limits = { rpm = 1000, tpm = 1000000 }

[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = { dist = "fixed", tokens = 5 }
limits = { rpm = 1000, itpm = 1000000, otpm = 100000 }

[[models]]
name = "gpt-down"
faults = { error_503 = 1.0 }

[[models]]
name = "claude-down"
shape = "anthropic"
faults = { error_503 = 1.0 }
"""

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the documentation.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "search",
        "description": "Search the documentation.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]


def gateway_config(sim_url: str, key_file: str, jobs_path: str) -> str:
    sha = key_sha256(KEY)
    fallback = 'when = ["provider_5xx", "primary_unavailable"]'
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs_path}"

{sim_providers(sim_url, key_file, 'sim-openai')}

[[deployments]]
name = "mini"
provider = "sim-openai"
model = "gpt-4o-mini"

[[deployments]]
name = "sonnet"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"

[[deployments]]
name = "gpt-down"
provider = "sim-openai"
model = "gpt-down"

[[deployments]]
name = "claude-down"
provider = "sim-anthropic"
model = "claude-down"

[[deployments]]
name = "gpt-nowhere"
provider = "sim-openai"
model = "gpt-nowhere"

[[deployments]]
name = "claude-nowhere"
provider = "sim-anthropic"
model = "claude-nowhere"

[[models]]
name = "gpt-via-claude"
deployment = "sonnet"

[[models]]
name = "claude-via-gpt"
deployment = "mini"

[[models]]
name = "claude-via-nowhere"
deployment = "gpt-nowhere"

[[models]]
name = "gpt-via-nowhere"
deployment = "claude-nowhere"

[[models]]
name = "gpt-fallback"
deployment = "gpt-down"
fallbacks = [{{ deployment = "sonnet", {fallback} }}]

[[models]]
name = "claude-fallback"
deployment = "claude-down"
fallbacks = [{{ deployment = "mini", {fallback} }}]

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{sha}"
"""


@pytest.fixture(scope="module")
def env(start_sim, processes) -> dict[str, str]:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("cross-provider-key", "sk-provider-secret-cross")
    # Its own job store: the default file in the working directory may be held by another gateway.
    jobs_path = key_file.parent / "cross-provider-jobs.redb"
    config = processes.write("cross-gateway.toml", gateway_config(sim_url, str(key_file), str(jobs_path)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return {"gateway": url, "sim": sim_url}


def oa(env: dict[str, str]) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{env['gateway']}/v1", api_key=KEY, max_retries=0, timeout=30)


def claude(env: dict[str, str]) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=env["gateway"], api_key=KEY, max_retries=0, timeout=30)


def sim_requests(env: dict[str, str], model: str) -> int:
    with urllib.request.urlopen(f"{env['sim']}/_stats", timeout=10) as response:
        stats = json.load(response)
    return stats["models"].get(model, {}).get("requests", 0)


# --- The OpenAI SDK, served by an Anthropic-shaped deployment ------------------------------


def test_openai_sdk_chat_served_by_anthropic(env) -> None:
    before = sim_requests(env, "claude-sonnet-4-5")
    reply = oa(env).chat.completions.create(
        model="gpt-via-claude",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}],
        max_tokens=50,
    )
    assert reply.object == "chat.completion" and reply.model == "gpt-via-claude"
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert reply.usage.completion_tokens == CLAUDE_TOKENS and reply.usage.prompt_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert sim_requests(env, "claude-sonnet-4-5") == before + 1


def test_openai_sdk_stream_served_by_anthropic(env) -> None:
    chunks = list(
        oa(env).chat.completions.create(
            model="gpt-via-claude",
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=50,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == CLAUDE_TOKENS
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == CLAUDE_TOKENS
    assert chunks[-1].usage.prompt_tokens > 0


def forced_search(env, **extra):
    return oa(env).chat.completions.create(
        model="gpt-via-claude",
        messages=[{"role": "user", "content": "What is sluice?"}],
        max_tokens=100,
        tools=OPENAI_TOOLS,
        tool_choice={"type": "function", "function": {"name": "search"}},
        **extra,
    )


def test_openai_sdk_forced_tool_call_then_tool_result(env) -> None:
    reply = forced_search(env)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id
    assert call.function.name == "search"
    assert json.loads(call.function.arguments) == ARGUMENTS
    assert reply.usage.completion_tokens > 0

    # Second turn: the tool's result goes back; the answer is text again.
    messages = [
        {"role": "user", "content": "What is sluice?"},
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sluice is a rate-limit-aware gateway for LLM APIs."},
    ]
    answer = oa(env).chat.completions.create(
        model="gpt-via-claude", messages=messages, max_tokens=100, tools=OPENAI_TOOLS
    )
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.content.strip() and not answer.choices[0].message.tool_calls
    assert answer.usage.completion_tokens == CLAUDE_TOKENS
    assert answer.usage.prompt_tokens > reply.usage.prompt_tokens, "the tool call and result reached the provider"


def test_openai_sdk_marker_tool_call_with_auto_choice(env) -> None:
    reply = oa(env).chat.completions.create(
        model="gpt-via-claude",
        messages=[{"role": "user", "content": "Look it up call-tool:search"}],
        max_tokens=100,
        tools=OPENAI_TOOLS,
        tool_choice="auto",
    )
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.choices[0].message.tool_calls[0].function.name == "search"


def test_openai_sdk_streamed_tool_call(env) -> None:
    stream = forced_search(env, stream=True, stream_options={"include_usage": True})
    calls: dict[int, dict[str, str]] = {}
    finishes, usage, fragments = [], None, 0
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += part.id or ""
            if part.function is not None:
                call["name"] += part.function.name or ""
                call["arguments"] += part.function.arguments or ""
                fragments += bool(part.function.arguments)
        if chunk.choices[0].finish_reason:
            finishes.append(chunk.choices[0].finish_reason)
    assert list(calls) == [0]
    assert calls[0]["id"] and calls[0]["name"] == "search"
    assert json.loads(calls[0]["arguments"]) == ARGUMENTS
    assert fragments >= 2, "arguments arrive in fragments"
    assert finishes == ["tool_calls"]
    assert usage is not None and usage.completion_tokens > 0


# --- The Anthropic SDK, served by an OpenAI-shaped deployment ------------------------------


def test_anthropic_sdk_message_served_by_openai(env) -> None:
    before = sim_requests(env, "gpt-4o-mini")
    message = claude(env).messages.create(
        model="claude-via-gpt",
        max_tokens=50,
        system="Be brief.",
        messages=[{"role": "user", "content": "Hello"}],
    )
    assert message.type == "message" and message.role == "assistant" and message.model == "claude-via-gpt"
    assert [b.type for b in message.content] == ["text"] and message.content[0].text.strip()
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == GPT_TOKENS and message.usage.input_tokens > 0
    assert sim_requests(env, "gpt-4o-mini") == before + 1


def test_anthropic_sdk_stream_served_by_openai(env) -> None:
    with claude(env).messages.stream(
        model="claude-via-gpt", max_tokens=50, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert len(text.split()) == GPT_TOKENS
    assert final.content[0].type == "text" and final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == GPT_TOKENS


def test_anthropic_sdk_forced_tool_use_then_tool_result(env) -> None:
    question = {"role": "user", "content": "What is sluice?"}
    message = claude(env).messages.create(
        model="claude-via-gpt",
        max_tokens=100,
        messages=[question],
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "tool", "name": "search"},
    )
    assert message.stop_reason == "tool_use"
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1
    use = uses[0]
    assert use.id and use.name == "search" and use.input == ARGUMENTS
    assert message.usage.output_tokens > 0

    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sluice is a gateway for LLM APIs."}],
    }
    answer = claude(env).messages.create(
        model="claude-via-gpt",
        max_tokens=100,
        messages=[question, {"role": "assistant", "content": message.content}, result],
        tools=ANTHROPIC_TOOLS,
    )
    assert answer.stop_reason == "end_turn"
    assert [b.type for b in answer.content] == ["text"] and answer.content[0].text.strip()
    assert answer.usage.output_tokens == GPT_TOKENS
    assert answer.usage.input_tokens > message.usage.input_tokens, "the tool use and result reached the provider"


def test_anthropic_sdk_streamed_tool_use(env) -> None:
    with claude(env).messages.stream(
        model="claude-via-gpt",
        max_tokens=100,
        messages=[{"role": "user", "content": "Look it up call-tool:search"}],
        tools=ANTHROPIC_TOOLS,
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert "content_block_start" in kinds and "content_block_stop" in kinds
    assert kinds.count("input_json") >= 2, f"partial JSON arrives in fragments: {kinds}"
    assert final.stop_reason == "tool_use"
    uses = [b for b in final.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "search" and uses[0].input == ARGUMENTS and uses[0].id
    assert final.usage.output_tokens > 0


# --- Fallback to the other protocol -------------------------------------------------------


def test_openai_sdk_falls_back_to_anthropic_transparently(env) -> None:
    down_before = sim_requests(env, "gpt-down")
    reply = oa(env).chat.completions.create(
        model="gpt-fallback", messages=[{"role": "user", "content": "Say hi"}], max_tokens=50
    )
    assert reply.model == "gpt-fallback" and reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content.strip()
    assert reply.usage.completion_tokens == CLAUDE_TOKENS, "served by the Anthropic fallback"
    assert sim_requests(env, "gpt-down") > down_before, "the primary was tried first"

    chunks = list(
        oa(env).chat.completions.create(
            model="gpt-fallback", messages=[{"role": "user", "content": "Say hi"}], max_tokens=50, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == CLAUDE_TOKENS


def test_openai_sdk_responses_fall_back_to_anthropic_plain_and_streamed(env) -> None:
    # The primary may be tried first or skipped while its breaker is open (earlier tests
    # failed it); either way the Anthropic fallback answers, as its output length shows.
    reply = oa(env).responses.create(model="gpt-fallback", instructions="Be brief.", input="Say hi", max_output_tokens=50)
    assert reply.status == "completed" and reply.model == "gpt-fallback" and reply.output_text.strip()
    assert reply.usage is not None and reply.usage.output_tokens == CLAUDE_TOKENS, "served by the Anthropic fallback"

    events = list(oa(env).responses.create(model="gpt-fallback", input="Say hi", max_output_tokens=50, stream=True))
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert len(text.split()) == CLAUDE_TOKENS and events[-1].response.output_text == text


def test_anthropic_sdk_falls_back_to_openai_transparently(env) -> None:
    down_before = sim_requests(env, "claude-down")
    message = claude(env).messages.create(
        model="claude-fallback", max_tokens=50, messages=[{"role": "user", "content": "Hello"}]
    )
    assert message.model == "claude-fallback" and message.stop_reason == "end_turn"
    assert message.content[0].type == "text" and message.content[0].text.strip()
    assert message.usage.output_tokens == GPT_TOKENS, "served by the OpenAI fallback"
    assert sim_requests(env, "claude-down") > down_before, "the primary was tried first"


# --- Provider errors across protocols --------------------------------------------------------


def test_anthropic_sdk_reads_an_openai_providers_error_in_its_own_shape(env) -> None:
    with pytest.raises(anthropic.NotFoundError) as raised:
        claude(env).messages.create(
            model="claude-via-nowhere", max_tokens=20, messages=[{"role": "user", "content": "Hello"}]
        )
    body = raised.value.body
    assert isinstance(body, dict) and body["type"] == "error", body
    assert body["error"]["type"] == "not_found_error"
    assert "gpt-nowhere" in body["error"]["message"], "the provider's own message"
    assert "gpt-nowhere" in str(raised.value)


def test_openai_sdk_reads_an_anthropic_providers_error_in_its_own_shape(env) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        oa(env).chat.completions.create(
            model="gpt-via-nowhere", max_tokens=20, messages=[{"role": "user", "content": "Hello"}]
        )
    error = raised.value
    # OpenAI's error object: message, type, param and code (Anthropic's has only the first two).
    assert isinstance(error.body, dict) and {"message", "type", "param", "code"} <= set(error.body), error.body
    assert error.type == "not_found_error"
    assert "claude-nowhere" in error.body["message"], "the provider's own message"
