"""The official OpenAI and Anthropic SDKs, pointed at the gateway by base URL and key only,
on each store: every test runs against a gateway on its memory store and one on Redis."""

from __future__ import annotations


import anthropic
import openai
import pytest
from conftest import key_sha256, sim_providers

KEY = "sk-sdk-test-acme"
TIGHT_KEY = "sk-sdk-test-tight"
LIMITED_KEY = "sk-sdk-test-limited"
TIGHT_RESPONSES_KEY = "sk-sdk-test-tight-responses"

SIM = """
seed = 11
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 7 }
limits = { rpm = 1000, tpm = 1000000 }

[[models]]
name = "text-embedding-3-small"
embedding_dims = 8

[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = { dist = "fixed", tokens = 5 }
limits = { rpm = 1000, itpm = 1000000, otpm = 100000 }
"""


def gateway_config(sim_url: str, key_file: str, store: str = "") -> str:
    # Each gateway keeps its async-job store in the session's temporary directory.
    jobs_path = f"{key_file}-jobs.redb"
    sha = key_sha256
    return f"""
[server]
listen = "127.0.0.1:0"

{store}

[jobs]
path = "{jobs_path}"

{sim_providers(sim_url, key_file)}

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 1000, tpm = 1000000 }}

[[deployments]]
name = "embed"
provider = "sim"
model = "text-embedding-3-small"
limits = {{ rpm = 1000, tpm = 1000000 }}

[[deployments]]
name = "sonnet"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"
limits = {{ rpm = 1000, input_tpm = 1000000, output_tpm = 100000 }}

[[models]]
name = "fast-chat"
deployment = "mini"

[[models]]
name = "embed"
deployment = "embed"

[[models]]
name = "smart-chat"
deployment = "sonnet"

[[tenants]]
name = "acme"

[[tenants]]
name = "tight"
limits = {{ rpm = 1, burst_seconds = 60 }}

[[tenants]]
name = "tight-responses"
limits = {{ rpm = 1, burst_seconds = 60 }}

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{sha(KEY)}"

[[keys]]
id = "tight-key"
tenant = "tight"
sha256 = "{sha(TIGHT_KEY)}"

[[keys]]
id = "tight-responses-key"
tenant = "tight-responses"
sha256 = "{sha(TIGHT_RESPONSES_KEY)}"

[[keys]]
id = "limited-key"
tenant = "acme"
sha256 = "{sha(LIMITED_KEY)}"
limits = {{ rpm = 600, tpm = 100000, burst_seconds = 3 }}
"""


@pytest.fixture(scope="module", params=["memory", "redis"])
def gateway(request, start_sim, processes) -> str:
    sim_url, _ = start_sim(SIM)
    store = ""
    if request.param == "redis":
        redis_url = request.getfixturevalue("redis_url")
        store = f'[store]\nkind = "redis"\nurl = "{redis_url}"\nprefix = "pytest-sdk"\n'
    key_file = processes.write(f"provider-key-{request.param}", "sk-provider-planted-secret-python")
    config = processes.write(f"gateway-{request.param}.toml", gateway_config(sim_url, str(key_file), store))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


