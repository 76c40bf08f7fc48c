"""The pool phase's `affinity` workload: sessions, prompt caches and a region-limited tenant.

One model over the pool's three deployments (300, 200, 100 RPM), now in three regions
(`a` eu-west, `b` eu-north, `c` us-east), on a simulated provider that keeps a real prompt
cache per deployment (`prompt_cache = true`: OpenAI's rules, prefixes of 1,024+ tokens). 120
conversations ("sessions", about four requests each), each with its own long system prompt (about 1,500 tokens) and a
short new user turn per request; a third of them belong to a tenant limited to the EU
regions (`regions = ["eu-west", "eu-north"]`). Poisson arrivals at 60 % of the pool's sum
(the members have headroom), each for a random session, over the three instances in turn
(a session's requests reach every instance).

Runs, each on a fresh provider state:
  sluice, sessions named    `prompt_cache_key` and `user` carry the session
  sluice, sessions unnamed  the same prompts without them (placement by headroom only)
  LiteLLM (each strategy)   the same bodies as the named run

Measured per run: for each session, the share of its requests answered by the member it
used most (the member is read from the answer's `model`, which the provider writes; an
answer naming no member, as LiteLLM's name the group, counts in no session or region
figure, and those figures print "-" when no answer named one), the
provider's prompt-cache hit share (hits over lookups of cacheable prompts, from its own
`/_stats`), requests of the EU tenant answered outside its regions, p50/p99, errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import aiohttp

from bench import KEY, gateway_head, MASTER, Procs, free_port, pct, sim_reset, sim_stats, start_litellm

MEMBERS = [("a", "dep-a", 300, "eu-west"), ("b", "dep-b", 200, "eu-north"), ("c", "dep-c", 100, "us-east")]
POOL_RPM = sum(rpm for _, _, rpm, _ in MEMBERS)
EU_REGIONS = ("eu-west", "eu-north")
EU_KEY = "sk-bench-litellm-eu"
SESSIONS = 120
EU_SESSIONS = 40
TPM = 10_000_000
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def sim_toml() -> str:
    models = "".join(f"""
[[models]]
name = "{model}"
completion = {{ dist = "uniform", min = 4, max = 64 }}
limits = {{ rpm = {rpm}, tpm = {TPM} }}
prompt_cache = true
""" for _, model, rpm, _ in MEMBERS)
    return f"""
seed = 13
model_timeline = true
[latency]
ttft_ms = 100.0
per_token_ms = 0.25
jitter = 0.1
{models}"""


def sluice_toml(sim_url: str, key_file: Path, redis: str, name: str, prefix: str) -> str:
    sha = hashlib.sha256(KEY.encode()).hexdigest()
    eu_sha = hashlib.sha256(EU_KEY.encode()).hexdigest()
    deployments = "".join(f"""
[[deployments]]
name = "{d}"
provider = "sim"
model = "{model}"
region = "{region}"
output_counting = "reserved"
limits = {{ rpm = {rpm}, tpm = {TPM} }}
""" for d, model, rpm, region in MEMBERS)
    regions = ", ".join(f'"{r}"' for r in EU_REGIONS)
    return gateway_head(sim_url, key_file, name, redis, prefix) + deployments + f"""
[[models]]
name = "fast-chat"
deployments = ["a", "b", "c"]

[[tenants]]
name = "bench"

[[tenants]]
name = "eu"
regions = [{regions}]

[[keys]]
id = "bench-key"
tenant = "bench"
sha256 = "{sha}"

