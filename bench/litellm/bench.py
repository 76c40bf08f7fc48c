"""sluice and the LiteLLM proxy side by side on one simulated provider.

Run by `scripts/bench-litellm` (which creates the venv and builds sluice). Every process binds
127.0.0.1 on a free port and is killed at the end; every phase is bounded in time.

Phases:
  latency   open-loop load at fixed rates straight at the simulated provider, through sluice,
            through LiteLLM; latency from the intended send time (no coordinated omission).
  accuracy  closed-loop clients that retry every 429 after the hinted wait, on an RPM-bound
            and a TPM-bound workload, against a strict provider with the same limits
            configured in both gateways; provider 429s and utilization from the provider.
  multi     the RPM-bound workload through two instances of each gateway on one Redis.
  pool      one model over three deployments of 300, 200 and 100 RPM, three instances of
            each gateway on one Redis (see pool.py); about 25 minutes, so not in the default
            list: `--phases pool`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import aiohttp

import pool

KEY = "sk-bench-litellm"
MASTER = "sk-litellm-master-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-litellm-"))

    def write(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def start(self, args: list[str], log: str, env: dict | None = None) -> subprocess.Popen:
        out = open(self.tmp / log, "w")
        proc = subprocess.Popen(args, stdout=subprocess.PIPE if log.endswith(".first") else out,
                                stderr=out, text=True, env=env)
        self.procs.append(proc)
        return proc

    def start_sluice(self, sluice: str, args: list[str], log: str) -> str:
        """Starts a sluice process that prints `... listening on URL` first; returns URL."""
        out = open(self.tmp / log, "w")
        # The admin plane on a free port of its own: nothing here reads it.
        env = dict(os.environ, SLUICE_ADMIN_LISTEN="127.0.0.1:0")
        proc = subprocess.Popen([sluice, *args], stdout=subprocess.PIPE, stderr=out, text=True, env=env)
        self.procs.append(proc)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        if not line or "listening on " not in line[0]:
            raise RuntimeError(f"{args[0]} did not start: {line} (log {self.tmp / log})")
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        return line[0].split("listening on ", 1)[1].strip()

    def stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs:
            self.stop(proc)


def wait_http(url: str, timeout: float, headers: dict | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready within {timeout}s")


def sim_toml(rpm: int, tpm: int, ttft_ms: float, completion: int, limited: bool) -> str:
    limits = f"limits = {{ rpm = {rpm}, tpm = {tpm} }}" if limited else ""
    return f"""
seed = 7
[latency]
ttft_ms = {ttft_ms}
per_token_ms = 0.0
jitter = 0.0
[[models]]
name = "gpt-4o-mini"
completion = {{ dist = "fixed", tokens = {completion} }}
{limits}
"""


def gateway_head(sim_url: str, key_file: Path, name: str, redis: str | None,
                 prefix: str = "bench-litellm") -> str:
    """What every benchmark gateway's config starts with: a loopback listener, the Redis
    store its instances share (same `prefix`: every scope shared), its own job store, and
    the simulated provider."""
    store = f'\n[store]\nkind = "redis"\nurl = "{redis}"\nprefix = "{prefix}"\n' if redis else ""
    return f"""
[server]
listen = "127.0.0.1:0"
{store}
[jobs]
path = "{key_file.parent / (name + '-jobs.redb')}"

[[providers]]
name = "sim"
kind = "openai"
base_url = "{sim_url}"
api_key_file = "{key_file}"
"""


def sluice_toml(sim_url: str, key_file: Path, rpm: int, tpm: int, redis: str | None, name: str,
                prefix: str = "bench-litellm") -> str:
    """One gateway over one deployment."""
    sha = hashlib.sha256(KEY.encode()).hexdigest()
    return gateway_head(sim_url, key_file, name, redis, prefix) + f"""