def oa(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def claude(url: str, key: str = KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)


def test_openai_chat(gateway: str) -> None:
    reply = oa(gateway).chat.completions.create(
        model="fast-chat", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20
    )
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens == 7


def test_openai_stream_with_and_without_usage(gateway: str) -> None:
    chunks = list(
        oa(gateway).chat.completions.create(
            model="fast-chat", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert all(c.usage is None for c in chunks), "usage must stay hidden when the client did not ask"
    chunks = list(
        oa(gateway).chat.completions.create(
            model="fast-chat",
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 7


def test_openai_embeddings_and_models(gateway: str) -> None:
    result = oa(gateway).embeddings.create(model="embed", input=["one", "two"])
    assert len(result.data) == 2 and len(result.data[0].embedding) == 8
    ids = sorted(m.id for m in oa(gateway).models.list())
    assert ids == ["embed", "fast-chat", "smart-chat"]


def test_anthropic_messages_and_stream(gateway: str) -> None:
    message = claude(gateway).messages.create(
        model="smart-chat", max_tokens=50, messages=[{"role": "user", "content": "Hello"}]
    )
    assert message.content[0].text and message.usage.output_tokens == 5
    with claude(gateway).messages.stream(
        model="smart-chat", max_tokens=50, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text.strip() and final.usage.output_tokens == 5


def test_the_callers_own_budget_reaches_the_sdk_in_rate_limit_headers(gateway: str) -> None:
    raw = oa(gateway, LIMITED_KEY).chat.completions.with_raw_response.create(
        model="fast-chat", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20
    )
    assert raw.parse().choices[0].message.content
    # The key's 600 RPM (30 at once, 10 a second back) and 100,000 TPM, this request counted.
    assert raw.headers["x-ratelimit-limit-requests"] == "600"
    assert 27 <= int(raw.headers["x-ratelimit-remaining-requests"]) <= 29
    assert raw.headers["x-ratelimit-limit-tokens"] == "100000"
    assert int(raw.headers["x-ratelimit-remaining-tokens"]) <= 5_000
    assert raw.headers["ratelimit-policy"] == '"requests";q=600;w=60, "tokens";q=100000;w=60'
    raw = claude(gateway, LIMITED_KEY).messages.with_raw_response.create(
        model="smart-chat", max_tokens=20, messages=[{"role": "user", "content": "Hello"}]
    )
    assert raw.parse().content[0].text
    # The Messages route answers in Anthropic's names, not OpenAI's.
    assert int(raw.headers["anthropic-ratelimit-requests-remaining"]) < 30
    assert "x-ratelimit-remaining-requests" not in raw.headers


def error_fields(error: Exception) -> dict:
    body = getattr(error, "body", None)
    assert isinstance(body, dict), f"no JSON body on {error!r}"
    return body.get("error", body)


def test_gateway_429_is_the_sdk_rate_limit_error_with_structured_fields(gateway: str) -> None:
    client = oa(gateway, TIGHT_KEY)
    messages = [{"role": "user", "content": "hi"}]
    client.chat.completions.create(model="fast-chat", messages=messages, max_tokens=5)
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="fast-chat", messages=messages, max_tokens=5)
    fields = error_fields(caught.value)
    assert fields["type"] == "rate_limited"
    assert fields["limiter"] == "rpm"
    assert fields["tenant_id"] == "tight" and fields["api_key_id"] == "tight-key"
    assert fields["gateway_decision"] == "rejected_before_send"
    assert fields["retry_after_ms"] > 1000
    assert caught.value.response.headers["retry-after"]

    with pytest.raises(anthropic.RateLimitError) as caught:
        claude(gateway, TIGHT_KEY).messages.create(model="smart-chat", max_tokens=5, messages=messages)
    fields = error_fields(caught.value)
    assert fields["limiter"] == "rpm" and fields["gateway_decision"] == "rejected_before_send"


def test_bad_key_and_unknown_model_are_sdk_errors(gateway: str) -> None:
    with pytest.raises(openai.AuthenticationError):
        oa(gateway, "sk-nope").chat.completions.create(
            model="fast-chat", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.NotFoundError) as caught:
        oa(gateway).chat.completions.create(model="gpt-99", messages=[{"role": "user", "content": "hi"}])
    assert "planted" not in str(caught.value.body)


def test_models_retrieve_and_anthropic_models_list(gateway: str) -> None:
    assert oa(gateway).models.retrieve("smart-chat").id == "smart-chat"
    with pytest.raises(openai.NotFoundError) as caught:
        oa(gateway).models.retrieve("gpt-99")
    assert error_fields(caught.value)["code"] == "model_not_found"
    page = claude(gateway).models.list()
    assert [m.id for m in page.data] == ["embed", "fast-chat", "smart-chat"]
    assert all(m.type == "model" for m in page.data)
    assert claude(gateway).models.retrieve("fast-chat").display_name == "fast-chat"
    with pytest.raises(anthropic.NotFoundError):
        claude(gateway).models.retrieve("claude-99")
    with pytest.raises(anthropic.AuthenticationError):
        claude(gateway, "sk-nope").models.list()


def test_anthropic_count_tokens_is_answered_by_the_gateway_for_one_request(gateway: str) -> None:
    client = claude(gateway)
    short = client.messages.count_tokens(model="smart-chat", messages=[{"role": "user", "content": "Hello"}])
    long = client.messages.count_tokens(
        model="smart-chat",
        system="You are terse.",
        messages=[{"role": "user", "content": "Hello " * 200}],
    )
    assert 0 < short.input_tokens < long.input_tokens
    assert long.input_tokens >= 200
    # A count costs one request of the caller's own limits (no tokens): the tight tenant's
    # single request a minute is spent by the first count at the latest.
    tight = claude(gateway, TIGHT_KEY)
    with pytest.raises(anthropic.RateLimitError) as caught:
        for _ in range(2):
            tight.messages.count_tokens(model="smart-chat", messages=[{"role": "user", "content": "hi"}])
    assert error_fields(caught.value)["limiter"] == "rpm"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="claude-99", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.count_tokens(model="smart-chat", messages=[])
    assert error_fields(caught.value)["param"] == "messages"


def test_legacy_completions_are_served_and_an_unlisted_endpoint_is_refused(gateway: str) -> None:
    reply = oa(gateway).completions.create(model="fast-chat", prompt="Say hi", max_tokens=20)
    assert reply.choices[0].text and reply.usage is not None and reply.usage.completion_tokens == 7
    with pytest.raises(openai.NotFoundError) as caught:
        oa(gateway).images.generate(model="fast-chat", prompt="a lighthouse")
    fields = error_fields(caught.value)
    assert fields["code"] == "endpoint_not_served" and "/v1/images/generations" in fields["message"]
    assert caught.value.response.headers["x-should-retry"] == "false"


def test_an_endpoint_sluice_does_not_serve_is_a_structured_404(gateway: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oa(gateway).get("/nothing-here", cast_to=object)
    fields = error_fields(caught.value)
    assert fields["code"] == "unknown_route" and "/v1/nothing-here" in fields["message"]
    assert caught.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude(gateway).post("/v1/complete", cast_to=object, body={"model": "smart-chat", "prompt": "hi"})
    assert caught.value.body["type"] == "error"
    assert error_fields(caught.value)["code"] == "unknown_route"


def test_openai_responses_plain_and_streamed_with_usage(gateway: str) -> None:
    client = oa(gateway)
    reply = client.responses.create(
        model="fast-chat", instructions="Be brief.", input="Say hi", max_output_tokens=20
    )
    assert reply.status == "completed" and reply.output_text
    assert reply.usage is not None and reply.usage.output_tokens == 7
    assert reply.usage.input_tokens > 0 and reply.usage.input_tokens_details.cached_tokens == 0
    assert reply.usage.total_tokens == reply.usage.input_tokens + 7

    events = list(
        client.responses.create(
            model="fast-chat",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "Say hi"}]}],
            max_output_tokens=20,
            stream=True,
        )
    )
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and events[-1].response.output_text == text
    usage = events[-1].response.usage
    assert usage is not None and usage.output_tokens == 7


def test_openai_responses_refusal_is_the_sdk_rate_limit_error(gateway: str) -> None:
    client = oa(gateway, TIGHT_RESPONSES_KEY)
    client.responses.create(model="fast-chat", input="hi", max_output_tokens=5)
    with pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="fast-chat", input="hi", max_output_tokens=5)
    fields = error_fields(caught.value)
    assert fields["type"] == "rate_limited" and fields["limiter"] == "rpm"
    assert fields["tenant_id"] == "tight-responses" and fields["api_key_id"] == "tight-responses-key"
    assert fields["gateway_decision"] == "rejected_before_send"
    assert caught.value.response.headers["retry-after"]


def test_openai_responses_served_by_an_anthropic_deployment_plain_and_streamed(gateway: str) -> None:
    client = oa(gateway)
    reply = client.responses.create(model="smart-chat", instructions="Be brief.", input="hi", max_output_tokens=20)
    assert reply.status == "completed" and reply.output_text and reply.model == "smart-chat"
    assert reply.usage is not None and reply.usage.output_tokens == 5
    events = list(client.responses.create(model="smart-chat", input="hi", max_output_tokens=20, stream=True))
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and events[-1].response.output_text == text
    # What only OpenAI keeps cannot be translated: a 400 naming the field.
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="smart-chat", input="hi", max_output_tokens=5, previous_response_id=reply.id)
    assert error_fields(caught.value)["param"] == "previous_response_id"