[[keys]]
id = "eu-key"
tenant = "eu"
sha256 = "{eu_sha}"
"""


def system_prompt(run: str, session: int) -> str:
    """About 1,500 tokens, its own for each session (and run: no hit carries over)."""
    rng = random.Random(f"{run}-{session}")
    return f"Session {run}-{session}. " + " ".join(rng.choice(WORDS) for _ in range(1_500))


async def drive(urls: list[str], gateway: str, run: str, named: bool, per_minute: float, seconds: float,
                seed: int) -> dict:
    """Poisson arrivals for random sessions; per request (session, status, member)."""
    rng = random.Random(seed)
    prompts = [system_prompt(run, s) for s in range(SESSIONS)]
    served: dict[int, list[str]] = defaultdict(list)
    counts = Counter()
    lat: list[float] = []
    eu_outside = 0
    # Answers whose `model` names no member (LiteLLM writes the group's name): which member
    # served them cannot be read, so they count in no session or region figure.
    unread = 0
    conn = aiohttp.TCPConnector(limit=512)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=60)) as http:
        start = time.perf_counter() + 0.05

        async def one(intended: float, n: int, session: int) -> None:
            nonlocal eu_outside, unread
            eu = session < EU_SESSIONS
            body = {"model": "fast-chat", "max_tokens": 32,
                    "messages": [{"role": "system", "content": prompts[session]},
                                 {"role": "user", "content": f"turn {n}: what next?"}]}
            if named:
                body["prompt_cache_key"] = f"s-{run}-{session}"
                body["user"] = f"s-{run}-{session}"
            key = MASTER if gateway == "litellm" else (EU_KEY if eu else KEY)
            try:
                async with http.post(f"{urls[n % len(urls)]}/v1/chat/completions", json=body,
                                     headers={"Authorization": f"Bearer {key}"}) as r:
                    status = r.status
                    answer = await r.json(content_type=None) if status == 200 else None
            except Exception:
                status, answer = -1, None
            counts[str(status)] += 1
            if status != 200:
                return
            lat.append((time.perf_counter() - intended) * 1000)
            model = str(answer.get("model", "")).split("/")[-1]
            member = next((d for d, m, _, _ in MEMBERS if model.startswith(m)), None)
            if member is None:
                unread += 1
                return
            served[session].append(member)
            if eu and next((r for d, _, _, r in MEMBERS if d == member), "") not in EU_REGIONS:
                eu_outside += 1

        tasks, at, n = [], 0.0, 0
        while True:
            at += rng.expovariate(per_minute / 60)
            if at >= seconds:
                break
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(start + at, n, rng.randrange(SESSIONS))))
            n += 1
        await asyncio.gather(*tasks)
    shares = [Counter(m).most_common(1)[0][1] / len(m) for m in served.values() if m]
    eu_requests = sum(len(served[s]) for s in range(EU_SESSIONS))
    return {"sent": n, "statuses": dict(counts), "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99),
            "session_on_one_member_mean": round(sum(shares) / len(shares), 4) if shares else None,
            "sessions_at_least_90pct": round(sum(1 for s in shares if s >= 0.9) / len(shares), 4) if shares else None,
            "eu_requests": eu_requests, "eu_outside_regions": eu_outside, "member_unread": unread,
            "per_member": dict(Counter(m for ms in served.values() for m in ms))}


def cache_share(stats: dict) -> dict:
    caches = stats.get("prompt_cache", {})
    hits = sum(c.get("hits", 0) for c in caches.values())
    misses = sum(c.get("misses", 0) for c in caches.values())
    read = sum(c.get("read_tokens", 0) for c in caches.values())
    return {"cache_hits": hits, "cache_misses": misses, "cache_hit_share": round(hits / max(1, hits + misses), 4),
            "cache_read_tokens": read}


def run(args, procs: Procs, key_file: Path, out: dict) -> None:
    """Runs the affinity workload for the gateways asked for, adding rows to `out`."""
    seconds = min(args.pool_open_seconds, 180)
    rate = POOL_RPM * 0.6
    redis_port = free_port()
    procs.start([args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no"], "affinity-redis.log")
    time.sleep(0.5)
    redis = f"redis://127.0.0.1:{redis_port}"
    sim_url = procs.start_sluice(args.sluice, ["simulate-provider", "--config", str(procs.write(
        "sim-affinity.toml", sim_toml())), "--port", "0"], "sim-affinity.log")
    n_inst = args.pool_instances
    runs = []
    for gateway in args.pool_gateways.split(","):
        if gateway == "sluice":
            runs += [("sluice", f"sluice x{n_inst} (redis), sessions named", True, None),
                     ("sluice", f"sluice x{n_inst} (redis), sessions unnamed", False, None)]
        elif gateway == "litellm":
            runs += [("litellm", f"litellm {s} x{n_inst} (redis)", True, s)
                     for s in args.pool_litellm_strategies.split(",")]
    for i, (gateway, name, named, strategy) in enumerate(runs):
        sim_reset(sim_url)
        mark = len(procs.procs)
        tag = f"affinity-{i}"
        if gateway == "sluice":
            urls = [procs.start_sluice(args.sluice, ["serve", "--config", str(procs.write(
                f"sluice-{tag}-{k}.toml", sluice_toml(sim_url, key_file, redis, f"{tag}-{k}", tag)))],
                f"sluice-{tag}-{k}.log") for k in range(n_inst)]
        else:
            # The pool phase's LiteLLM group: the same three members, untiered.
            from pool import pool_litellm_yaml
            urls = [start_litellm(procs, args.litellm, procs.write(f"litellm-{tag}-{k}.yaml",
                                  pool_litellm_yaml(sim_url, redis_port, strategy, False)), f"litellm-{tag}-{k}.log")
                    for k in range(n_inst)]
        try:
            r = asyncio.run(drive(urls, gateway, f"r{i}", named, rate, seconds, 71))
        finally:
            for proc in procs.procs[mark:]:
                procs.stop(proc)
        stats = sim_stats(sim_url)
        limited = sum(stats.get("models", {}).get(m, {}).get("rate_limited", 0) for _, m, _, _ in MEMBERS)
        row = {"workload": "affinity", "path": name, "named": named, **r, **cache_share(stats),
               "provider_429": limited, "offered_per_minute": rate}
        out.setdefault("rows", []).append(row)
        print(row, flush=True)
        time.sleep(1)


def table(rows: list[dict]) -> str:
    rows = [r for r in rows if r["workload"] == "affinity"]
    if not rows:
        return ""
    lines = ["", "Sessions over the pool (a eu-west, b eu-north, c us-east; Poisson at 360/min, 60 % of the sum; "
             "120 sessions with ~1,500-token prompts, 40 of them of a tenant limited to the EU regions; "
             "the provider caches prompts per deployment):", "",
             "| gateway | a session's requests on its member (mean) | sessions ≥ 90 % on one member | prompt-cache hit share "
             "| EU tenant's requests outside the EU | p50 | p99 | provider 429s | errors |",
             "|---|---|---|---|---|---|---|---|---|"]
    def share(v, digits: int) -> str:
        return "-" if v is None else f"{100 * v:.{digits}f} %"

    for r in rows:
        errors = sum(v for k, v in r["statuses"].items() if k != "200")
        eu = f"{r['eu_outside_regions']} of {r['eu_requests']}" if r["eu_requests"] else "-"
        lines.append(f"| {r['path']} | {share(r['session_on_one_member_mean'], 1)} | {share(r['sessions_at_least_90pct'], 0)} "
                     f"| {100 * r['cache_hit_share']:.1f} % | {eu} "
                     f"| {r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms | {r['provider_429']} | {errors} |")
    return "\n".join(lines)