[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
output_counting = "reserved"
limits = {{ rpm = {rpm}, tpm = {tpm} }}

[[models]]
name = "fast-chat"
deployment = "mini"

[[tenants]]
name = "bench"

[[keys]]
id = "bench-key"
tenant = "bench"
sha256 = "{sha}"
"""


def litellm_yaml(sim_url: str, rpm: int, tpm: int, redis_port: int | None) -> str:
    redis = ""
    if redis_port:
        redis = f"""
  redis_host: 127.0.0.1
  redis_port: {redis_port}
"""
    return f"""
model_list:
  - model_name: fast-chat
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {sim_url}/v1
      api_key: sk-sim
      rpm: {rpm}
      tpm: {tpm}
router_settings:
  routing_strategy: usage-based-routing-v2
  num_retries: 0
  enable_pre_call_checks: true{redis}
litellm_settings:
  num_retries: 0
  request_timeout: 60
general_settings:
  master_key: {MASTER}
"""


def start_litellm(procs: Procs, litellm: str, config: Path, log: str) -> str:
    port = free_port()
    env = dict(os.environ)
    env.setdefault("LITELLM_LOG", "ERROR")
    env["LITELLM_TELEMETRY"] = "False"
    # The bundled model cost map: no fetch of a remote one (loopback only).
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["NO_DOCS"] = "True"
    procs.start([litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
                 "--num_workers", "1"], log, env)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health/liveliness", 180)
    return url


def body(prompt_words: int, max_tokens: int, n: int) -> dict:
    text = " ".join(["word"] * prompt_words) + f" req-id:{n}"
    return {"model": "fast-chat", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def model_for(url: str, direct: bool) -> str:
    return "gpt-4o-mini" if direct else "fast-chat"


def auth_for(kind: str) -> dict:
    if kind == "litellm":
        return {"Authorization": f"Bearer {MASTER}"}
    return {"Authorization": f"Bearer {KEY}"}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


async def open_loop(url: str, kind: str, rate: float, seconds: float) -> dict:
    """Sends at `rate`/s for `seconds`; latency from the intended send time, in ms."""
    lat: list[float] = []
    errors = 0
    conn = aiohttp.TCPConnector(limit=512)
    timeout = aiohttp.ClientTimeout(total=30)
    model = model_for(url, kind == "direct")
    async with aiohttp.ClientSession(connector=conn, timeout=timeout, headers=auth_for(kind)) as session:
        async def one(intended: float, n: int) -> None:
            nonlocal errors
            payload = body(4, 16, n)
            payload["model"] = model
            try:
                async with session.post(f"{url}/v1/chat/completions", json=payload) as r:
                    await r.read()
                    if r.status != 200:
                        errors += 1
                        return
            except Exception:
                errors += 1
                return
            lat.append((time.perf_counter() - intended) * 1000)

        # warm-up, unrecorded
        for n in range(20):
            await one(time.perf_counter(), n)
        lat.clear()
        errors = 0
        tasks = []
        start = time.perf_counter() + 0.05
        total = int(rate * seconds)
        for i in range(total):
            intended = start + i / rate
            delay = intended - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(intended, i)))
        await asyncio.gather(*tasks)
    return {"sent": total, "ok": len(lat), "errors": errors,
            "p50": pct(lat, 50), "p99": pct(lat, 99), "p999": pct(lat, 99.9)}


def retry_wait(headers) -> float:
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    s = headers.get("retry-after")
    if s:
        try:
            return float(s)
        except ValueError:
            pass
    return 1.0


# What the official openai/anthropic SDKs do with a 429 or 503 (`max_retries=2`): wait the
# `retry-after-ms`/`retry-after` hint when there is one, else 0.5 s x 2^n (at most 8 s) less
# up to 25 % jitter, and try again. The hint is capped here at SDK_HINT_CAP.
SDK_RETRY_STATUSES = (429, 503)
SDK_HINT_CAP = 10.0


def hinted_wait(headers) -> float | None:
    """The wait a `retry-after-ms` or `retry-after` header asks for, in seconds, if any."""
    for name, scale in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value:
            try:
                return float(value) / scale
            except ValueError:
                pass
    return None


def sdk_backoff(headers, attempt: int, rng) -> float:
    """The SDK's wait before retry number `attempt + 1`."""
    hint = hinted_wait(headers)
    if hint is not None and hint > 0:
        return min(hint, SDK_HINT_CAP)
    return min(0.5 * 2 ** attempt, 8.0) * (1 - 0.25 * rng.random())


async def sdk_call(session, url: str, payload: dict, retries: int, counts: dict, rng) -> tuple[int, object]:
    """One client call with the SDK's retries: the final (status, headers); -1 for a
    connection error. Counts `retries` made, `hinted_429` and `wire_429`/`wire_503` seen.
    Each attempt carries the headers openai-python and anthropic-python send: its timeout
    (`x-stainless-timeout`, their default 600 s) and how many times it was sent before
    (`x-stainless-retry-count`)."""
    attempt = 0
    tried = []
    while True:
        sdk_headers = {"x-stainless-timeout": "600", "x-stainless-retry-count": str(attempt)}
        sent = time.monotonic()
        try:
            async with session.post(url, json=payload, headers=sdk_headers) as r:
                await r.read()
                status, headers = r.status, r.headers
        except Exception:
            return -1, {}
        tried.append((round(time.monotonic() - sent, 2), headers.get("retry-after-ms")))
        if status == 429 and attempt >= retries:
            # What a request refused for good went through: each attempt's time to its
            # answer and the wait it was told.
            counts.setdefault("final_error_attempts", []).append(tried)
        if status == 429:
            counts["wire_429"] += 1
            if hinted_wait(headers) is not None:
                counts["hinted_429"] += 1
        elif status == 503:
            counts["wire_503"] += 1
        if status not in SDK_RETRY_STATUSES or attempt >= retries:
            return status, headers
        await asyncio.sleep(sdk_backoff(headers, attempt, rng))
        attempt += 1
        counts["retries"] += 1


async def closed_loop(urls: list[str], kind: str, workers: int, seconds: float, prompt_words: int,
                      max_tokens: int, sizes=None, retries: int | None = None) -> dict:
    """`workers` clients (spread over `urls`), each sending one request at a time and retrying
    every 429 after the hinted wait, for `seconds`. `sizes`, when given, draws each request's
    (prompt words, max_tokens) instead. With `retries`, each client is an SDK instead
    ([`sdk_call`]): a request still refused after `retries` retries is a final error
    (`client_429`/`other_errors`) and the client goes on with its next one."""
    counts = {"ok": 0, "client_429": 0, "other_errors": 0, "waited_s": 0.0, "hints": {},
              "retries": 0, "hinted_429": 0, "wire_429": 0, "wire_503": 0, "final_error_at_s": []}
    rng = random.Random(77)
    started = time.monotonic()
    deadline = started + seconds
    model = model_for(urls[0], kind == "direct")
    conn = aiohttp.TCPConnector(limit=workers * 2)
    timeout = aiohttp.ClientTimeout(total=seconds + 30)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout, headers=auth_for(kind)) as session:
        async def worker(w: int) -> None:
            url = urls[w % len(urls)]
            n = 0
            while time.monotonic() < deadline:
                words, most = sizes() if sizes else (prompt_words, max_tokens)
                payload = body(words, most, w * 1_000_000 + n)
                payload["model"] = model
                if retries is not None:
                    status, _ = await sdk_call(session, f"{url}/v1/chat/completions", payload, retries, counts, rng)
                    if status == 200:
                        counts["ok"] += 1
                        n += 1
                    else:
                        counts["client_429" if status == 429 else "other_errors"] += 1
                        counts["final_error_at_s"].append(round(time.monotonic() - started, 1))
                        await asyncio.sleep(0.1)
                    continue
                try:
                    async with session.post(f"{url}/v1/chat/completions", json=payload) as r:
                        await r.read()
                        status = r.status
                        headers = r.headers
                except Exception:
                    counts["other_errors"] += 1
                    await asyncio.sleep(0.1)
                    continue
                if status == 200:
                    counts["ok"] += 1
                    n += 1
                elif status == 429:
                    counts["client_429"] += 1
                    counts["wire_429"] += 1
                    if hinted_wait(headers) is not None:
                        counts["hinted_429"] += 1
                    wait = retry_wait(headers)
                    key = f"{wait:.0f}s" if wait >= 1 else "<1s"
                    counts["hints"][key] = counts["hints"].get(key, 0) + 1
                    wait = min(wait, max(0.0, deadline - time.monotonic()))
                    counts["waited_s"] += wait
                    await asyncio.sleep(wait)
                else:
                    counts["other_errors"] += 1
                    await asyncio.sleep(0.1)

        await asyncio.gather(*(worker(w) for w in range(workers)))
    return counts


