"""Free ports are checked before a rank starts: a taken port is a clear error, never a crash later."""

from __future__ import annotations

import errno
import socket

import psutil


def taken_ports(ports: list[int]) -> list[int]:
    """The ports among ``ports`` that something already listens on (any address)."""
    return [port for port in ports if not _bindable(port)]


def _bindable(port: int) -> bool:
    # Binding the wildcard address conflicts with a listener on any address on
    # Linux; SO_REUSEADDR keeps a previous run's TIME_WAIT sockets from counting.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def holder(port: int) -> str | None:
    """Which process listens on ``port``, where the agent may see it (best effort)."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return f"{psutil.Process(conn.pid).name()} (pid {conn.pid})"
    except (psutil.Error, OSError):
        pass
    return None
