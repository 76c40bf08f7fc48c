"""A recording pass-through in front of the simulated provider, and the views of what it
recorded that the differential suite (test_differential.py) compares.

`Capture` listens on a free port of 127.0.0.1, forwards every request unchanged (method,
path, query, headers — `Host` included, which SigV4 signs — and body) to its target, and
streams the target's answer back unchanged as it arrives, so event streams and SSE reach
the client with their framing. It records each request; `take()` hands over (and forgets)
those recorded since the last call.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

# Hop-by-hop headers (RFC 9110 §7.6.1) and the framing of the answer, which the capture
# server sets itself: it answers over HTTP/1.0 and closes the connection after each
# answer, so a streamed body is delimited by the close.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class Recorded:
    """One request as it reached the capture server."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lowercased; repeated headers joined with ", "
    body: bytes
    status: int = 0
    answer_headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Capture:
    """`Capture(target_url)`: a recording forwarder to `target_url` (http only)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._lock = threading.Lock()
        self._log: list[Recorded] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _any(self) -> None:
                capture._forward(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def take(self) -> list[Recorded]:
        with self._lock:
            log, self._log = self._log, []
        return log

    def _forward(self, h: BaseHTTPRequestHandler) -> None:
        if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
            body = _read_chunked(h.rfile)
        else:
            body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        headers: dict[str, str] = {}
        for name, value in h.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        parts = urlsplit(h.path)
        record = Recorded(h.command, parts.path, parse_qs(parts.query, keep_blank_values=True), headers, body)
        with self._lock:
            self._log.append(record)
        upstream = http.client.HTTPConnection(self._host, self._port, timeout=60)
        try:
            # Unchanged: the same header lines (Host too), the body with its own length.
            upstream.putrequest(h.command, h.path, skip_host=True, skip_accept_encoding=True)
            for name, value in h.headers.items():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    upstream.putheader(name, value)
            upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            answer = upstream.getresponse()
            record.status = answer.status
            record.answer_headers = {k.lower(): v for k, v in answer.getheaders()}
            h.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    h.send_header(name, value)
            h.send_header("Connection", "close")
            h.end_headers()
            # Bounded: 1 GiB in 64 KiB reads is far beyond any answer of the suite.
            for _ in range(16384):
                chunk = answer.read1(65536)
                if not chunk:
                    break
                h.wfile.write(chunk)
                h.wfile.flush()
        finally:
            upstream.close()


def _read_chunked(rfile: Any) -> bytes:
    out = b""
    for _ in range(1_000_000):
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while rfile.readline().strip():
                pass
            return out
        out += rfile.read(size)
        rfile.readline()
    raise ValueError("unterminated chunked body")


# ---------------------------------------------------------------------------------------
# What is compared of a request on the wire.

# Headers that identify the client library and its run, not the request: the SDKs' own
# telemetry (`user-agent`, `x-stainless-*`, `x-goog-api-client`, `amz-sdk-*`), per-request
# ids, and transport (`host` differs by the port each client was pointed at; the length
# follows the body, which is compared itself; `accept-encoding` and `connection` are the
# HTTP stack's). `x-amz-date` and `x-amz-content-sha256` are compared through the SigV4
# view below (the date always differs).
NOT_COMPARED = re.compile(
    r"^(user-agent|x-stainless-.*|x-goog-api-client|amz-sdk-.*|host|content-length|accept-encoding|connection"
    r"|x-amz-date|x-amz-user-agent|x-client-request-id|traceparent|tracestate)$"
)

SIGV4 = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?Signature=[0-9a-f]{64}$")


def auth_view(headers: dict[str, str]) -> dict[str, Any]:
    """The authentication of a request, as structure: for SigV4 the access key, the
    credential scope's region and service and the signed header list (not the date or the
    signature, which differ on every request); a bearer token as its scheme and, for the
    OAuth tokens the simulator mints (`ya29.sim-…`, a new one per client), only that it is
    one; `api-key` and `x-goog-api-key` as they are."""
    view: dict[str, Any] = {}
    auth = headers.get("authorization")
    if auth:
        m = SIGV4.match(auth)
        if m:
            view["sigv4"] = {
                "access_key": m.group(1),
                "region": m.group(3),
                "service": m.group(4),
                "signed_headers": m.group(5).split(";"),
            }
            view["x-amz-date"] = "x-amz-date" in headers
        elif auth.startswith("Bearer "):
            token = auth[len("Bearer "):]
            view["bearer"] = "<oauth access token>" if token.startswith("ya29.") else token
        else:
            view["authorization"] = auth
    for name in ("api-key", "x-goog-api-key"):
        if name in headers:
            view[name] = headers[name]
    return view


def header_view(headers: dict[str, str]) -> dict[str, str]:
    """Every other header that says something about the request, values as sent except
    media types, whose spaces and case are insignificant (RFC 9110 §8.3.1)."""
    out = {}
    for name, value in headers.items():
        if NOT_COMPARED.match(name) or name in ("authorization", "api-key", "x-goog-api-key"):
            continue
        if name in ("content-type", "accept", "x-amzn-bedrock-accept"):
            value = value.replace(" ", "").lower()
        # `accept: */*` (httpx's default, which google-genai sends) is what no Accept means
        # (RFC 9110 §12.5.1: "A request without any Accept header field implies that the
        # user agent will accept any media type").
        if name == "accept" and value == "*/*":
            continue
        out[name] = value
    return out
