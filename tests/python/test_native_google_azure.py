"""Google's and Azure's own SDKs pointed at sluice, governed like every other route.

- `google-genai` with `http_options.base_url` = sluice (`api_version` `v1beta` and `v1`):
  `generate_content`, `generate_content_stream`, `count_tokens`, a system instruction, JSON
  schema output, and a function-calling round trip on a thinking model whose thought
  signature the SDK keeps on the part it hands back (the simulator verifies it on the
  second turn). `{model}` is a sluice model profile on any deployment kind: Gemini's native
  API, OpenAI's and Anthropic's shapes of the simulated provider.
- `google-genai` in Vertex AI mode: express mode (an API key, `publishers/google/models/…`)
  and a project and location with static credentials (the access token is the sluice key).
- `AnthropicVertex` (`base_url`, `access_token=`): `:rawPredict` and `:streamRawPredict`.
- `AzureOpenAI`: embeddings, legacy completions and Responses on deployment paths.
- The tokens each client was told are what `/admin/usage` counts for its key; a 429 from
  sluice's admission reaches google-genai as its own `ClientError` with code 429 and
  `RESOURCE_EXHAUSTED`; raw REST callers may send `?key=` and read an unframed stream as
  one JSON array.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import anthropic
import openai
import pytest
from conftest import key_sha256, sim_providers

KEY = "sk-native-google-acme"
USAGE_KEY = "sk-native-google-usage"
TIGHT_KEY = "sk-native-google-tight"
ADMIN = "sk-native-google-admin"
GEMINI_KEY = "AIza-sim-native-google"

SIM = f"""
seed = 11
[[models]]
name = "gemini-flash"
flavor = "gemini"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "gemini-3-flash-preview"
flavor = "gemini"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "gpt-4o-mini"
completion = {{ dist = "fixed", tokens = 7 }}

[[models]]
name = "text-embedding-3-small"
embedding_dims = 8