def sim_stats(sim_url: str) -> dict:
    with urllib.request.urlopen(f"{sim_url}/_stats", timeout=5) as r:
        return json.loads(r.read())


def sim_reset(sim_url: str) -> None:
    req = urllib.request.Request(f"{sim_url}/_reset", method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=5):
        pass


def summarize(stats: dict, seconds: float, rpm: int, tpm: int, skip: int) -> dict:
    limited = stats.get("rate_limited", {})
    p429 = sum(v for v in limited.values()) if isinstance(limited, dict) else limited
    # timeline: admitted requests and tokens per real second since the reset (seconds
    # without admissions are absent). Steady state: from `skip` s to the end of the run,
    # past the provider's initial full bucket.
    timeline = stats.get("timeline", [])
    steady = [t for t in timeline if skip <= t.get("second", -1) < int(seconds)]
    reqs = sum(t.get("requests", 0) for t in steady)
    toks = sum(t.get("tokens", 0) for t in steady)
    span = max(1, int(seconds) - skip)
    return {
        "provider_requests": stats.get("requests"),
        "provider_served": stats.get("served"),
        "provider_429": p429,
        "tokens_admitted": stats.get("tokens", {}).get("admitted"),
        "rpm_utilization_steady": reqs / (rpm * span / 60),
        "tpm_utilization_steady": toks / (tpm * span / 60),
        "steady_seconds": span,
        "sent_per_limit": (stats.get("requests") or 0) / (rpm * seconds / 60),
        "timeline": timeline,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--litellm", required=True)
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--phases", default="latency,accuracy,multi")
    ap.add_argument("--latency-seconds", type=float, default=15)
    ap.add_argument("--rates", default="50,200")
    ap.add_argument("--seconds", type=float, default=45, help="accuracy run length (<= 60)")
    ap.add_argument("--out", default="target/bench-litellm/results.json")
    pool.add_args(ap)
    args = ap.parse_args()
    assert args.seconds <= 60
    phases = args.phases.split(",")
    procs = Procs()
    results: dict = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    key_file = procs.write("provider-key", "sk-sim")
    try:
        import importlib.metadata as md
        try:
            results["litellm_version"] = md.version("litellm")
        except md.PackageNotFoundError:  # a run of sluice alone needs no LiteLLM
            results["litellm_version"] = None
        if "latency" in phases:
            sim_url = procs.start_sluice(args.sluice, ["simulate-provider", "--config",
                                          str(procs.write("sim-lat.toml", sim_toml(0, 0, 0.0, 16, False))), "--port", "0"], "sim-lat.log")
            big_rpm, big_tpm = 10_000_000, 10_000_000_000
            gw = procs.start_sluice(args.sluice, ["serve", "--config", str(procs.write(
                "sluice-lat.toml", sluice_toml(sim_url, key_file, big_rpm, big_tpm, None, "lat")))], "sluice-lat.log")
            ll = start_litellm(procs, args.litellm, procs.write("litellm-lat.yaml", litellm_yaml(sim_url, big_rpm, big_tpm, None)), "litellm-lat.log")
            lat = []
            for rate in [float(r) for r in args.rates.split(",")]:
                for kind, url in [("direct", sim_url), ("sluice", gw), ("litellm", ll)]:
                    r = asyncio.run(open_loop(url, kind, rate, args.latency_seconds))
                    r.update(rate=rate, path=kind)
                    print(json.dumps({k: v for k, v in r.items() if k != 'timeline'}), flush=True)
                    lat.append(r)
            results["latency"] = lat
            procs.stop_all()
            procs.procs.clear()

        workloads = {
            # RPM-bound: 600 RPM, tiny requests (~26 tokens charged each).
            "rpm_bound": dict(rpm=600, tpm=10_000_000, prompt_words=4, max_tokens=16, workers=40),
            # TPM-bound: 300k TPM, ~500 tokens charged each (prompt ~100 + max_tokens 400): ~600 req/min.
            "tpm_bound": dict(rpm=100_000, tpm=300_000, prompt_words=95, max_tokens=400, workers=40),
        }
        if "accuracy" in phases:
            acc = []
            for name, w in workloads.items():
                sim_url = procs.start_sluice(args.sluice, ["simulate-provider", "--config", str(procs.write(
                    f"sim-{name}.toml", sim_toml(w["rpm"], w["tpm"], 100.0, 16, True))), "--port", "0"], f"sim-{name}.log")
                gw = procs.start_sluice(args.sluice, ["serve", "--config", str(procs.write(
                    f"sluice-{name}.toml", sluice_toml(sim_url, key_file, w["rpm"], w["tpm"], None, name)))], f"sluice-{name}.log")
                ll = start_litellm(procs, args.litellm, procs.write(f"litellm-{name}.yaml", litellm_yaml(sim_url, w["rpm"], w["tpm"], None)), f"litellm-{name}.log")
                for kind, url in [("direct", sim_url), ("sluice", gw), ("litellm", ll)]:
                    sim_reset(sim_url)
                    c = asyncio.run(closed_loop([url], kind, w["workers"], args.seconds, w["prompt_words"], w["max_tokens"]))
                    s = summarize(sim_stats(sim_url), args.seconds, w["rpm"], w["tpm"], 15)
                    r = {"workload": name, "path": kind, **c, **s}
                    print(json.dumps({k: v for k, v in r.items() if k != 'timeline'}), flush=True)
                    acc.append(r)
                    time.sleep(1)
                procs.stop_all()
                procs.procs.clear()
            results["accuracy"] = acc

        if "multi" in phases:
            w = workloads["rpm_bound"]
            redis_port = free_port()
            procs.start([args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no"], "redis.log")
            time.sleep(0.5)
            redis = f"redis://127.0.0.1:{redis_port}"
            sim_url = procs.start_sluice(args.sluice, ["simulate-provider", "--config", str(procs.write(
                "sim-multi.toml", sim_toml(w["rpm"], w["tpm"], 100.0, 16, True))), "--port", "0"], "sim-multi.log")
            multi = []
            gws = [procs.start_sluice(args.sluice, ["serve", "--config", str(procs.write(
                f"sluice-multi-{i}.toml", sluice_toml(sim_url, key_file, w["rpm"], w["tpm"], redis, f"multi{i}", "multi")))], f"sluice-multi-{i}.log")
                for i in range(2)]
            sim_reset(sim_url)
            c = asyncio.run(closed_loop(gws, "sluice", w["workers"], args.seconds, w["prompt_words"], w["max_tokens"]))
            s = summarize(sim_stats(sim_url), args.seconds, w["rpm"], w["tpm"], 15)
            multi.append({"path": "sluice x2 (redis)", **c, **s})
            print(json.dumps({k: v for k, v in multi[-1].items() if k != 'timeline'}), flush=True)
            lls = [start_litellm(procs, args.litellm, procs.write(f"litellm-multi-{i}.yaml", litellm_yaml(sim_url, w["rpm"], w["tpm"], redis_port)), f"litellm-multi-{i}.log")
                   for i in range(2)]
            sim_reset(sim_url)
            c = asyncio.run(closed_loop(lls, "litellm", w["workers"], args.seconds, w["prompt_words"], w["max_tokens"]))
            s = summarize(sim_stats(sim_url), args.seconds, w["rpm"], w["tpm"], 15)
            multi.append({"path": "litellm x2 (redis)", **c, **s})
            print(json.dumps({k: v for k, v in multi[-1].items() if k != 'timeline'}), flush=True)
            results["multi"] = multi
            procs.stop_all()
            procs.procs.clear()

        if "pool" in phases:
            results["pool"] = {}
            try:
                pool.run(args, procs, key_file, results["pool"])
            finally:
                # Its own file too, beside --out: the pool phase runs on its own.
                pool_out = Path(args.out).parent / "pool.json"
                pool_out.parent.mkdir(parents=True, exist_ok=True)
                pool_out.write_text(json.dumps({k: results[k] for k in ("machine", "cpus", "started", "litellm_version", "pool")
                                                if k in results}, indent=2))
                print(pool.table(results["pool"]), flush=True)
                print(f"pool results: {pool_out}", file=sys.stderr)
    finally:
        procs.stop_all()
        print(f"logs: {procs.tmp}", file=sys.stderr)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2))
        print(f"results (complete or not): {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
