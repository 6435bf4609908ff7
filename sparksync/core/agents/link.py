"""One node's agent as everything in the client reaches it: an agent I can call and stream from.

``AgentLink`` is the one seam between the client and any agent. Its two
flavours differ only in how they find the agent's port and token:

- ``LocalLink`` (``local_link``): this computer, through the agent the client
  runs on loopback (the token file in the local state directory, no SSH);
- ``SshLink`` (``ssh_link``): a paired node, through an SSH tunnel on the
  node's shared transport (the token and endpoint read over SFTP, the host
  key pinned).

The fleet hands one out for every node, this computer included
(``Fleet.agent(name)``), and ``Fleet.call(name, action)`` runs
``action(client)`` through it. Workloads, benchmarks, the telemetry follower
and the faces all go this way.

A call that fails is tried once more after reading the agent's endpoint
again: a restarted agent listens on a new port (its workloads keep running
and it re-attaches to them). Every failure the link can explain comes out
as a ``NodeProblem`` (offline, or degraded with a cause).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Protocol, TypeVar

from sparksync_agent.protocol import AgentStatus, HelloReply

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import AgentRequestError, SparkSyncError
from sparksync.core.fleet.problems import NodeProblem

T = TypeVar("T")

AGENT_TIMEOUT_S = 5.0  # one request to an agent
SSH_TIMEOUT_S = 15.0  # waiting for an SSH transport, an SFTP read or a channel


class AgentLink(ABC):
    """The way to one node's agent (thread-safe; ``close()`` when done)."""

    kind: ClassVar[str]  # "local" or "ssh": how the node is reached
    name: str

    @abstractmethod
    def open(self, cancel: threading.Event | None = None, *, reread: bool = False) -> AgentClient:
        """A client for the agent, reused between calls; ``reread``: find the agent again first."""

    @abstractmethod
    def explain(self, exc: BaseException) -> NodeProblem:
        """The node-level meaning of an error met while talking to the agent."""

    @abstractmethod
    def reachable(self) -> bool:
        """Whether the way to the node is up (its SSH link), whatever its agent does."""

    @abstractmethod
    def close(self) -> None:
        """Drop the client and whatever carries it (a tunnel, a local agent started here)."""

    def hello(
        self, cancel: threading.Event | None = None, *, reread: bool = False
    ) -> tuple[AgentClient, HelloReply]:
        """Open and say hello; a problem on the way comes out as a ``NodeProblem``."""
        try:
            client = self.open(cancel, reread=reread)
            return client, client.hello()
        except SparkSyncError as exc:
            raise self.explain(exc) from exc

    def status(self, client: AgentClient) -> AgentStatus:
        try:
            return client.status()
        except SparkSyncError as exc:
            raise self.explain(exc) from exc

    def call(self, action: Callable[[AgentClient], T], cancel: threading.Event | None = None) -> T:
        """``action(client)`` against the agent, tried once more after finding the agent again.

        An answer the agent gave and refused (a 4xx) is not retried: asking
        again changes nothing. When the second try cannot even reach the
        agent, the first error is the one raised.
        """
        client = self.open(cancel)
        try:
            return action(client)
        except AgentRequestError as exc:
            if exc.status < 500:
                raise
            first: SparkSyncError = exc
        except SparkSyncError as exc:
            first = exc
        try:
            client, _hello = self.hello(cancel, reread=True)
        except SparkSyncError:
            raise first from None
        return action(client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class NodeAgents(Protocol):
    """Any node's agent by node name: what workloads, benchmarks, models and the fabric code take.

    ``Fleet`` is the one that serves it (``Fleet.call``), this computer included.
    """

    def call(self, node: str, action: Callable[[AgentClient], T]) -> T:
        """``action(client)`` against ``node``'s agent; a SparkSyncError says why it could not."""
        ...
