"""Fakes of an agent for unit tests of the client.

``FakeAgent`` answers through ``httpx.MockTransport`` (no sockets, fully
scripted); ``SilentStreamServer`` is a real loopback HTTP server whose stream
goes quiet, to prove that close() wakes a reader blocked on a socket.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from sparksync_agent.protocol import (
    PROTOCOL_VERSION,
    CpuSample,
    ErrorBody,
    HelloReply,
    MemorySample,
    NodeInfo,
    Sample,
    Snapshot,
)

GOOD_TOKEN = "fake-token-0123456789"


def make_sample(seq: int) -> Sample:
    memory = MemorySample(
        total_bytes=128_000_000_000, used_bytes=seq * 1_000_000_000, available_bytes=1, free_bytes=1,
        cached_bytes=0, buffers_bytes=0, swap_total_bytes=0, swap_used_bytes=0,
    )  # fmt: skip
    cpu = CpuSample(percent=float(seq % 100), per_core=[1.0, 2.0], load_avg=(0.1, 0.2, 0.3))
    return Sample(seq=seq, ts=1_000.0 + seq, memory=memory, cpu=cpu)


def sample_event(seq: int) -> bytes:
    return b"id: %d\nevent: sample\ndata: %s\n\n" % (seq, make_sample(seq).model_dump_json().encode())


def lost_event(lost: int, since: int) -> bytes:
    return b"event: lost\ndata: " + json.dumps({"lost": lost, "since": since}).encode() + b"\n\n"


def error(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json=ErrorBody(error=code, message=message).model_dump())


class FakeAgent:
    """A scripted agent: each stream connection plays the next script in ``scripts``.

    A script is a list of ``bytes`` (sent as they are) and exceptions (raised,
    as a dropped connection would), or an ``httpx.Response`` to answer with.
    When the scripts run out, a connection gets 503.
    """

    def __init__(self, protocol_version: str = PROTOCOL_VERSION):
        self.protocol_version = protocol_version
        self.run_ids: deque[str] = deque(["run-1"])  # each hello takes the next; the last one stays
        self.scripts: deque[list | httpx.Response] = deque()
        self.requests: list[httpx.Request] = []
        self.routes = {
            ("POST", "/v1/hello"): self._hello,
            ("GET", "/v1/snapshot"): self._snapshot,
            ("GET", "/v1/telemetry/stream"): self._stream,
            ("GET", "/metrics"): lambda _: httpx.Response(200, text="sparksync_up 1\n"),
        }

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def stream_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path == "/v1/telemetry/stream"]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("authorization") != f"Bearer {GOOD_TOKEN}":
            return error(401, "unauthorized", "missing or wrong bearer token")
        route = self.routes.get((request.method, request.url.path))
        if route is None:
            return error(404, "not_found", f"no route {request.url.path}")
        return route(request)

    def _hello(self, request: httpx.Request) -> httpx.Response:
        run_id = self.run_ids.popleft() if len(self.run_ids) > 1 else self.run_ids[0]
        reply = HelloReply(
            agent_version="9.9.9", protocol_version=self.protocol_version, node_id="n1",
            run_id=run_id, sample_hz=10.0,
        )  # fmt: skip
        return httpx.Response(200, json=reply.model_dump())

    def _snapshot(self, request: httpx.Request) -> httpx.Response:
        info = NodeInfo(node_id="n1", hostname="fake", arch="aarch64", os="DGX OS", kernel="6", cpu_count=20, boot_time=0)
        snap = Snapshot(info=info, run_id=self.run_ids[0], sample_hz=10.0, latest=make_sample(1))
        return httpx.Response(200, json=snap.model_dump(mode="json"))

    def _stream(self, request: httpx.Request) -> httpx.Response:
        if not self.scripts:
            return error(503, "unavailable", "no more scripted connections")
        script = self.scripts.popleft()
        if isinstance(script, httpx.Response):
            return script
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_play(script))


def _play(script: list) -> Iterator[bytes]:
    for step in script:
        if isinstance(step, BaseException):
            raise step
        yield step


class SilentStreamServer:
    """A loopback HTTP server whose telemetry stream sends one sample, then nothing."""

    def __init__(self):
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("content-length", 0)))
                body = HelloReply(
                    agent_version="1", protocol_version=PROTOCOL_VERSION, node_id="n", run_id="r", sample_hz=1
                ).model_dump_json().encode()
                self._send(200, "application/json", body)

            def do_GET(self):  # noqa: N802
                self._send(200, "text/event-stream", sample_event(1), close_delimited=True)
                server.release.wait(30)

            def _send(self, status, ctype, body, close_delimited=False):
                self.send_response(status)
                self.send_header("content-type", ctype)
                if not close_delimited:
                    self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="silent-sse", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> SilentStreamServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
