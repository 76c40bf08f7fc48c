"""Extended thinking with tool use from the official `openai` SDK, through sluice, to every
Anthropic-shaped provider: Anthropic, Bedrock Converse, Bedrock InvokeModel and Claude on
Vertex (the simulated ones, which sign thinking and verify the signatures sent back as the
providers do).

The OpenAI client asks with `reasoning_effort` and reads the thinking where LiteLLM puts it
for OpenAI-shaped clients of Claude (https://docs.litellm.ai/docs/reasoning_content): the
text in `message.reasoning_content`, the signed blocks in `message.thinking_blocks` (in a
stream, `delta.reasoning_content` and `delta.thinking_blocks`). It sends the assistant
message back as it got it, `thinking_blocks` included, and the conversation goes on for
three turns with a tool call in each; a signature altered on the way back is refused.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest
from conftest import key_sha256
from test_google_sdk import key_pair

KEY = "sk-openai-thinking-acme"
BEDROCK_MODEL = "anthropic.claude-3-7-sonnet-20250219-v1:0"
CLAUDE = "claude-sonnet-4-5"
ACCOUNT = "sluice-think@acme-ai.iam.gserviceaccount.com"
ACCESS_KEY_ID = "AKIDSLUICESIMULATED"
SECRET_ACCESS_KEY = "sluice-simulated-secret-access-key"

SIM = f"""
seed = 31
[[models]]
name = "{BEDROCK_MODEL}"
shape = "anthropic"
flavor = "bedrock"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "{CLAUDE}"
shape = "anthropic"
completion = {{ dist = "fixed", tokens = 6 }}

[google]
service_accounts = [{{ client_email = "{ACCOUNT}", public_key_pem = PUBLIC_PEM }}]
"""

# Profile -> the deployment behind it.
PROFILES = {
    "claude-direct": "anthropic",
    "claude-converse": "bedrock-converse",
    "claude-invoke": "bedrock-invoke",
    "claude-vertex": "vertex-claude",
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
QUESTIONS = [
    "Weather in Paris? call-tool:get_weather",
    "And in Lyon? call-tool:get_weather",
    "And in Nice? call-tool:get_weather",
]


def gateway_config(sim: str, files: dict[str, Any]) -> str:
    models = "".join(f'\n[[models]]\nname = "{p}"\ndeployment = "{d}"\n' for p, d in PROFILES.items())
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{files['jobs']}"

[[providers]]
name = "anthropic"
kind = "anthropic"
base_url = "{sim}"
api_key_file = "{files['key']}"

[[providers]]
name = "bedrock-converse"
kind = "bedrock"
base_url = "{sim}"
region = "us-east-1"
aws_credentials_file = "{files['aws']}"

[[providers]]
name = "bedrock-invoke"
kind = "bedrock"
bedrock_api = "invoke"
base_url = "{sim}"
region = "us-east-1"
aws_credentials_file = "{files['aws']}"

[[providers]]
name = "vertex-anthropic"
kind = "vertex"
publisher = "anthropic"
project = "acme-ai"
region = "us-east5"
base_url = "{sim}"
service_account_file = "{files['account']}"

[[deployments]]
name = "anthropic"
provider = "anthropic"
model = "{CLAUDE}"

[[deployments]]
name = "bedrock-converse"
provider = "bedrock-converse"
model = "{BEDROCK_MODEL}"

[[deployments]]
name = "bedrock-invoke"
provider = "bedrock-invoke"
model = "{BEDROCK_MODEL}"

[[deployments]]
name = "vertex-claude"
provider = "vertex-anthropic"
model = "{CLAUDE}"
{models}
[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"
"""


def start_gateway(start_sim, processes, name: str) -> str:
    """A simulated provider and a gateway with one profile a Claude provider (`PROFILES`);
    the gateway's URL. `name` keeps each module's files apart."""
    private, public = key_pair()
    sim, _ = start_sim(SIM.replace("PUBLIC_PEM", json.dumps(public)))
    info = {
        "type": "service_account", "project_id": "acme-ai", "private_key_id": "k1", "private_key": private,
        "client_email": ACCOUNT, "token_uri": f"{sim}/token",
    }
    files: dict[str, Any] = {
        "account": processes.write(f"{name}-sa.json", json.dumps(info)),
        "key": processes.write(f"{name}-anthropic-key", "sk-ant-simulated"),
        "aws": processes.write(
            f"{name}-aws", f"[default]\naws_access_key_id = {ACCESS_KEY_ID}\naws_secret_access_key = {SECRET_ACCESS_KEY}\n"
        ),
    }
    files["jobs"] = files["account"].parent / f"{name}-jobs.redb"
    config = processes.write(f"gateway-{name}.toml", gateway_config(sim, files))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


@pytest.fixture(scope="module")
def client(start_sim, processes) -> openai.OpenAI:
    url = start_gateway(start_sim, processes, "think")
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=30)


