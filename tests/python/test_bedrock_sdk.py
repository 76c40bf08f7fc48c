"""AWS Bedrock, both ways. `boto3`'s `bedrock-runtime` client pointed at the simulated
provider by `endpoint_url` (`converse`, `converse_stream`): the simulator speaks Converse's
wire format, its event-stream framing and SigV4 as AWS does, so the official client signs,
parses and validates it. And the `openai` and `anthropic` SDKs through sluice to a Bedrock
deployment, which sluice calls over Converse with its own SigV4 signature."""

from __future__ import annotations

import json

import anthropic
import boto3
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from conftest import key_sha256

KEY = "sk-bedrock-sdk-test"
MODEL = "anthropic.claude-3-7-sonnet-20250219-v1:0"
# The key pair the simulated provider knows (sluice_sim::bedrock::sigv4).
ACCESS_KEY_ID = "AKIDSLUICESIMULATED"
SECRET_ACCESS_KEY = "sluice-simulated-secret-access-key"

SIM = f"""
seed = 17
[[models]]
name = "{MODEL}"
shape = "anthropic"
flavor = "bedrock"
output_weight = 5
completion = {{ dist = "fixed", tokens = 6 }}
limits = {{ tpm = 100000 }}
"""


@pytest.fixture(scope="module")
def sim_url(start_sim) -> str:
    url, _ = start_sim(SIM)
    return url


def bedrock(url: str, secret: str = SECRET_ACCESS_KEY):
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def hello() -> list[dict]:
    return [{"role": "user", "content": [{"text": "Say hi"}]}]


def test_boto3_converse_reads_the_simulated_answer(sim_url: str) -> None:
    reply = bedrock(sim_url).converse(
        modelId=MODEL, messages=hello(), system=[{"text": "be brief"}], inferenceConfig={"maxTokens": 20}
    )
    assert reply["output"]["message"]["content"][0]["text"]
    assert reply["stopReason"] == "end_turn"
    assert reply["usage"]["outputTokens"] == 6 and reply["usage"]["inputTokens"] > 0


def test_boto3_converse_stream_parses_the_event_stream(sim_url: str) -> None:
    reply = bedrock(sim_url).converse_stream(modelId=MODEL, messages=hello(), inferenceConfig={"maxTokens": 20})
    events = list(reply["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"], kinds
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 6


def test_a_wrong_secret_is_refused_in_aws_words(sim_url: str) -> None:
    with pytest.raises(ClientError) as refused:
        bedrock(sim_url, secret="not-the-secret").converse(modelId=MODEL, messages=hello())
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def gateway_config(sim_url: str, credentials: str, jobs_path: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs_path}"

[[providers]]
name = "bedrock"
kind = "bedrock"
base_url = "{sim_url}"
region = "us-east-1"
aws_credentials_file = "{credentials}"

[[deployments]]
name = "claude"
provider = "bedrock"
model = "{MODEL}"
limits = {{ tpm = 100000 }}

[[models]]
name = "claude"
deployment = "claude"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"
"""


@pytest.fixture(scope="module")
def gateway(sim_url: str, processes) -> str:
    text = f"[default]\naws_access_key_id = {ACCESS_KEY_ID}\naws_secret_access_key = {SECRET_ACCESS_KEY}\n"
    credentials = processes.write("aws-credentials", text)
    jobs = credentials.parent / "bedrock-jobs.redb"
    config = processes.write("gateway-bedrock.toml", gateway_config(sim_url, str(credentials), str(jobs)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


def test_openai_sdk_through_sluice_to_bedrock(gateway: str) -> None:
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(model="claude", messages=[{"role": "user", "content": "Hi"}], max_tokens=20)
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens == 6
    chunks = list(
        client.chat.completions.create(
            model="claude",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6


def test_anthropic_sdk_through_sluice_to_bedrock(gateway: str) -> None:
    client = anthropic.Anthropic(base_url=gateway, api_key=KEY, max_retries=0)
    reply = client.messages.create(model="claude", max_tokens=20, messages=[{"role": "user", "content": "Hi"}])
    assert reply.content[0].type == "text" and reply.content[0].text
    assert reply.usage.output_tokens == 6
    with client.messages.stream(model="claude", max_tokens=20, messages=[{"role": "user", "content": "Hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.usage.output_tokens == 6


def test_boto3_invoke_model_for_an_anthropic_model(sim_url: str) -> None:
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]}
    reply = json.loads(bedrock(sim_url).invoke_model(modelId=MODEL, body=json.dumps(body))["body"].read())
    assert reply["type"] == "message" and reply["content"][0]["text"]
    assert reply["usage"]["output_tokens"] == 6
    stream = bedrock(sim_url).invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body))
    events = [json.loads(e["chunk"]["bytes"]) for e in stream["body"]]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    assert "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")


def test_anthropic_sdk_keeps_the_thinking_signature_through_sluice_to_bedrock(gateway: str) -> None:
    """Extended thinking with tool use, streamed: the SDK's final message carries the
    signature Bedrock's `reasoningContent` delta sent, and the second turn, sent back with
    it, is accepted (the simulator verifies the signature as Bedrock does)."""
    client = anthropic.Anthropic(base_url=gateway, api_key=KEY, max_retries=0)
    tools = [{"name": "get_weather", "description": "The weather of a city", "input_schema": {"type": "object"}}]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    messages = [{"role": "user", "content": "Weather in Paris? call-tool:get_weather"}]
    with client.messages.stream(
        model="claude", max_tokens=2048, thinking=thinking, tools=tools, messages=messages
    ) as stream:
        first = stream.get_final_message()
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    assert first.content[0].signature and first.content[0].thinking
    call = first.content[1]
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
    ]
    second = client.messages.create(model="claude", max_tokens=2048, thinking=thinking, tools=tools, messages=messages)
    assert second.content[-1].type == "text" and second.content[-1].text
    with pytest.raises(anthropic.BadRequestError):
        unsigned = [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]
        client.messages.create(
            model="claude",
            max_tokens=2048,
            thinking=thinking,
            tools=tools,
            messages=[messages[0], {"role": "assistant", "content": unsigned}, messages[2]],
        )
