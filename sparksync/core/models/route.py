"""Which way a copy goes from one node to another: the one place that decides.

- ``ssh``: the source node rsyncs to the target itself, over the node-to-node
  SSH of the cluster (each node's own key, its known_hosts written from the
  pinned keys); the bytes never touch this computer;
- ``direct``: this computer is one end, and rsync runs here over SparkSync's
  own SSH connection to the node;
- ``relay``: the source cannot reach the target (no node-to-node SSH yet), so
  the model comes to this computer once and goes on from here; the output
  says so.

The mesh plugs in here: when it knows a better address (the fabric) or a
key path for a pair of nodes, ``choose_route`` is what changes.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from sparksync_agent.protocol import ReachRequest

from sparksync.core.agents.this_computer import is_local
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.models.nodes import ModelNodes
from sparksync.core.nodes.registry import PairedNode

RouteKind = Literal["ssh", "direct", "relay"]


@dataclass(frozen=True)
class Route:
    kind: RouteKind
    detail: str
    target: PairedNode | None = None  # where an ssh route connects to


class Routes:
    """``choose(source, target)``, each pair asked once per copy; ``ahead`` asks while other work runs."""

    def __init__(self, nodes: ModelNodes):
        self.nodes = nodes
        self._known: dict[tuple[str, str], Future[Route]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="model-route")

    def ahead(self, source: str, targets: list[str]) -> None:
        """Start finding the routes from ``source`` (an ssh attempt each), without waiting."""
        for target in targets:
            self._future(source, target)

    def choose(self, source: str, target: str) -> Route:
        return self._future(source, target).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _future(self, source: str, target: str) -> Future[Route]:
        with self._lock:
            future = self._known.get((source, target))
            if future is None:
                future = self._known[(source, target)] = self._pool.submit(
                    choose_route, self.nodes, source, target
                )
        return future


def choose_route(nodes: ModelNodes, source: str, target: str) -> Route:
    if is_local(source) or is_local(target):
        return Route("direct", "over this computer's SSH connection to the node")
    peer = nodes.paired(target)
    assert peer is not None
    request = ReachRequest(host=peer.host, port=peer.port, user=peer.user)
    try:
        answer = nodes.call(source, lambda c: c.model_reach(request))
    except SparkSyncError as exc:
        return Route("relay", f"relayed through this computer ({source} could not be asked: {exc})")
    if answer.ok:
        return Route("ssh", f"{source} → {target} over node-to-node SSH", peer)
    return Route(
        "relay", f"relayed through this computer: {source} cannot ssh to {target} ({answer.detail})"
    )
