"""The caller's rate-limit headers as each official SDK reads them through sluice.

The Anthropic SDK on `/v1/messages` gets Anthropic's own names,
`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`
with resets as RFC 3339 instants, and none of OpenAI's `x-ratelimit-*`; the OpenAI SDK on
chat completions gets `x-ratelimit-*` and none of Anthropic's. Both carry the IETF fields and
`x-sluice-ratelimit-scope`. A refusal on the Messages route reaches the Anthropic SDK as its
`RateLimitError`, with `retry-after` and the refusing scope named in the body.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import anthropic
import openai
import pytest
from conftest import key_sha256, sim_providers

KEY = "sk-ratelimit-headers-acme"

SIM = """
seed = 5
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 7 }
limits = { rpm = 1000, tpm = 1000000 }

[[models]]
name = "claude-sonnet-4-5"
shape = "anthropic"
completion = { dist = "fixed", tokens = 5 }
limits = { rpm = 1000, itpm = 1000000, otpm = 100000 }
"""

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def gateway_config(sim_url: str, key_file: str, jobs_path: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs_path}"

{sim_providers(sim_url, key_file)}

[[classes]]
name = "now"
max_wait = "1ms"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"

[[deployments]]
name = "sonnet"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"

[[models]]
name = "gpt-4o-mini"
deployment = "mini"

[[models]]
name = "claude-sonnet-4-5"
deployment = "sonnet"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
class = "now"
sha256 = "{key_sha256(KEY)}"
limits = {{ rpm = 4, input_tpm = 50000, output_tpm = 2000, tpm = 100000, burst_seconds = 60 }}
"""


@pytest.fixture(scope="module")
def gateway(start_sim, processes) -> str:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("ratelimit-headers-key", "sk-provider-secret-headers")
    jobs_path = key_file.parent / "ratelimit-headers-jobs.redb"
    config = processes.write("ratelimit-headers.toml", gateway_config(sim_url, str(key_file), str(jobs_path)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


def claude(gateway: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway, api_key=KEY, max_retries=0, timeout=30)


def instant(value: str) -> datetime:
    assert RFC3339_UTC.match(value), value
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def test_the_anthropic_sdk_reads_anthropic_rate_limit_headers_and_the_openai_sdk_openais(gateway) -> None:
    raw = claude(gateway).messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Say hi"}]
    )
    message = raw.parse()
    assert message.type == "message" and message.usage.output_tokens == 5
    headers = raw.headers
    assert headers["anthropic-ratelimit-requests-limit"] == "4"
    assert headers["anthropic-ratelimit-requests-remaining"] == "3"
    assert headers["anthropic-ratelimit-input-tokens-limit"] == "50000"
    assert headers["anthropic-ratelimit-output-tokens-limit"] == "2000"
    # Tokens: the tightest token bucket, the output one.
    assert headers["anthropic-ratelimit-tokens-limit"] == "2000"
    now = datetime.now(timezone.utc)
    for dimension in ["requests", "tokens", "input-tokens", "output-tokens"]:
        reset = instant(headers[f"anthropic-ratelimit-{dimension}-reset"])
        assert now - timedelta(seconds=5) <= reset <= now + timedelta(seconds=61), (dimension, reset, now)
    assert not [name for name in headers if name.lower().startswith("x-ratelimit-")], dict(headers)
    assert headers["x-sluice-ratelimit-scope"] == "api_key"
    assert "ratelimit-policy" in headers and "ratelimit" in headers

    chat = openai.OpenAI(base_url=f"{gateway}/v1", api_key=KEY, max_retries=0, timeout=30)
    raw = chat.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", max_tokens=64, messages=[{"role": "user", "content": "Say hi"}]
    )
    assert raw.parse().choices[0].message.content
    assert raw.headers["x-ratelimit-limit-requests"] == "4"
    assert raw.headers["x-ratelimit-remaining-requests"] == "2"
    assert not [name for name in raw.headers if name.lower().startswith("anthropic-ratelimit-")]


def test_a_refusal_on_the_messages_route_is_the_sdks_rate_limit_error_with_retry_after(gateway) -> None:
    client = claude(gateway)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Say hi"}]}
    with pytest.raises(anthropic.RateLimitError) as refused:
        for _ in range(5):
            client.messages.create(**body)
    response = refused.value.response
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert response.headers["x-sluice-ratelimit-scope"] == "api_key"
    error = response.json()["error"]
    assert (error["scope"], error["scope_name"], error["limiter"], error["dimension"]) == (
        "api_key",
        "acme-key",
        "rpm",
        "requests",
    )
    assert error["message"].startswith("rate limit `rpm` reached for api_key acme-key: 4 RPM, 4 used, resets in ")
