"""Local port forwards: 127.0.0.1:<ephemeral> here -> 127.0.0.1:<port> on a node.

Each accepted connection gets a ``direct-tcpip`` channel on the node's
shared transport (``NodeTransports``), fetched per connection, so a tunnel
outlives reconnects: connections open when a link drops fail, the next ones
use the new transport. Each connection is pumped by its own thread, woken
by data on either side or by ``close()``; nothing polls.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Callable

import paramiko

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.ssh.errors import TunnelError
from sparksync.core.ssh.transports import DEFAULT_GET_TIMEOUT_S, NodeTransports

log = logging.getLogger(__name__)

CHUNK = 65536
CHANNEL_OPEN_TIMEOUT_S = 15.0

# Gives a live transport; the Event is set when the tunnel closes, to cut a wait short.
TransportSource = Callable[[threading.Event], paramiko.Transport]


class Tunnel:
    """Listens on ``local_host:local_port``; forwards each connection to ``remote`` via the node."""

    def __init__(
        self,
        transport: TransportSource,
        remote_host: str,
        remote_port: int,
        *,
        local_host: str = "127.0.0.1",
        label: str = "node",
    ):
        self.remote = (remote_host, remote_port)
        self.label = label
        self._transport = transport
        self._listener = socket.create_server((local_host, 0))
        self.local_host, self.local_port = self._listener.getsockname()[:2]
        # Readable once close() writes to it: wakes every selector at once (nobody reads it).
        self._wake_r, self._wake_w = socket.socketpair()
        self._closing = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._spawn(self._accept_loop, f"tunnel-{label}-{remote_port}")

    def close(self) -> None:
        """Stop listening, end every forwarded connection, and wait for the threads."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._wake_w.send(b"x")
        while True:
            with self._lock:
                # A thread killed at interpreter exit never ran its ``finally``: skip the dead ones
                # rather than join them forever.
                threads = [t for t in self._threads if t is not threading.current_thread() and t.is_alive()]
            if not threads:
                break
            for thread in threads:
                thread.join()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def __enter__(self) -> Tunnel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- threads --------------------------------------------------------------------------------

    def _spawn(self, target: Callable, name: str, *args: object) -> None:
        thread = threading.Thread(target=self._tracked, args=(target, *args), name=name, daemon=True)
        with self._lock:
            # Started under the lock, so every thread ``close`` sees is alive until it ends.
            self._threads.add(thread)
            thread.start()

    def _tracked(self, target: Callable, *args: object) -> None:
        try:
            target(*args)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._closing.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._listener and not self._closing.is_set():
                        client, peer = self._listener.accept()
                        # Small writes (a header, then a body) must not wait for a delayed ACK.
                        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        self._spawn(self._forward, f"tunnel-{self.label}-conn", client, peer)

    def _forward(self, client: socket.socket, peer: tuple) -> None:
        channel = None
        try:
            channel = self._open_channel(peer)
            _pump(client, channel, self._wake_r)
        except (SparkSyncError, paramiko.SSHException, OSError, EOFError) as exc:
            level = logging.DEBUG if self._closing.is_set() else logging.WARNING
            log.log(
                level,
                "tunnel to %s %s:%d: connection from %s failed: %s",
                self.label,
                *self.remote,
                peer,
                exc,
            )
        finally:
            client.close()
            if channel is not None:
                # On a transport that died (a cut link) the close cannot be sent, and the channel
                # is gone with its transport anyway.
                with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
                    channel.close()

    def _open_channel(self, peer: tuple) -> paramiko.Channel:
        transport = self._transport(self._closing)
        return transport.open_channel("direct-tcpip", self.remote, peer[:2], timeout=CHANNEL_OPEN_TIMEOUT_S)


def _pump(client: socket.socket, channel: paramiko.Channel, wake: socket.socket) -> None:
    """Copy both ways until both sides have ended (half-closes passed on) or ``wake`` fires."""
    with selectors.DefaultSelector() as selector:
        selector.register(client, selectors.EVENT_READ)
        selector.register(channel, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        open_sides = 2
        while open_sides:
            for key, _ in selector.select():
                if key.fileobj is wake:
                    return
                source, sink = (client, channel) if key.fileobj is client else (channel, client)
                data = source.recv(CHUNK)
                if data:
                    sink.sendall(data)
                    continue
                selector.unregister(source)
                open_sides -= 1
                _end_writing(sink)


def _end_writing(sink: socket.socket | paramiko.Channel) -> None:
    try:
        sink.shutdown_write() if isinstance(sink, paramiko.Channel) else sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the other side is already gone


def open_tunnel(
    transports: NodeTransports,
    node_name: str,
    remote_port: int,
    *,
    remote_host: str = "127.0.0.1",
    local_host: str = "127.0.0.1",
    timeout: float = DEFAULT_GET_TIMEOUT_S,
) -> Tunnel:
    """A tunnel to ``remote_host:remote_port`` as seen from node ``node_name`` (its loopback by default).

    The node's transport is connected first, so an unreachable node or a
    changed host key raises here rather than on the first forwarded connection.
    """
    if not 0 < remote_port < 65536:
        raise TunnelError(f"Port {remote_port} is out of range; give a port between 1 and 65535.")
    transports.get(node_name, timeout)
    return Tunnel(
        lambda cancel: transports.get(node_name, timeout, cancel),
        remote_host,
        remote_port,
        local_host=local_host,
        label=node_name,
    )
