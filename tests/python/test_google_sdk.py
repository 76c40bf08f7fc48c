"""Google's quota domains with the official SDKs.

- The `openai` SDK to sluice, whose deployment is on the Gemini API's native surface of
  the simulated provider (`generateContent`, `x-goog-api-key`), stream and not; and a
  function-calling round trip on a thinking model (Gemini 3), whose thought signature the
  SDK keeps on the tool call it hands back, so the second turn passes the simulator's check.
- The `google-genai` SDK pointed at the simulated provider itself (`http_options.base_url`),
  which proves the simulator speaks Gemini's real shape (so sluice's tests against it mean
  something).
- The `anthropic` SDK to sluice, whose deployment is Claude on Vertex AI: sluice mints OAuth
  tokens from a service-account key (its `token_uri` is the simulator's `/token`, which
  verifies the RS256 assertion with the account's public key), stream and not.
- `AnthropicVertex` pointed at the simulator, with `google-auth` minting its token from the
  same key file: the simulator's Vertex routes and token endpoint are what Google's clients
  expect.
"""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from conftest import key_sha256
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

KEY = "sk-google-sdk-test"
GEMINI_KEY = "AIza-sim-gemini-key"
ACCOUNT = "sluice@acme-ai.iam.gserviceaccount.com"


def key_pair() -> tuple[str, str]:
    """A fresh RSA key: PKCS#8 private PEM (as in a key file), PKCS#1 public PEM (the sim's)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1).decode()
    return private, public


def sim_config(public_pem: str) -> str:
    return f"""
seed = 5
[[models]]
name = "gemini-flash"
flavor = "gemini"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "gemini-3-flash-preview"
flavor = "gemini"
completion = {{ dist = "fixed", tokens = 6 }}

[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = {{ dist = "fixed", tokens = 6 }}

[google]
api_keys = ["{GEMINI_KEY}"]
service_accounts = [{{ client_email = "{ACCOUNT}", public_key_pem = {json.dumps(public_pem)} }}]
"""


def gateway_config(sim_url: str, gemini_key_file: str, account_file: str, jobs_path: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs_path}"

[[providers]]
name = "gemini"
kind = "gemini"
api_surface = "native"
base_url = "{sim_url}"
api_key_file = "{gemini_key_file}"

[[providers]]
name = "vertex-claude"
kind = "vertex"
publisher = "anthropic"
project = "acme-ai"
region = "us-east5"
base_url = "{sim_url}"
service_account_file = "{account_file}"

[[deployments]]
name = "flash"
provider = "gemini"
model = "gemini-flash"

[[deployments]]
name = "flash3"
provider = "gemini"
model = "gemini-3-flash-preview"

[[deployments]]
name = "claude-vertex"
provider = "vertex-claude"
model = "claude-sonnet-4-5"

[[models]]
name = "gemini"
deployment = "flash"

[[models]]
name = "gemini3"
deployment = "flash3"

[[models]]
name = "claude"
deployment = "claude-vertex"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"
"""


@pytest.fixture(scope="module")
def google(start_sim, processes) -> dict[str, str]:
    private_pem, public_pem = key_pair()
    sim_url, _ = start_sim(sim_config(public_pem))
    info = {
        "type": "service_account",
        "project_id": "acme-ai",
        "private_key_id": "k1",
        "private_key": private_pem,
        "client_email": ACCOUNT,
        "token_uri": f"{sim_url}/token",
    }
    account = processes.write("vertex-sa.json", json.dumps(info))
    gemini_key = processes.write("gemini-key", GEMINI_KEY)
    # Its own job store: the default file in the working directory belongs to one gateway.
    jobs = gemini_key.parent / "google-jobs.redb"
    config = processes.write("gateway-google.toml", gateway_config(sim_url, str(gemini_key), str(account), str(jobs)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return {"gateway": url, "sim": sim_url, "account": str(account)}


def test_openai_sdk_reaches_gemini_native(google: dict[str, str]) -> None:
    client = openai.OpenAI(base_url=google["gateway"] + "/v1", api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(model="gemini", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20)
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens == 6
    chunks = list(
        client.chat.completions.create(
            model="gemini",
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6


def test_openai_sdk_tool_round_trip_keeps_geminis_thought_signature(google: dict[str, str]) -> None:
    client = openai.OpenAI(base_url=google["gateway"] + "/v1", api_key=KEY, max_retries=0)
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}]
    messages: list = [{"role": "user", "content": "call-tool:weather in Oslo"}]
    first = client.chat.completions.create(model="gemini3", messages=messages, tools=tools, max_tokens=32)
    message = first.choices[0].message
    call = message.tool_calls[0]
    extra = (call.model_extra or {}).get("extra_content") or {}
    assert extra.get("google", {}).get("thought_signature"), call
    # The SDK's own message object goes back as the SDK serializes it, signature included.
    answer = {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 3}'}
    second = client.chat.completions.create(
        model="gemini3", messages=[*messages, message, answer], tools=tools, max_tokens=32
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content
    # A history rebuilt without it meets Gemini 3's refusal.
    stripped = message.model_dump(exclude_none=True)
    del stripped["tool_calls"][0]["extra_content"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gemini3", messages=[*messages, stripped, answer], tools=tools, max_tokens=32
        )
    assert "thought_signature" in str(refused.value)


def test_genai_sdk_speaks_to_the_simulator_natively(google: dict[str, str]) -> None:
    from google import genai
    from google.genai import errors, types

    client = genai.Client(api_key=GEMINI_KEY, http_options=types.HttpOptions(base_url=google["sim"]))
    reply = client.models.generate_content(
        model="gemini-flash",
        contents="Say hi",
        config=types.GenerateContentConfig(system_instruction="be brief", max_output_tokens=20),
    )
    assert reply.text
    assert reply.usage_metadata.candidates_token_count == 6
    assert reply.usage_metadata.prompt_token_count > 0
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    chunks = list(client.models.generate_content_stream(model="gemini-flash", contents="Say hi"))
    assert "".join(c.text or "" for c in chunks)
    assert chunks[-1].usage_metadata.candidates_token_count == 6
    wrong = genai.Client(api_key="AIza-wrong", http_options=types.HttpOptions(base_url=google["sim"]))
    with pytest.raises(errors.ClientError) as refused:
        wrong.models.generate_content(model="gemini-flash", contents="Say hi")
    assert refused.value.code == 400 and refused.value.status == "INVALID_ARGUMENT"


def test_anthropic_sdk_reaches_claude_on_vertex(google: dict[str, str]) -> None:
    client = anthropic.Anthropic(base_url=google["gateway"], api_key=KEY, max_retries=0)
    reply = client.messages.create(model="claude", max_tokens=20, messages=[{"role": "user", "content": "Say hi"}])
    assert reply.content[0].text
    assert reply.usage.output_tokens == 6
    with client.messages.stream(model="claude", max_tokens=20, messages=[{"role": "user", "content": "Say hi"}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text and final.usage.output_tokens == 6


def test_anthropic_vertex_client_speaks_to_the_simulator(google: dict[str, str]) -> None:
    from google.oauth2 import service_account

    credentials = service_account.Credentials.from_service_account_file(
        google["account"], scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    client = anthropic.AnthropicVertex(
        region="us-east5", project_id="acme-ai", credentials=credentials, base_url=google["sim"] + "/v1", max_retries=0
    )
    reply = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": "Say hi"}]
    )
    assert reply.content[0].text
    assert credentials.token and credentials.token.startswith("ya29.sim-")
