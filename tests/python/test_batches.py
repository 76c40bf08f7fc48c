"""The official OpenAI SDK's batch workflow through sluice: upload a JSONL file, create a
batch, poll it, read the output file; every request runs as an async job of the batch class,
admitted like any other, and reaches the simulated provider exactly once."""

from __future__ import annotations

import json
import time
import urllib.request

import openai
import pytest
from conftest import key_sha256, sim_providers

KEY = "sk-batches-py-acme"
OTHER_KEY = "sk-batches-py-globex"
MODEL = "gpt-4o-mini"
REQUESTS = 20
POLL_TIMEOUT_S = 60.0
POLL_EVERY_S = 0.2

SIM = f"""
seed = 5
[[models]]
name = "{MODEL}"
completion = {{ dist = "fixed", tokens = 4 }}
limits = {{ rpm = 600, tpm = 1000000 }}
"""


def gateway_config(sim_url: str, key_file: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{key_file}-batches.redb"
workers = 4

{sim_providers(sim_url, key_file)}

[[deployments]]
name = "mini"
provider = "sim"
model = "{MODEL}"
limits = {{ rpm = 600, tpm = 1000000 }}

[[models]]
name = "fast-chat"
deployment = "mini"

[[tenants]]
name = "acme"

[[tenants]]
name = "globex"

[[classes]]
name = "interactive"

[[classes]]
name = "batch"
priority = 5
max_wait = "10m"

[[keys]]
id = "acme-key"
tenant = "acme"
class = "interactive"
sha256 = "{key_sha256(KEY)}"

[[keys]]
id = "globex-key"
tenant = "globex"
class = "interactive"
sha256 = "{key_sha256(OTHER_KEY)}"
"""


@pytest.fixture(scope="module")
def env(start_sim, processes) -> dict[str, str]:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("batches-provider-key", "sk-provider-planted-secret-batches")
    config = processes.write("batches-gateway.toml", gateway_config(sim_url, str(key_file)))
    url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
    return {"sim": sim_url, "gateway": url}


def client(env: dict[str, str], key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{env['gateway']}/v1", api_key=key, max_retries=0, timeout=30)


def sim_stats(env: dict[str, str]) -> dict:
    with urllib.request.urlopen(f"{env['sim']}/_stats", timeout=10) as response:
        return json.load(response)


def requests_served(env: dict[str, str]) -> int:
    return sim_stats(env)["models"].get(MODEL, {}).get("requests", 0)


def request_line(custom_id: str, model: str = "fast-chat") -> str:
    body = {"model": model, "messages": [{"role": "user", "content": f"hi req-id:{custom_id}"}], "max_tokens": 8}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


def upload(oa: openai.OpenAI, lines: list[str]) -> str:
    data = ("\n".join(lines) + "\n").encode()
    return oa.files.create(file=("input.jsonl", data), purpose="batch").id


def wait_done(oa: openai.OpenAI, batch_id: str):
    deadline = time.monotonic() + POLL_TIMEOUT_S
    for _ in range(int(POLL_TIMEOUT_S / POLL_EVERY_S) + 1):
        batch = oa.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "cancelled", "expired"):
            return batch
        if time.monotonic() > deadline:
            break
        time.sleep(POLL_EVERY_S)
    pytest.fail(f"batch {batch_id} still {batch.status} after {POLL_TIMEOUT_S}s")


def test_a_batch_runs_every_request_once_through_the_gateway(env: dict[str, str]) -> None:
    oa = client(env)
    before = requests_served(env)
    ids = [f"task-{i:02d}" for i in range(REQUESTS)]
    file_id = upload(oa, [request_line(i) for i in ids])
    assert oa.files.retrieve(file_id).purpose == "batch"
    batch = oa.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"suite": "pytest"}
    )
    assert batch.id.startswith("batch_") and batch.status in ("validating", "in_progress")
    done = wait_done(oa, batch.id)
    assert done.status == "completed", done
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (REQUESTS, REQUESTS, 0)
    assert done.output_file_id and done.error_file_id is None
    lines = [json.loads(line) for line in oa.files.content(done.output_file_id).text.splitlines()]
    answered = [line["custom_id"] for line in lines]
    assert sorted(answered) == sorted(ids) and len(set(answered)) == REQUESTS, "every custom_id exactly once"
    assert all(line["response"]["status_code"] == 200 and line["error"] is None for line in lines)
    assert all(line["response"]["body"]["object"] == "chat.completion" for line in lines)
    assert requests_served(env) - before == REQUESTS, "the provider saw each request once"
    stats = sim_stats(env)
    assert stats["duplicates"] == 0
    assert stats["rate_limited"]["requests"] == 0, "admission kept the provider under its limit"
    assert batch.id in [b.id for b in oa.batches.list(limit=10).data]
    assert {file_id, done.output_file_id} <= {f.id for f in oa.files.list()}


def test_an_invalid_file_fails_the_batch(env: dict[str, str]) -> None:
    oa = client(env)
    before = requests_served(env)
    lines = [request_line("a"), request_line("a"), request_line("b", model="no-such-model")]
    file_id = upload(oa, lines)
    batch = oa.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    batch = wait_done(oa, batch.id)
    assert batch.status == "failed"
    assert batch.errors is not None and batch.errors.data is not None
    assert [(e.code, e.line) for e in batch.errors.data] == [("duplicate_custom_id", 2), ("model_not_found", 3)]
    assert requests_served(env) == before


def test_another_tenant_gets_not_found(env: dict[str, str]) -> None:
    oa = client(env)
    file_id = upload(oa, [request_line("mine")])
    batch = oa.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    other = client(env, OTHER_KEY)
    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(file_id)
    with pytest.raises(openai.NotFoundError):
        other.files.content(file_id)
    with pytest.raises(openai.NotFoundError):
        other.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        other.batches.cancel(batch.id)
    assert wait_done(oa, batch.id).status == "completed"


def test_bad_requests_are_4xx(env: dict[str, str]) -> None:
    oa = client(env)
    with pytest.raises(openai.BadRequestError):
        oa.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    with pytest.raises(openai.NotFoundError):
        oa.batches.create(input_file_id="file-missing", endpoint="/v1/chat/completions", completion_window="24h")
    file_id = upload(oa, [request_line("e")])
    with pytest.raises(openai.BadRequestError):
        oa.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h")