[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = {{ dist = "fixed", tokens = 5 }}

[google]
api_keys = ["{GEMINI_KEY}"]
"""


def gateway_config(sim_url: str, key_file: str, gemini_key_file: str, jobs_path: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs_path}"

[admin]
key_sha256 = "{key_sha256(ADMIN)}"

[usage]
flush_interval = "200ms"

{sim_providers(sim_url, key_file)}

[[providers]]
name = "gemini"
kind = "gemini"
api_surface = "native"
base_url = "{sim_url}"
api_key_file = "{gemini_key_file}"

[[classes]]
name = "now"
max_wait = "1ms"

[[deployments]]
name = "flash"
provider = "gemini"
model = "gemini-flash"

[[deployments]]
name = "flash3"
provider = "gemini"
model = "gemini-3-flash-preview"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"

[[deployments]]
name = "embed"
provider = "sim"
model = "text-embedding-3-small"

[[deployments]]
name = "sonnet"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"

[[models]]
name = "gemini"
deployment = "flash"

[[models]]
name = "gemini3"
deployment = "flash3"

[[models]]
name = "chat"
deployment = "mini"

[[models]]
name = "embed"
deployment = "embed"

[[models]]
name = "claude"
deployment = "sonnet"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"

[[keys]]
id = "usage-key"
tenant = "acme"
sha256 = "{key_sha256(USAGE_KEY)}"

[[keys]]
id = "tight-key"
tenant = "acme"
class = "now"
sha256 = "{key_sha256(TIGHT_KEY)}"
limits = {{ rpm = 2 }}
"""


@pytest.fixture(scope="module")
def gateway(start_sim, processes) -> str:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("native-google-provider-key", "sk-provider-native-google")
    gemini_key = processes.write("native-google-gemini-key", GEMINI_KEY)
    # Its own job store (which holds the usage book): the default file belongs to one gateway.
    jobs = gemini_key.parent / "native-google-jobs.redb"
    config = processes.write(
        "gateway-native-google.toml", gateway_config(sim_url, str(key_file), str(gemini_key), str(jobs))
    )
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


def genai_client(url: str, key: str = KEY, version: str = "v1beta"):
    from google import genai
    from google.genai import types

    options = types.HttpOptions(base_url=url, api_version=version, retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key=key, http_options=options)


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_genai_generate_content_on_every_deployment_kind(gateway: str, version: str) -> None:
    from google.genai import types

    client = genai_client(gateway, version=version)
    config = types.GenerateContentConfig(system_instruction="be brief", max_output_tokens=20, temperature=0.2)
    for model, tokens in (("gemini", 6), ("chat", 7), ("claude", 5)):
        reply = client.models.generate_content(model=model, contents="Say hi", config=config)
        assert reply.text, model
        assert reply.usage_metadata.candidates_token_count == tokens, model
        assert reply.usage_metadata.prompt_token_count > 0
        assert reply.usage_metadata.total_token_count == reply.usage_metadata.prompt_token_count + tokens
        assert reply.candidates[0].finish_reason == types.FinishReason.STOP
        assert reply.model_version == model


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_genai_lists_and_gets_the_profiles_its_key_may_name(gateway: str, version: str) -> None:
    from google.genai import errors

    client = genai_client(gateway, version=version)
    listed = {model.name: model for model in client.models.list()}
    assert {"models/gemini", "models/gemini3", "models/chat", "models/embed", "models/claude"} <= set(listed)
    assert "generateContent" in listed["models/chat"].supported_actions
    one = client.models.get(model="claude")
    assert (one.name, one.display_name) == ("models/claude", "claude")
    with pytest.raises(errors.ClientError) as missing:
        client.models.get(model="no-such-profile")
    assert missing.value.code == 404
    assert "no-such-profile" in str(missing.value)
    stranger = genai_client(gateway, key="sk-not-a-key", version=version)
    with pytest.raises(errors.ClientError) as refused:
        list(stranger.models.list())
    assert refused.value.code == 401
    # The OpenAI SDK on the same `/v1/models` still gets OpenAI's list.
    import openai

    names = {m.id for m in openai.OpenAI(base_url=f"{gateway}/v1", api_key=KEY).models.list()}
    assert "claude" in names


def test_genai_stream_and_count_tokens(gateway: str) -> None:
    client = genai_client(gateway)
    for model, tokens in (("gemini", 6), ("chat", 7), ("claude", 5)):
        chunks = list(client.models.generate_content_stream(model=model, contents="Say hi"))
        assert "".join(c.text or "" for c in chunks), model
        assert chunks[-1].usage_metadata.candidates_token_count == tokens, model
        assert chunks[-1].candidates[0].finish_reason.name == "STOP"
    short = client.models.count_tokens(model="gemini", contents="Say hi")
    longer = client.models.count_tokens(model="gemini", contents="Say hi " * 50)
    assert 0 < short.total_tokens < longer.total_tokens


def test_genai_function_calling_keeps_the_thought_signature(gateway: str) -> None:
    from google.genai import errors, types

    client = genai_client(gateway)
    weather = types.FunctionDeclaration(
        name="weather",
        description="The weather in a city",
        parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[weather])], max_output_tokens=32)
    question = types.Content(role="user", parts=[types.Part.from_text(text="call-tool:weather in Oslo")])
    first = client.models.generate_content(model="gemini3", contents=[question], config=config)
    assert first.function_calls and first.function_calls[0].name == "weather"
    turn = first.candidates[0].content
    assert turn.parts[0].thought_signature, turn
    answer = types.Content(
        role="user", parts=[types.Part.from_function_response(name="weather", response={"temp": 3})]
    )
    second = client.models.generate_content(model="gemini3", contents=[question, turn, answer], config=config)
    assert second.text and second.candidates[0].finish_reason == types.FinishReason.STOP
    # Streamed, the call comes whole on the last chunk with its signature, which verifies too.
    chunks = list(client.models.generate_content_stream(model="gemini3", contents=[question], config=config))
    streamed = chunks[-1].candidates[0].content
    assert streamed.parts[0].function_call.name == "weather" and streamed.parts[0].thought_signature
    again = client.models.generate_content(model="gemini3", contents=[question, streamed, answer], config=config)
    assert again.text
    # The same history without the signature meets Gemini 3's refusal, in Google's shape.
    unsigned = turn.model_copy(deep=True)
    unsigned.parts[0].thought_signature = None
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini3", contents=[question, unsigned, answer], config=config)
    assert refused.value.code == 400 and refused.value.status == "INVALID_ARGUMENT"
    assert "signature" in str(refused.value.message)


