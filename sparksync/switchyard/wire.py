"""A lean HTTP/1.1 client for the relay's hot path: POST a body, stream the answer back.

Why not httpx here: a stream of tokens is thousands of tiny chunks a second,
and httpx's layers (httpcore, h11, anyio) cost ~60 us of CPU per chunk,
which on a small machine is CPU taken from the engine itself. This client is
an asyncio Protocol around httptools' HttpResponseParser (llhttp, the C
parser uvicorn uses), a few us per chunk. httptools does all the parsing:
status line, headers, Content-Length, chunked bodies and trailers. This
module only adds what the relay needs around it: keep-alive pooling, connect
and read timeouts, backpressure, and closing a connection to cancel a
generation.
Health checks and everything else still use httpx.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

HIGH_WATER = 1 << 20  # pause reading from a replica when this much is buffered (a slow client)
# How long a replica that closed a connection after a streamed answer is taken to do so with
# every streamed answer (llama-server does); after that one connection is kept again, to see.
CLOSES_AFTER_STREAM_S = 60.0
MAX_HEAD = 64 * 1024  # llhttp puts no limit on a head still arriving; this is ours


class WireError(Exception):
    """The replica could not be reached, or broke the answer off."""


class WireConnectError(WireError):
    pass


class WireTimeout(WireError):
    pass


class _Connection(asyncio.Protocol):
    """One connection to a replica. The parser calls the ``on_*`` methods, which keep the answer
    in flight: its head, the body pieces not yet read, and whether it is complete."""

    def __init__(self, key: tuple[str, str, int]):
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: Exception | None = None  # why asyncio lost the connection
        self.failure: WireError | None = None  # what the parser rejected
        self.timed_out = False
        self.leftover = False  # bytes came after an answer: never reuse this connection
        self.spare = False  # opened ahead of need, not yet used
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._paused = False
        self._clear(read_timeout=0.0)
        self.complete = True  # no answer in flight until a request goes out

    def begin(self, read_timeout: float) -> None:
        """Ready for the answer to a request about to be written."""
        self.spare = False
        self._clear(read_timeout)
        self._arm(read_timeout)

    def _clear(self, read_timeout: float) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.head_done = self.complete = self.keep_alive = self.until_eof = self.chunked = False
        self.body: deque[bytes] = deque()  # body pieces the reader has not taken yet
        self.buffered = self.head_bytes = 0
        self.read_timeout = read_timeout
        self.last_activity = time.monotonic()

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
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self.failure is not None:
            raise self.failure
        if self.closed and not self.complete and not self.body:
            raise self._ended()

    def _ended(self) -> WireError:
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
        loop = asyncio.get_running_loop()

        def check() -> None:
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


class WireResponse:
    """A replica's answer: status and headers at once, then the body as it comes."""

    def __init__(self, client: WireClient, conn: _Connection):
        self._client = client
        self._conn = conn
        self._closed = False
        self.status_code = conn.status
        self.headers = conn.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, as its bytes arrive (de-chunked).

        Pieces that arrived together come out as one: a replica streams one
        HTTP chunk per token, and under load several wait here at once; one
        piece for them all means one pass through the relay and one write to
        the client instead of one per token, which is where a busy gateway
        spends its CPU. Nothing waits for more: a lone piece goes at once.
        """
        conn = self._conn
        body = conn.body
        while True:
            if body:
                piece = body.popleft() if len(body) == 1 else _drain(body)
                conn.buffered -= len(piece)
                yield piece
                continue
            if conn.complete:
                return
            await conn.wait()

    @property
    def finished(self) -> bool:
        """The answer's end has been parsed and every piece of its body taken."""
        return self._conn.complete and not self._conn.body

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def aclose(self) -> None:
        """Done with the answer: keep the connection when it was read to the end, else drop it
        (which tells the replica to stop generating)."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        self._client._answered(conn.key)
        conn.disarm()
        if conn.complete and not conn.body and conn.keep_alive and conn.reusable:
            self._client.release(conn)
        else:
            conn.abort()


class WireClient:
    """Keep-alive connections to replicas, by scheme, host and port."""

    def __init__(self, connect_timeout: float, read_timeout: float):
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        # Replicas seen closing a connection after a streamed answer, and when. Their next
        # request would first try the dead connection (its end arrives after the client's next
        # request, not before), costing a write and a wait for the reset; a new one is opened
        # at once instead.
        self._closes_after_stream: dict[tuple[str, str, int], float] = {}
        # Spare connections being opened, and answers not yet closed, by replica (see _want_spare).
        self._opening: dict[tuple[str, str, int], asyncio.Task] = {}
        self._in_flight: dict[tuple[str, str, int], int] = {}
        self._ssl = ssl.create_default_context()

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> WireResponse:
        """Send the request and return once the answer's head has arrived."""
        scheme, host, port, target = _split(url)
        key = (scheme, host, port)
        request = _request(host, port, target, body, headers)
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        try:
            return await self._send(key, request)
        except BaseException:
            self._answered(key)
            raise

    async def _send(self, key, request: bytes) -> WireResponse:
        conn = self._reuse(key)
        if conn is not None:
            chunked = conn.chunked
            if conn.spare:  # taken: the next request gets one too
                self._want_spare(key)
            try:
                return await self._exchange(conn, request)
            except WireTimeout:
                raise
            except WireError:
                # The replica had closed this idle connection before reading the request: send again.
                self._closed_after(conn, chunked)
        conn = await self._connect(key)
        self._want_spare(key)
        return await self._exchange(conn, request)

    def release(self, conn: _Connection) -> None:
        if conn.chunked and conn.key in self._closes_after_stream:
            if self._closes_each_stream(conn.key):
                conn.close()
                return
            del self._closes_after_stream[conn.key]
        self._idle.setdefault(conn.key, []).append(conn)

    def _answered(self, key) -> None:
        self._in_flight[key] -= 1

    def _closes_each_stream(self, key) -> bool:
        seen = self._closes_after_stream.get(key)
        return seen is not None and time.monotonic() - seen < CLOSES_AFTER_STREAM_S

    async def aclose(self) -> None:
        opening = list(self._opening.values())
        for task in opening:
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle.clear()

    def _reuse(self, key) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reusable:
                return conn
            if conn.closed:
                self._closed_after(conn, conn.chunked)
            conn.abort()
        return None

    def _closed_after(self, conn: _Connection, chunked: bool) -> None:
        if chunked:
            self._closes_after_stream[conn.key] = time.monotonic()

    def _want_spare(self, key) -> None:
        """Open the next request's connection now, while this one's answer is on its way.

        Only for a replica seen closing the connection after each streamed
        answer (llama-server): every request to it would otherwise wait for a
        connect, and at concurrency 1 on a fast engine that is a sizeable share
        of each answer's time. One spare per replica at most, opened while the
        loop waits for the replica's first token, off any request's path. While
        idle it holds one of the replica's HTTP threads, until the replica's
        keep-alive timeout drops it; a dropped spare is skipped at reuse.

        Only while this is the replica's one answer in flight: under load the
        connect is a small share of a batched answer, and a spare opened in the
        middle of other streams delays their tokens instead (at concurrency 32
        on the tiny engine, added TTFT p50 rose from about +0.6 to +1.7 ms).
        """
        if not self._closes_each_stream(key) or key in self._opening or self._in_flight.get(key, 0) > 1:
            return
        if any(c.reusable for c in self._idle.get(key, ())):
            return
        task = asyncio.get_running_loop().create_task(self._open_spare(key))
        self._opening[key] = task

    async def _open_spare(self, key) -> None:
        try:
            conn = await self._connect(key)
        except WireError:
            return  # the request that needs it will try, and say why
        finally:
            self._opening.pop(key, None)
        conn.spare = True
        self._idle.setdefault(key, []).append(conn)

    async def _connect(self, key) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        opening = loop.create_connection(
            lambda: _Connection(key), host, port, ssl=self._ssl if scheme == "https" else None
        )
        try:
            _, conn = await _within(opening, self.connect_timeout)
        except asyncio.TimeoutError:
            raise WireTimeout(f"no connection to {host}:{port} within {self.connect_timeout:g} s") from None
        except OSError as exc:
            raise WireConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        return conn

    async def _exchange(self, conn: _Connection, request: bytes) -> WireResponse:
        assert conn.transport is not None
        if conn.transport.is_closing():
            # The replica hung up between our last look and now (it died, or dropped an idle
            # connection). uvloop raises on a write to a closed transport; treat it as what it is.
            raise WireError("the replica closed the connection")
        conn.begin(self.read_timeout)
        try:
            conn.transport.write(request)
        except RuntimeError as exc:  # closed in between (uvloop); asyncio's own transport ignores it
            conn.disarm()
            conn.closed = True
            raise WireError(f"the replica closed the connection: {exc}") from None
        try:
            while not conn.head_done:
                await conn.wait()
        except BaseException:
            conn.abort()
            raise
        return WireResponse(self, conn)


async def _within(opening, timeout: float):
    # asyncio.timeout (3.11+) where there is one: wait_for runs the connect in a task of its own,
    # which costs loop turns, and with some engines every streamed answer needs a new connection.
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(timeout):
            return await opening
    return await asyncio.wait_for(opening, timeout)


def _drain(body: deque[bytes]) -> bytes:
    piece = b"".join(body)
    body.clear()
    return piece


def _request(host: str, port: int, target: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _split(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, parts.hostname or "127.0.0.1", port, target
