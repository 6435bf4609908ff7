"""One SSH transport per paired node, reused by everything that talks to it.

Each node gets a supervisor thread that connects (key and pinned host key
only), watches the connection and reconnects when it drops, waiting
``Backoff`` delays with jitter between failed attempts so that eight nodes
coming back at once do not retry in lockstep.

A dead link is noticed without any traffic of ours: paramiko sends an SSH
keepalive after ``keepalive_s`` of silence, and the socket's
TCP_USER_TIMEOUT (``dead_after_s``, set in ``connection``) makes the kernel
drop a connection whose data stays unacknowledged. The transport's thread
then ends and the supervisor reconnects.

A changed host key is final: the link stops in ``host-key-changed`` and
every ``get`` raises the warning, until the node is re-paired (``get``
then notices the new pin in the registry and starts over).
"""

from __future__ import annotations

import enum
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import paramiko

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.base.backoff import Backoff
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.nodes.registry import PairedNode, Registry
from sparksync.core.ssh.connection import Dialer, Endpoint, SshSettings, connect_with_key, default_dialer
from sparksync.core.ssh.errors import HostKeyChangedError, NodeOfflineError

log = logging.getLogger(__name__)

DEFAULT_GET_TIMEOUT_S = 30.0
_WATCH_POLL_S = 1.0
_CANCEL_POLL_S = 0.1
SSH_BACKOFF = Backoff(first_s=0.5, factor=2.0, max_s=30.0, jitter=0.5)  # how often a watcher re-checks for close(); a dying transport wakes it at once


class LinkState(str, enum.Enum):
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"  # lost or never reached; reconnecting
    HOST_KEY_CHANGED = "host-key-changed"  # stopped for good
    CLOSED = "closed"


@dataclass(frozen=True)
class LinkStatus:
    node: str
    state: LinkState
    reason: str | None
    since: float  # time.time() of the last state change
    failures: int  # failed attempts since the link was last up
    connects: int  # successful connections so far


StatusCallback = Callable[[LinkStatus], None]


class NodeTransports:
    """The live SSH transports to paired nodes, by node name. Close it when done."""

    def __init__(
        self,
        client_key: ClientKey,
        registry: Registry | None = None,
        *,
        dialer: Dialer | None = None,
        settings: SshSettings | None = None,
        backoff: Backoff | None = None,
        on_status: StatusCallback | None = None,
    ):
        self.client_key = client_key
        self.registry = registry if registry is not None else Registry()
        self.dialer = dialer or default_dialer
        self.settings = settings or SshSettings()
        self.backoff = backoff or SSH_BACKOFF
        self.on_status = on_status
        self._links: dict[str, _Link] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(
        self, name: str, timeout: float = DEFAULT_GET_TIMEOUT_S, cancel: threading.Event | None = None
    ) -> paramiko.Transport:
        """The node's live transport, connecting (or waiting for a reconnect) up to ``timeout``.

        Setting ``cancel`` ends the wait early (with NodeOfflineError).
        """
        return self._link(name).get(timeout, cancel)

    def status(self, name: str) -> LinkStatus:
        return self._link(name).status()

    def drop(self, name: str) -> None:
        """Close the node's transport and forget it (e.g. after unpairing)."""
        with self._lock:
            link = self._links.pop(name, None)
        if link is not None:
            link.stop()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links, self._links = list(self._links.values()), {}
        for link in links:
            link.stop()

    def __enter__(self) -> NodeTransports:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _link(self, name: str) -> _Link:
        with self._lock:
            if self._closed:
                raise NodeOfflineError("The SSH transports were closed; open new ones to reach the nodes.")
            link = self._links.get(name)
            if link is not None and not link.stale(self.registry):
                return link
        node = _read_entry(self.registry, name)  # outside our lock: it reads a file
        with self._lock:
            if name in self._links and self._links[name] is not link:
                return self._links[name]  # another thread replaced it meanwhile
            if link is not None:
                link.stop()
            self._links[name] = _Link(node, self)
            return self._links[name]