def test_genai_thought_summaries_when_asked(gateway: str) -> None:
    """`include_thoughts` reaches a Gemini deployment, whose thought summaries come back as
    `thought` parts, whole and streamed; other deployments are not sent Google's field (the
    simulated OpenAI refuses it as OpenAI does)."""
    from google.genai import types

    client = genai_client(gateway)
    asked = types.GenerateContentConfig(
        max_output_tokens=64, thinking_config=types.ThinkingConfig(thinking_level="low", include_thoughts=True)
    )
    reply = client.models.generate_content(model="gemini3", contents="Say hi", config=asked)
    parts = reply.candidates[0].content.parts
    assert [p.thought for p in parts][0] is True and parts[0].text, parts
    assert reply.text and reply.usage_metadata.thoughts_token_count
    chunks = list(client.models.generate_content_stream(model="gemini3", contents="Say hi", config=asked))
    streamed = [p for c in chunks if c.candidates for p in (c.candidates[0].content.parts or [])]
    assert any(p.thought and p.text for p in streamed), streamed
    unasked = types.GenerateContentConfig(max_output_tokens=64, thinking_config=types.ThinkingConfig(thinking_level="low"))
    reply = client.models.generate_content(model="gemini3", contents="Say hi", config=unasked)
    assert not any(p.thought for p in reply.candidates[0].content.parts)
    reply = client.models.generate_content(model="chat", contents="Say hi", config=asked)
    assert reply.text
    # Claude counts thinking within the output limit: it needs room above the budget.
    roomy = asked.model_copy(update={"max_output_tokens": 2048})
    reply = client.models.generate_content(model="claude", contents="Say hi", config=roomy)
    assert reply.text and any(p.thought and p.text for p in reply.candidates[0].content.parts)


def test_genai_json_schema_output(gateway: str) -> None:
    from google.genai import types

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
        "required": ["city", "temp"],
    }
    config = types.GenerateContentConfig(response_mime_type="application/json", response_json_schema=schema)
    client = genai_client(gateway)
    reply = client.models.generate_content(model="gemini", contents="Weather?", config=config)
    assert set(json.loads(reply.text)) == {"city", "temp"}


def test_genai_vertex_modes(gateway: str) -> None:
    from google import genai
    from google.genai import types
    from google.oauth2.credentials import Credentials

    no_retry = types.HttpRetryOptions(attempts=1)
    express = genai.Client(
        vertexai=True, api_key=KEY, http_options=types.HttpOptions(base_url=gateway, retry_options=no_retry)
    )
    reply = express.models.generate_content(model="gemini", contents="Say hi")
    assert reply.text and reply.usage_metadata.candidates_token_count == 6
    project = genai.Client(
        vertexai=True,
        project="acme-ai",
        location="us-central1",
        credentials=Credentials(token=KEY),
        http_options=types.HttpOptions(base_url=gateway, api_version="v1", retry_options=no_retry),
    )
    chunks = list(project.models.generate_content_stream(model="claude", contents="Say hi"))
    assert "".join(c.text or "" for c in chunks)
    assert chunks[-1].usage_metadata.candidates_token_count == 5
    assert project.models.count_tokens(model="gemini", contents="Say hi").total_tokens > 0


