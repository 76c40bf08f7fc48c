"""boto3's `bedrock-runtime` client pointed at sluice (`endpoint_url`), its sluice key as a
Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`, sent as `Authorization: Bearer`): `converse`,
`converse_stream`, `invoke_model` and `invoke_model_with_response_stream` reach the
simulated provider through whatever deployment serves the profile the model id names, under
the gateway's admission and usage. botocore sends a bearer token over HTTPS only, so sluice
serves TLS with a certificate made here for 127.0.0.1 (`[server] tls_cert` / `tls_key`).
Refusals arrive as botocore's own typed exceptions (`ThrottlingException`,
`ValidationException`)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import time
import urllib.error
import urllib.request
import ssl
from pathlib import Path
from typing import Iterator

import boto3
import pytest
from botocore.config import Config
from conftest import key_sha256, sim_providers
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY = "sk-bedrock-inbound-test"
LIMITED_KEY = "sk-bedrock-inbound-limited"
COUNTED_KEY = "sk-bedrock-inbound-counted"
ADMIN = "sk-bedrock-inbound-admin"
CLAUDE = "anthropic.claude-sonnet-4-5-v1:0"
# A profile served by a Bedrock deployment (the simulated Bedrock, SigV4 with its key pair,
# sluice_sim::bedrock::sigv4): Converse in, Converse out.
ON_BEDROCK = "on-bedrock"
BEDROCK_MODEL = "anthropic.claude-3-7-sonnet-20250219-v1:0"
ACCESS_KEY_ID = "AKIDSLUICESIMULATED"
SECRET_ACCESS_KEY = "sluice-simulated-secret-access-key"

SIM = """
seed = 23
[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = { dist = "fixed", tokens = 7 }
prompt_cache = true
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 5 }
[[models]]
name = "anthropic.claude-3-7-sonnet-20250219-v1:0"
shape = "anthropic"
flavor = "bedrock"
completion = { dist = "fixed", tokens = 7 }
"""


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "bedrock-inbound-cert.pem", directory / "bedrock-inbound-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def gateway_config(sim_url: str, key_file: str, cert: Path, key: Path, jobs_path: str, aws: Path) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"
tls_cert = "{cert}"
tls_key = "{key}"

[admin]
key_sha256 = "{key_sha256(ADMIN)}"

[jobs]
path = "{jobs_path}"

[usage]
flush_interval = "200ms"

{sim_providers(sim_url, key_file)}

[[providers]]
name = "bedrock"
kind = "bedrock"
base_url = "{sim_url}"
region = "us-east-1"
aws_credentials_file = "{aws}"

[[deployments]]
name = "bedrock-claude"
provider = "bedrock"
model = "{BEDROCK_MODEL}"

[[models]]
name = "{ON_BEDROCK}"
deployment = "bedrock-claude"

[[deployments]]
name = "claude"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"

[[models]]
name = "{CLAUDE}"
deployment = "claude"

[[models]]
name = "mini"
deployment = "mini"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-bedrock"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"

[[keys]]
id = "acme-limited"
tenant = "acme"
sha256 = "{key_sha256(LIMITED_KEY)}"
limits = {{ rpm = 1 }}

[[keys]]
id = "acme-counted"
tenant = "acme"
sha256 = "{key_sha256(COUNTED_KEY)}"
"""


@pytest.fixture(scope="module")
def served(start_sim, processes) -> tuple[str, Path]:
    """(sluice's https URL, the certificate that verifies it)."""
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("provider-key-bedrock-inbound", "sk-provider-bedrock-inbound")
    cert, key = certificate(key_file.parent)
    jobs = key_file.parent / "bedrock-inbound-jobs.redb"
    aws = processes.write(
        "aws-credentials-inbound",
        f"[default]\naws_access_key_id = {ACCESS_KEY_ID}\naws_secret_access_key = {SECRET_ACCESS_KEY}\n",
    )
    text = gateway_config(sim_url, str(key_file), cert, key, str(jobs), aws)
    config = processes.write("gateway-bedrock-inbound.toml", text)
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    assert url.startswith("https://127.0.0.1:"), url
    return url, cert


@pytest.fixture
def bedrock(served, monkeypatch) -> Iterator:
    """`bedrock(key=KEY)`: a `bedrock-runtime` client on sluice, `key` as its Bedrock API
    key, retries off (a throttle reaches the test as it reaches the application)."""
    url, cert = served

    def client(key: str = KEY):
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", key)
        # No SigV4 credentials anywhere: the bearer token is what authenticates.
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        return boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=url,
            verify=str(cert),
            config=Config(retries={"max_attempts": 1, "mode": "standard"}),
        )

    yield client


