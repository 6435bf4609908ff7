"""The live telemetry stream of one agent, with resume and reconnect.

Iterating a :class:`TelemetryStream` yields :class:`~sparksync_agent.protocol.Sample`
objects plus marker objects that tell the consumer what happened to the
connection:

- :class:`Connected`: a (re)connection is up and resumes after ``since``;
- :class:`Lost`: the agent's ring buffer no longer held ``lost`` samples;
- :class:`Restarted`: the agent restarted (new ``run_id``), ``seq`` starts over;
- :class:`Disconnected`: the connection dropped; the stream retries after ``retry_in`` s.

Errors a retry cannot fix (a refused token, another protocol MAJOR) end the
iteration with their exception. ``close()`` may be called from any thread.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, Union

import httpx
from httpx_sse import EventSource, SSEError, connect_sse
from pydantic import BaseModel, ValidationError

from sparksync.core.base.backoff import Backoff
from sparksync.core.agents.answers import check_answer, error_code, unreachable, unreadable
from sparksync.core.base.errors import (
    AgentRequestError,
    AgentUnreachableError,
    ProtocolMismatchError,
    SparkSyncError,
)
from sparksync_agent.protocol import Sample

if TYPE_CHECKING:
    from sparksync.core.agents.client import AgentClient

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

STREAM_PATH = "/v1/telemetry/stream"
STREAM_BACKOFF = Backoff(first_s=0.25, factor=2.0, max_s=5.0)


@dataclass(frozen=True)
class Connected:
    run_id: str
    since: int


@dataclass(frozen=True)
class Lost:
    lost: int
    since: int


@dataclass(frozen=True)
class Restarted:
    old_run_id: str
    new_run_id: str


@dataclass(frozen=True)
class Disconnected:
    error: SparkSyncError
    retry_in: float


StreamItem = Union[Sample, Connected, Lost, Restarted, Disconnected]


class _LostNotice(BaseModel):
    lost: int
    since: int


class _Resync(Exception):
    """The agent does not know our ``since`` because it restarted: reconnect at once."""


class TelemetryStream:
    """Samples with ``seq > since``, reconnecting and resuming until closed."""

    def __init__(
        self,
        client: AgentClient,
        since: int = 0,
        backoff: Backoff | None = None,
        *,
        run_id: str | None = None,
        on_close: Callable[[TelemetryStream], None] | None = None,
    ):
        if since < 0:
            raise ValueError("since must be >= 0")
        self._client = client
        self._since = since
        self._run_id = run_id
        self._backoff = backoff or STREAM_BACKOFF
        self._on_close = on_close
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._response: httpx.Response | None = None
        self._delivered = False  # did the current connection deliver a sample?

    @property
    def last_seq(self) -> int:
        """The newest ``seq`` delivered (or the ``since`` it started from)."""
        return self._since

    @property
    def run_id(self) -> str | None:
        return self._run_id

    @property
    def closed(self) -> bool:
        return self._stopped.is_set()

    def __iter__(self) -> Iterator[StreamItem]:
        return self._items()

    def samples(self) -> Iterator[Sample]:
        """Only the samples, for callers that do not care about the markers."""
        return (item for item in self if isinstance(item, Sample))

    def close(self) -> None:
        """Stop the stream; safe from any thread, wakes a blocked read at once."""
        with self._lock:
            self._stopped.set()
            if self._response is not None:
                _shutdown(self._response)

    # --- the reconnect loop -------------------------------------------------

    def _items(self) -> Iterator[StreamItem]:
        try:
            yield from self._reconnect_loop()
        finally:
            if self._on_close is not None:
                self._on_close(self)

    def _reconnect_loop(self) -> Iterator[StreamItem]:
        delays = self._backoff.delays()
        while not self._stopped.is_set():
            self._delivered = False
            try:
                yield from self._session()
                error: SparkSyncError = AgentUnreachableError(
                    f"the agent at {self._client.base_url} ended the telemetry stream; reconnecting."
                )
            except _Resync:
                continue
            except (AgentUnreachableError, AgentRequestError) as exc:
                if isinstance(exc, AgentRequestError) and exc.status < 500:
                    raise
                error = exc
            if self._stopped.is_set():
                return
            if self._delivered:  # a healthy session earns a fresh, short backoff
                delays = self._backoff.delays()
            delay = next(delays)
            log.info("telemetry stream from %s dropped (%s); retrying in %.2f s", self._client.where, error, delay)
            yield Disconnected(error, delay)
            if self._stopped.wait(delay):
                return

    def _session(self) -> Iterator[StreamItem]:
        """One connection: hello, then events until it ends or drops."""
        hello = self._client.hello()
        yield from self._check_run(hello.run_id)
        what = "reading the telemetry stream"
        try:
            with connect_sse(
                self._client.http,
                "GET",
                STREAM_PATH,
                params={"since": self._since},
                headers=self._resume_headers(),
                timeout=self._client.stream_timeout(),
            ) as source:
                yield from self._open(source)
                try:
                    yield from self._events(source)
                finally:
                    self._attach(None)
        except httpx.TransportError as exc:
            if self._stopped.is_set():
                return
            raise unreachable(self._client.where, what, exc) from exc
        except SSEError as exc:
            raise ProtocolMismatchError(
                f"the agent at {self._client.base_url} did not answer the telemetry stream with "
                f"server-sent events ({exc}). Update SparkSync or the agent."
            ) from exc

    def _open(self, source: EventSource) -> Iterator[StreamItem]:
        response = source.response
        if not response.is_success:
            response.read()
            # 409 since protocol 1.5; agents before it answered 400.
            if response.status_code in (400, 409) and error_code(response) == "unknown_since":
                yield from self._resync(response)
            check_answer(response, self._client.where, "opening the telemetry stream")
        self._attach(response)
        yield Connected(self._run_id or "", self._since)

    def _resync(self, response: httpx.Response) -> Iterator[StreamItem]:
        # since > newest seq: the agent restarted between our hello and this
        # request. A same run_id means the caller's since was simply wrong.
        hello = self._client.hello()
        if hello.run_id == self._run_id:
            check_answer(response, self._client.where, "resuming the telemetry stream")
        yield from self._check_run(hello.run_id)
        raise _Resync()

    def _events(self, source: EventSource) -> Iterator[StreamItem]:
        for event in source.iter_sse():
            if self._stopped.is_set():
                break
            if event.event == "sample":
                sample = self._parse(Sample, event.data)
                if sample.seq <= self._since:  # already delivered before a resume
                    continue
                self._since = sample.seq
                self._delivered = True
                yield sample
            elif event.event == "lost":
                notice = self._parse(_LostNotice, event.data)
                yield Lost(notice.lost, notice.since)
            # Other event names come from a newer MINOR; ignoring them is the contract.

    def _check_run(self, run_id: str) -> Iterator[StreamItem]:
        if self._run_id is not None and run_id != self._run_id:
            log.info("agent at %s restarted (run %s -> %s)", self._client.where, self._run_id, run_id)
            old, self._run_id, self._since = self._run_id, run_id, 0
            yield Restarted(old, run_id)
        self._run_id = run_id

    def _resume_headers(self) -> dict[str, str]:
        return {"Last-Event-ID": str(self._since)} if self._since else {}

    def _parse(self, model: type[M], data: str) -> M:
        try:
            return model.model_validate_json(data)
        except ValidationError as exc:
            raise unreadable(model.__name__, self._client.where, "reading the telemetry stream", exc) from exc

    def _attach(self, response: httpx.Response | None) -> None:
        with self._lock:
            self._response = response
            if response is not None and self._stopped.is_set():
                _shutdown(response)


def _shutdown(response: httpx.Response) -> None:
    """Wake a thread blocked reading ``response``.

    Closing a socket does not wake a recv() blocked on it in another thread;
    shutdown() does, so close() from the GUI thread takes effect at once.
    """
    network_stream = response.extensions.get("network_stream")
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the peer
