"""Extended thinking with tool use from the official `anthropic` SDK, through sluice, to
Gemini deployments (the Gemini API's native surface and Gemini on Vertex AI; Gemini 2.5
with a thinking budget and Gemini 3), whose simulated provider signs each function call
(and Gemini 3's text answers) with a thought signature and verifies every signature sent
back, as Google documents (https://ai.google.dev/gemini-api/docs/thought-signatures).

The client asks with `thinking: {type: "enabled", budget_tokens}`. sluice asks Gemini for
that budget and for its thought summaries, hands the summaries out as `thinking` blocks,
and each thought signature as the `signature` of the `thinking` block just before the part
it signs (`gemini:` and Gemini's signature). The client sends its turns back as the SDK
gave them to it, and the conversation goes on for three turns with a tool call in each,
then a text answer; an altered signature is refused by the provider, and Gemini 3 refuses
a tool turn whose thinking blocks were dropped.
"""

from __future__ import annotations

import copy
import json
import urllib.request
from typing import Any

import anthropic
import pytest
from conftest import key_sha256
from test_google_sdk import key_pair

KEY = "sk-anthropic-gemini-thinking"
GEMINI_KEY = "AIza-sim-thinking-key"
ACCOUNT = "sluice-gemini-think@acme-ai.iam.gserviceaccount.com"
GEMINI25 = "gemini-2.5-flash"
GEMINI3 = "gemini-3-flash-preview"

SIM = f"""
seed = 37
[[models]]
name = "{GEMINI25}"
flavor = "gemini"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "{GEMINI3}"
flavor = "gemini"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = {{ dist = "fixed", tokens = 6 }}

[google]
api_keys = ["{GEMINI_KEY}"]
service_accounts = [{{ client_email = "{ACCOUNT}", public_key_pem = PUBLIC_PEM }}]
"""

# Profile -> (deployment, provider, model).
PROFILES = {
    "gemini25": ("flash25", "gemini", GEMINI25),
    "gemini3": ("flash3", "gemini", GEMINI3),
    "vertex-gemini3": ("vx-flash3", "vertex-google", GEMINI3),
}

TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
QUESTIONS = [
    "Weather in Paris? call-tool:get_weather",
    "And in Lyon? call-tool:get_weather",
    "And in Nice? call-tool:get_weather",
]
THINKING = {"type": "enabled", "budget_tokens": 2048}


def gateway_config(sim: str, files: dict[str, Any]) -> str:
    deployments = "".join(
        f'\n[[deployments]]\nname = "{d}"\nprovider = "{p}"\nmodel = "{m}"\n' for d, p, m in PROFILES.values()
    )
    models = "".join(f'\n[[models]]\nname = "{name}"\ndeployment = "{d}"\n' for name, (d, _, _) in PROFILES.items())
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{files['jobs']}"

[[providers]]
name = "gemini"
kind = "gemini"
api_surface = "native"
base_url = "{sim}"
api_key_file = "{files['key']}"

[[providers]]
name = "anthropic"
kind = "anthropic"
base_url = "{sim}"
api_key_file = "{files['anthropic']}"

[[deployments]]
name = "claude"
provider = "anthropic"
model = "claude-sonnet-4-5"

[[models]]
name = "claude"
deployment = "claude"