def hello(text: str = "Say hi") -> list[dict]:
    return [{"role": "user", "content": [{"text": text}]}]


TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "description": "The weather of a city",
                                  "inputSchema": {"json": {"type": "object"}}}}]}
THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def test_converse_answers_from_anthropic_and_openai_deployments(bedrock) -> None:
    client = bedrock()
    for model, tokens in ((CLAUDE, 7), ("mini", 5), (ON_BEDROCK, 7)):
        reply = client.converse(
            modelId=model, messages=hello(), system=[{"text": "be brief"}], inferenceConfig={"maxTokens": 20}
        )
        content = reply["output"]["message"]["content"]
        assert reply["output"]["message"]["role"] == "assistant" and content[0]["text"], reply
        assert reply["stopReason"] == "end_turn"
        assert reply["usage"]["outputTokens"] == tokens and reply["usage"]["inputTokens"] > 0
        assert reply["usage"]["totalTokens"] >= reply["usage"]["inputTokens"] + tokens
        assert "cacheReadInputTokens" in reply["usage"] and reply["metrics"]["latencyMs"] >= 0
        assert reply["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"]


def test_converse_stream_events_with_usage(bedrock) -> None:
    reply = bedrock().converse_stream(modelId=CLAUDE, messages=hello(), inferenceConfig={"maxTokens": 20})
    events = list(reply["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"], kinds
    assert "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    assert "contentBlockStop" in kinds
    usage = events[-1]["metadata"]["usage"]
    assert usage["outputTokens"] == 7 and usage["inputTokens"] > 0, usage


def streamed_turn(client, messages: list[dict], model: str = CLAUDE) -> tuple[list[dict], list[dict]]:
    """One converse_stream turn, its content blocks rebuilt from the events as an
    application does; (the blocks, the events)."""
    reply = client.converse_stream(
        modelId=model,
        messages=messages,
        inferenceConfig={"maxTokens": 2048},
        toolConfig=TOOLS,
        additionalModelRequestFields=THINKING,
    )
    events = list(reply["stream"])
    blocks: dict[int, dict] = {}
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            tool = start["start"]["toolUse"]
            call = {"toolUseId": tool["toolUseId"], "name": tool["name"], "input": ""}
            blocks[start["contentBlockIndex"]] = {"toolUse": call}
        elif "contentBlockDelta" in event:
            index, delta = event["contentBlockDelta"]["contentBlockIndex"], event["contentBlockDelta"]["delta"]
            if "reasoningContent" in delta:
                text = blocks.setdefault(index, {"reasoningContent": {"reasoningText": {"text": ""}}})
                reasoning = text["reasoningContent"]["reasoningText"]
                reasoning["text"] += delta["reasoningContent"].get("text", "")
                if "signature" in delta["reasoningContent"]:
                    reasoning["signature"] = delta["reasoningContent"]["signature"]
            elif "toolUse" in delta:
                blocks[index]["toolUse"]["input"] += delta["toolUse"]["input"]
            elif "text" in delta:
                blocks.setdefault(index, {"text": ""})["text"] += delta["text"]
    content = [blocks[i] for i in sorted(blocks)]
    for block in content:
        if "toolUse" in block:
            block["toolUse"]["input"] = json.loads(block["toolUse"]["input"] or "{}")
    return content, events


@pytest.mark.parametrize("model", [CLAUDE, ON_BEDROCK])
def test_thinking_and_tool_use_stream_keep_the_signature_for_the_second_turn(bedrock, model: str) -> None:
    """Extended thinking with a tool call, streamed, from an Anthropic deployment and from a
    Bedrock one: the reasoning's signature arrives as its own delta, and the second turn,
    sent back with it, is accepted (the simulator checks the signature); with it altered,
    botocore raises ValidationException."""
    client = bedrock()
    messages = hello("Weather in Paris? call-tool:get_weather")
    first, events = streamed_turn(client, messages, model)
    assert [next(iter(b)) for b in first] == ["reasoningContent", "toolUse"], first
    reasoning = first[0]["reasoningContent"]["reasoningText"]
    assert reasoning["text"] and reasoning["signature"], reasoning
    assert next(e for e in events if "messageStop" in e)["messageStop"]["stopReason"] == "tool_use"
    call = first[1]["toolUse"]
    assert call["name"] == "get_weather"
    result = {"toolUseId": call["toolUseId"], "content": [{"json": {"sky": "sunny"}}]}
    answer = {"role": "user", "content": [{"toolResult": result}]}
    second, _ = streamed_turn(client, messages + [{"role": "assistant", "content": first}, answer], model)
    assert second[-1].get("text"), second
    altered = json.loads(json.dumps(first))
    altered[0]["reasoningContent"]["reasoningText"]["signature"] = "bm90LXRoZS1zaWduYXR1cmU="
    with pytest.raises(client.exceptions.ValidationException):
        client.converse(
            modelId=model,
            messages=messages + [{"role": "assistant", "content": altered}, answer],
            inferenceConfig={"maxTokens": 2048},
            toolConfig=TOOLS,
            additionalModelRequestFields=THINKING,
        )


def test_a_two_turn_tool_conversation_with_converse(bedrock) -> None:
    client = bedrock()
    messages = hello("What is the weather? call-tool:get_weather")
    first = client.converse(modelId=CLAUDE, messages=messages, inferenceConfig={"maxTokens": 64}, toolConfig=TOOLS)
    assert first["stopReason"] == "tool_use", first
    call = next(b["toolUse"] for b in first["output"]["message"]["content"] if "toolUse" in b)
    assert call["name"] == "get_weather" and isinstance(call["input"], dict)
    messages += [
        first["output"]["message"],
        {"role": "user", "content": [{"toolResult": {"toolUseId": call["toolUseId"], "content": [{"text": "sunny"}]}}]},
    ]
    second = client.converse(modelId=CLAUDE, messages=messages, inferenceConfig={"maxTokens": 64}, toolConfig=TOOLS)
    assert second["stopReason"] == "end_turn" and second["output"]["message"]["content"][0]["text"]


def test_thinking_with_converse_returns_the_signed_reasoning(bedrock) -> None:
    reply = bedrock().converse(
        modelId=CLAUDE, messages=hello(), inferenceConfig={"maxTokens": 2048}, additionalModelRequestFields=THINKING
    )
    content = reply["output"]["message"]["content"]
    reasoning = content[0]["reasoningContent"]["reasoningText"]
    assert reasoning["text"] and reasoning["signature"] and content[-1]["text"], content


def test_invoke_model_and_its_stream_with_an_anthropic_body(bedrock) -> None:
    client = bedrock()
    messages = [{"role": "user", "content": "Hi"}]
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 20, "messages": messages}
    answer = client.invoke_model(modelId=CLAUDE, body=json.dumps(body))
    reply = json.loads(answer["body"].read())
    assert reply["type"] == "message" and reply["content"][0]["text"]
    assert reply["usage"]["output_tokens"] == 7
    assert answer["ResponseMetadata"]["HTTPHeaders"]["x-amzn-bedrock-output-token-count"] == "7"
    stream = client.invoke_model_with_response_stream(modelId=CLAUDE, body=json.dumps(body))
    events = [json.loads(e["chunk"]["bytes"]) for e in stream["body"]]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    assert "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert next(e for e in events if e["type"] == "message_delta")["usage"]["output_tokens"] == 7


