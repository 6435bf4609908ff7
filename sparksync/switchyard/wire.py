"""A lean HTTP/1.1 client for the relay's hot path: POST a body, stream the answer back.

Why not httpx here: a stream of tokens is thousands of tiny chunks a second,
and httpx's layers (httpcore, h11, anyio) cost ~60 us of CPU per chunk,
which on a small machine is CPU taken from the engine itself. This client
is an asyncio Protocol and a small parser (~5 us per chunk). It does only
what the relay needs: keep-alive pooling, Content-Length and chunked bodies,
connect and read timeouts, and closing a connection to cancel a generation.
Health checks and everything else still use httpx.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

HIGH_WATER = 1 << 20  # pause reading from a replica when this much is buffered (a slow client)
MAX_HEAD = 64 * 1024


class WireError(Exception):
    """The replica could not be reached, or broke the answer off."""


class WireConnectError(WireError):
    pass


class WireTimeout(WireError):
    pass


class _Connection(asyncio.Protocol):
    def __init__(self, key: tuple[str, str, int]):
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.error: Exception | None = None
        self.timed_out = False
        self.last_activity = time.monotonic()
        self._waiter: asyncio.Future | None = None
        self._paused = False

    # -- asyncio callbacks --------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.last_activity = time.monotonic()
        if len(self.buffer) > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- reading ------------------------------------------------------------------------------

    async def more(self, have: int) -> None:
        """Wait until the buffer holds more than the ``have`` bytes the caller saw; raises when
        the connection ended instead. (Bytes may arrive between the caller's look and this call.)"""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        if len(self.buffer) > have:
            return
        if self.closed:
            raise self._ended()
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self.closed and not self.buffer:
            raise self._ended()

    def take(self, n: int) -> bytes:
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def _ended(self) -> WireError:
        if self.timed_out:
            return WireTimeout("no byte from the replica within the read timeout")
        detail = f": {self.error}" if self.error else ""
        return WireError(f"the replica closed the connection{detail}")

    def abort(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.abort()
        self.closed = True

    @property
    def reusable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


class WireResponse:
    """A replica's answer: status and headers at once, then the body as it comes."""

    def __init__(self, client: WireClient, conn: _Connection, status: int, headers: list[tuple[str, str]]):
        self._client = client
        self._conn = conn
        self.status_code = status
        self.headers = headers
        values = {k: v for k, v in headers}
        self._chunked = "chunked" in values.get("transfer-encoding", "").lower()
        length = values.get("content-length")
        self._remaining = int(length) if length and length.isdigit() else None
        self._keep_alive = values.get("connection", "").lower() != "close"
        self._done = not self._chunked and self._remaining == 0
        self._watchdog: asyncio.TimerHandle | None = None
        self._watch()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, as its bytes arrive (de-chunked)."""
        while not self._done:
            data = await (self._next_chunked() if self._chunked else self._next_plain())
            if data:
                yield data

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def aclose(self) -> None:
        """Done with the answer: keep the connection when it was read to the end, else drop it
        (which tells the replica to stop generating)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._done and self._keep_alive and self._conn.reusable and not self._conn.buffer:
            self._client.release(self._conn)
        else:
            self._conn.abort()

    # -- body framing -------------------------------------------------------------------------

    async def _next_plain(self) -> bytes:
        conn = self._conn
        if not conn.buffer:
            try:
                await conn.more(0)
            except WireError:
                if self._remaining is None:  # a body delimited by the end of the connection
                    self._done = True
                    return b""
                raise
        n = len(conn.buffer) if self._remaining is None else min(len(conn.buffer), self._remaining)
        data = conn.take(n)
        if self._remaining is not None:
            self._remaining -= n
            self._done = self._remaining == 0
        return data

    async def _next_chunked(self) -> bytes:
        conn = self._conn
        if not self._remaining:  # at a chunk boundary: read the size line first
            line = await self._line(skip_crlf=self._remaining == 0)
            try:
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                raise WireError(f"the replica sent a malformed chunk size {line[:20]!r}") from None
            if size == 0:
                await self._trailer()
                self._done = True
                return b""
            self._remaining = size
        # A token's chunk usually arrives whole with its size line: hand it over in the same call.
        if not conn.buffer:
            await conn.more(0)
        n = min(len(conn.buffer), self._remaining)
        self._remaining -= n
        return conn.take(n)

    async def _line(self, skip_crlf: bool) -> bytes:
        conn = self._conn
        if skip_crlf:  # the CRLF that ends the previous chunk's data
            while len(conn.buffer) < 2:
                await conn.more(len(conn.buffer))
            if conn.buffer[:2] == b"\r\n":
                del conn.buffer[:2]
        while (end := conn.buffer.find(b"\r\n")) < 0:
            await conn.more(len(conn.buffer))
        line = conn.take(end)
        del conn.buffer[:2]
        return line

    async def _trailer(self) -> None:
        while (await self._line(skip_crlf=False)) != b"":
            pass

    # -- read timeout -------------------------------------------------------------------------

    def _watch(self) -> None:
        # One timer per answer, not per chunk: it wakes a few times per timeout period.
        timeout = self._client.read_timeout
        loop = asyncio.get_running_loop()

        def check() -> None:
            idle = time.monotonic() - self._conn.last_activity
            if self._conn._paused:  # our client is slow to read; the replica is not late
                idle = 0.0
            if idle >= timeout:
                self._conn.timed_out = True
                self._conn.abort()
                self._conn._wake()
                return
            self._watchdog = loop.call_later(min(timeout - idle, timeout / 4) + 0.001, check)

        self._watchdog = loop.call_later(timeout / 4, check)


class WireClient:
    """Keep-alive connections to replicas, by scheme, host and port."""

    def __init__(self, connect_timeout: float, read_timeout: float):
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._ssl = ssl.create_default_context()

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> WireResponse:
        """Send the request and return once the answer's head has arrived."""
        scheme, host, port, target = _split(url)
        key = (scheme, host, port)
        conn = self._reuse(key)
        if conn is not None:
            try:
                return await self._exchange(conn, host, port, target, body, headers)
            except WireTimeout:
                raise
            except WireError:
                pass  # the replica had closed this idle connection before reading the request: send again
        conn = await self._connect(key)
        return await self._exchange(conn, host, port, target, body, headers)

    def release(self, conn: _Connection) -> None:
        self._idle.setdefault(conn.key, []).append(conn)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle.clear()

    def _reuse(self, key) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reusable and not conn.buffer:
                return conn
            conn.abort()
        return None

    async def _connect(self, key) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(key), host, port, ssl=self._ssl if scheme == "https" else None
                ),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise WireTimeout(f"no connection to {host}:{port} within {self.connect_timeout:g} s") from None
        except OSError as exc:
            raise WireConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        return conn

    async def _exchange(
        self, conn: _Connection, host: str, port: int, target: str, body: bytes, headers: dict[str, str]
    ) -> WireResponse:
        lines = [f"POST {target} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        assert conn.transport is not None
        conn.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        try:
            status, response_headers = await self._head(conn)
        except BaseException:
            conn.abort()
            raise
        return WireResponse(self, conn, status, response_headers)

    async def _head(self, conn: _Connection) -> tuple[int, list[tuple[str, str]]]:
        deadline = time.monotonic() + self.read_timeout
        while (end := conn.buffer.find(b"\r\n\r\n")) < 0:
            if len(conn.buffer) > MAX_HEAD:
                raise WireError("the replica sent an oversized response head")
            try:
                await asyncio.wait_for(conn.more(len(conn.buffer)), max(0.001, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise WireTimeout(f"no answer from the replica within {self.read_timeout:g} s") from None
        head = conn.take(end).decode("latin-1")
        del conn.buffer[:4]
        status_line, *header_lines = head.split("\r\n")
        try:
            status = int(status_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            raise WireError(f"the replica sent a malformed status line {status_line[:60]!r}") from None
        if status == 100:  # Continue: the real head follows
            return await self._head(conn)
        parsed = []
        for line in header_lines:
            name, _, value = line.partition(":")
            parsed.append((name.strip().lower(), value.strip()))
        return status, parsed


def _split(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, parts.hostname or "127.0.0.1", port, target
