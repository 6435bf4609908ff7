"""The relay's lean HTTP/1.1 client against raw scripted servers: framing, keep-alive, timeouts.

httptools parses the answers; these tests pin what the client builds on it: bodies reassembled from
any split, interim heads and trailers skipped, malformed answers turned into clear WireErrors, and a
connection reused only when its answer ended cleanly and the replica allows it.
"""

from __future__ import annotations

import asyncio

import pytest

from sparksync.switchyard import wire, wire_connection
from sparksync.switchyard.wire import WireClient, WireConnectError, WireError, WireTimeout
from tests.engines.engine_procs import free_port

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


class Script:
    """A TCP server that answers each request on a connection with the next scripted reply."""

    def __init__(
        self, replies: list[bytes], byte_by_byte: bool = False, close_after: bool = False, linger: float = 0.0
    ):
        self.replies = list(replies)
        self.byte_by_byte = byte_by_byte
        self.close_after = close_after
        self.linger = linger  # how long a connection stays open after its last answer
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                self.requests.append(head + await reader.readexactly(length))
                await self._reply(writer, self.replies.pop(0))
                if self.close_after:
                    await asyncio.sleep(self.linger)
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _reply(self, writer: asyncio.StreamWriter, reply: bytes) -> None:
        if reply in (b"hang", b"silent"):
            if reply == b"hang":
                writer.write(CHUNKED_HEAD)
            await asyncio.sleep(5)
            return
        for piece in [reply[i : i + 1] for i in range(len(reply))] if self.byte_by_byte else [reply]:
            writer.write(piece)
            await writer.drain()
            if self.byte_by_byte:
                await asyncio.sleep(0)


def run(script: Script, body, read_timeout: float = 5.0):
    """Serve ``script`` on a free port and run ``body(client, url)`` against it."""

    async def main():
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        client = WireClient(connect_timeout=2, read_timeout=read_timeout)
        try:
            return await body(client, url)
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()

    return asyncio.run(main())


async def fetch(client: WireClient, url: str) -> tuple[int, bytes]:
    response = await client.post(url, b'{"x": 1}', {"Content-Type": "application/json"})
    try:
        return response.status_code, await response.read()
    finally:
        await response.aclose()


def test_chunked_body_split_at_every_byte_is_reassembled():
    script = Script([CHUNKED_HEAD + chunked(*EVENTS)], byte_by_byte=True)
    status, body = run(script, fetch)
    assert status == 200 and body == b"".join(EVENTS)
    assert script.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert script.requests[0].endswith(b'\r\n\r\n{"x": 1}')


def test_chunks_that_arrive_together_come_out_as_one_piece():
    # One write to the client for them all, not one per token (the relay's per-chunk cost).
    async def body(client, url):
        response = await client.post(url, b"{}", {})
        pieces = [piece async for piece in response.chunks()]
        await response.aclose()
        return pieces

    assert run(Script([CHUNKED_HEAD + chunked(*EVENTS)]), body) == [b"".join(EVENTS)]