def test_sluices_429_is_botocores_throttling_exception(bedrock) -> None:
    client = bedrock(LIMITED_KEY)
    client.converse(modelId=CLAUDE, messages=hello(), inferenceConfig={"maxTokens": 8})
    with pytest.raises(client.exceptions.ThrottlingException) as refused:
        client.converse(modelId=CLAUDE, messages=hello(), inferenceConfig={"maxTokens": 8})
    response = refused.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert int(response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]) >= 1
    assert "rate limit" in response["Error"]["Message"], response["Error"]


def test_a_bad_body_is_botocores_validation_exception_naming_the_field(bedrock) -> None:
    client = bedrock()
    with pytest.raises(client.exceptions.ValidationException) as refused:
        client.converse(
            modelId=CLAUDE,
            messages=hello(),
            system=[{"text": "rules"}, {"cachePoint": {"type": "ephemeral"}}],
        )
    assert "system[1].cachePoint.type" in refused.value.response["Error"]["Message"], refused.value.response
    document = {"document": {"format": "pdf", "name": "report", "source": {"bytes": b"%PDF-1.4"}}}
    with pytest.raises(client.exceptions.ValidationException) as refused:
        client.converse(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "read"}, document]}])
    assert "messages[0].content[1]" in refused.value.response["Error"]["Message"], refused.value.response
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.converse(modelId="anthropic.no-such-model-v1:0", messages=hello())
    with pytest.raises(client.exceptions.AccessDeniedException):
        bedrock("sk-not-a-key").converse(modelId=CLAUDE, messages=hello())


