"""Shared pytest fixtures for sluice's Python tests (official SDKs against real processes).

Fixtures here start `sluice` processes on 127.0.0.1 with a free port and stop them at the end
of the session. The binary is `$SLUICE_BIN`, or `target/debug/sluice` under the repository
root (build it with `cargo build -p sluice`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 20.0


def sluice_bin() -> Path:
    """The sluice binary under test."""
    path = Path(os.environ.get("SLUICE_BIN", "target/debug/sluice"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.exists():
        pytest.fail(f"sluice binary not found at {path}: run `cargo build -p sluice` or set SLUICE_BIN")
    return path


class Processes:
    """Processes started during the session; all are killed at teardown."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[str]] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="sluice-pytest-")

    def write(self, name: str, text: str) -> Path:
        """Writes a file into the session's temporary directory."""
        path = Path(self._tmp.name) / name
        path.write_text(text)
        return path

    def launch(self, args: list[str], prefix: str = "listening on ") -> tuple[str, subprocess.Popen[str]]:
        """Starts `sluice ARGS`, waits for its first stdout line `<prefix>URL`, returns (URL, process).

        A gateway serves its admin plane (`/admin`, `/dashboard`, `/metrics`) on the same URL
        (`SLUICE_ADMIN_LISTEN=shared`): these suites drive the API and the admin API through
        one address, and gateways started side by side do not contend for the admin port."""
        proc = subprocess.Popen(
            [str(sluice_bin()), *args],
            cwd=REPO_ROOT,
            env=dict(os.environ, SLUICE_ADMIN_LISTEN=os.environ.get("SLUICE_ADMIN_LISTEN", "shared")),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._procs.append(proc)
        line = _first_line(proc, STARTUP_TIMEOUT_S)
        if not line.startswith(prefix):
            stderr = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
            pytest.fail(f"`sluice {' '.join(args)}` printed {line!r} instead of '{prefix}URL'\n{stderr}")
        # Keep draining stdout and stderr (the access log writes a line per request) so the
        # process never blocks on a full pipe.
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
        return line[len(prefix):].strip(), proc

    def launch_gateway(self, config: Path) -> tuple[str, str, subprocess.Popen[str]]:
        """Starts `sluice serve --config CONFIG` with its admin plane apart, on a free port of
        its own; returns (URL, admin URL, process) from its first two stdout lines."""
        proc = subprocess.Popen(
            [str(sluice_bin()), "serve", "--config", str(config), "--admin-listen", "127.0.0.1:0"],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._procs.append(proc)
        # `sluice serve` writes both lines at once.
        lines = [_first_line(proc, STARTUP_TIMEOUT_S), _first_line(proc, STARTUP_TIMEOUT_S)]
        prefixes = ["sluice listening on ", "sluice admin listening on "]
        if not all(line.startswith(prefix) for line, prefix in zip(lines, prefixes)):
            pytest.fail(f"`sluice serve` printed {lines!r}")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
        url, admin = (line[len(prefix):].strip() for line, prefix in zip(lines, prefixes))
        return url, admin, proc

    def track(self, proc: subprocess.Popen[str]) -> None:
        """Kills `proc` at teardown with the others."""
        self._procs.append(proc)

    def stop_all(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        self._tmp.cleanup()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not result:
        proc.kill()
        pytest.fail(f"no first line from sluice within {timeout}s")
    return result[0]


@pytest.fixture(scope="session")
def processes() -> Iterator[Processes]:
    """Session-wide registry of started processes (killed at teardown)."""
    procs = Processes()
    yield procs
    procs.stop_all()


@pytest.fixture(scope="session")
def start_sim(processes: Processes) -> Callable[..., tuple[str, subprocess.Popen[str]]]:
    """`start_sim(config_toml, *extra_args) -> (url, process)`: a simulated provider.

    Runs `sluice simulate-provider --config FILE --port 0 EXTRA_ARGS`; `url` is its base URL,
    e.g. `http://127.0.0.1:41234` (OpenAI clients use `url + "/v1"`, Anthropic clients `url`).
    """
    counter = iter(range(1_000_000))

    def start(config_toml: str, *extra_args: str) -> tuple[str, subprocess.Popen[str]]:
        config = processes.write(f"sim-{next(counter)}.toml", config_toml)
        return processes.launch(["simulate-provider", "--config", str(config), "--port", "0", *extra_args])

    return start


@pytest.fixture(scope="session")
def redis_url(processes: Processes) -> str:
    """A `redis-server` of this session on a free port of 127.0.0.1, no persistence
    (`scripts/test` installs it); its URL, e.g. `redis://127.0.0.1:41235`."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    processes.track(proc)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return f"redis://127.0.0.1:{port}"
        except OSError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"redis-server exited with {proc.returncode}")
        time.sleep(0.05)
    pytest.fail(f"redis-server did not answer on port {port} within {STARTUP_TIMEOUT_S}s")


def key_sha256(key: str) -> str:
    """The SHA-256 a gateway config stores for an API key (`keys[].sha256`)."""
    return hashlib.sha256(key.encode()).hexdigest()


def sim_providers(sim_url: str, key_file: str, openai_name: str = "sim") -> str:
    """The two `[[providers]]` tables of a gateway in front of one simulator: its OpenAI
    shape as `openai_name` and its Anthropic shape as `sim-anthropic`."""
    return f"""
[[providers]]
name = "{openai_name}"
kind = "openai"
base_url = "{sim_url}"
api_key_file = "{key_file}"

[[providers]]
name = "sim-anthropic"
kind = "anthropic"
base_url = "{sim_url}"
api_key_file = "{key_file}"
"""