def test_anthropic_vertex_raw_predict(gateway: str) -> None:
    client = anthropic.AnthropicVertex(
        base_url=f"{gateway}/v1", region="us-east5", project_id="acme-ai", access_token=KEY, max_retries=0
    )
    reply = client.messages.create(model="claude", max_tokens=20, messages=[{"role": "user", "content": "Say hi"}])
    assert reply.content[0].text and reply.usage.output_tokens == 5
    with client.messages.stream(model="gemini", max_tokens=20, messages=[{"role": "user", "content": "Say hi"}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text and final.usage.output_tokens == 6
    counted = client.messages.count_tokens(model="claude", messages=[{"role": "user", "content": "Say hi " * 20}])
    assert counted.input_tokens > 20
    wrong = anthropic.AnthropicVertex(
        base_url=f"{gateway}/v1", region="us-east5", project_id="acme-ai", access_token="nope", max_retries=0
    )
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(model="claude", max_tokens=20, messages=[{"role": "user", "content": "Say hi"}])


def test_azure_deployment_paths_beyond_chat(gateway: str) -> None:
    client = openai.AzureOpenAI(azure_endpoint=gateway, api_key=KEY, api_version="2024-10-21", max_retries=0)
    vectors = client.embeddings.create(model="embed", input=["one", "two"])
    assert len(vectors.data) == 2 and len(vectors.data[0].embedding) == 8
    completion = client.completions.create(model="chat", prompt="Say hi", max_tokens=20)
    assert completion.choices[0].text and completion.usage.completion_tokens == 7
    deployed = openai.AzureOpenAI(
        azure_endpoint=gateway, azure_deployment="chat", api_key=KEY, api_version="2025-03-01-preview", max_retries=0
    )
    reply = deployed.responses.create(model="chat", input="Say hi", max_output_tokens=20)
    assert reply.output_text and reply.usage.output_tokens == 7
    # Responses under the deployment's own path (a client whose base URL is the deployment):
    # the path names the profile, whatever the body's `model`.
    under = openai.OpenAI(
        base_url=f"{gateway}/openai/deployments/chat", api_key=KEY, max_retries=0
    )
    reply = under.responses.create(model="not-the-profile", input="Say hi", max_output_tokens=20)
    assert reply.output_text and reply.usage.output_tokens == 7


def admin_get(url: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_usage_of_gemini_clients_is_counted_for_their_key(gateway: str) -> None:
    client = genai_client(gateway, key=USAGE_KEY)
    seen = []
    for model in ("gemini", "chat"):
        reply = client.models.generate_content(model=model, contents=f"Count me on {model}")
        seen.append(reply.usage_metadata)
        chunks = list(client.models.generate_content_stream(model=model, contents=f"Stream me on {model}"))
        seen.append(chunks[-1].usage_metadata)
    inputs = sum(u.prompt_token_count for u in seen)
    outputs = sum(u.candidates_token_count for u in seen)
    deadline = time.monotonic() + 10
    while True:
        rows = admin_get(f"{gateway}/admin/usage?group_by=key")["rows"]
        row = next((r for r in rows if r["key"] == "usage-key"), None)
        if row and row["requests"] >= len(seen):
            break
        assert time.monotonic() < deadline, f"usage never reached {len(seen)} requests: {rows}"
        time.sleep(0.1)
    assert (row["requests"], row["input_tokens"], row["output_tokens"]) == (len(seen), inputs, outputs)


def test_admission_429_is_genais_own_client_error(gateway: str) -> None:
    from google.genai import errors

    client = genai_client(gateway, key=TIGHT_KEY)
    for _ in range(2):
        assert client.models.generate_content(model="gemini", contents="Say hi").text
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini", contents="Say hi")
    assert refused.value.code == 429 and refused.value.status == "RESOURCE_EXHAUSTED"
    details = refused.value.details["error"]["details"]
    assert any(d["@type"].endswith("RetryInfo") and d["retryDelay"].endswith("s") for d in details), details
    assert any(d.get("reason") == "rate_limit_exceeded" for d in details), details
    assert "rpm" in refused.value.message


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes, dict]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_rest_callers_key_in_query_and_unframed_stream_and_refusals(gateway: str) -> None:
    body = {"contents": [{"parts": [{"text": "Say hi"}]}]}
    status, raw, _ = post(f"{gateway}/v1beta/models/gemini:streamGenerateContent?key={KEY}", body)
    assert status == 200, raw
    array = json.loads(raw)
    assert isinstance(array, list) and array[-1]["usageMetadata"]["candidatesTokenCount"] == 6
    status, raw, _ = post(f"{gateway}/v1beta/models/gemini:generateContent", body)
    assert status == 401 and json.loads(raw)["error"]["status"] == "UNAUTHENTICATED"
    status, raw, _ = post(f"{gateway}/v1beta/models/nothing:generateContent", body, {"x-goog-api-key": KEY})
    assert status == 404 and json.loads(raw)["error"]["status"] == "NOT_FOUND"
    bad = {"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": "gs://b/a.png", "mimeType": "image/png"}}]}]}
    status, raw, _ = post(f"{gateway}/v1beta/models/gemini:generateContent", bad, {"x-goog-api-key": KEY})
    error = json.loads(raw)["error"]
    assert status == 400 and error["status"] == "INVALID_ARGUMENT"
    violations = [d for d in error["details"] if d["@type"].endswith("BadRequest")]
    assert violations[0]["fieldViolations"][0]["field"] == "contents[0].parts[0].fileData"