def test_streamed_chunks_come_out_as_they_arrive():
    """Each event is written only after the client has read the one before: nothing is held back."""

    async def main():
        got_one = asyncio.Event()

        async def handle(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            writer.write(CHUNKED_HEAD + b"%x\r\n%s\r\n" % (len(EVENTS[0]), EVENTS[0]))
            await writer.drain()
            await asyncio.wait_for(got_one.wait(), 30)
            writer.write(chunked(*EVENTS[1:]))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        client = WireClient(connect_timeout=2, read_timeout=30)
        try:
            response = await client.post(
                f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", b"{}", {}
            )
            pieces = []
            async for piece in response.chunks():
                pieces.append(piece)
                got_one.set()
            await response.aclose()
            return pieces
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()

    pieces = asyncio.run(main())
    assert pieces[0] == EVENTS[0] and b"".join(pieces) == b"".join(EVENTS)


def test_content_length_body_and_keep_alive_reuse():
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    script = Script([reply, reply])

    async def twice(client, url):
        return [await fetch(client, url), await fetch(client, url)]

    assert run(script, twice) == [(200, b"hello"), (200, b"hello")]
    assert script.connections == 1


def test_a_connection_the_server_closed_is_replaced_transparently():
    # llama-server closes the connection after each streamed answer; the next request must not fail.
    script = Script([CHUNKED_HEAD + chunked(b"a"), CHUNKED_HEAD + chunked(b"b")], close_after=True)

    async def twice(client, url):
        first = await fetch(client, url)
        await asyncio.sleep(0.05)  # let the close arrive, as between two real requests
        return [first, await fetch(client, url)]

    assert run(script, twice) == [(200, b"a"), (200, b"b")]
    assert len(script.requests) == 2  # the dead connection's attempt never reached the replica


def test_a_replica_that_closes_after_each_stream_gets_a_new_connection_at_once(monkeypatch):
    # llama-server closes after every streamed answer, but its close arrives after the client's
    # next request: without learning that, every request would first go to a dead connection.
    answers = [CHUNKED_HEAD + chunked(name) for name in (b"a", b"b", b"c")]
    script = Script(answers, close_after=True, linger=0.2)
    exchanges, spares = [], []
    exchange = WireClient._exchange

    async def counted(self, conn, request, *timeouts):
        exchanges.append(conn)
        spares.append(conn.spare)
        return await exchange(self, conn, request, *timeouts)

    monkeypatch.setattr(WireClient, "_exchange", counted)

    async def thrice(client, url):
        answers = []
        for _ in range(3):
            answers.append(await fetch(client, url))
            await asyncio.sleep(0.05)  # as between two real requests: time for the spare to connect
        return answers

    assert run(script, thrice) == [(200, b"a"), (200, b"b"), (200, b"c")]
    # The second request tried the first connection, found it dead and learned; the third did not:
    # it went out on a spare connection, opened while the second answer streamed.
    assert len(exchanges) == 4
    assert exchanges[1] is exchanges[0] and len({id(c) for c in exchanges}) == 3
    assert spares == [False, False, False, True]
    assert len(script.requests) == 3


def spares_used(monkeypatch) -> list[bool]:
    """Whether each request the client sends goes out on a spare connection, in order."""
    used: list[bool] = []
    exchange = WireClient._exchange

    async def counted(self, conn, request, *timeouts):
        used.append(conn.spare)
        return await exchange(self, conn, request, *timeouts)

    monkeypatch.setattr(WireClient, "_exchange", counted)
    return used


async def fetch_after_its_close(client: WireClient, url: str) -> tuple[int, bytes]:
    # The replica's close arrives with the answer's end, before the relay is done with it.
    response = await client.post(url, b"{}", {})
    try:
        body = await response.read()
        await asyncio.sleep(0.05)
        return response.status_code, body
    finally:
        await response.aclose()


def test_a_close_that_comes_with_the_answers_end_is_learned_at_once(monkeypatch):
    # llama-server's close often arrives with the end of the stream: the connection is never
    # kept, so finding it dead at reuse cannot teach the client; the close itself must.
    script = Script([CHUNKED_HEAD + chunked(name) for name in (b"a", b"b", b"c")], close_after=True)
    spares = spares_used(monkeypatch)

    async def thrice(client, url):
        answers = []
        for _ in range(3):
            answers.append(await fetch_after_its_close(client, url))
            await asyncio.sleep(0.05)  # time for a spare to connect
        return answers

    assert run(script, thrice) == [(200, b"a"), (200, b"b"), (200, b"c")]
    # Learned from the first answer's end: the second request connects and opens the third's spare.
    assert spares == [False, False, True] and len(script.requests) == 3


def test_no_spares_beyond_a_few_answers_in_flight(monkeypatch):
    # Under load a spare opened mid-stream delays the other streams' tokens more than it saves.
    together = wire.SPARES_UP_TO + 2
    script = Script([CHUNKED_HEAD + chunked(b"x")] * (2 * together), close_after=True)
    spares = spares_used(monkeypatch)

    async def body(client, url):
        for _ in range(2):
            await asyncio.gather(*(fetch_after_its_close(client, url) for _ in range(together)))
            await asyncio.sleep(0.05)

    run(script, body)
    assert spares == [False] * (2 * together)
    assert script.connections == 2 * together  # and none was opened to sit idle


def test_a_replica_that_keeps_connections_after_streams_keeps_its_connection():
    answers = [CHUNKED_HEAD + chunked(name) for name in (b"a", b"b", b"c")]
    script = Script(answers)

    async def thrice(client, url):
        return [await fetch(client, url) for _ in range(3)]

    assert run(script, thrice) == [(200, b"a"), (200, b"b"), (200, b"c")]
    assert script.connections == 1


def test_silence_after_the_head_times_out():
    async def body(client, url):
        response = await client.post(url, b"{}", {})
        with pytest.raises(WireTimeout, match="nothing for 0.3 s mid-answer"):
            await response.read()
        await response.aclose()

    run(Script([b"hang"]), body, read_timeout=0.3)


def test_malformed_chunk_size_is_a_wire_error():
    with pytest.raises(WireError, match=r"malformed HTTP response \(.*chunk size.*\); check that its URL"):
        run(Script([CHUNKED_HEAD + b"zz\r\nhello\r\n0\r\n\r\n"]), fetch)


def test_refused_connection():
    async def body(client, url):
        await client.post(f"http://127.0.0.1:{free_port()}/v1/completions", b"{}", {})

    with pytest.raises(WireConnectError, match="cannot connect"):
        run(Script([]), body)


def fetch_twice(client: WireClient, url: str) -> list[tuple[int, bytes]]:
    async def both():
        return [await fetch(client, url), await fetch(client, url)]

    return both()


def test_content_length_answer_split_at_every_byte_is_reassembled():
    reply = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok": 1.0}'
    assert run(Script([reply], byte_by_byte=True), fetch) == (200, b'{"ok": 1.0}')


def test_head_values_are_trimmed_and_names_lowercased():
    reply = b"HTTP/1.1 200 OK\r\nContent-Type:   text/event-stream  \r\nContent-Length: 0\r\n\r\n"

    async def head(client, url):
        response = await client.post(url, b"{}", {})
        await response.aclose()
        return response.headers

    assert ("content-type", "text/event-stream") in run(Script([reply]), head)


def test_chunked_trailers_are_skipped_and_the_connection_kept():
    with_trailer = CHUNKED_HEAD + chunked(*EVENTS)[: -len(b"\r\n")] + b"X-Usage: 3\r\nX-Other: a\r\n\r\n"
    script = Script([with_trailer, with_trailer], byte_by_byte=True)

    async def twice(client, url):
        answers = []
        for _ in range(2):
            response = await client.post(url, b"{}", {})
            answers.append((await response.read(), [name for name, _ in response.headers]))
            await response.aclose()
        return answers

    assert run(script, twice) == [(b"".join(EVENTS), ["content-type", "transfer-encoding"])] * 2
    assert script.connections == 1


def test_an_interim_100_continue_head_is_skipped():
    reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
    assert run(Script([reply]), fetch) == (201, b"ok")


def test_a_body_delimited_by_the_connection_end_is_read_whole_and_not_reused():
    script = Script([b"HTTP/1.1 200 OK\r\n\r\nuntil the end"] * 2, close_after=True)
    assert run(script, fetch_twice) == [(200, b"until the end")] * 2
    assert script.connections == 2


@pytest.mark.parametrize(
    "head",
    [b"HTTP/1.1 200 OK\r\nConnection: close\r\n", b"HTTP/1.0 200 OK\r\n"],
    ids=["connection-close", "http-1.0"],
)
def test_a_connection_the_replica_wants_closed_is_not_reused(head):
    # The server would serve a second request on it; the client must not ask.
    reply = head + b"Content-Length: 2\r\n\r\nok"
    script = Script([reply, reply])
    assert run(script, fetch_twice) == [(200, b"ok")] * 2
    assert script.connections == 2


def test_bytes_after_the_answer_keep_the_answer_but_not_the_connection():
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"
    script = Script([reply, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno"])
    assert run(script, fetch_twice) == [(200, b"ok"), (200, b"no")]
    assert script.connections == 2


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "Expected HTTP/"),
        (b"HTTP/1.1 abc OK\r\n\r\n", "Invalid status code"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n", "upgrade"),
        (b"HTTP/1.1 200 OK\r\nX-Endless: " + b"a" * (3 * wire_connection.MAX_HEAD), "a head over 64 KiB"),
    ],
    ids=["not-http", "status", "content-length", "upgrade", "oversized-head"],
)
def test_a_malformed_head_is_a_wire_error_that_says_what_to_check(reply, reason):
    async def body(client, url):
        await client.post(url, b"{}", {})

    with pytest.raises(WireError, match="malformed HTTP response") as caught:
        run(Script([reply]), body)
    assert reason in str(caught.value) and "127.0.0.1:" in str(caught.value)
    assert not isinstance(caught.value, WireTimeout)


def test_a_replica_closing_mid_body_is_a_wire_error():
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"
    with pytest.raises(WireError, match="closed the connection"):
        run(Script([reply], close_after=True), fetch)


def test_silence_before_the_head_times_out():
    async def body(client, url):
        await client.post(url, b"{}", {})

    with pytest.raises(WireTimeout, match=r"nothing for 0.3 s before answering.*limits.read_timeout_s"):
        run(Script([b"silent"]), body, read_timeout=0.3)


def test_a_slow_reader_pauses_the_replica_without_timing_out(monkeypatch):
    monkeypatch.setattr(wire_connection, "HIGH_WATER", 1024)
    pieces = [bytes([65 + i % 26]) * 512 for i in range(256)]  # 128 KiB in 512-byte chunks

    async def slow(client, url):
        response = await client.post(url, b"{}", {})
        await asyncio.sleep(0.5)  # longer than the read timeout, while the replica is paused
        transport = response._conn.transport
        paused = transport is not None and not transport.is_closing() and not transport.is_reading()
        body = await response.read()
        await response.aclose()
        return paused, body

    reply = CHUNKED_HEAD + chunked(*pieces)
    # A second reply keeps the server's side open, so "not reading" can only mean paused.
    paused, body = run(Script([reply, reply]), slow, read_timeout=0.3)
    assert paused and body == b"".join(pieces)


class _ClosedTransport:
    """A transport the peer has already closed, as uvloop shows it: writing raises."""

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")

    def abort(self) -> None:
        raise AssertionError("a closed transport must not be aborted again")


@pytest.mark.parametrize("closing", [True, False])
def test_a_connection_closed_under_our_feet_is_a_wire_error_not_a_crash(closing):
    # A replica that dies leaves idle connections whose transports are closed; the relay retries
    # on WireError, but a RuntimeError would reach the client as an HTTP 500.
    async def go():
        conn = wire_connection.Connection(("http", "127.0.0.1", 1))
        conn.transport = _ClosedTransport()
        conn.transport.closing = closing
        with pytest.raises(WireError, match="closed the connection"):
            await WireClient(1.0, 1.0)._exchange(conn, b"POST / HTTP/1.1\r\n\r\n")

    asyncio.run(go())
