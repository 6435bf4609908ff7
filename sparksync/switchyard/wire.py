"""A lean HTTP/1.1 client for the relay's hot path: POST a body, stream the answer back.

Why not httpx here: a stream of tokens is thousands of tiny chunks a second,
and httpx's layers (httpcore, h11, anyio) cost ~60 us of CPU per chunk,
which on a small machine is CPU taken from the engine itself. Each
connection (``wire_connection.Connection``) is an asyncio Protocol around
httptools' HttpResponseParser (llhttp, the C parser uvicorn uses), a few us
per chunk. httptools does all the parsing: status line, headers,
Content-Length, chunked bodies and trailers. This module adds what the relay
needs around it: keep-alive pooling, a spare connection for replicas that
close after each stream, connect timeouts, and closing a connection to cancel
a generation. Health checks and everything else still use httpx.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

from sparksync.switchyard.wire_connection import (
    Connection,
    WireConnectError,
    WireConnectTimeout,
    WireError,
    WireTimeout,
    join_pieces,
)

# How long a replica that closed a connection after a streamed answer is taken to do so with
# every streamed answer (llama-server does); after that one connection is kept again, to see.
CLOSES_AFTER_STREAM_S = 60.0
# Spares are kept for up to this many answers in flight to one replica (see _want_spare). Four
# helped nothing measurable and cost an engine on one core about 5 % of its tokens/s at c4.
SPARES_UP_TO = 1


class WireResponse:
    """A replica's answer: status and headers at once, then the body as it comes."""

    def __init__(self, client: WireClient, conn: Connection):
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
                piece = body.popleft() if len(body) == 1 else join_pieces(body)
                conn.buffered -= len(piece)
                yield piece
                continue
            if conn.complete:
                return
            await conn.wait()

    async def next_piece(self) -> bytes:
        """The body's next piece as it comes (what has arrived, joined), or b"" at its end."""
        conn = self._conn
        body = conn.body
        while not body:
            if conn.complete:
                return b""
            await conn.wait()
        piece = body.popleft() if len(body) == 1 else join_pieces(body)
        conn.buffered -= len(piece)
        return piece

    async def splice(self, sink: Callable[[bytes], bool]) -> bytes | None:
        """Hand the body's pieces to ``sink`` as they arrive, from the connection's own callback.

        The reader of ``chunks`` wakes once per piece, through a future, a
        task step and every generator between the replica and the client:
        most of a proxy's CPU per token. Here a piece goes from the replica's
        socket to ``sink`` within the read itself, and this waits only for the
        answer's end. Returns the answer's last piece (the one its end came
        with, not given to ``sink``: it goes to the client with the end, in
        one write) once the answer is complete, or None as soon as ``sink``
        returns False (it can take no more for now; call again to go on).
        Raises as ``chunks`` does when the answer breaks off.
        """
        conn = self._conn
        body = conn.body
        conn.sink = sink
        try:
            while not conn.complete:
                if body:  # pieces that came before (or as the connection closed)
                    piece = join_pieces(body)
                    conn.buffered -= len(piece)
                    if not sink(piece):
                        return None
                if conn.sink is None:  # it said stop, from the callback
                    return None
                await conn.wait()
        finally:
            conn.sink = None
        piece = join_pieces(body)
        conn.buffered -= len(piece)
        return piece

    @property
    def finished(self) -> bool:
        """The answer's end has been parsed and every piece of its body taken."""
        return self._conn.complete and not self._conn.body

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Done with the answer: keep the connection when it was read to the end, else drop it
        (which tells the replica to stop generating). It never waits, so a cancelled task's
        cleanup cannot be cut short in it."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        self._client._answered(conn.key)
        conn.disarm()
        if conn.complete and not conn.body and conn.keep_alive and conn.reusable:
            self._client.release(conn)
            return
        if conn.complete and conn.keep_alive and conn.closed:
            # Whole, kept alive by its headers, and closed already: the replica's close came with
            # the answer's end (llama-server's often does), as telling as finding it dead later.
            self._client._closed_after(conn, conn.chunked)
        conn.abort()


class WireClient:
    """Keep-alive connections to replicas, by scheme, host and port."""

    def __init__(self, connect_timeout: float, read_timeout: float):
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        # Replicas seen closing a connection after a streamed answer, and when. Their next
        # request would first try the dead connection (its end arrives after the client's next
        # request, not before), costing a write and a wait for the reset; a new one is opened
        # at once instead.
        self._closes_after_stream: dict[tuple[str, str, int], float] = {}
        # Spare connections being opened, and answers not yet closed, by replica (see _want_spare).
        self._opening: dict[tuple[str, str, int], set[asyncio.Task]] = {}
        self._in_flight: dict[tuple[str, str, int], int] = {}
        self._ssl = ssl.create_default_context()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        # Looked up once: on Python 3.11 each asyncio.get_running_loop() is a getpid() system call.
        # A client serves the one loop it was first used on.
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], answer_timeout: float | None = None
    ) -> WireResponse:
        """Send the request and return once the answer's head has arrived.

        The answer may fall silent for ``read_timeout`` at most between two
        bytes; with ``answer_timeout`` it must instead be whole within that
        time (for non-streamed answers, which come in one piece at the end).
        Connect failures raise ``WireConnectError``: the request never left.
        """
        scheme, host, port, target = _split(url)
        key = (scheme, host, port)
        request = _request(host, port, target, body, headers)
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        try:
            return await self._send(key, request, answer_timeout)
        except BaseException:
            self._answered(key)
            raise

    async def _send(self, key, request: bytes, answer_timeout: float | None) -> WireResponse:
        conn = self._reuse(key)
        if conn is not None:
            chunked, spare = conn.chunked, conn.spare
            try:
                response = await self._exchange(conn, request, answer_timeout)
            except WireTimeout:
                raise
            except WireError:
                # The replica had closed this kept-alive connection before reading the request (no
                # byte of an answer came): the request reached no engine, so it goes again.
                self._closed_after(conn, chunked)
            else:
                if spare:  # taken: the next request gets one too
                    self._want_spare(key)
                return response
        conn = await self._connect(key)
        response = await self._exchange(conn, request, answer_timeout)
        self._want_spare(key)
        return response

    def release(self, conn: Connection) -> None:
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
        opening = [task for tasks in self._opening.values() for task in tasks]
        for task in opening:
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle.clear()

    def _reuse(self, key) -> Connection | None:
        idle = self._idle.get(key)
        while idle:
            # Spares oldest first: llama-server gives connections its HTTP threads in the order
            # they came, so an older spare is the likelier to hold one and answer at once.
            conn = idle.pop(0 if idle[0].spare else -1)
            if conn.reusable:
                return conn
            if conn.closed:
                self._closed_after(conn, conn.chunked)
            conn.abort()
        return None

    def _closed_after(self, conn: Connection, chunked: bool) -> None:
        if chunked:
            self._closes_after_stream[conn.key] = time.monotonic()

    def _want_spare(self, key) -> None:
        """Open the next request's connection now, while this one's answer is on its way.

        Only for a replica seen closing the connection after each streamed
        answer (llama-server): every request to it would otherwise wait for a
        connect, and at concurrency 1 on a fast engine that is a sizeable share
        of each answer's time. The request that took a spare or connected opens
        the next one once its answer has begun (llama-server sends the head
        with the first token), so the connect delays no first token. While idle
        a spare holds one of the replica's HTTP threads, which llama-server
        wakes every 10 ms to check its keep-alive timeout, until that timeout
        drops it; a dropped spare is skipped at reuse.

        Only up to SPARES_UP_TO answers in flight: under load the connect is a
        small share of a batched answer, and a spare opened in the middle of
        other streams delays their tokens instead (at concurrency 32 on the
        tiny engine, added TTFT p50 rose from about +0.6 to +1.7 ms; with four
        spares at c4 and the engine on one core, tokens/s fell by about 5 %).
        """
        in_flight = self._in_flight.get(key, 0)
        if in_flight > SPARES_UP_TO or not self._closes_each_stream(key):
            return
        opening = self._opening.setdefault(key, set())
        if len(opening) + sum(c.reusable for c in self._idle.get(key, ())) >= SPARES_UP_TO:
            return
        task = self._running_loop().create_task(self._open_spare(key))
        opening.add(task)
        task.add_done_callback(opening.discard)

    async def _open_spare(self, key) -> None:
        try:
            conn = await self._connect(key)
        except WireError:
            return  # the request that needs it will try, and say why
        conn.spare = True
        self._idle.setdefault(key, []).append(conn)

    async def _connect(self, key) -> Connection:
        scheme, host, port = key
        loop = self._running_loop()
        opening = loop.create_connection(
            lambda: Connection(key, loop), host, port, ssl=self._ssl if scheme == "https" else None
        )
        try:
            _, conn = await _within(opening, self.connect_timeout)
        except asyncio.TimeoutError:
            raise WireConnectTimeout(
                f"no connection to {host}:{port} within {self.connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise WireConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        return conn

    async def _exchange(
        self, conn: Connection, request: bytes, answer_timeout: float | None = None
    ) -> WireResponse:
        assert conn.transport is not None
        if conn.transport.is_closing():
            # The replica hung up between our last look and now (it died, or dropped an idle
            # connection). uvloop raises on a write to a closed transport; treat it as what it is.
            raise WireError("the replica closed the connection")
        if answer_timeout is None:
            conn.begin(self.read_timeout)
        else:
            conn.begin(answer_timeout, whole=True)
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


def _request(host: str, port: int, target: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@functools.lru_cache(maxsize=256)
def _split(url: str) -> tuple[str, str, int, str]:
    # Cached: a gateway sends to a few URLs over and over, and urlsplit costs every request.
    parts = urlsplit(url)
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, parts.hostname or "127.0.0.1", port, target


# The errors live with the connection; callers know them from here.
__all__ = [
    "WireClient",
    "WireConnectError",
    "WireConnectTimeout",
    "WireError",
    "WireResponse",
    "WireTimeout",
]