def ask(client: openai.OpenAI, profile: str, messages: list[dict], stream: bool) -> dict:
    """One turn with thinking and tools; the assistant message as the client keeps it (a
    dict, `reasoning_content` and `thinking_blocks` included), whole or rebuilt from the
    stream's deltas."""
    params: dict[str, Any] = {
        "model": profile, "messages": messages, "tools": TOOLS, "max_tokens": 2048, "reasoning_effort": "low",
    }
    if not stream:
        reply = client.chat.completions.create(**params)
        assert reply.choices[0].finish_reason == "tool_calls"
        return reply.choices[0].message.model_dump(exclude_none=True)
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": "", "thinking_blocks": []}
    calls: dict[int, dict] = {}
    finish = None
    for chunk in client.chat.completions.create(**params, stream=True):
        for choice in chunk.choices:
            delta = choice.delta
            message["content"] += delta.content or ""
            message["reasoning_content"] += getattr(delta, "reasoning_content", None) or ""
            message["thinking_blocks"] += getattr(delta, "thinking_blocks", None) or []
            for t in delta.tool_calls or []:
                call = calls.setdefault(t.index, {"id": t.id, "type": "function", "function": {"name": "", "arguments": ""}})
                call["function"]["name"] += t.function.name or ""
                call["function"]["arguments"] += t.function.arguments or ""
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def check_turn(message: dict) -> None:
    """The assistant's turn carries signed thinking whose text is the reasoning shown, and a call."""
    blocks = message["thinking_blocks"]
    assert [b["type"] for b in blocks] == ["thinking"], blocks
    assert blocks[0]["signature"] and blocks[0]["thinking"]
    assert message["reasoning_content"] == blocks[0]["thinking"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]


def answered(message: dict) -> list[dict]:
    return [{"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for c in message["tool_calls"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("profile", list(PROFILES))
def test_three_turns_of_thinking_and_tool_calls_from_the_openai_sdk(client, profile: str, stream: bool) -> None:
    messages: list[dict] = [{"role": "user", "content": QUESTIONS[0]}]
    turns = []
    for question in QUESTIONS[1:] + [None]:
        # Turns 2 and 3 replay the earlier turns' thinking: the simulator verifies every
        # signature and refuses a tool turn that does not open with its thinking.
        message = ask(client, profile, messages, stream)
        check_turn(message)
        turns.append(message)
        messages += [message, *answered(message)]
        if question:
            messages.append({"role": "user", "content": question})
    assert len(turns) == 3
    assert len({t["thinking_blocks"][0]["signature"] for t in turns}) == 3, "each turn signed anew"


@pytest.mark.parametrize("profile", list(PROFILES))
def test_an_altered_signature_is_refused_by_the_provider(client, profile: str) -> None:
    first = ask(client, profile, [{"role": "user", "content": QUESTIONS[0]}], stream=False)
    altered = copy.deepcopy(first)
    altered["thinking_blocks"][0]["thinking"] += " (edited)"
    for message, ok in ((first, True), (altered, False)):
        messages = [{"role": "user", "content": QUESTIONS[0]}, message, *answered(message)]
        params = {"model": profile, "messages": messages, "tools": TOOLS, "max_tokens": 2048, "reasoning_effort": "low"}
        if ok:
            assert client.chat.completions.create(**params).choices[0].message.content
            continue
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(**params)
        assert "signature" in str(refused.value)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_without_the_thinking_blocks_the_tool_turn_is_refused(client, profile: str) -> None:
    first = ask(client, profile, [{"role": "user", "content": QUESTIONS[0]}], stream=False)
    bare = {k: v for k, v in first.items() if k not in ("thinking_blocks", "reasoning_content")}
    messages = [{"role": "user", "content": QUESTIONS[0]}, bare, *answered(first)]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=profile, messages=messages, tools=TOOLS, max_tokens=2048, reasoning_effort="low"
        )
    assert "thinking" in str(refused.value)


def test_what_anthropics_thinking_cannot_take_is_refused_naming_the_field(client) -> None:
    ask_once = [{"role": "user", "content": "Say hi"}]
    for extra, field in (
        ({"max_tokens": 1024}, "max_tokens"),
        ({"max_tokens": 2048, "temperature": 0.2}, "temperature"),
        ({"max_tokens": 2048, "tool_choice": "required", "tools": TOOLS}, "tool_choice"),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="claude-direct", messages=ask_once, reasoning_effort="low", **extra)
        assert refused.value.body.get("param") == field, refused.value.body


# Anthropic's documented test string: the answer opens with a `redacted_thinking` block.
REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("profile", list(PROFILES))
def test_redacted_thinking_goes_out_and_back_with_its_data(client, profile: str, stream: bool) -> None:
    question = [{"role": "user", "content": f"{QUESTIONS[0]} {REDACTED_TRIGGER}"}]
    first = ask(client, profile, question, stream)
    blocks = first["thinking_blocks"]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "thinking"], blocks
    assert blocks[0]["data"] and blocks[1]["signature"]
    assert first["reasoning_content"] == blocks[1]["thinking"], "redacted reasoning shows no text"
    second = client.chat.completions.create(
        model=profile, messages=[*question, first, *answered(first)], tools=TOOLS, max_tokens=2048,
        reasoning_effort="low",
    )
    assert second.choices[0].message.content
    forged = copy.deepcopy(first)
    forged["thinking_blocks"][0]["data"] = "bm90IGZyb20gdGhlIHByb3ZpZGVyLCBub3Qgc2lnbmVkIGF0IGFsbC4uLi4uLg=="
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=profile, messages=[*question, forged, *answered(forged)], tools=TOOLS, max_tokens=2048,
            reasoning_effort="low",
        )
