"""The nodes a command or a window talks to, each with a name and a way to reach its agent.

With no paired node there is one: "this computer", reached through the local
agent. Paired nodes, reached through SSH tunnels (``fleet.remote_node``),
implement the same ``NodeHandle`` shape, so callers loop over
``known_nodes()`` and never care how a node is reached.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.local import LocalAgent
from sparksync.core.nodes.identity import LOCAL_NODE_NAME

__all__ = ["LOCAL_NODE_NAME", "LocalNode", "NodeHandle", "known_nodes"]


class NodeHandle(Protocol):
    name: str
    source: str  # how the node is reached: "local" or "ssh"

    def connect(self, cancel: threading.Event | None = None) -> AbstractContextManager[AgentClient]:
        """A client for the node's agent, valid inside the ``with`` block."""
        ...


@dataclass
class LocalNode:
    """This computer, through the client-run local agent (started on demand, stopped after)."""

    name: str = LOCAL_NODE_NAME
    source: str = "local"
    sample_hz: float = 1.0
    state_dir: Path | None = None

    @contextmanager
    def connect(self, cancel: threading.Event | None = None) -> Iterator[AgentClient]:
        agent = LocalAgent(self.state_dir, self.sample_hz)
        agent.start(cancel)
        try:
            with agent.client() as client:
                yield client
        finally:
            agent.stop()  # a no-op when we only attached to a running agent


def known_nodes() -> list[NodeHandle]:
    """The paired nodes (through SSH tunnels); "this computer" alone when none is paired."""
    # Imported here: callers that only use LocalNode do not load the SSH stack.
    from sparksync.core.fleet.remote_node import paired_node_handles

    return [*paired_node_handles()] or [LocalNode()]