class _Link:
    """One node's transport and the thread that keeps it up."""

    def __init__(self, node: PairedNode, owner: NodeTransports):
        self.node = node
        self._owner = owner
        self._endpoint = Endpoint(node.host, node.port, node.user, node.name)
        self._cond = threading.Condition()
        self._transport: paramiko.Transport | None = None
        self._error: SparkSyncError | None = None
        self._failed_total = 0
        self._status = LinkStatus(node.name, LinkState.CONNECTING, None, time.time(), 0, 0)
        self._stop = threading.Event()
        self._dialing: socket.socket | None = None  # shut down by stop() to cut a slow handshake short
        self._thread = threading.Thread(target=self._run, name=f"ssh-link-{node.name}", daemon=True)
        self._thread.start()

    # --- used by callers ----------------------------------------------------------------

    def get(self, timeout: float, cancel: threading.Event | None) -> paramiko.Transport:
        deadline = time.monotonic() + timeout
        with self._cond:
            failures_before = self._failed_total
            while True:
                transport = self._usable()
                if transport is not None:
                    return transport
                # Wait for at most one more attempt: a caller learns why without waiting out the backoff.
                if self._failed_total > failures_before:
                    raise self._offline()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._offline(timeout)
                if cancel is not None and cancel.is_set():
                    raise NodeOfflineError(f"Waiting for node {self.node.name!r} was cancelled.")
                # A Condition cannot wait on an Event too: re-check ``cancel`` now and then.
                self._cond.wait(min(remaining, _CANCEL_POLL_S) if cancel is not None else remaining)

    def status(self) -> LinkStatus:
        with self._cond:
            return self._status

    def stale(self, registry: Registry) -> bool:
        """A link stopped by a changed key is replaced once the registry pins another key."""
        if self.status().state is not LinkState.HOST_KEY_CHANGED:
            return False
        try:
            return _read_entry(registry, self.node.name).host_key != self.node.host_key
        except SparkSyncError:
            return False

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            transport, dialing = self._transport, self._dialing
        if dialing is not None:
            _shutdown_quietly(dialing)
        if transport is not None:
            transport.close()
        self._thread.join()

    def _usable(self) -> paramiko.Transport | None:
        state = self._status.state
        if state is LinkState.HOST_KEY_CHANGED:
            assert self._error is not None, "_set stores the error with this state"
            raise self._error
        if state is LinkState.CLOSED:
            raise NodeOfflineError(f"The SSH link to {self.node.name!r} was closed.")
        if state is LinkState.UP and self._transport is not None and self._transport.is_active():
            return self._transport
        return None

    def _offline(self, waited: float | None = None) -> NodeOfflineError:
        status = self._status
        why = status.reason or (f"not connected within {waited:g} s" if waited else "not connected")
        why = why.rstrip(".")  # some reasons are whole sentences already
        return NodeOfflineError(
            f"Node {self.node.name!r} ({self.node.host}) is offline: {why}. SparkSync keeps reconnecting in "
            f"the background ({status.failures} failed attempts so far); check the node and its network."
        )

    # --- the supervisor thread -------------------------------------------------------------

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            transport = self._connect(attempt)
            if transport is None:
                if self._status.state is LinkState.HOST_KEY_CHANGED:
                    return
                if self._stop.wait(self._owner.backoff.delay(attempt)):
                    break
                attempt += 1
                continue
            attempt = 0
            self._watch(transport)
        transport = self._transport
        if transport is not None:
            transport.close()
        self._set(LinkState.CLOSED, None)

    def _connect(self, attempt: int) -> paramiko.Transport | None:
        owner = self._owner
        try:
            transport = connect_with_key(
                self._endpoint, self.node.host_key, owner.client_key.pkey, self._dial, owner.settings
            )
        except HostKeyChangedError as exc:
            self._set(LinkState.HOST_KEY_CHANGED, str(exc), error=exc)
            return None
        except SparkSyncError as exc:
            self._set(LinkState.DOWN, str(exc), error=exc, failed=True)
            log.info("node %s: connect attempt %d failed: %s", self.node.name, attempt + 1, exc)
            return None
        transport.set_keepalive(max(1, round(owner.settings.keepalive_s)))
        if self._stop.is_set():
            transport.close()
            return None
        self._set(LinkState.UP, None, transport=transport)
        return transport

    def _dial(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = self._owner.dialer(host, port, timeout)
        with self._cond:
            self._dialing = sock
        if self._stop.is_set():
            _shutdown_quietly(sock)
        return sock

    def _watch(self, transport: paramiko.Transport) -> None:
        # The transport's own thread ends when the connection dies (or we close it).
        while transport.is_active() and not self._stop.is_set():
            transport.join(_WATCH_POLL_S)
        if self._stop.is_set():
            return
        reason = _lost_reason(transport.get_exception())
        log.warning("node %s: SSH connection lost (%s); reconnecting", self.node.name, reason)
        transport.close()
        self._set(LinkState.DOWN, f"connection lost ({reason})")

    def _set(
        self,
        state: LinkState,
        reason: str | None,
        *,
        error: SparkSyncError | None = None,
        failed: bool = False,
        transport: paramiko.Transport | None = None,
    ) -> None:
        with self._cond:
            old = self._status
            self._transport, self._dialing = transport, None
            self._error = error
            self._failed_total += failed
            self._status = replace(
                old,
                state=state,
                reason=reason,
                since=time.time() if state is not old.state else old.since,
                failures=0 if state is LinkState.UP else old.failures + failed,
                connects=old.connects + (state is LinkState.UP),
            )
            status = self._status
            self._cond.notify_all()
        if self._owner.on_status is not None and (state is not old.state or failed):
            self._owner.on_status(status)


def _read_entry(registry: Registry, name: str) -> PairedNode:
    # A fresh read each time: pairing and re-pairing happen in other Registry
    # objects (or processes), and a shared one would cache what it read first.
    return Registry(registry.path).get(name)


def _lost_reason(exc: BaseException | None) -> str:
    if exc is None or isinstance(exc, EOFError):
        # Also what a cut link looks like: the kernel gave up on unacknowledged keepalives.
        return "closed by the node, or no answer to keepalives"
    return str(exc) or type(exc).__name__


def _shutdown_quietly(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected
