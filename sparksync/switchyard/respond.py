"""The ASGI answer that plays a Relay's output to the client, and stops it when the client leaves.

Starlette's StreamingResponse notices a client that left only at its next
write, which, during a long prefill or a slow token, may be many seconds
later, while the replica keeps generating for nobody. This answer watches
the connection itself and cancels the relay at once; the relay's cleanup
closes the replica's response, which makes the engine free its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager

import anyio

from sparksync.switchyard.http_errors import error_body, sse_error_event
from sparksync.switchyard.relay import End, Head, Item, LiveRest

log = logging.getLogger(__name__)


class RelayResponse:
    def __init__(
        self,
        items: AsyncGenerator[Item, None],
        timeout_s: float,
        request_id: str,
        loop: asyncio.AbstractEventLoop | None = None,
    ):
        self._items = items
        # The server's loop, when the caller knows it: on Python 3.11 every lookup of the running
        # loop (current_task, create_task) is a getpid() system call.
        self._loop = loop
        self._timeout_s = timeout_s
        self._request_id = request_id
        self._started = False
        self._finished = False
        self._complete = False  # the server took the answer's end
        self._left = False  # the client disconnected before the end

    async def __call__(self, scope, receive, send) -> None:
        # A plain asyncio task watches the connection, not an anyio task group: a group costs
        # each request a cancel scope and its bookkeeping, a sizeable share of a short stream.
        loop = self._loop or asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None
        watcher = loop.create_task(self._watch_disconnect(receive, task))
        try:
            await self._pump(send)
        except asyncio.CancelledError:
            # Our own watcher's cancel ends the answer quietly; any other is passed on.
            if not self._left or _uncancel(task) > 0:
                raise
        finally:
            # Once the answer is complete the server ends the watcher's receive() itself
            # (ASGI: a receive after the response gets http.disconnect).
            if not self._complete:
                watcher.cancel()

    async def _watch_disconnect(self, receive, task: asyncio.Task) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if self._finished or self._complete or task.done():
            return  # the server reports a disconnect once the answer is complete, too
        log.info("request %s: the client disconnected; cancelling the upstream request", self._request_id)
        self._left = True
        task.cancel()

    async def _pump(self, send) -> None:
        try:
            async with _deadline(self._timeout_s):
                async for item in self._items:
                    if isinstance(item, End):
                        await self._end(send, item.body)
                    elif isinstance(item, LiveRest):
                        await item.play(ClientWire.beneath(send), lambda piece: self._send(send, piece))
                    else:
                        await self._send(send, item)
                if not self._complete:
                    await self._end(send, b"")
        except TimeoutError:
            if not self._complete:
                await self._timed_out(send)
        except OSError:
            pass  # the client is gone (the server reports it on our next write)
        finally:
            # The relay's cleanup (closing the replica's response, which stops its generation)
            # never waits, so even a task being cancelled runs it whole, unshielded.
            await self._items.aclose()

    async def _end(self, send, body: bytes) -> None:
        self._finished = True
        await send({"type": "http.response.body", "body": body, "more_body": False})
        self._complete = True

    async def _send(self, send, item: Head | bytes) -> None:
        if isinstance(item, Head):
            headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in item.headers]
            await send({"type": "http.response.start", "status": item.status, "headers": headers})
            self._started = True
        elif item:
            await send({"type": "http.response.body", "body": item, "more_body": True})

    async def _timed_out(self, send) -> None:
        message = (
            f"the request took longer than limits.request_timeout_s ({self._timeout_s:g} s); "
            "ask for fewer tokens or raise the limit"
        )
        log.warning("request %s: %s", self._request_id, message)
        if not self._started:
            await send(
                {
                    "type": "http.response.start",
                    "status": 504,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            body = error_body(504, message, code="timeout")
        else:
            body = sse_error_event(message, code="timeout")
        await send({"type": "http.response.body", "body": body, "more_body": False})
        self._complete = True


class ClientWire:
    """The client's connection beneath uvicorn's ASGI ``send``, for a streamed body's pieces.

    Each ASGI ``send`` of a piece is a coroutine, a message dict and a pass
    through the server's checks, and it needs a task awake to call it: per
    token, that is where a Python proxy's CPU goes. Once uvicorn (its
    httptools protocol, the one the gateway runs on) has sent the head of a
    chunked answer, a piece is one chunk on the client's transport, framed
    as uvicorn frames it, so the replica's connection can write it there from
    its own callback (``LiveRest.play``). The head and the end still go
    through ``send``, so the server's own state stays right. Anything else
    (another server, another protocol, an answer with a length) gets None
    and the pieces go through ``send``.
    """

    def __init__(self, cycle) -> None:
        self._cycle = cycle
        self._transport = cycle.transport
        self._flow = cycle.flow

    @classmethod
    def beneath(cls, send) -> ClientWire | None:
        cycle = getattr(send, "__self__", None)
        if type(cycle).__name__ != "RequestResponseCycle" or type(cycle).__module__ != _HTTPTOOLS_CYCLE:
            return None
        if not (cycle.response_started and cycle.chunked_encoding is True and not cycle.response_complete):
            return None
        if cycle.scope.get("method") == "HEAD" or cycle.disconnected:
            return None
        return cls(cycle)

    def write(self, piece: bytes) -> bool:
        if self._cycle.disconnected:
            return False
        if piece:
            self._transport.write(b"%x\r\n%b\r\n" % (len(piece), piece))
        return not self._flow.write_paused

    async def writable(self) -> None:
        if self._cycle.disconnected:
            raise ConnectionResetError("the client disconnected")
        await self._flow.drain()
        if self._cycle.disconnected:
            raise ConnectionResetError("the client disconnected")


_HTTPTOOLS_CYCLE = "uvicorn.protocols.http.httptools_impl"


def _deadline(seconds: float) -> AbstractAsyncContextManager[object]:
    """A TimeoutError after ``seconds``: asyncio's own timeout (3.11+) costs a third of anyio's
    fail_after, paid by every request; Python 3.10 has only anyio's."""
    timeout = getattr(asyncio, "timeout", None)
    return timeout(seconds) if timeout is not None else _anyio_deadline(seconds)


@contextlib.asynccontextmanager
async def _anyio_deadline(seconds: float) -> AsyncIterator[None]:
    with anyio.fail_after(seconds):
        yield


def _uncancel(task: asyncio.Task) -> int:
    """Withdraw our cancel; the cancels still pending (Python 3.10 cannot tell: none)."""
    uncancel = getattr(task, "uncancel", None)
    return uncancel() if uncancel is not None else 0