def test_usage_counts_the_bedrock_callers_requests(bedrock, served) -> None:
    """`/admin/usage` counts what boto3 was told, for the caller's key (one used here only)."""
    url, cert = served
    context = ssl.create_default_context(cafile=str(cert))

    def usage() -> dict:
        request = urllib.request.Request(
            f"{url}/admin/usage?group_by=key&tenant=acme", headers={"Authorization": f"Bearer {ADMIN}"}
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            rows = json.loads(response.read())["rows"]
        none = {"requests": 0, "input_tokens": 0, "output_tokens": 0}
        return next((r for r in rows if r["key"] == "acme-counted"), none)

    assert usage()["requests"] == 0
    client = bedrock(COUNTED_KEY)
    reply = client.converse(modelId=CLAUDE, messages=hello("count me"), inferenceConfig={"maxTokens": 20})
    stream = client.converse_stream(modelId=CLAUDE, messages=hello("count me too"), inferenceConfig={"maxTokens": 20})
    metadata = [e["metadata"] for e in stream["stream"] if "metadata" in e][0]
    seen_in = reply["usage"]["inputTokens"] + metadata["usage"]["inputTokens"]
    seen_out = reply["usage"]["outputTokens"] + metadata["usage"]["outputTokens"]
    deadline = time.monotonic() + 10
    while True:
        after = usage()
        if after["requests"] >= 2:
            break
        assert time.monotonic() < deadline, f"usage never counted the two requests: {after}"
        time.sleep(0.1)
    assert (after["requests"], after["input_tokens"], after["output_tokens"]) == (2, seen_in, seen_out), after


def test_count_tokens_for_converse_and_invoke_inputs(bedrock) -> None:
    client = bedrock()
    converse = client.count_tokens(modelId=CLAUDE, input={"converse": {"messages": hello("count these words")}})
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 8,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "count these words"}]}]}
    invoke = client.count_tokens(modelId=CLAUDE, input={"invokeModel": {"body": json.dumps(body)}})
    assert converse["inputTokens"] > 0 and converse["inputTokens"] == invoke["inputTokens"], (converse, invoke)


def test_a_cache_point_writes_then_reads_the_prompt_cache(bedrock) -> None:
    """A `cachePoint` after a long system prompt: the first call writes the cache, the
    second reads it, as Converse's usage says (`cacheWriteInputTokens`, then
    `cacheReadInputTokens`)."""
    client = bedrock()
    system = [{"text": "Follow these house rules carefully. " * 400}, {"cachePoint": {"type": "default"}}]
    first = client.converse(modelId=CLAUDE, system=system, messages=hello("first"), inferenceConfig={"maxTokens": 8})
    written = first["usage"]["cacheWriteInputTokens"]
    assert written >= 1024 and first["usage"]["cacheReadInputTokens"] == 0, first["usage"]
    second = client.converse(modelId=CLAUDE, system=system, messages=hello("second"), inferenceConfig={"maxTokens": 8})
    assert second["usage"]["cacheReadInputTokens"] == written, second["usage"]
    assert second["usage"]["totalTokens"] == sum(
        second["usage"][k] for k in ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
    )


# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def test_an_image_block_reaches_the_model(bedrock) -> None:
    content = [{"text": "What is in this image?"}, {"image": {"format": "png", "source": {"bytes": PNG}}}]
    client = bedrock()
    config = {"maxTokens": 8}
    reply = client.converse(modelId=CLAUDE, messages=[{"role": "user", "content": content}], inferenceConfig=config)
    text_only = client.converse(modelId=CLAUDE, messages=hello("What is in this image?"), inferenceConfig=config)
    assert reply["output"]["message"]["content"][0]["text"]
    assert reply["usage"]["inputTokens"] > text_only["usage"]["inputTokens"], "the image was counted as input"


@pytest.mark.parametrize("model", [CLAUDE, ON_BEDROCK])
def test_anthropic_beta_flags_in_additional_fields_reach_the_model(bedrock, model: str) -> None:
    """`additionalModelRequestFields.anthropic_beta` reaches the model, as a header to an
    Anthropic deployment and in the body to a Bedrock one: interleaved thinking lets the
    thinking budget exceed `maxTokens`, which the model refuses without the flag."""
    client = bedrock()
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    config = {"maxTokens": 1100}
    with pytest.raises(client.exceptions.ValidationException):
        client.converse(modelId=model, messages=hello(), inferenceConfig=config, additionalModelRequestFields=thinking)
    beta = {**thinking, "anthropic_beta": ["interleaved-thinking-2025-05-14"]}
    reply = client.converse(modelId=model, messages=hello(), inferenceConfig=config, additionalModelRequestFields=beta)
    assert reply["output"]["message"]["content"][-1]["text"], reply
