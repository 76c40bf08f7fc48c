"""The `pool` phase of bench.py: one model over three deployments of 300, 200 and 100 RPM.

The simulated provider serves the three deployments as three models (`dep-a`, `dep-b`,
`dep-c`), each enforcing its own limits, and keeps each one's admissions per second
(`model_timeline = true`), so the busiest provider minute of every member is read from its
`/_stats`. sluice runs as three instances on one Redis with one `[[models]]` pool
`deployments = ["a", "b", "c"]` and the default `max_wait`; LiteLLM as three proxies on the
same Redis with one `model_list` group of the three (rpm set), once per routing strategy.

Workloads (each bounded in count and time; request sizes drawn from a spread):
  closed   30 closed-loop clients above the pool's sum: utilization of the sum, provider
           429s, client errors, each member's busiest minute against its limit.
  open     Poisson arrivals at 80 % of the sum (480/min, more than any one member holds),
           some clients giving up early: p50/p99 against the provider's own (a direct call),
           provider 429s, client errors.
  tiers    `a` tier 0, `b` and `c` tier 1 (LiteLLM: `order`): after a closed-loop warm-up
           that empties every bucket, Poisson arrivals at 450/min (1.5 x `a`): `a`'s
           utilization and how much tier 1 took beyond the overflow.
  affinity sessions with long prompts on a provider caching prompts per deployment, a third
           of them from a tenant limited to two regions (see affinity.py): how much of a
           session stays on one member, the cache-hit share, requests outside the regions.
  fault    the open workload while one member (`--pool-outage-member`, `b`) answers 503, or
           429 with a 20 s `retry-after` (`--pool-outage-kind`), for a while (the provider's
           `/_faults`): client errors, the member's requests per second from 5 s before the
           outage to 10 s into it, when it served again.

Clients behave as the official SDKs do (`--pool-client-retries`, 2): a 429 or 503 is retried
up to twice, after its `retry-after-ms`/`retry-after` (at most 10 s) or else 0.5 s x 2^n with
jitter; the same for every gateway. Each workload counts the final errors (after retries),
the hinted 429s seen on the wire and the retries made.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import time
import urllib.request
from pathlib import Path

import aiohttp

import affinity
from bench import (KEY, gateway_head, Procs, auth_for, closed_loop, free_port, pct, sdk_call, sim_reset, sim_stats,
                   start_litellm)

MEMBERS = [("a", "dep-a", 300), ("b", "dep-b", 200), ("c", "dep-c", 100)]
POOL_RPM = sum(rpm for _, _, rpm in MEMBERS)
TPM = 10_000_000
DIRECT_MODEL = "dep-free"
WORKLOADS = ("closed", "open", "tiers", "fault", "affinity")
# Request sizes: prompt words and max_tokens drawn from these (the sim draws each answer's
# length uniformly up to max_tokens; each output token adds to its latency).
PROMPT_WORDS = [4, 16, 64, 256, 1024]
MAX_TOKENS = [16, 64, 256, 512]


def pool_sim_toml() -> str:
    models = "".join(f"""
[[models]]
name = "{model}"
completion = {{ dist = "uniform", min = 4, max = 512 }}
limits = {{ rpm = {rpm}, tpm = {TPM} }}
""" for _, model, rpm in MEMBERS)
    return f"""
seed = 11
model_timeline = true
[latency]
ttft_ms = 100.0
per_token_ms = 0.25
jitter = 0.1
{models}
[[models]]
name = "{DIRECT_MODEL}"
completion = {{ dist = "uniform", min = 4, max = 512 }}
"""


def pool_sluice_toml(sim_url: str, key_file: Path, redis: str, name: str, prefix: str, tiers: bool,
                     burst: float | None = None) -> str:
    sha = hashlib.sha256(KEY.encode()).hexdigest()
    burst_seconds = f", burst_seconds = {burst}" if burst else ""
    deployments = "".join(f"""
