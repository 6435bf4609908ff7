"""The relay's lean HTTP/1.1 client against raw scripted servers: framing, keep-alive, timeouts."""

from __future__ import annotations

import asyncio

import pytest

from sparksync.switchyard.wire import WireClient, WireConnectError, WireError, WireTimeout
from tests.engines.engine_procs import free_port

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


class Script:
    """A TCP server that answers each request on a connection with the next scripted reply."""

    def __init__(self, replies: list[bytes], byte_by_byte: bool = False, close_after: bool = False):
        self.replies = list(replies)
        self.byte_by_byte = byte_by_byte
        self.close_after = close_after
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
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _reply(self, writer: asyncio.StreamWriter, reply: bytes) -> None:
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


def test_streamed_chunks_come_out_as_they_arrive():
    async def body(client, url):
        response = await client.post(url, b"{}", {})
        pieces = [piece async for piece in response.chunks()]
        await response.aclose()
        return pieces

    assert run(Script([CHUNKED_HEAD + chunked(*EVENTS)]), body) == EVENTS


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
    assert script.connections == 2


def test_silence_after_the_head_times_out():
    async def body(client, url):
        response = await client.post(url, b"{}", {})
        with pytest.raises(WireTimeout):
            await response.read()
        await response.aclose()

    run(Script([b"hang"]), body, read_timeout=0.3)


def test_malformed_chunk_size_is_a_wire_error():
    with pytest.raises(WireError, match="malformed chunk size"):
        run(Script([CHUNKED_HEAD + b"zz\r\nhello\r\n0\r\n\r\n"]), fetch)


def test_refused_connection():
    async def body(client, url):
        await client.post(f"http://127.0.0.1:{free_port()}/v1/completions", b"{}", {})

    with pytest.raises(WireConnectError, match="cannot connect"):
        run(Script([]), body)
