"""Telemetry written to caught-up stream clients straight from the sampling tick.

At 10 Hz, waking each stream's task to pass a sample down Starlette's and
uvicorn's send chain (four coroutines per sample) was a fifth of what the
agent cost beyond sleeping. Here the tick frames the sample once, as the
HTTP/1.1 chunk uvicorn itself would write, and writes it to each client's
transport: a sample costs one ``write`` per client and no other wake-up.

Only what uvicorn's own send would do is skipped; the stream's task still
owns the response (start, pings, the last chunk) and takes over again as
soon as a client's socket backs up (uvicorn's write flow control), so a slow
client is served from the ring and told what it lost, as before. Where the
server's transport cannot be reached (another server, a test transport) the
stream never comes here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NamedTuple

from starlette.types import ASGIApp, Receive, Scope, Send

from sparksync_agent.sampler import Sampler

log = logging.getLogger(__name__)

STREAM_PATH = "/v1/telemetry/stream"
_SEND_KEY = "sparksync.server_send"  # the server's own send callable, before any middleware wraps it


class ServerSendKeeper:
    """Outermost ASGI layer: keeps the server's own ``send`` in the stream's scope.

    Starlette's middleware wraps ``send`` in closures; the stream needs the
    original to find the connection's transport.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == STREAM_PATH:
            scope[_SEND_KEY] = send
        await self.app(scope, receive, send)


class DirectTarget(NamedTuple):
    transport: asyncio.Transport
    flow: Any  # uvicorn's FlowControl: ``write_paused`` while the transport's buffer is full


def direct_target(scope: Scope) -> DirectTarget | None:
    """The transport and flow control of uvicorn's httptools connection behind this stream, or None.

    Only once the response has started as a chunked body: the direct writes
    frame each sample as a chunk, exactly as uvicorn's send does.
    """
    cycle = getattr(scope.get(_SEND_KEY), "__self__", None)
    transport, flow = getattr(cycle, "transport", None), getattr(cycle, "flow", None)
    if getattr(cycle, "chunked_encoding", None) is not True or transport is None:
        return None
    if not hasattr(flow, "write_paused") or not hasattr(transport, "write"):
        return None
    return DirectTarget(transport, flow)


class DirectWriter:
    """One client's socket, written to by the tick while it keeps up."""

    __slots__ = ("transport", "flow", "last", "detached")

    def __init__(self, transport: asyncio.Transport, flow: Any, last: int):
        self.transport, self.flow, self.last = transport, flow, last
        # Done once the tick stops writing here; the stream's task then takes over from ``last``.
        self.detached: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def write(self, seq: int, chunk: bytes) -> bool:
        """Write one framed sample; False (and detached) when the client must be served from the ring."""
        if self.flow.write_paused or self.transport.is_closing():
            if not self.detached.done():
                self.detached.set_result(None)
            return False
        self.transport.write(chunk)
        self.last = seq
        return True


class SampleFanout:
    """Frames each new sample once and writes it to every attached client, from the tick."""

    def __init__(self, sampler: Sampler):
        self._sampler = sampler
        self._writers: tuple[DirectWriter, ...] = ()  # replaced, never mutated: the tick iterates it

    @property
    def attached(self) -> int:
        """How many clients the tick writes to now."""
        return len(self._writers)

    def add(self, writer: DirectWriter) -> None:
        if not self._writers:
            self._sampler.listen(self._on_sample)
        self._writers += (writer,)

    def remove(self, writer: DirectWriter) -> None:
        if writer not in self._writers:
            return
        self._writers = tuple(w for w in self._writers if w is not writer)
        if not self._writers:
            self._sampler.unlisten(self._on_sample)

    def _on_sample(self, seq: int, data: bytes) -> None:
        event = b"id: %d\nevent: sample\ndata: %s\n\n" % (seq, data)
        chunk = b"%x\r\n%s\r\n" % (len(event), event)
        for writer in self._writers:
            try:
                if not writer.write(seq, chunk):
                    self.remove(writer)
            except Exception:  # noqa: BLE001 - one broken socket must not cost the others their sample
                log.debug("direct write to a stream client failed; its task takes over", exc_info=True)
                self.remove(writer)
                if not writer.detached.done():
                    writer.detached.set_result(None)


def fanout_of(app: Any) -> SampleFanout | None:
    return getattr(app.state, "sample_fanout", None)
