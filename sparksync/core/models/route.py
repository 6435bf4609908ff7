"""Which way a copy goes from one node to another: the one place that decides.

- ``ssh``: the source node rsyncs to the target itself; the bytes never touch
  this computer. Over the fabric when the cluster's mesh is set up
  (``sparksync cluster mesh``) and the two nodes share a fabric subnet of the
  applied plan: the target's fabric address, the source's own mesh key
  (``~/.ssh/id_ed25519_sparksync``) and ``StrictHostKeyChecking=yes``
  against the known_hosts the mesh wrote from the pinned host keys.
  Otherwise over the target's paired (management) address with the node's
  default SSH setup, and the route's detail says why not over the fabric;
- ``direct``: this computer is one end, and rsync runs here over SparkSync's
  own SSH connection to the node;
- ``relay``: the source cannot reach the target, so the model comes to this
  computer once and goes on from here; the output says so, and why.

``choose_route`` is the choice; ``fabric_way`` only reads what the mesh and
the fabric plan say about one pair.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from sparksync_agent.protocol import ReachRequest

from sparksync.core.agents.this_computer import is_local
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fabric.fabric_links import links_from_plan
from sparksync.core.fabric.mesh import load_mesh
from sparksync.core.fabric.mesh_files import MESH_KEY_FILE
from sparksync.core.fabric.store import FabricStore
from sparksync.core.models.nodes import ModelNodes

RouteKind = Literal["ssh", "direct", "relay"]
MESH_IDENTITY = f"~/{MESH_KEY_FILE}"  # ssh expands the ~ on the source node, in its user's home
FABRIC_SSH_PORT = 22  # the mesh's known_hosts and authorized_keys are for sshd on the fabric addresses


@dataclass(frozen=True)
class Route:
    kind: RouteKind
    detail: str
    # Where an ssh route connects to, and with which key (None: the node's default SSH setup).
    host: str | None = None
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    over: Literal["fabric", "management"] | None = None


@dataclass(frozen=True)
class FabricWay:
    """The target's fabric address from the source, or why there is none."""

    address: str | None
    why_not: str = ""


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


def fabric_way(nodes: ModelNodes, source: str, target: str) -> FabricWay:
    """The target's address on a fabric subnet it shares with the source, when the mesh covers both."""
    try:
        mesh = load_mesh()
        if not mesh.members:
            return FabricWay(None, "the node-to-node mesh is not set up (`sparksync cluster mesh`)")
        ids = {name: nodes.node_id(name) for name in (source, target)}
        outside = [name for name, node_id in ids.items() if node_id not in mesh.members]
        if outside:
            verb = "is" if len(outside) == 1 else "are"
            return FabricWay(None, f"{' and '.join(outside)} {verb} not in the node-to-node mesh "
                                   "(`sparksync cluster mesh`)")
        plan = FabricStore().applied()
        if plan is None:
            return FabricWay(None, "no fabric plan is applied (`sparksync cluster apply`)")
        # Ends named by node id: a rename since the plan changes nothing here.
        links = links_from_plan(plan, lambda node_id: node_id)
        known = set(mesh.members[ids[target]].addresses)  # what the source's known_hosts has for the target
        shared = [far.address for _near, far in links.routes(ids[source], ids[target]) if far.address in known]
    except SparkSyncError as exc:
        return FabricWay(None, f"the mesh or the fabric plan cannot be read ({exc})")
    if not shared:
        return FabricWay(None, f"{source} and {target} share no fabric subnet")
    return FabricWay(shared[0])


def choose_route(nodes: ModelNodes, source: str, target: str) -> Route:
    if is_local(source) or is_local(target):
        return Route("direct", "over this computer's SSH connection to the node")
    peer = nodes.paired(target)
    assert peer is not None
    way = fabric_way(nodes, source, target)
    why_not = way.why_not
    if way.address is not None:
        request = ReachRequest(host=way.address, port=FABRIC_SSH_PORT, user=peer.user, identity_file=MESH_IDENTITY)
        try:
            answer = nodes.call(source, lambda c: c.model_reach(request))
        except SparkSyncError as exc:
            return Route("relay", f"relayed through this computer ({source} could not be asked: {exc})")
        if answer.ok:
            return Route("ssh", f"{source} → {target} over the fabric ({way.address}) with the mesh key",
                         way.address, FABRIC_SSH_PORT, peer.user, MESH_IDENTITY, "fabric")  # fmt: skip
        why_not = f"{source} cannot ssh to {target}'s fabric address {way.address} ({answer.detail})"
    request = ReachRequest(host=peer.host, port=peer.port, user=peer.user)
    try:
        answer = nodes.call(source, lambda c: c.model_reach(request))
    except SparkSyncError as exc:
        return Route("relay", f"relayed through this computer ({source} could not be asked: {exc})")
    if answer.ok:
        return Route("ssh", f"{source} → {target} over node-to-node SSH to {peer.host}, not the fabric: {why_not}",
                     peer.host, peer.port, peer.user, None, "management")  # fmt: skip
    return Route(
        "relay",
        f"relayed through this computer: {source} cannot ssh to {target} ({answer.detail}); "
        f"not over the fabric: {why_not}",
    )
