"""One connection to a replica: an asyncio Protocol around httptools' response parser.

It keeps the answer in flight (its head, the body pieces not yet read, and
whether it is complete), pauses reading while too much waits for a slow
client, and watches the read timeout with one timer per answer. The client
that pools these connections is ``wire.WireClient``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

import httptools

HIGH_WATER = 1 << 20  # pause reading from a replica when this much is buffered (a slow client)
MAX_HEAD = 64 * 1024  # llhttp puts no limit on a head still arriving; this is ours


class WireError(Exception):
    """The replica could not be reached, or broke the answer off."""


class WireConnectError(WireError):
    pass


class WireTimeout(WireError):
    pass


class WireConnectTimeout(WireConnectError, WireTimeout):
    """No connection within the connect timeout: the request never left, like a refused connect."""


class Connection(asyncio.Protocol):
    """One connection to a replica. The parser calls the ``on_*`` methods, which keep the answer
    in flight: its head, the body pieces not yet read, and whether it is complete."""

    def __init__(self, key: tuple[str, str, int], loop: asyncio.AbstractEventLoop | None = None):
        self.key = key
        # Kept, not asked for each time: on Python 3.11 asyncio.get_running_loop() is a getpid() system call.
        self._loop = loop or asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: Exception | None = None  # why asyncio lost the connection
        self.failure: WireError | None = None  # what the parser rejected
        self.timed_out = False
        self.leftover = False  # bytes came after an answer: never reuse this connection
        self.spare = False  # opened ahead of need, not yet used
        # While set, body pieces go to it from data_received itself, and no reader is woken per
        # piece (see WireResponse.splice); it returns False to stop taking them.
        self.sink: Callable[[bytes], bool] | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._paused = False
        self._clear(read_timeout=0.0)
        self.complete = True  # no answer in flight until a request goes out

    def begin(self, read_timeout: float, whole: bool = False) -> None:
        """Ready for the answer to a request about to be written.

        ``read_timeout`` is the silence allowed between two bytes, or with
        ``whole`` the time the whole answer may take from now: an engine
        that answers a non-streamed request sends nothing until it has
        generated all of it, so silence there is not a sign of trouble.
        """
        self.spare = False
        self._clear(read_timeout)
        self.whole = whole
        self._arm(read_timeout)

    def _clear(self, read_timeout: float) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.head_done = self.complete = self.keep_alive = self.until_eof = self.chunked = False
        self.body: deque[bytes] = deque()  # body pieces the reader has not taken yet
        self.buffered = self.head_bytes = 0
        self.read_timeout = read_timeout
        self.whole = False
        self.last_activity = self.begun = time.monotonic()

    # -- asyncio callbacks --------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        if self.complete:  # nothing is expected now: a replica that sends anyway is not reused
            self.leftover = True
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            self._reject("a protocol upgrade, which this client never asks for", exc)
        except httptools.HttpParserError as exc:
            self._reject(str(exc), exc)
        if not self.head_done and not self.closed:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD:
                self._reject(f"a head over {MAX_HEAD // 1024} KiB")
        sink = self.sink
        if sink is not None and not self.complete and not self.closed:
            # Spliced: the pieces go on at once, and the reader sleeps until the answer ends (the
            # last piece is left for it: it goes to the client with the end, in one write).
            body = self.body
            if body:
                piece = body.popleft() if len(body) == 1 else join_pieces(body)
                self.buffered -= len(piece)
                if sink(piece):
                    return
                self.sink = None
            else:
                return
        if self.buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._peer_closed(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self._peer_closed(exc)
        self.closed = True
        self.disarm()
        self._wake()

    def _peer_closed(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        if exc is None and self.head_done and self.until_eof:  # a body delimited by the connection's end
            self.complete = True
        self._wake()

    # -- parser callbacks (httptools) ---------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request: stop the parser here
            raise WireError("bytes after the end of the answer")

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # after the head, these are a chunked body's trailers: not needed
            self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1").strip()))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # an interim answer (100 Continue): the real head follows
            self.headers = []
            return
        self.status, self.head_done = status, True
        framing = dict(h for h in self.headers if h[0] in ("content-length", "transfer-encoding"))
        # Neither length nor chunks: llhttp reads the body to the connection's end, which only we see.
        self.chunked = "chunked" in framing.get("transfer-encoding", "")
        self.until_eof = "content-length" not in framing and not self.chunked

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.complete = True
            self.keep_alive = self._parser.should_keep_alive()

    def _reject(self, reason: str, cause: Exception | None = None) -> None:
        if self.complete:  # the answer is whole; only the connection is spoilt
            self.leftover = True
            return
        host, port = self.key[1], self.key[2]
        self.failure = WireError(
            f"the replica at {host}:{port} sent a malformed HTTP response ({reason}); "
            "check that its URL points at the engine's OpenAI-compatible HTTP port"
        )
        self.failure.__cause__ = cause  # a failing callback of ours shows up here too
        self.abort()

    # -- reading ------------------------------------------------------------------------------

    async def wait(self) -> None:
        """Wait until the parser has made progress; raises when the answer failed or ended early."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        if not self.closed and self.failure is None:
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self.failure is not None:
            raise self.failure
        if self.closed and not self.complete and not self.body:
            raise self._ended()

    def _ended(self) -> WireError:
        if self.timed_out and self.whole:
            return WireTimeout(
                f"the replica did not finish its answer within {self.read_timeout:g} s "
                "(limits.answer_timeout_s; a non-streamed answer arrives whole once generated): "
                "ask for fewer tokens, stream the answer, or raise the limit"
            )
        if self.timed_out:
            when = "mid-answer" if self.head_done else "before answering"
            return WireTimeout(
                f"the replica sent nothing for {self.read_timeout:g} s {when}; "
                "check that it is not overloaded, or raise limits.read_timeout_s"
            )
        detail = f": {self.error}" if self.error else ""
        return WireError(f"the replica closed the connection{detail}")

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- read timeout -------------------------------------------------------------------------

    def _arm(self, timeout: float) -> None:
        # One timer per answer, not per chunk: it wakes a few times per timeout period.
        loop = self._loop

        def check() -> None:
            if self.whole:  # a deadline for the whole answer: activity does not push it back
                idle = time.monotonic() - self.begun
            else:
                idle = 0.0 if self._paused else time.monotonic() - self.last_activity
            if idle >= timeout:  # (paused: our client is slow to read; the replica is not late)
                self.timed_out = True
                self.abort()
                return
            self._watchdog = loop.call_later(min(timeout - idle, timeout / 4) + 0.001, check)

        self.disarm()
        self._watchdog = loop.call_later(timeout / 4, check)

    def disarm(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    # -- ending -------------------------------------------------------------------------------

    def close(self) -> None:
        """Done with the connection, politely (the replica sees its end, not a reset)."""
        self.disarm()
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def abort(self) -> None:
        self.disarm()
        if self.transport is not None and not self.closed:
            self.transport.abort()
        self.closed = True
        self._wake()

    @property
    def reusable(self) -> bool:
        return (
            not self.closed
            and not self.leftover
            and self.transport is not None
            and not self.transport.is_closing()
        )


def join_pieces(body: deque[bytes]) -> bytes:
    """The body pieces waiting in ``body`` as one, taken out of it."""
    piece = b"".join(body)
    body.clear()
    return piece