def test_openai_responses_chained_by_previous_response_id(gateway: str) -> None:
    client = oa(gateway)
    first = client.responses.create(model="fast-chat", input="Remember: sluice.", max_output_tokens=20)
    assert first.usage is not None
    second = client.responses.create(
        model="fast-chat", input="What did I say?", max_output_tokens=20, previous_response_id=first.id
    )
    assert second.usage is not None and second.output_text
    # The provider charges the earlier turn as input; sluice passes the chain through.
    assert second.usage.input_tokens > first.usage.total_tokens


def test_openai_responses_retrieve_input_items_delete_and_cancel(gateway: str) -> None:
    client = oa(gateway)
    first = client.responses.create(model="fast-chat", input="Keep this.", max_output_tokens=20)
    read = client.responses.retrieve(first.id)
    assert read.id == first.id and read.status == "completed" and read.output_text == first.output_text
    items = client.responses.input_items.list(first.id)
    assert [item.role for item in items.data] == ["user"]
    # Another tenant's key is told the response does not exist, as for an unknown id.
    with pytest.raises(openai.NotFoundError) as caught:
        oa(gateway, TIGHT_KEY).responses.retrieve(first.id)
    assert error_fields(caught.value)["code"] == "response_not_found"
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)

    queued = client.responses.create(model="fast-chat", input="Later.", max_output_tokens=20, background=True)
    assert queued.status == "queued"
    assert client.responses.cancel(queued.id).status == "cancelled"
    assert client.responses.retrieve(queued.id).status == "cancelled"


def test_openai_responses_tool_call_and_its_output_in_a_second_turn(gateway: str) -> None:
    client = oa(gateway)
    tools = [
        {
            "type": "function",
            "name": "lookup",
            "description": "Looks a word up.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        }
    ]
    first = client.responses.create(
        model="fast-chat", input="call-tool:lookup please", tools=tools, max_output_tokens=50
    )
    call = first.output[0]
    assert call.type == "function_call" and call.name == "lookup", first.output
    second = client.responses.create(
        model="fast-chat",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "a gateway"}],
        tools=tools,
        max_output_tokens=20,
    )
    assert second.output_text and second.usage is not None
    assert second.usage.input_tokens > first.usage.total_tokens
