"""The official OpenAI and Anthropic Python SDKs work unchanged against the simulated provider."""

from __future__ import annotations

import json
import urllib.request

import anthropic
import openai
import pytest

CONFIG = """
seed = 5
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 9 }
limits = { rpm = 1000, tpm = 1000000 }

[[models]]
name = "text-embedding-3-small"
embedding_dims = 16

[[models]]
name = "tiny-rpm"
limits = { rpm = 1 }

[[models]]
name = "claude-sim"
shape = "anthropic"
completion = { dist = "fixed", tokens = 6 }
limits = { rpm = 1000, itpm = 100000, otpm = 100000 }

[[models]]
name = "claude-tiny"
shape = "anthropic"
limits = { rpm = 1 }
"""


@pytest.fixture(scope="module")
def sim(start_sim) -> str:
    url, _proc = start_sim(CONFIG)
    return url


def stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_stats", timeout=10) as response:
        return json.load(response)


def oai(url: str, retries: int = 2) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=retries)


def claude(url: str, retries: int = 2) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=retries)


def test_openai_chat(sim: str) -> None:
    completion = oai(sim).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}], max_tokens=50, user="py-tenant"
    )
    assert completion.choices[0].message.role == "assistant"
    assert completion.usage is not None and completion.usage.completion_tokens == 9
    assert completion.usage.prompt_tokens > 0
    assert len(completion.choices[0].message.content.split()) == 9
    assert stats(sim)["tenants"]["py-tenant"]["served"] >= 1


def test_openai_streaming_with_usage(sim: str) -> None:
    stream = oai(sim).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=50,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage is not None:
            usage = chunk.usage
    assert len(text.split()) == 9
    assert usage is not None and usage.completion_tokens == 9


def test_openai_embeddings(sim: str) -> None:
    result = oai(sim).embeddings.create(model="text-embedding-3-small", input=["hello world", "bye"])
    assert len(result.data) == 2
    assert len(result.data[0].embedding) == 16
    assert result.usage.prompt_tokens == 3


def test_openai_models(sim: str) -> None:
    ids = {m.id for m in oai(sim).models.list()}
    assert {"gpt-4o-mini", "claude-sim"} <= ids


def test_openai_rate_limit_raises(sim: str) -> None:
    client = oai(sim, retries=0)
    client.chat.completions.create(model="tiny-rpm", messages=[{"role": "user", "content": "a"}], max_tokens=5)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="tiny-rpm", messages=[{"role": "user", "content": "b"}], max_tokens=5)
    assert info.value.status_code == 429
    assert info.value.response.headers["x-ratelimit-limit-requests"] == "1"
    assert int(info.value.response.headers["retry-after"]) >= 1
    assert info.value.body["type"] == "requests"


def test_openai_not_found(sim: str) -> None:
    with pytest.raises(openai.NotFoundError):
        oai(sim, retries=0).chat.completions.create(model="nope", messages=[{"role": "user", "content": "a"}])


def test_anthropic_message(sim: str) -> None:
    message = claude(sim).messages.create(
        model="claude-sim",
        max_tokens=100,
        system="be brief",
        messages=[{"role": "user", "content": "hello"}],
        metadata={"user_id": "py-claude"},
    )
    assert message.role == "assistant"
    assert message.content[0].type == "text"
    assert message.usage.output_tokens == 6
    assert message.stop_reason == "end_turn"
    assert stats(sim)["tenants"]["py-claude"]["output_tokens"] >= 6


def test_anthropic_streaming(sim: str) -> None:
    with claude(sim).messages.stream(
        model="claude-sim", max_tokens=100, messages=[{"role": "user", "content": "hello"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert len(text.split()) == 6
    assert final.usage.output_tokens == 6
    assert final.stop_reason == "end_turn"


def test_anthropic_rate_limit_raises(sim: str) -> None:
    client = claude(sim, retries=0)
    client.messages.create(model="claude-tiny", max_tokens=5, messages=[{"role": "user", "content": "a"}])
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(model="claude-tiny", max_tokens=5, messages=[{"role": "user", "content": "b"}])
    assert info.value.status_code == 429
    assert info.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert info.value.body["error"]["type"] == "rate_limit_error"
