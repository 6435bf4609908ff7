"""Paired nodes as ``NodeHandle``s, so windows and commands treat them like "this computer".

All handles from one ``paired_node_handles()`` call share one ``Fleet`` (one
SSH transport per node), opened by the first ``connect()`` and closed when
the last one ends, so a window streaming eight nodes holds eight transports,
not one per worker reconnect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sparksync.core.agents.client import AgentClient
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.fleet.problems import NodeProblem
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore


class SharedFleet:
    """One ``Fleet`` for many users: made on first use, closed after the last."""

    def __init__(self, factory: Callable[[], Fleet]):
        self._factory = factory
        self._fleet: Fleet | None = None
        self._users = 0
        self._lock = threading.Lock()

    @contextmanager
    def use(self) -> Iterator[Fleet]:
        with self._lock:
            if self._fleet is None:
                self._fleet = self._factory()
            self._users += 1
            fleet = self._fleet
        try:
            yield fleet
        finally:
            with self._lock:
                self._users -= 1
                last = self._users == 0
                if last:
                    self._fleet = None
            if last:
                fleet.close()


@dataclass
class SshNode:
    """A paired node, reached through an SSH tunnel to its agent."""

    name: str
    shared: SharedFleet
    source: str = "ssh"

    @contextmanager
    def connect(self, cancel: threading.Event | None = None) -> Iterator[AgentClient]:
        with self.shared.use() as fleet:
            [node] = fleet.nodes([self.name])
            link = fleet.link(self.name)
            try:
                # Read the endpoint again on every connect: callers reconnect after failures,
                # and a restarted agent listens on another port.
                client, _hello = link.hello(cancel, reread=True)
            except NodeProblem as problem:
                fleet.apply(node, problem)
                raise
            fleet.apply(node, None)
            yield client


def default_fleet(**options) -> Fleet:
    """A fleet over the user's registry, with this computer's key from the keyring."""
    return Fleet(ClientKey.load_or_create(SecretStore()), **options)


def paired_node_handles(registry: Registry | None = None) -> list[SshNode]:
    """A handle per paired node (none when nothing is paired)."""
    registry = registry if registry is not None else Registry()
    names = registry.names()
    if not names:
        return []
    shared = SharedFleet(lambda: default_fleet(registry=registry))
    return [SshNode(name, shared) for name in names]