[[providers]]
name = "vertex-google"
kind = "vertex"
project = "acme-ai"
region = "us-central1"
base_url = "{sim}"
service_account_file = "{files['account']}"
{deployments}{models}
[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"
"""


@pytest.fixture(scope="module")
def sim(start_sim) -> tuple[str, str]:
    private, public = key_pair()
    url, _ = start_sim(SIM.replace("PUBLIC_PEM", json.dumps(public)))
    return url, private


def verified(sim_url: str) -> int:
    """Thought signatures the simulated provider has verified so far."""
    with urllib.request.urlopen(f"{sim_url}/_stats", timeout=10) as reply:
        return json.load(reply)["thought_signatures_verified"]


@pytest.fixture(scope="module")
def client(sim, processes) -> anthropic.Anthropic:
    sim, private = sim
    info = {
        "type": "service_account", "project_id": "acme-ai", "private_key_id": "k1", "private_key": private,
        "client_email": ACCOUNT, "token_uri": f"{sim}/token",
    }
    files: dict[str, Any] = {
        "account": processes.write("gemini-think-sa.json", json.dumps(info)),
        "key": processes.write("gemini-think-key", GEMINI_KEY),
        "anthropic": processes.write("gemini-think-anthropic-key", "sk-ant-simulated"),
    }
    files["jobs"] = files["account"].parent / "gemini-think-jobs.redb"
    config = processes.write("gateway-gemini-think.toml", gateway_config(sim, files))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0, timeout=30)


def ask(client: anthropic.Anthropic, profile: str, messages: list, stream: bool) -> Any:
    """One turn with thinking and tools: the SDK's own message, whole or as its stream
    helper accumulates it."""
    params: dict[str, Any] = {
        "model": profile, "messages": messages, "tools": TOOLS, "max_tokens": 4096, "thinking": THINKING,
    }
    if not stream:
        return client.messages.create(**params)
    with client.messages.stream(**params) as events:
        for _ in events:
            pass
        return events.get_final_message()


def check_call_turn(message: Any) -> str:
    """The turn opens with the thought summary in a thinking block that carries the call's
    signature, then the call; its signature is returned."""
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "tool_use"], message.content
    thought = message.content[0]
    assert thought.thinking, "the thought summary is shown"
    assert thought.signature.startswith("gemini:") and len(thought.signature) > len("gemini:"), thought
    assert message.content[1].name == "get_weather"
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens > 6, "thinking tokens are output"
    return thought.signature


def answered(message: Any) -> dict:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "sunny"} for b in message.content if b.type == "tool_use"],
    }


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("profile", list(PROFILES))
def test_three_turns_of_thinking_and_tool_calls_then_an_answer(client, sim, profile: str, stream: bool) -> None:
    messages: list = [{"role": "user", "content": QUESTIONS[0]}]
    for turn, question in enumerate(QUESTIONS[1:] + [None]):
        # Every later turn replays the earlier ones as the SDK returned them: the
        # simulator verifies each signature (and Gemini 3 wants the current turn's).
        before = verified(sim[0])
        message = ask(client, profile, messages, stream)
        assert verified(sim[0]) - before == turn, "every earlier call's signature came back and verified"
        check_call_turn(message)
        messages += [{"role": "assistant", "content": message.content}, answered(message)]
        if question:
            messages[-1]["content"].append({"type": "text", "text": question})
    before = verified(sim[0])
    final = ask(client, profile, messages, stream)
    assert verified(sim[0]) - before == 3
    assert final.stop_reason == "end_turn"
    texts = [b.text for b in final.content if b.type == "text"]
    assert "".join(texts)
    if PROFILES[profile][2] == GEMINI3:
        # Gemini 3 signs its text answers too; the signature rides a thinking block.
        signed = [b for b in final.content if b.type == "thinking" and b.signature]
        assert len(signed) == 1 and signed[0].signature.startswith("gemini:"), final.content
    messages += [{"role": "assistant", "content": final.content}, {"role": "user", "content": "Thanks, and Paris again? call-tool:get_weather"}]
    check_call_turn(ask(client, profile, messages, stream))


@pytest.mark.parametrize("profile", list(PROFILES))
def test_an_altered_signature_is_refused_by_the_provider(client, profile: str) -> None:
    first = ask(client, profile, [{"role": "user", "content": QUESTIONS[0]}], stream=False)
    content = [b.model_dump(exclude_none=True) for b in first.content]
    altered = copy.deepcopy(content)
    altered[0]["signature"] = "gemini:" + "QUJD" + altered[0]["signature"][len("gemini:") + 4 :]
    for blocks, ok in ((content, True), (altered, False)):
        messages = [
            {"role": "user", "content": QUESTIONS[0]}, {"role": "assistant", "content": blocks}, answered(first),
        ]
        params = {"model": profile, "messages": messages, "tools": TOOLS, "max_tokens": 4096, "thinking": THINKING}
        if ok:
            assert client.messages.create(**params).stop_reason == "end_turn"
            continue
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(**params)
        assert "signature" in str(refused.value)


@pytest.mark.parametrize("profile", ["gemini3", "vertex-gemini3"])
def test_gemini_3_refuses_a_tool_turn_without_its_thinking_blocks(client, profile: str) -> None:
    first = ask(client, profile, [{"role": "user", "content": QUESTIONS[0]}], stream=False)
    bare = [b.model_dump(exclude_none=True) for b in first.content if b.type != "thinking"]
    messages = [{"role": "user", "content": QUESTIONS[0]}, {"role": "assistant", "content": bare}, answered(first)]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model=profile, messages=messages, tools=TOOLS, max_tokens=4096, thinking=THINKING)
    assert "thought_signature" in str(refused.value)


def test_without_thinking_gemini_3_still_gets_its_signatures_back(client) -> None:
    """Gemini 3 always thinks: a client that never asked for thinking still gets the
    signature blocks, and its tool turn passes when it sends them back."""
    question = [{"role": "user", "content": QUESTIONS[0]}]
    first = client.messages.create(model="gemini3", messages=question, tools=TOOLS, max_tokens=256)
    thoughts = [b for b in first.content if b.type == "thinking"]
    assert len(thoughts) == 1 and not thoughts[0].thinking and thoughts[0].signature.startswith("gemini:")
    messages = [*question, {"role": "assistant", "content": first.content}, answered(first)]
    second = client.messages.create(model="gemini3", messages=messages, tools=TOOLS, max_tokens=256)
    assert second.stop_reason == "end_turn"


def test_an_unknown_thinking_type_is_a_400_naming_the_field(client) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model="gemini25", messages=[{"role": "user", "content": "hi"}], max_tokens=256,
            thinking={"type": "enabled"},  # type: ignore[typeddict-item]
        )
    assert "thinking.budget_tokens" in str(refused.value)


def test_a_conversation_moved_from_gemini_to_claude_leaves_geminis_signatures_out(client) -> None:
    """Claude verifies every thinking block sent back and refuses a signature not its own:
    the blocks that carry Gemini's are left out on the way to it."""
    question = [{"role": "user", "content": QUESTIONS[0]}]
    first = ask(client, "gemini3", question, stream=False)
    check_call_turn(first)
    messages = [*question, {"role": "assistant", "content": first.content}, answered(first)]
    moved = client.messages.create(model="claude", messages=messages, tools=TOOLS, max_tokens=256)
    assert moved.stop_reason == "end_turn" and moved.content[0].text
