"""Runtime keys through the official OpenAI SDK: three `sluice serve` processes on one
`redis-server`; a key created through the admin API on the first answers chat completions
on the other two, its usage and cost (at the model's preset price) are read back from
`/admin/usage` as JSON and CSV, and once revoked on the first, every one of the three
refuses it (401, the SDK's AuthenticationError) within 1 s."""

from __future__ import annotations

import csv
import io
import json
import time
import urllib.error
import urllib.request

import openai
import pytest
from conftest import key_sha256, sim_providers

ADMIN = "sk-admin-runtime-keys-python"
BOUND_S = 1.0

SIM = """
seed = 5
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 3 }
"""


def config(sim_url: str, key_file: str, redis_url: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[store]
kind = "redis"
url = "{redis_url}"
prefix = "pytest-runtime-keys"

[admin]
key_sha256 = "{key_sha256(ADMIN)}"

{sim_providers(sim_url, key_file)}

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 100000, tpm = 10000000 }}

[[models]]
name = "chat"
deployment = "mini"
default_max_tokens = 8

[[tenants]]
name = "acme"
"""


def admin(method: str, url: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {ADMIN}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def chat(url: str, key: str, seen: list | None = None) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=10)
    answer = client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    if seen is not None:
        seen.append(answer.usage)
    return answer.choices[0].message.content or ""


def get(url: str, accept: str = "application/json") -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN}", "Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# gpt-4o-mini's preset, USD per 1 M tokens: input, output.
PRICE_IN, PRICE_OUT = 0.15, 0.60


def wait_for_usage(url: str, seen: list) -> dict:
    """The key's row of `/admin/usage` once it counts every request the clients saw (the
    instances flush every second; the answer adds this instance's unflushed part)."""
    deadline = time.monotonic() + 10
    while True:
        status, body = get(f"{url}/admin/usage?group_by=key,deployment&tenant=acme")
        assert status == 200, body
        rows = [r for r in json.loads(body)["rows"] if r["key"] == "sdk-key"]
        if rows and rows[0]["requests"] == len(seen):
            return json.loads(body)
        assert time.monotonic() < deadline, f"usage never reached {len(seen)} requests: {rows}"
        time.sleep(0.1)


def check_usage(url: str, seen: list) -> None:
    answer = wait_for_usage(url, seen)
    assert answer["currency"] == "USD"
    (row,) = [r for r in answer["rows"] if r["key"] == "sdk-key"]
    assert row["deployment"] == "mini"
    assert row["input_tokens"] == sum(u.prompt_tokens for u in seen)
    assert row["output_tokens"] == sum(u.completion_tokens for u in seen)
    expected = sum((u.prompt_tokens * PRICE_IN + u.completion_tokens * PRICE_OUT) / 1e6 for u in seen)
    # Each request's cost is kept in whole nano-dollars.
    assert abs(row["cost"] - expected) <= len(seen) * 1e-9, (row, expected)
    assert row["cost"] > 0
    status, body = get(f"{url}/admin/usage?group_by=key,deployment&tenant=acme&format=csv")
    assert status == 200
    table = list(csv.DictReader(io.StringIO(body.decode("utf-8-sig"), newline="")))
    assert [r["key"] for r in table] == [r["key"] for r in answer["rows"]]
    for field in ("requests", "input_tokens", "output_tokens"):
        assert sum(int(r[field]) for r in table) == answer["total"][field]
    assert sum(float(r["cost"]) for r in table) == pytest.approx(answer["total"]["cost"], abs=1e-9)
    # Asked for as text/csv, the same table comes back.
    status, same = get(f"{url}/admin/usage?group_by=key,deployment&tenant=acme", accept="text/csv")
    assert status == 200 and same.startswith("\ufeff".encode() + b"key,deployment,requests,")


def refused(url: str, key: str) -> bool:
    try:
        chat(url, key)
    except openai.AuthenticationError as e:
        assert e.status_code == 401
        return True
    return False


def test_a_runtime_key_works_through_the_sdk_and_its_revocation_reaches_all_three_within_a_second(
    processes, start_sim, redis_url
) -> None:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("provider-key-runtime", "sk-provider-planted-secret-python")
    path = processes.write("gateway-runtime-keys.toml", config(sim_url, str(key_file), redis_url))
    urls = [processes.launch(["serve", "--config", str(path)], prefix="sluice listening on ")[0] for _ in range(3)]

    status, created = admin("POST", f"{urls[0]}/admin/keys", {"tenant": "acme", "id": "sdk-key"})
    assert status == 201, created
    secret = created["secret"]
    deadline = time.monotonic() + 5
    seen: list = []
    for url in urls[1:]:
        while True:
            try:
                assert chat(url, secret, seen)
                break
            except openai.AuthenticationError:
                assert time.monotonic() < deadline, f"{url} never accepted the new key"
                time.sleep(0.05)

    assert chat(urls[0], secret, seen)
    # Every instance reads every instance's usage (flushed to Redis) and its own unflushed part.
    check_usage(urls[2], seen)
    check_usage(urls[0], seen)

    status, revoked = admin("POST", f"{urls[0]}/admin/keys/sdk-key/revoke")
    assert status == 200 and revoked["status"] == "revoked", revoked
    revoked_at = time.monotonic()
    took = {}
    for url in urls:
        while not refused(url, secret):
            assert time.monotonic() - revoked_at < 5, f"{url} still accepts a revoked key"
            time.sleep(0.02)
        took[url] = time.monotonic() - revoked_at
    assert all(t <= BOUND_S for t in took.values()), took
    status, again = admin("POST", f"{urls[1]}/admin/keys/sdk-key/revoke")
    assert status == 409 and again["error"]["code"] == "key_revoked", again
