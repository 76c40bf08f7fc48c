"""The live dashboard in headless Chromium under load, and the planted-secret sweep.

A simulated provider and `sluice serve --log-json` (SLUICE_LOG=debug) run as processes; a
provider key with a distinctive value is planted through `api_key_file`. Traffic includes
successes, provider 429s, gateway refusals, bad keys, bad JSON, refused admin calls, admin
state, `/metrics` and the dashboard. The dashboard is rendered by Debian's `chromium`
(installed by scripts/test) while traffic keeps flowing; its DOM must show live numbers,
not an error. Then every log line, response body and header seen is searched for the key.

Set SLUICE_DASHBOARD_SCREENSHOT=docs/dashboard.png to refresh the screenshot in docs/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO_ROOT, STARTUP_TIMEOUT_S, Processes, key_sha256, sluice_bin

PLANTED = "sk-planted-PROVIDER-KEY-7f3a9c2e51d04b86"
ADMIN = "sk-admin-dashboard-test"
KEYS = {"acme": "sk-dash-acme", "beta": "sk-dash-beta", "single": "sk-dash-single", "tight": "sk-dash-tight"}

SIM = """
seed = 5
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 12 }
limits = { rpm = 100000, tpm = 100000000 }

[[models]]
name = "gpt-4o"
completion = { dist = "fixed", tokens = 6 }
limits = { rpm = 60 }
"""


sha = key_sha256


def gateway_config(sim_url: str, key_file: Path) -> str:
    # Each gateway keeps its async-job store in the session's temporary directory.
    jobs_path = f"{key_file}-jobs.redb"
    return f"""
[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs_path}"

[admin]
key_sha256 = "{sha(ADMIN)}"

[[providers]]
name = "sim"
kind = "openai"
base_url = "{sim_url}"
api_key_file = "{key_file}"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 3000, tpm = 600000 }}

[[deployments]]
name = "unguarded"
provider = "sim"
model = "gpt-4o"
limits = {{ rpm = 100000 }}

[[models]]
name = "fast"
deployment = "mini"
default_max_tokens = 64

[[models]]
name = "misconfigured"
deployment = "unguarded"

[[classes]]
name = "interactive"
max_wait = "2s"

[[classes]]
name = "single"
retry_attempts = 1
max_wait = "1ms"

[[tenants]]
name = "acme"
limits = {{ rpm = 1200 }}

[[tenants]]
name = "beta"
limits = {{ rpm = 600, tpm = 60000 }}

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{sha(KEYS['acme'])}"
limits = {{ rpm = 900, burst_seconds = 1 }}

[[keys]]
id = "beta-1"
tenant = "beta"
sha256 = "{sha(KEYS['beta'])}"

[[keys]]
id = "acme-single"
tenant = "acme"
class = "single"
sha256 = "{sha(KEYS['single'])}"

[[keys]]
id = "beta-tight"
tenant = "beta"
class = "single"
sha256 = "{sha(KEYS['tight'])}"
limits = {{ rpm = 60, burst_seconds = 1 }}
"""


class Seen:
    """Every response body and header the test saw, for the secret sweep."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.texts: list[str] = []
        self.statuses: list[int] = []

    def add(self, status: int, headers: dict[str, str], body: str) -> None:
        with self.lock:
            self.statuses.append(status)
            self.texts.append(json.dumps(headers) + "\n" + body)


def call(seen: Seen, method: str, url: str, key: str | None = None, body: bytes | None = None,
         content_type: str = "application/json") -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method=method)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    if body is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, headers, text = response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        status, headers, text = error.code, dict(error.headers), error.read().decode()
    seen.add(status, headers, text)
    return status, text


