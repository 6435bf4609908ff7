"""A streamed answer's way through the gateway: spliced from the replica's connection to the client's
under uvicorn's httptools protocol, piece by piece through ASGI ``send`` anywhere else, the same bytes
either way, and a client that reads slowly holds the replica back instead of losing anything."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from sparksync.switchyard import respond
from sparksync.switchyard.server import GatewayThread
from tests.switchyard.conftest import config_for
from tests.switchyard.fakes import Reply

CHAT = "/v1/chat/completions"


def ask() -> dict:
    return {"model": "switchyard", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
def counted(monkeypatch):
    """How often the gateway wrote a piece straight to a client, and waited for one to read."""
    counts = {"write": 0, "writable": 0}
    write, writable = respond.ClientWire.write, respond.ClientWire.writable

    def counting_write(self, piece):
        counts["write"] += 1
        return write(self, piece)

    async def counting_writable(self):
        counts["writable"] += 1
        await writable(self)

    monkeypatch.setattr(respond.ClientWire, "write", counting_write)
    monkeypatch.setattr(respond.ClientWire, "writable", counting_writable)
    return counts


def _body(gw: GatewayThread) -> bytes:
    with httpx.stream("POST", gw.url + CHAT, json=ask()) as response:
        assert response.status_code == 200
        return response.read()


def test_the_spliced_stream_and_the_asgi_one_carry_the_same_bytes(fake, _servers, counted):
    replica = fake("r", default=Reply(content="the same answer, either way " * 5, token_delay_s=0.002))
    config = config_for([replica.url], [replica.url])
    spliced = GatewayThread(config, http="httptools")
    plain = GatewayThread(config, http="h11")
    _servers.extend([spliced, plain])
    spliced.start()
    plain.start()

    through_h11 = _body(plain)
    assert counted["write"] == 0  # under h11 every piece went through ASGI send
    through_httptools = _body(spliced)
    # Under httptools the pieces went straight to the client: if a uvicorn release changed what
    # ClientWire relies on, it would fall back to send (still correct, only slower), and this says so.
    assert counted["write"] > 10, "the stream was not spliced under uvicorn's httptools protocol"
    assert through_httptools == through_h11
    events = [line for line in through_httptools.split(b"\n") if line.startswith(b"data:")]
    assert events[-1] == b"data: [DONE]"
    text = "".join(
        (json.loads(e[5:])["choices"][0]["delta"].get("content") or "") for e in events[:-1]
    )
    assert text == "the same answer, either way " * 5


def _read_chunked(sock: socket.socket, pause_s: float) -> tuple[bytes, bytes]:
    """The answer's head and its de-chunked body, read a little at a time after a pause."""
    time.sleep(pause_s)  # meanwhile the gateway's writes to us fill the (small) socket buffers
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, rest = data.split(b"\r\n\r\n", 1)
    body = b""
    while True:
        while b"\r\n" not in rest:
            rest += sock.recv(65536)
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(rest) < size + 2:
            more = sock.recv(65536)
            assert more, "the gateway closed the connection mid-answer"
            rest += more
        if size == 0:
            return head, body
        body, rest = body + rest[:size], rest[size + 2 :]


def test_a_slow_client_gets_the_whole_stream_and_holds_the_replica_back(fake, gateway, counted):
    content = "".join(f"{i:07d}," for i in range(1_000_000))  # 8 MB in 64 KiB pieces
    replica = fake("big", default=Reply(content=content, piece_chars=65536))
    gw = gateway(config_for([replica.url], [replica.url]))
    request = json.dumps(ask()).encode()
    port = int(gw.url.rsplit(":", 1)[1])
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client that takes little at a time
        sock.connect(("127.0.0.1", port))
        sock.sendall(
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(request)}\r\n\r\n".encode() + request
        )
        head, body = _read_chunked(sock, pause_s=0.5)
    assert head.startswith(b"HTTP/1.1 200")
    events = [line for line in body.split(b"\n") if line.startswith(b"data:")]
    text = "".join((json.loads(e[5:])["choices"][0]["delta"].get("content") or "") for e in events[:-1])
    assert text == content and events[-1] == b"data: [DONE]"
    # The client's buffer filled: the gateway stopped taking the replica's pieces until it drained.
    assert counted["writable"] > 0, counted
    assert gw.gateway.pools["small"].replicas[0].outstanding == 0
