"""Connection failures on loopback, each with its own message (the lab covers real sshd)."""

from __future__ import annotations

import socket
import threading

import pytest

from sparksync.core.ssh.connection import Endpoint, SshSettings, default_dialer, probe_host_key
from sparksync.core.ssh.errors import HostUnreachableError, SshHandshakeError

FAST = SshSettings(connect_timeout_s=2, handshake_timeout_s=2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def not_ssh():
    """A TCP server on loopback that answers like a web server, then hangs up."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve)
    thread.start()
    yield server.getsockname()[1]
    thread.join(5)
    server.close()


def test_a_closed_port_is_reported_as_refused_with_what_to_do():
    port = free_port()
    with pytest.raises(HostUnreachableError) as caught:
        default_dialer("127.0.0.1", port, 2)
    message = str(caught.value)
    assert f"127.0.0.1 on SSH port {port}" in message and "connection refused" in message
    assert "no SSH server listens" in message


def test_a_server_that_is_not_ssh_fails_the_handshake_clearly(not_ssh):
    endpoint = Endpoint("127.0.0.1", not_ssh, "u", "127.0.0.1")
    with pytest.raises(SshHandshakeError, match=f"handshake with 127.0.0.1 port {not_ssh} failed"):
        probe_host_key(endpoint, default_dialer, FAST)


def test_the_dialer_connects_to_a_listening_port():
    server = socket.create_server(("127.0.0.1", 0))
    try:
        sock = default_dialer("127.0.0.1", server.getsockname()[1], 2)
        assert sock.getpeername() == server.getsockname()
        sock.close()
    finally:
        server.close()
