"""Open sockets inside a lab namespace from this (host-namespace) test process.

Linux keeps the network namespace per thread, and a socket stays in the
namespace it was created in whichever thread uses it later. So ``in_netns``
runs a function in a short-lived thread that first joins the namespace
(``setns``); sockets it creates (and name lookups it makes) happen there,
and the rest of the process never leaves the host namespace.

``NetnsDialer`` is a ``Dialer`` for ``sparksync.core.ssh``: the client core
runs in the test process while its TCP connections start from a lab node.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

from sparksync.core.ssh.connection import default_dialer

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _enter(netns: str) -> None:
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({netns}): {os.strerror(err)}")
    finally:
        os.close(fd)


def in_netns(netns: str, fn: Callable[[], T]) -> T:
    """``fn()`` run by a thread inside ``netns``; its result or exception comes back here."""
    outcome: dict[str, object] = {}

    def body() -> None:
        try:
            _enter(netns)
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=body, name=f"netns-{netns}")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


class NetnsDialer:
    """The client core's default dialer, run from inside ``netns``."""

    def __init__(self, netns: str):
        self.netns = netns

    def __call__(self, host: str, port: int, timeout: float) -> socket.socket:
        return in_netns(self.netns, lambda: default_dialer(host, port, timeout))


def read_banner(netns: str, host: str, port: int, timeout: float) -> bytes:
    """The first line a TCP server at ``host:port`` sends, as seen from ``netns``."""

    def fetch() -> bytes:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            line = b""
            while not line.endswith(b"\n"):
                chunk = sock.recv(256)
                if not chunk:
                    break
                line += chunk
            return line

    return in_netns(netns, fetch)