[[deployments]]
name = "{d}"
provider = "sim"
model = "{model}"
output_counting = "reserved"
limits = {{ rpm = {rpm}, tpm = {TPM}{burst_seconds} }}
""" for d, model, rpm in MEMBERS)
    if tiers:
        members = "[\n  { deployment = \"a\", tier = 0 },\n  { deployment = \"b\", tier = 1 },\n  { deployment = \"c\", tier = 1 },\n]"
    else:
        members = '["a", "b", "c"]'
    return gateway_head(sim_url, key_file, name, redis, prefix) + deployments + f"""
[[models]]
name = "fast-chat"
deployments = {members}

[[tenants]]
name = "bench"

[[keys]]
id = "bench-key"
tenant = "bench"
sha256 = "{sha}"
"""


def pool_litellm_yaml(sim_url: str, redis_port: int, strategy: str, tiers: bool) -> str:
    entries = ""
    for d, model, rpm in MEMBERS:
        order = f"\n      order: {1 if d == 'a' else 2}" if tiers else ""
        entries += f"""
  - model_name: fast-chat
    litellm_params:
      model: openai/{model}
      api_base: {sim_url}/v1
      api_key: sk-sim
      rpm: {rpm}
      tpm: {TPM}{order}
    model_info:
      id: {d}
"""
    return f"""
model_list:{entries}
router_settings:
  routing_strategy: {strategy}
  num_retries: 0
  enable_pre_call_checks: true
  redis_host: 127.0.0.1
  redis_port: {redis_port}
litellm_settings:
  num_retries: 0
  request_timeout: 60
general_settings:
  master_key: sk-litellm-master-bench