def chat(model: str, words: int = 20, max_tokens: int = 32) -> bytes:
    content = "lorem ipsum " * (words // 2)
    return json.dumps({"model": model, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": content}]}).encode()


def start_gateway(processes: Processes, config: Path, log: Path) -> tuple[str, subprocess.Popen[str]]:
    # The admin plane on the gateway's one URL (the split is tested in Rust, admin_plane.rs).
    env = dict(os.environ, SLUICE_LOG="debug", SLUICE_ADMIN_LISTEN="shared")
    proc = subprocess.Popen(
        [str(sluice_bin()), "serve", "--config", str(config), "--log-json"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
    )
    processes._procs.append(proc)  # killed at session teardown if still running
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(STARTUP_TIMEOUT_S)
    prefix = "sluice listening on "
    if not lines or not lines[0].startswith(prefix):
        proc.kill()
        pytest.fail(f"gateway did not start: {lines!r}\n{log.read_text()}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]
    return lines[0][len(prefix):].strip(), proc


def load(url: str, seen: Seen, stop: threading.Event) -> None:
    """Background traffic: successes for two tenants (queueing at acme-1's burst), gateway
    refusals (beta-tight may not wait), and requests to a deployment the provider limits."""
    n = 0
    while not stop.is_set() and n < 2000:
        n += 1
        call(seen, "POST", f"{url}/v1/chat/completions", KEYS["acme" if n % 3 else "beta"], chat("fast"))
        if n % 5 == 0:
            call(seen, "POST", f"{url}/v1/chat/completions", KEYS["tight"], chat("fast", 4, 8))
        if n % 10 == 0:
            call(seen, "POST", f"{url}/v1/chat/completions", KEYS["single"], chat("misconfigured", 4, 8))


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium not found: scripts/test installs Debian's chromium package")
    return path


def render(url: str, *mode: str) -> str:
    with tempfile.TemporaryDirectory(prefix="sluice-chromium-") as profile:
        args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--window-size=1280,900", "--virtual-time-budget=5000", *mode, url]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def ticket(url: str, seen: Seen) -> str:
    status, body = call(seen, "POST", f"{url}/admin/dashboard/ticket", ADMIN)
    assert status == 200, body
    return url + json.loads(body)["url"]


def text_of(dom: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', dom)
    assert match, f"no #{element_id} in the rendered page"
    return match.group(1).strip()


def test_dashboard_renders_live_data_under_load_and_no_secret_leaks(processes: Processes, start_sim) -> None:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("provider-key", PLANTED + "\n")
    config = processes.write("gateway-dashboard.toml", gateway_config(sim_url, key_file))
    log = Path(tempfile.mkdtemp(prefix="sluice-log-")) / "gateway.log"
    url, gateway = start_gateway(processes, config, log)
    seen = Seen()

    # Errors of every kind.
    call(seen, "POST", f"{url}/v1/chat/completions", "sk-wrong", chat("fast"))
    call(seen, "POST", f"{url}/v1/chat/completions", None, chat("fast"))
    call(seen, "POST", f"{url}/v1/chat/completions", KEYS["acme"], b"{not json")
    call(seen, "POST", f"{url}/v1/chat/completions", KEYS["acme"], chat("no-such-model"))
    call(seen, "POST", f"{url}/v1/chat/completions", KEYS["beta"], chat("fast", 4, 10_000_000))
    for path in ["/admin/state", "/admin/tenants/acme/pause", "/admin/limits/key/acme-1"]:
        status, _ = call(seen, "POST" if "pause" in path else "GET", f"{url}{path}", "sk-wrong")
        assert status in (401, 405)
    call(seen, "POST", f"{url}/dashboard/login", None, b"key=wrong", "application/x-www-form-urlencoded")
    # The provider's own 429s: `unguarded` believes 100,000 RPM, the provider allows 60.
    statuses = [call(seen, "POST", f"{url}/v1/chat/completions", KEYS["single"], chat("misconfigured", 4, 8))[0]
                for _ in range(40)]
    assert 429 in statuses, statuses

    stop = threading.Event()
    workers = [threading.Thread(target=load, args=(url, seen, stop), daemon=True) for _ in range(6)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(2.0)
        # A short pause of a tenant under load, then resume (admin calls in the sweep too).
        assert call(seen, "POST", f"{url}/admin/tenants/beta/pause", ADMIN)[0] == 200
        time.sleep(0.5)
        assert call(seen, "POST", f"{url}/admin/tenants/beta/resume", ADMIN)[0] == 200
        dom = render(ticket(url, seen), "--dump-dom")
        shot = os.environ.get("SLUICE_DASHBOARD_SCREENSHOT")
        target = Path(shot) if shot else Path(tempfile.mkdtemp(prefix="sluice-shot-")) / "dashboard.png"
        if not target.is_absolute():
            target = REPO_ROOT / target
        render(ticket(url, seen), f"--screenshot={target}")
        state = call(seen, "GET", f"{url}/admin/state", ADMIN)[1]
        metrics = call(seen, "GET", f"{url}/metrics")[1]
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)

    # The page rendered live numbers, not the login form or an error.
    assert 'name="key"' not in dom, "the login form, not the dashboard"
    assert re.search(r'id="error"[^>]*hidden', dom) and text_of(dom, "error") == "", "the error banner shows"
    assert text_of(dom, "updated") != "never"
    assert int(float(text_of(dom, "prevented").rstrip("k"))) >= 0
    assert re.fullmatch(r"[\d.]+k?", text_of(dom, "used")), text_of(dom, "used")
    assert text_of(dom, "store") == "store ok"
    assert 'title="mini"' in dom and 'title="acme"' in dom and 'title="beta"' in dom
    assert target.stat().st_size > 10_000, "the screenshot is suspiciously small"
    assert json.loads(state)["counters"]["requests"]["2xx"] > 50
    assert 200 in seen.statuses and 429 in seen.statuses and 401 in seen.statuses

    # Stop the gateway so its log is complete, then sweep everything for the planted key.
    gateway.terminate()
    gateway.wait(timeout=30)
    logs = log.read_text()
    assert logs.count("\n") > 20 and '"level":"DEBUG"' in logs, "debug JSON logs were captured"
    haystacks = {"logs": logs, "dashboard": dom, "state": state, "metrics": metrics}
    haystacks.update({f"response {i}": t for i, t in enumerate(seen.texts)})
    for needle in (PLANTED, PLANTED[10:30], ADMIN, sha(ADMIN)):
        for name, text in haystacks.items():
            assert needle not in text, f"`{needle}` leaked into {name}"
