"""Client deadlines through the official OpenAI SDK: its `timeout=` reaches sluice as
`x-stainless-read-timeout` (or `x-stainless-timeout`), and a request whose predicted wait is
longer is refused at once with the prediction instead of being held until the SDK gives up;
a request that waited in a queue says how long in `x-sluice-queued-ms`."""

from __future__ import annotations

import httpx2
import openai
import pytest
from conftest import key_sha256, sim_providers

KEY = "sk-deadline-acme"

SIM = """
seed = 3
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 3 }
limits = { rpm = 100000, tpm = 100000000 }
"""


def gateway_config(sim_url: str, key_file: str) -> str:
    # `paced` passes one request every 10 s, `steady` one every 2 s; requests may wait 30 s.
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{key_file}-jobs.redb"

{sim_providers(sim_url, key_file)}

[[deployments]]
name = "paced"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 6 }}

[[deployments]]
name = "steady"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 30 }}

[[models]]
name = "paced"
deployment = "paced"

[[models]]
name = "steady"
deployment = "steady"

[[classes]]
name = "interactive"
max_wait = "30s"

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
    key_file = processes.write("provider-key-deadlines", "sk-provider-planted-secret-python")
    config = processes.write("gateway-deadlines.toml", gateway_config(sim_url, str(key_file)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return url


def client(url: str, timeout: float, sent: list[httpx2.Headers]) -> openai.OpenAI:
    http = httpx2.Client(event_hooks={"request": [lambda request: sent.append(request.headers)]})
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=timeout, http_client=http)


def ask(oa: openai.OpenAI, model: str):
    messages = [{"role": "user", "content": "Say hi"}]
    return oa.chat.completions.with_raw_response.create(model=model, messages=messages, max_tokens=4)


def test_the_sdk_timeout_is_the_deadline_and_a_longer_wait_is_refused_at_once(gateway: str) -> None:
    sent: list[httpx2.Headers] = []
    oa = client(gateway, 0.5, sent)
    assert ask(oa, "paced").http_response.status_code == 200
    # The next slot is ~10 s away, the SDK waits 0.5 s: a 429 now, saying when, long before
    # the SDK's own timeout (which would raise APITimeoutError instead).
    with pytest.raises(openai.RateLimitError) as refused:
        ask(oa, "paced")
    error = refused.value.body
    assert isinstance(error, dict), error
    assert error["retry_after_ms"] > 500, error
    assert int(refused.value.response.headers["retry-after-ms"]) > 500
    stated = [h.get("x-stainless-read-timeout") or h.get("x-stainless-timeout") for h in sent]
    assert stated == ["0.5", "0.5"], "the installed SDK states its timeout"


def test_a_request_that_waited_says_how_long(gateway: str) -> None:
    sent: list[httpx2.Headers] = []
    oa = client(gateway, 30.0, sent)
    replies = [ask(oa, "steady") for _ in range(3)]
    assert all(r.http_response.status_code == 200 for r in replies)
    queued = [r.headers.get("x-sluice-queued-ms") for r in replies]
    assert queued[0] is None, "the first had the window to itself"
    # One request every 2 s: the ones right behind it waited their turn.
    waited = [int(q) for q in queued[1:] if q is not None]
    assert waited and all(0 <= ms <= 2_100 for ms in waited), queued
