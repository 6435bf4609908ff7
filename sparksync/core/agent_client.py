"""A synchronous client for one agent's HTTP API.

It is Qt-free and blocking on purpose: the CLI calls it directly and the GUI
runs it in a worker thread. The token travels only in the Authorization
header; it is never logged and never part of an error message.
"""

from __future__ import annotations

import threading
from typing import TypeVar

import httpx
from pydantic import BaseModel

from sparksync import __version__
from sparksync.core.answers import check_answer, parse_answer, unreachable
from sparksync.core.errors import ProtocolMismatchError
from sparksync.core.telemetry_stream import Backoff, TelemetryStream
from sparksync_agent.protocol import (
    PROTOCOL_VERSION,
    AgentStatus,
    Hello,
    HelloReply,
    Snapshot,
    TelemetryPage,
    protocol_major,
)

M = TypeVar("M", bound=BaseModel)

DEFAULT_TIMEOUT = 5.0
# The agent pings idle streams; this much silence means a dead link, which
# the stream then treats as a dropped connection and reconnects.
DEFAULT_STREAM_READ_TIMEOUT = 30.0


class AgentClient:
    """Talks to the agent at ``base_url`` (e.g. ``http://127.0.0.1:PORT``)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        stream_read_timeout: float = DEFAULT_STREAM_READ_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.stream_read_timeout = stream_read_timeout
        self._streams: set[TelemetryStream] = set()
        self._lock = threading.Lock()
        # trust_env=False: a proxy from the environment must never see our
        # loopback or tunnel traffic, and with it the bearer token.
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
            trust_env=False,
        )

    def __repr__(self) -> str:  # never show the token
        return f"AgentClient({self.base_url!r})"

    # --- requests ----------------------------------------------------------

    def hello(self) -> HelloReply:
        """Exchange versions; raises ProtocolMismatchError when the MAJORs differ."""
        body = Hello(client_version=__version__).model_dump(mode="json")
        reply = self._call("POST", "/v1/hello", HelloReply, "saying hello", json=body)
        if not _same_major(reply.protocol_version):
            raise ProtocolMismatchError(
                f"the agent at {self.base_url} speaks protocol {reply.protocol_version} "
                f"(agent {reply.agent_version}), this client speaks {PROTOCOL_VERSION}. "
                "Update SparkSync or the agent so both speak the same MAJOR version."
            )
        return reply

    def snapshot(self) -> Snapshot:
        return self._call("GET", "/v1/snapshot", Snapshot, "reading the snapshot")

    def status(self) -> AgentStatus:
        return self._call("GET", "/v1/status", AgentStatus, "reading the agent status")

    def telemetry(self, since: int, limit: int | None = None) -> TelemetryPage:
        """Samples with ``seq > since``, oldest first (at most ``limit``)."""
        params = {"since": since} if limit is None else {"since": since, "limit": limit}
        return self._call("GET", "/v1/telemetry", TelemetryPage, "reading telemetry", params=params)

    def metrics(self) -> str:
        """The agent's Prometheus text exposition."""
        return self._send("GET", "/metrics", "reading metrics").text

    def stream(
        self, since: int = 0, *, run_id: str | None = None, backoff: Backoff | None = None
    ) -> TelemetryStream:
        """Live samples with ``seq > since``; see :class:`TelemetryStream`.

        Pass the ``run_id`` that ``since`` belongs to so that a restarted agent
        is noticed (the stream then starts over from 0). The stream reconnects
        by itself; ``close()`` (of the stream or of this client) stops it from
        any thread.
        """
        stream = TelemetryStream(self, since, backoff, run_id=run_id, on_close=self._forget)
        with self._lock:
            self._streams.add(stream)
        return stream

    # --- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Stop every open stream, then release the connections."""
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.close()
        self._http.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- plumbing shared with TelemetryStream --------------------------------

    @property
    def http(self) -> httpx.Client:
        return self._http

    def stream_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, read=self.stream_read_timeout)

    def _call(self, method: str, path: str, model: type[M], what: str, **kwargs) -> M:
        return parse_answer(self._send(method, path, what, **kwargs), model, self.base_url, what)

    def _send(self, method: str, path: str, what: str, **kwargs) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, what, exc) from exc
        return check_answer(response, self.base_url, what)

    def _forget(self, stream: TelemetryStream) -> None:
        with self._lock:
            self._streams.discard(stream)


def _same_major(version: str) -> bool:
    try:
        return protocol_major(version) == protocol_major(PROTOCOL_VERSION)
    except ValueError:
        return False