"""


def sizes(seed: int):
    """A draw of (prompt words, max_tokens) per request, reproducible from `seed`."""
    rng = random.Random(seed)
    return lambda: (rng.choice(PROMPT_WORDS), rng.choice(MAX_TOKENS))


def mixed_body(model: str, draw, n: int) -> dict:
    words, max_tokens = draw()
    text = " ".join(["word"] * words) + f" req-id:{n}"
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def set_faults(sim_url: str, model: str, faults: dict) -> None:
    data = json.dumps({"model": model, "faults": faults}).encode()
    req = urllib.request.Request(f"{sim_url}/_faults", method="POST", data=data,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5):
        pass


async def poisson(urls: list[str], kind: str, model: str, per_minute: float, seconds: float, seed: int,
                  give_up_share: float = 0.05, events: list | None = None, retries: int = 0) -> dict:
    """Poisson arrivals at `per_minute` for `seconds` over `urls`; latency of each answered
    request from its intended send time (no coordinated omission, retries included), in ms.
    Each client retries a 429 or 503 up to `retries` times as the SDKs do (`sdk_call`). A
    `give_up_share` of the requests is abandoned by its client after 0.2-1.0 s (counted, not
    an error). `events` are (offset s, callable) run in a thread at their time (a fault
    starting)."""
    rng = random.Random(seed)
    backoff_rng = random.Random(seed + 2)
    draw = sizes(seed + 1)
    lat: list[float] = []
    counts = {"sent": 0, "ok": 0, "client_429": 0, "other_errors": 0, "gave_up": 0, "statuses": {},
              "retries": 0, "hinted_429": 0, "wire_429": 0, "wire_503": 0}
    # (offset of the intended send, status) of every request that ended with an error.
    failures: list[tuple[float, int]] = []
    conn = aiohttp.TCPConnector(limit=1024)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout, headers=auth_for(kind)) as session:
        start = time.perf_counter() + 0.05

        async def one(intended: float, n: int, url: str, give_up: float | None) -> None:
            payload = mixed_body(model, draw, n)

            async def call() -> int:
                status, _ = await sdk_call(session, f"{url}/v1/chat/completions", payload, retries, counts, backoff_rng)
                return status

            try:
                status = await (asyncio.wait_for(call(), give_up) if give_up else call())
            except asyncio.TimeoutError:
                if give_up:
                    counts["gave_up"] += 1
                    return
                status = -1
            except Exception:
                status = -1
            counts["statuses"][str(status)] = counts["statuses"].get(str(status), 0) + 1
            if status == 200:
                counts["ok"] += 1
                lat.append((time.perf_counter() - intended) * 1000)
                return
            counts["client_429" if status == 429 else "other_errors"] += 1
            failures.append((round(intended - start, 3), status))

        async def run_events() -> None:
            loop = asyncio.get_running_loop()
            for offset, action in sorted(events or [], key=lambda e: e[0]):
                delay = start + offset - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await loop.run_in_executor(None, action)

        ticker = asyncio.create_task(run_events())
        tasks = []
        at = 0.0
        rate = per_minute / 60
        n = 0
        while True:
            at += rng.expovariate(rate)
            if at >= seconds:
                break
            intended = start + at
            delay = intended - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            give_up = rng.uniform(0.2, 1.0) if rng.random() < give_up_share else None
            tasks.append(asyncio.create_task(one(intended, n, urls[n % len(urls)], give_up)))
            n += 1
        counts["sent"] = n
        await asyncio.gather(*tasks)
        await ticker
    return {**counts, "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat, default=float("nan")),
            "failures": failures}


def members_summary(stats: dict, start: int, end: int) -> dict:
    """Per member, from the provider's own counters: requests admitted per minute over
    seconds [start, end) and its busiest provider minute (any 60 consecutive seconds) there
    and over the whole run, against its limit."""
    timeline = stats.get("model_timeline", {})
    models = stats.get("models", {})
    out = {}
    span = max(1, end - start)
    for d, model, rpm in MEMBERS:
        seconds = timeline.get(model, [])
        window = seconds[start:end]
        admitted = sum(window)
        busiest = max((sum(window[i:i + 60]) for i in range(max(1, len(window) - 59))), default=0)
        out[d] = {
            "limit_rpm": rpm,
            "admitted": admitted,
            "per_minute": round(admitted * 60 / span, 1),
            "utilization": round(admitted * 60 / span / rpm, 4),
            "busiest_minute": busiest,
            "busiest_minute_whole_run": stats.get("busiest_minute", {}).get(model, 0),
            "provider_429": models.get(model, {}).get("rate_limited", 0),
            "first_second": next((i for i, c in enumerate(seconds) if c), None),
        }
    return out


def provider_429(stats: dict) -> int:
    return sum(stats.get("models", {}).get(model, {}).get("rate_limited", 0) for _, model, _ in MEMBERS)


def delivered(stats: dict, start: int, end: int) -> int:
    return sum(sum(stats.get("model_timeline", {}).get(model, [])[start:end]) for _, model, _ in MEMBERS)


class Side:
    """One gateway's instances, started for a config (plain or tiered) and stopped when
    another config is asked for; `fresh` restarts them for every workload."""

    def __init__(self, name: str, kind: str, procs: Procs, start, fresh: bool) -> None:
        self.name, self.kind, self.procs, self._start, self.fresh = name, kind, procs, start, fresh
        self.config: bool | None = None
        self.urls: list[str] = []
        self.mine: list = []
        self.runs = 0

    def urls_for(self, tiers: bool) -> list[str]:
        if self.fresh or self.config != tiers:
            self.stop()
            mark = len(self.procs.procs)
            self.runs += 1
            self.urls = self._start(tiers, self.runs)
            self.mine = self.procs.procs[mark:]
            self.config = tiers
        return self.urls

    def stop(self) -> None:
        for proc in self.mine:
            self.procs.stop(proc)
        self.mine = []
        self.config = None


def run(args, procs: Procs, key_file: Path, out: dict) -> None:
    """Runs the pool phase, filling `out` as it goes (kept when a later step fails)."""
    seconds = args.pool_seconds
    skip = args.pool_skip
    open_seconds = args.pool_open_seconds
    workloads = [w for w in args.pool_workloads.split(",") if w]
    for w in workloads:
        assert w in WORKLOADS, f"unknown pool workload {w}"
    assert seconds <= 240 and open_seconds <= 180 and args.pool_workers <= 64
    redis_port = free_port()
    procs.start([args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no"], "pool-redis.log")
    time.sleep(0.5)
    redis = f"redis://127.0.0.1:{redis_port}"
    sim_url = procs.start_sluice(args.sluice, ["simulate-provider", "--config", str(procs.write(
        "sim-pool.toml", pool_sim_toml())), "--port", "0"], "sim-pool.log")
    out.update({"members": {d: rpm for d, _, rpm in MEMBERS}, "pool_rpm": POOL_RPM, "rows": []})

    if "open" in workloads or "fault" in workloads:
        sim_reset(sim_url)
        r = asyncio.run(poisson([sim_url], "direct", DIRECT_MODEL, POOL_RPM * 0.8, min(open_seconds, 60), 5, 0.0))
        out["direct"] = {k: v for k, v in r.items() if k != "failures"}
        print(json.dumps({"pool": "direct", **out["direct"]}), flush=True)

    sides = []
    n_inst = args.pool_instances
    for gateway in args.pool_gateways.split(","):
        if gateway == "sluice":
            def start(tiers: bool, run: int) -> list[str]:
                # A fresh prefix per workload: the ledger starts full, as the provider does
                # after its reset.
                tag = f"{'tiers' if tiers else 'plain'}-{run}"
                return [procs.start_sluice(args.sluice, ["serve", "--config", str(procs.write(
                    f"sluice-pool-{tag}-{i}.toml", pool_sluice_toml(sim_url, key_file, redis, f"pool-{tag}-{i}",
                                                                   f"pool-{tag}", tiers, args.pool_sluice_burst)))], f"sluice-pool-{tag}-{i}.log")
                        for i in range(n_inst)]
            burst = f", burst_seconds = {args.pool_sluice_burst:g}" if args.pool_sluice_burst else ""
            sides.append(Side(f"sluice x{n_inst} (redis){burst}", "sluice", procs, start, fresh=True))
        elif gateway == "litellm":
            for strategy in args.pool_litellm_strategies.split(","):
                def start(tiers: bool, run: int, strategy=strategy) -> list[str]:
                    tag = f"{strategy}-{'tiers' if tiers else 'plain'}-{run}"
                    return [start_litellm(procs, args.litellm, procs.write(f"litellm-pool-{tag}-{i}.yaml",
                                          pool_litellm_yaml(sim_url, redis_port, strategy, tiers)),
                                          f"litellm-pool-{tag}-{i}.log")
                            for i in range(n_inst)]
                sides.append(Side(f"litellm {strategy} x{n_inst} (redis)", "litellm", procs, start, fresh=False))
        else:
            raise SystemExit(f"unknown pool gateway {gateway}")

    retries = args.pool_client_retries
    assert 0 <= retries <= 5
    out["client_retries"] = retries
    for side in sides:
        kind = side.kind
        if "closed" in workloads:
            urls = side.urls_for(False)
            sim_reset(sim_url)
            # retries 0: the old clients, every 429 retried after its hint for as long as it takes.
            c = asyncio.run(closed_loop(urls, kind, args.pool_workers, seconds, 0, 0, sizes=sizes(21),
                                        retries=retries or None))
            stats = sim_stats(sim_url)
            got = delivered(stats, skip, int(seconds))
            row = {
                "workload": "closed", "path": side.name, **c,
                "provider_requests": sum(stats["models"].get(m, {}).get("requests", 0) for _, m, _ in MEMBERS),
                "provider_429": provider_429(stats),
                "utilization_of_sum": round(got * 60 / (int(seconds) - skip) / POOL_RPM, 4),
                "steady_seconds": [skip, int(seconds)],
                "members": members_summary(stats, skip, int(seconds)),
            }
            row["provider_429_share"] = round(row["provider_429"] / max(1, row["provider_requests"]), 5)
            row["over_limit_minutes"] = [d for d, m in row["members"].items() if m["busiest_minute"] > m["limit_rpm"]]
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
            time.sleep(1)
        if "open" in workloads:
            urls = side.urls_for(False)
            sim_reset(sim_url)
            r = asyncio.run(poisson(urls, kind, "fast-chat", POOL_RPM * 0.8, open_seconds, 31, retries=retries))
            stats = sim_stats(sim_url)
            row = {"workload": "open", "path": side.name, **{k: v for k, v in r.items() if k != "failures"},
                   "provider_429": provider_429(stats), "members": members_summary(stats, 0, int(open_seconds))}
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
            time.sleep(1)
        if "fault" in workloads:
            urls = side.urls_for(False)
            sim_reset(sim_url)
            begin, end = args.pool_fault_at, args.pool_fault_at + args.pool_fault_seconds
            member = args.pool_outage_member
            dep = next(model for d, model, _ in MEMBERS if d == member)
            if args.pool_outage_kind == "503":
                fault = {"error_503": 1.0}
            else:
                fault = {"error_429": 1.0, "error_429_retry_after_ms": int(args.pool_outage_hint * 1000)}
            events = [(begin, lambda: set_faults(sim_url, dep, fault)), (end, lambda: set_faults(sim_url, dep, {}))]
            try:
                r = asyncio.run(poisson(urls, kind, "fast-chat", POOL_RPM * 0.8, open_seconds, 41, events=events,
                                        retries=retries))
            finally:
                set_faults(sim_url, dep, {})
            stats = sim_stats(sim_url)
            seconds_of = stats.get("model_timeline", {}).get(dep, [])
            b0, e0 = int(begin), int(end)
            during = seconds_of[b0:e0]
            around = [seconds_of[i] if 0 <= i < len(seconds_of) else 0 for i in range(b0 - 5, b0 + 10)]
            row = {
                "workload": "fault", "path": side.name, **{k: v for k, v in r.items() if k != "failures"},
                "outage_member": member, "outage_kind": args.pool_outage_kind, "fault_window_s": [begin, end],
                "provider_503": stats.get("faults", {}).get("error_503", 0),
                "provider_fault_429": stats.get("faults", {}).get("error_429", 0),
                "provider_429": provider_429(stats),
                "member_requests_per_second_around_start": around,
                "member_requests_per_second_during_outage": during,
                "member_requests_during_outage": sum(during),
                "member_last_second_with_requests_during_outage": max((begin + i for i, v in enumerate(during) if v), default=None),
                "member_first_second_after_outage": next((end + i for i, v in enumerate(seconds_of[e0:]) if v), None),
                "client_errors_by_offset": r["failures"][:200],
                "members": members_summary(stats, 0, int(open_seconds)),
            }
            out["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "client_errors_by_offset"}), flush=True)
            time.sleep(1)
        if "tiers" in workloads:
            urls = side.urls_for(True)
            sim_reset(sim_url)
            reset_at = time.monotonic()
            warm = args.pool_tier_warmup
            asyncio.run(closed_loop(urls, kind, args.pool_workers, warm, 0, 0, sizes=sizes(51)))
            began = time.monotonic() - reset_at
            r = asyncio.run(poisson(urls, kind, "fast-chat", args.pool_tier_rate, open_seconds, 61))
            stats = sim_stats(sim_url)
            # The provider's seconds count from its reset; measure from 10 s into the Poisson
            # part (the warm-up's queue drained) to its last arrival.
            start_s = int(began) + 10
            end_s = int(began + open_seconds)
            members = members_summary(stats, start_s, end_s)
            got = delivered(stats, start_s, end_s)
            tier1 = members["b"]["admitted"] + members["c"]["admitted"]
            a_cap = 300 * (end_s - start_s) / 60
            row = {
                "workload": "tiers", "path": side.name, **{k: v for k, v in r.items() if k != "failures"},
                "offered_per_minute": args.pool_tier_rate, "measured_seconds": [start_s, end_s],
                "tier0_utilization": members["a"]["utilization"],
                "tier1_admitted": tier1,
                "overflow": round(max(0.0, got - a_cap), 1),
                "tier1_beyond_overflow": round(max(0.0, tier1 - max(0.0, got - a_cap)), 1),
                "provider_429": provider_429(stats), "members": members,
            }
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
            time.sleep(1)
        side.stop()
    if "affinity" in workloads:
        affinity.run(args, procs, key_file, out)


def fmt(v, digits: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "-"
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def table(out: dict) -> str:
    """The markdown tables of the pool phase. "final errors" are the requests that failed
    after the clients' retries; "hinted 429s" the 429s with a `retry-after` the clients saw
    on the wire (retried or not); "retries" the retries they made."""
    lines = []
    direct = out.get("direct")
    rows = out.get("rows", [])
    retries = out.get("client_retries", 0)
    who = f"clients retry a 429/503 up to {retries} times as the SDKs do" if retries else "clients without SDK retries"
    closed = [r for r in rows if r["workload"] == "closed"]
    if closed:
        lines += ["", f"Pool of 3 (300 + 200 + 100 RPM), 30 closed-loop clients above the sum ({who}):", "",
                  "| gateway | utilization of the sum | provider 429s | final client errors (429 / other) | hinted 429s | retries | busiest minute a / b / c (limits 300 / 200 / 100) |",
                  "|---|---|---|---|---|---|---|"]
        for r in closed:
            m = r["members"]
            busiest = " / ".join(str(m[d]["busiest_minute"]) for d in ("a", "b", "c"))
            lines.append(f"| {r['path']} | {r['utilization_of_sum']:.3f} | {r['provider_429']} ({100 * r['provider_429_share']:.2f} %) "
                         f"| {r['client_429'] + r['other_errors']} ({r['client_429']} / {r['other_errors']}) "
                         f"| {r.get('hinted_429', '-')} | {r.get('retries', '-')} | {busiest} |")
    opened = [r for r in rows if r["workload"] == "open"]
    if opened:
        lines += ["", f"Poisson arrivals at 480/min (80 % of the sum), 5 % of clients giving up after 0.2-1 s ({who}):", "",
                  "| path | p50 | p99 | provider 429s | final client errors (429 / other) | hinted 429s | retries | gave up | a / b / c per minute |",
                  "|---|---|---|---|---|---|---|---|---|"]
        if direct:
            lines.append(f"| provider direct (unlimited model) | {fmt(direct['p50_ms'])} ms | {fmt(direct['p99_ms'])} ms | - | - | - | - | - | - |")
        for r in opened:
            m = r["members"]
            per = " / ".join(fmt(m[d]["per_minute"]) for d in ("a", "b", "c"))
            lines.append(f"| {r['path']} | {fmt(r['p50_ms'])} ms | {fmt(r['p99_ms'])} ms | {r['provider_429']} "
                         f"| {r['client_429'] + r['other_errors']} ({r['client_429']} / {r['other_errors']}) "
                         f"| {r.get('hinted_429', '-')} | {r.get('retries', '-')} | {r['gave_up']} | {per} |")
    tiers = [r for r in rows if r["workload"] == "tiers"]
    if tiers:
        lines += ["", "Tiers (a tier 0; b, c tier 1), Poisson at 450/min after a warm-up that empties every bucket:", "",
                  "| gateway | tier-0 utilization | tier 1 took | of which beyond the overflow | provider 429s | client 429s | other client errors |",
                  "|---|---|---|---|---|---|---|"]
        for r in tiers:
            lines.append(f"| {r['path']} | {r['tier0_utilization']:.3f} | {r['tier1_admitted']} | {fmt(r['tier1_beyond_overflow'])} "
                         f"| {r['provider_429']} | {r['client_429']} | {r['other_errors']} |")
    faults = [r for r in rows if r["workload"] == "fault"]
    for kind in sorted({(r["outage_member"], r["outage_kind"]) for r in faults}):
        member, status = kind
        what = "503" if status == "503" else "429 with retry-after"
        b, e = next(r["fault_window_s"] for r in faults if (r["outage_member"], r["outage_kind"]) == kind)
        lines += ["", f"{member} answers {what} from {b:g} s to {e:g} s (Poisson at 480/min, {who}); "
                  f"{member}'s requests per second from {b - 5:g} s to {b + 9:g} s, the outage starting after the `|`:", "",
                  "| gateway | provider 503s / fault 429s | limit 429s | requests per second around the start | in the whole outage | final client errors (429 / other) | hinted 429s | retries | p99 | back at |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in faults:
            if (r["outage_member"], r["outage_kind"]) != kind:
                continue
            around = r["member_requests_per_second_around_start"]
            per = ",".join(str(v) for v in around[:5]) + " \\| " + ",".join(str(v) for v in around[5:])
            lines.append(f"| {r['path']} | {r['provider_503']} / {r['provider_fault_429']} | {r['provider_429']} | {per} "
                         f"| {r['member_requests_during_outage']} "
                         f"| {r['client_429'] + r['other_errors']} ({r['client_429']} / {r['other_errors']}) "
                         f"| {r['hinted_429']} | {r['retries']} | {fmt(r['p99_ms'])} ms | {fmt(r['member_first_second_after_outage'])} s |")
    lines.append(affinity.table(rows))
    return "\n".join(lines)


def add_args(ap) -> None:
    ap.add_argument("--pool-gateways", default="sluice,litellm", help="pool phase: sluice, litellm or both")
    ap.add_argument("--pool-litellm-strategies", default="usage-based-routing-v2,simple-shuffle")
    ap.add_argument("--pool-workloads", default=",".join(WORKLOADS), help="closed,open,tiers,fault,affinity")
    ap.add_argument("--pool-instances", type=int, default=3)
    ap.add_argument("--pool-sluice-burst", type=float, default=None,
                    help="sluice deployments' burst_seconds (default: sluice's own, one second's worth)")
    ap.add_argument("--pool-workers", type=int, default=30)
    ap.add_argument("--pool-seconds", type=float, default=150, help="closed-loop length (<= 240)")
    ap.add_argument("--pool-skip", type=int, default=30, help="closed loop: seconds before the steady state")
    ap.add_argument("--pool-open-seconds", type=float, default=90, help="Poisson runs' length (<= 180)")
    ap.add_argument("--pool-tier-warmup", type=float, default=20)
    ap.add_argument("--pool-tier-rate", type=float, default=450, help="tiers: arrivals per minute")
    ap.add_argument("--pool-fault-at", type=float, default=30)
    ap.add_argument("--pool-fault-seconds", type=float, default=30)
    ap.add_argument("--pool-outage-member", default="b", choices=[d for d, _, _ in MEMBERS],
                    help="fault: the member that fails (b is the 200 RPM one)")
    ap.add_argument("--pool-outage-kind", default="503", choices=["503", "429"],
                    help="fault: the failing member answers 503, or 429 with retry-after --pool-outage-hint")
    ap.add_argument("--pool-outage-hint", type=float, default=20, help="fault 429: its retry-after, seconds")
    ap.add_argument("--pool-client-retries", type=int, default=2,
                    help="clients retry a 429/503 this many times as the SDKs do (0: closed-loop clients "
                         "retry every 429 after its hint, open-loop ones never)")
