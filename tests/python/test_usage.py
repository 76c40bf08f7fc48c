"""Usage a finance team can use: a mixed workload through the official OpenAI SDK (chat,
streams, the Responses API plain and streamed, and async jobs through `/v1/jobs`), then
`/admin/usage` must count exactly the tokens the clients were told, to the token, and its
CSV (read with Python's csv module) must add up to its JSON. A tenant admin key reads its
own tenant only; a bad parameter is a 400 naming it."""

from __future__ import annotations

import csv
import io
import json
import time
import urllib.error
import urllib.request

import openai
from conftest import key_sha256, sim_providers

KEY = "sk-usage-acme"
OTHER_KEY = "sk-usage-globex"
ADMIN = "sk-usage-admin"

SIM = """
seed = 17
[[models]]
name = "gpt-4o-mini"
completion = { dist = "uniform", min = 3, max = 9 }
limits = { rpm = 100000, tpm = 100000000 }
"""


def config(sim_url: str, key_file: str, jobs_path: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"

[admin]
key_sha256 = "{key_sha256(ADMIN)}"

[jobs]
path = "{jobs_path}"
workers = 2

[usage]
flush_interval = "200ms"

{sim_providers(sim_url, key_file)}

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 100000, tpm = 100000000 }}

[[models]]
name = "chat"
deployment = "mini"
default_max_tokens = 16

[[tenants]]
name = "acme"

[[tenants]]
name = "globex"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"

[[keys]]
id = "globex-1"
tenant = "globex"
sha256 = "{key_sha256(OTHER_KEY)}"
"""


def call(method: str, url: str, token: str, body: dict | None = None, accept: str = "application/json"):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Accept": accept, "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def workload(url: str) -> tuple[int, int, int]:
    """Runs the mixed workload; (requests, input tokens, output tokens) the clients saw."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=20)
    seen = []
    for i in range(3):
        answer = client.chat.completions.create(model="chat", messages=[{"role": "user", "content": f"hi {i}"}])
        seen.append((answer.usage.prompt_tokens, answer.usage.completion_tokens))
    for i in range(2):
        chunks = list(
            client.chat.completions.create(
                model="chat",
                messages=[{"role": "user", "content": f"stream {i} " * (i + 1)}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        usage = chunks[-1].usage
        seen.append((usage.prompt_tokens, usage.completion_tokens))
    reply = client.responses.create(model="chat", instructions="Be brief.", input="Say hi", max_output_tokens=16)
    seen.append((reply.usage.input_tokens, reply.usage.output_tokens))
    events = list(client.responses.create(model="chat", input="Say hello there", max_output_tokens=16, stream=True))
    usage = events[-1].response.usage
    seen.append((usage.input_tokens, usage.output_tokens))
    seen.extend(jobs(url))
    return len(seen), sum(i for i, _ in seen), sum(o for _, o in seen)


def jobs(url: str) -> list[tuple[int, int]]:
    ids = []
    for i in range(2):
        job = {"endpoint": "/v1/chat/completions", "body": {"model": "chat", "messages": [{"role": "user", "content": f"job {i}"}]}}
        status, body = call("POST", f"{url}/v1/jobs", KEY, job)
        assert status in (200, 201, 202), body
        ids.append(json.loads(body)["job_id"])
    seen = []
    deadline = time.monotonic() + 30
    for job_id in ids:
        while True:
            status, body = call("GET", f"{url}/v1/jobs/{job_id}", KEY)
            view = json.loads(body)
            if view["status"] == "completed":
                usage = view["result"]["body"]["usage"]
                seen.append((usage["prompt_tokens"], usage["completion_tokens"]))
                break
            assert view["status"] in ("queued", "running"), view
            assert time.monotonic() < deadline, f"job {job_id} never completed"
            time.sleep(0.1)
    return seen


def test_usage_counts_every_token_the_clients_saw_as_json_and_csv(processes, start_sim) -> None:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("provider-key-usage", "sk-provider-usage")
    jobs_path = processes.write("usage-jobs.placeholder", "").with_name("usage-jobs.redb")
    path = processes.write("gateway-usage.toml", config(sim_url, str(key_file), str(jobs_path)))
    url = processes.launch(["serve", "--config", str(path)], prefix="sluice listening on ")[0]

    requests, input_tokens, output_tokens = workload(url)
    other = openai.OpenAI(base_url=f"{url}/v1", api_key=OTHER_KEY, max_retries=0, timeout=20)
    other.chat.completions.create(model="chat", messages=[{"role": "user", "content": "globex"}])

    deadline = time.monotonic() + 10
    while True:
        status, body = call("GET", f"{url}/admin/usage?group_by=tenant,key,deployment,day", ADMIN)
        assert status == 200, body
        answer = json.loads(body)
        acme = [r for r in answer["rows"] if r["tenant"] == "acme"]
        if acme and acme[0]["requests"] >= requests:
            break
        assert time.monotonic() < deadline, f"usage never reached {requests} requests: {acme}"
        time.sleep(0.1)
    (row,) = acme
    assert (row["requests"], row["input_tokens"], row["output_tokens"]) == (requests, input_tokens, output_tokens)
    assert row["key"] == "acme-1" and row["deployment"] == "mini" and row["cost"] > 0
    assert [r["tenant"] for r in answer["rows"]] == ["acme", "globex"]

    # The CSV is the same table: parsed as a spreadsheet would, its totals are the JSON's.
    status, body = call("GET", f"{url}/admin/usage?group_by=tenant,key,deployment,day&format=csv", ADMIN)
    assert status == 200
    table = list(csv.DictReader(io.StringIO(body.decode("utf-8-sig"), newline="")))
    assert len(table) == len(answer["rows"])
    for field in ("requests", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"):
        assert sum(int(r[field]) for r in table) == answer["total"][field], field
    cost_nanos = sum(int(r["cost"].replace(".", "")) for r in table)
    assert cost_nanos == int(answer["total"]["cost_decimal"].replace(".", ""))
    assert {r["currency"] for r in table} == {"USD"}

    # A tenant admin reads its own tenant only; another tenant does not exist for it.
    status, body = call("POST", f"{url}/admin/keys", ADMIN, {"tenant": "acme", "id": "acme-admin", "role": "tenant_admin"})
    assert status == 201, body
    tenant_admin = json.loads(body)["secret"]
    status, body = call("GET", f"{url}/admin/usage?group_by=tenant", tenant_admin)
    assert status == 200, body
    assert [r["tenant"] for r in json.loads(body)["rows"]] == ["acme"]
    status, body = call("GET", f"{url}/admin/usage?tenant=globex", tenant_admin)
    assert status == 404, body

    # Bad parameters are named.
    for query, param in [("group_by=colour", "group_by"), ("from=yesterday", "from"), ("from=2020-01-01&to=2026-01-01", "from")]:
        status, body = call("GET", f"{url}/admin/usage?{query}", ADMIN)
        assert status == 400, body
        assert json.loads(body)["error"]["param"] == param, body
