"""How the workload code reaches each node's agent: by node name, with one retry after a restart.

``NodeAgents`` is all the orchestrator needs. ``FleetAgents`` serves it from
a ``Fleet`` (SSH tunnels to paired nodes): the tunnel and client are reused,
and a call that fails is tried once more after re-reading the node's
endpoint, because a restarted agent listens on a new port (its workloads
keep running and it re-attaches to them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import AgentRequestError, SparkSyncError
from sparksync.core.fleet.fleet import Fleet

T = TypeVar("T")


class NodeAgents(Protocol):
    def call(self, node: str, action: Callable[[AgentClient], T]) -> T:
        """``action(client)`` against ``node``'s agent; a SparkSyncError says why it could not."""
        ...


class FleetAgents:
    """Agents of paired nodes through the fleet's SSH tunnels."""

    def __init__(self, fleet: Fleet, cancel: threading.Event | None = None):
        self.fleet = fleet
        self.cancel = cancel

    def call(self, node: str, action: Callable[[AgentClient], T]) -> T:
        link = self.fleet.link(node)
        client = link.open(self.cancel)
        try:
            return action(client)
        except AgentRequestError as exc:
            if exc.status < 500:
                raise  # the agent answered and refused: asking again changes nothing
            first: SparkSyncError = exc
        except SparkSyncError as exc:
            first = exc
        try:
            client, _hello = link.hello(self.cancel, reread=True)
        except SparkSyncError:
            raise first from None
        return action(client)


class ClientAgents:
    """Fixed clients by node name (the local agent, tests)."""

    def __init__(self, clients: dict[str, AgentClient]):
        self.clients = clients

    def call(self, node: str, action: Callable[[AgentClient], T]) -> T:
        try:
            client = self.clients[node]
        except KeyError:
            raise SparkSyncError(f"no agent is known for node {node!r}") from None
        return action(client)
