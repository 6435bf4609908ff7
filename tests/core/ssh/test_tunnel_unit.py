"""The tunnel's forwarding threads, over a stand-in channel: what happens when the transport dies."""

from __future__ import annotations

import socket
import threading

from sparksync.core.ssh.tunnel import Tunnel


class DeadTransportChannel:
    """A channel whose far end is a local socket, and whose close fails as on a dead transport."""

    def __init__(self):
        self.sock, self.far = socket.socketpair()
        self.close_tried = threading.Event()

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, n: int) -> bytes:
        return self.sock.recv(n)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def shutdown(self, how: int) -> None:  # the tunnel ends a channel's writing as a socket's here
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()
        self.close_tried.set()
        raise EOFError()  # paramiko's packetizer, writing CHANNEL_CLOSE to a socket that is gone


class OneChannel:
    def __init__(self, channel: DeadTransportChannel):
        self.channel = channel

    def open_channel(self, kind, dest, src, timeout=None):
        return self.channel


def test_a_channel_that_cannot_be_closed_ends_its_thread_quietly(monkeypatch):
    crashed: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", crashed.append)
    channel = DeadTransportChannel()
    with Tunnel(lambda stop: OneChannel(channel), "127.0.0.1", 9, label="n1") as tunnel:  # type: ignore[arg-type]
        with socket.create_connection((tunnel.local_host, tunnel.local_port), timeout=5) as client:
            client.sendall(b"ping")
            assert channel.far.recv(4) == b"ping"
            channel.far.sendall(b"pong")
            assert client.recv(4) == b"pong"
            channel.far.close()  # the node's side ends; then the client's
            assert client.recv(1) == b""
        assert channel.close_tried.wait(5)
    channel.far.close()
    assert crashed == []
