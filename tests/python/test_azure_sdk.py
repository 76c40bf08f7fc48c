"""The official `AzureOpenAI` client pointed at sluice by `azure_endpoint` and key only: the
deployment name in its path is a sluice model profile, its `api-key` header the sluice key,
and the profile's deployment is itself an Azure OpenAI deployment on the simulated provider
(classic surface, `api-key` upstream), stream and not; and `responses.create`, which the
client sends to `/openai/responses` with the profile as `model`, and which sluice sends on to
Azure's resource path with the deployment as `model`."""

from __future__ import annotations

import openai
import pytest
from conftest import key_sha256

KEY = "sk-azure-sdk-test"

SIM = """
seed = 17
[[models]]
name = "gpt4o-east"
flavor = "azure"
completion = { dist = "fixed", tokens = 6 }
limits = { tpm = 100000 }
"""


def gateway_config(sim_url: str, key_file: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[[providers]]
name = "azure"
kind = "azure"
base_url = "{sim_url}"
api_version = "2024-10-21"
api_key_file = "{key_file}"

[[deployments]]
name = "east"
provider = "azure"
model = "gpt-4o"
azure_deployment = "gpt4o-east"
limits = {{ tpm = 100000 }}

[[models]]
name = "chat"
deployment = "east"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"
"""


@pytest.fixture(scope="module")
def gateway(start_sim, processes) -> str:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("azure-provider-key", "azure-provider-planted-key")
    config = processes.write("gateway-azure.toml", gateway_config(sim_url, str(key_file)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


def azure(url: str, key: str = KEY) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(azure_endpoint=url, api_key=key, api_version="2024-10-21", max_retries=0)


def test_azure_client_chat(gateway: str) -> None:
    reply = azure(gateway).chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20
    )
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens == 6


def test_azure_client_stream(gateway: str) -> None:
    chunks = list(
        azure(gateway).chat.completions.create(
            model="chat",
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6


def test_azure_client_responses(gateway: str) -> None:
    reply = azure(gateway).responses.create(model="chat", input="Say hi", max_output_tokens=20)
    assert reply.output_text
    assert reply.usage is not None and reply.usage.output_tokens == 6


def test_azure_client_with_a_wrong_key_is_refused(gateway: str) -> None:
    with pytest.raises(openai.AuthenticationError):
        azure(gateway, key="sk-not-a-sluice-key").chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20
        )


def test_azure_v1_surface_with_the_plain_client(gateway: str) -> None:
    client = openai.OpenAI(base_url=f"{gateway}/openai/v1", api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "Hi"}], max_tokens=20
    )
    assert reply.usage is not None and reply.usage.completion_tokens == 6
