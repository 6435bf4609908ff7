"""The node list as the app shows it: paired, discovered and live nodes merged into rows.

A row per machine, whatever told us about it:

- the registry gives the paired nodes;
- discovery (mDNS, manual add, scan) gives the machines on the network; one
  that is a paired node (the same agent node id or pinned host key; without
  either, the same host name or address) only refreshes that node's
  last-seen time, and is never listed again as "not paired";
- a ``NodeStateSource`` (the fleet code, which watches agents through SSH
  tunnels) gives paired nodes their live state: online, offline, degraded,
  deploying, with a reason and a last-seen time. Until one is plugged in,
  paired nodes read "paired";
- the agent's version (from the registry after a deploy, or from the agent's
  own hello) tells whether the node's agent is older than this client's, and
  so whether the node offers "Upgrade agent";
- a deploy started here shows the node as deploying until it ends.

``NodeRows`` holds no Qt and does no I/O: callers hand it what workers read
and subscribe to changes. It is used from one thread (the GUI's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from sparksync.core.fleet.state import NodeState  # light: enum and pydantic only

if TYPE_CHECKING:  # discovery and the registry bring zeroconf and paramiko: loaded by workers, not the window
    from sparksync.core.discovery.model import DiscoveredNode
    from sparksync.core.nodes.registry import PairedNode


@dataclass(frozen=True)
class FleetState:
    """What the fleet code reports about one paired node."""

    state: NodeState
    reason: str | None = None
    last_seen: float | None = None  # Unix time the node last answered


# listener(node name, its new state); returns nothing and must not block.
FleetListener = Callable[[str, FleetState], None]


class NodeStateSource(Protocol):
    """Live states of paired nodes (the fleet code implements it)."""

    def add_listener(self, listener: FleetListener) -> Callable[[], None]:
        """Call ``listener`` on every change, from any thread; returns an unsubscribe function."""
        ...


@dataclass(frozen=True)
class NodeRow:
    key: str  # "paired:<name>" or the discovery key
    name: str
    host: str
    state: NodeState
    reason: str | None
    last_seen: float | None
    paired: bool
    discovered: DiscoveredNode | None = None  # what pairing needs (advertised host keys, port)
    agent_version: str | None = None  # the version its agent reported (or the last deploy recorded)
    node_id: str | None = None  # a paired node's stable id; a discovered agent's own node id

    @property
    def slot_taken(self) -> bool:
        return self.paired

    @property
    def upgrade_available(self) -> bool:
        """The node runs an agent older than the one this client ships."""
        return self.paired and is_older(self.agent_version)


def client_agent_version() -> str:
    """The agent version this client deploys (client and agent share one version)."""
    from sparksync_agent._version import __version__

    return __version__


@lru_cache(maxsize=64)
def is_older(version: str | None, than: str | None = None) -> bool:
    """Whether ``version`` is older than ``than`` (default: this client's); unknown is not older."""
    if not version:
        return False
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) < Version(than or client_agent_version())
    except InvalidVersion:
        return False


RowsListener = Callable[[list[NodeRow]], None]


def preload() -> None:
    """Import what merging needs (discovery, the registry); call it from a worker before the first merge."""
    import sparksync.core.discovery.model
    import sparksync.core.nodes.registry  # noqa: F401


class NodeRows:
    def __init__(self, max_nodes: int | None = None):
        self.max_nodes = max_nodes  # None until the first registry read: the registry's MAX_NODES
        self._paired: list[PairedNode] = []
        self._discovered: dict[str, DiscoveredNode] = {}
        self._fleet: dict[str, FleetState] = {}
        self._pairing: set[str] = set()  # discovery keys or hosts being paired
        self._deploying: dict[str, str] = {}  # node name -> what its deploy is doing
        self._versions: dict[str, str] = {}  # node name -> the version its agent reported
        self._samples: dict[str, float] = {}  # node name -> Unix time of its latest telemetry sample
        self._listeners: list[RowsListener] = []
        self._rows: list[NodeRow] = []

    # --- reading -------------------------------------------------------------------------

    def rows(self) -> list[NodeRow]:
        return list(self._rows)

    def row(self, key: str) -> NodeRow | None:
        return next((r for r in self._rows if r.key == key), None)

    @property
    def slots_used(self) -> int:
        return len(self._paired)

    def slots_text(self) -> str:
        if self.max_nodes is None:
            return "Reading the paired nodes…"
        return f"{self.slots_used} of {self.max_nodes} slots used"

    def is_full(self) -> bool:
        return self.max_nodes is not None and self.slots_used >= self.max_nodes

    def add_listener(self, listener: RowsListener) -> None:
        self._listeners.append(listener)

    # --- feeding -------------------------------------------------------------------------

    def set_paired(self, nodes: list[PairedNode]) -> None:
        if self.max_nodes is None:
            from sparksync.core.nodes.registry import MAX_NODES  # loaded already by whoever read ``nodes``

            self.max_nodes = MAX_NODES
        self._paired = list(nodes)
        names = {n.name for n in nodes}
        self._fleet = {name: s for name, s in self._fleet.items() if name in names}
        self._changed()

    def on_discovery(self, event: str, node: DiscoveredNode) -> None:
        """A discovery listener's event ("added", "updated", "removed")."""
        if event == "removed":
            self._discovered.pop(node.key, None)
        else:
            self._discovered[node.key] = node
        self._changed()

    def set_discovered(self, nodes: list[DiscoveredNode]) -> None:
        self._discovered = {n.key: n for n in nodes}
        self._changed()

    def set_state(self, name: str, state: FleetState) -> None:
        """The fleet hook: a paired node's live state."""
        self._fleet[name] = state
        self._changed()

    def set_agent_version(self, name: str, version: str | None) -> None:
        """The version a node's agent reported (its hello); wins over the registry's record."""
        if version and self._versions.get(name) != version:
            self._versions[name] = version
            self._changed()

    def note_sample(self, name: str, ts: float) -> None:
        """A telemetry sample of ``name`` arrived: its last-seen time moves on.

        Quietly: listeners are not called (samples come several times a second);
        whoever shows last-seen times refreshes them on a timer.
        """
        self._samples[name] = ts
        key = f"paired:{name}"
        self._rows = [
            replace(r, last_seen=max(ts, r.last_seen or 0.0)) if r.key == key else r for r in self._rows
        ]

    def set_deploying(self, name: str, what: str | None) -> None:
        """Show ``name`` as deploying (``what``: the step), or stop doing so (None)."""
        if what is None:
            self._deploying.pop(name, None)
            # The registry's record of the deploy is fresher than the last hello.
            self._versions.pop(name, None)
        else:
            self._deploying[name] = what
        self._changed()

    def set_pairing(self, key: str, pairing: bool) -> None:
        """Mark a discovered row (by key) or a typed host as being paired."""
        (self._pairing.add if pairing else self._pairing.discard)(key)
        self._changed()

    # --- merging -------------------------------------------------------------------------

    def _changed(self) -> None:
        self._rows = self._merge()
        for listener in list(self._listeners):
            listener(self.rows())

    def _merge(self) -> list[NodeRow]:

        matched: set[str] = set()
        rows = []
        for node in self._paired:
            sightings = [d for d in self._discovered.values() if _same_machine(node, d)]
            matched.update(d.key for d in sightings)
            rows.append(self._paired_row(node, sightings))
        for seen in self._discovered.values():
            if seen.key not in matched:
                rows.append(self._discovered_row(seen))
        rows.extend(self._typed_pairings(rows))
        return rows

    def _paired_row(self, node: PairedNode, sightings: list[DiscoveredNode]) -> NodeRow:
        seen = max((d.last_seen for d in sightings), default=None)
        sample = self._samples.get(node.name)
        seen = sample if seen is None else max(seen, sample or 0.0)
        fleet = self._fleet.get(node.name)
        row = NodeRow(
            key=f"paired:{node.name}",
            name=node.name,
            host=node.host if node.port == 22 else f"{node.host}:{node.port}",
            state=NodeState.PAIRED,
            reason="seen on the network" if sightings else "not connected yet",
            last_seen=seen,
            paired=True,
            agent_version=self._versions.get(node.name) or getattr(node, "agent_version", None),
            node_id=node.node_id,
        )
        if fleet is not None:
            last = max(x for x in (fleet.last_seen, seen, -1.0) if x is not None)
            row = replace(row, state=fleet.state, reason=fleet.reason, last_seen=last if last >= 0 else None)
        # The fleet may see the agent restart meanwhile; the deploy is the news.
        if node.name in self._deploying:
            row = replace(row, state=NodeState.DEPLOYING, reason=self._deploying[node.name])
        return row

    def _discovered_row(self, node: DiscoveredNode) -> NodeRow:
        pairing = node.key in self._pairing
        return NodeRow(
            key=node.key,
            name=node.hostname,
            host=node.addresses[0] if node.addresses else node.hostname,
            state=NodeState.PAIRING if pairing else NodeState.DISCOVERED,
            reason="pairing…" if pairing else _discovered_reason(node),
            last_seen=node.last_seen,
            paired=False,
            discovered=node,
            node_id=node.node_id,
        )

    def _typed_pairings(self, rows: list[NodeRow]) -> list[NodeRow]:
        """Rows for hosts typed into the pair dialog, that no other row stands for."""
        from sparksync.core.discovery.model import normalize_host

        known = {r.key for r in rows} | {normalize_host(r.host) for r in rows}
        return [
            NodeRow(f"pairing:{host}", host, host, NodeState.PAIRING, "pairing…", None, False)
            for host in sorted(self._pairing)
            if host not in known and normalize_host(host) not in known
        ]


def _discovered_reason(node: DiscoveredNode) -> str:
    if node.kind == "agent":
        version = f" {node.agent_version}" if node.agent_version else ""
        return f"runs the SparkSync agent{version}; not paired"
    if node.likely_spark:
        return "looks like a DGX Spark; not paired"
    return "an SSH host; not paired"


def _same_machine(node: PairedNode, seen: DiscoveredNode) -> bool:
    if node.host_key.fingerprint in seen.host_key_fingerprints.values():
        return True
    if seen.node_id is not None and seen.node_id == node.node_id:
        # Its agent says it is this node (deploy gave it the id). Its advertised keys may differ from
        # the ones sshd shows (host keys kept elsewhere); a copied disk also carries the id to another
        # machine, but that one's keys and address both differ, and it is listed on its own.
        return not seen.host_key_fingerprints or _same_place(node, seen)
    if seen.host_key_fingerprints:  # it told us its keys, and ours is not among them
        return False
    return _same_place(node, seen)


def _same_place(node: PairedNode, seen: DiscoveredNode) -> bool:
    from sparksync.core.discovery.model import normalize_host

    if normalize_host(node.host) == normalize_host(seen.hostname):
        return True
    return bool(set(node.addresses) & set(seen.addresses)) or node.host in seen.addresses


@dataclass(frozen=True)
class DeployProgress:
    """One step of deploying (or upgrading) the agent on a node, for a progress bar."""

    node: str
    stage: str  # e.g. "uploading the bundle", "installing", "starting the agent"
    fraction: float | None  # 0..1 of the whole deploy; None while unknown
    done: bool = False
    error: str | None = None  # set with done=True when the deploy failed


class DeployProgressSource(Protocol):
    """Per-node deploy progress (the deploy code implements it)."""

    def add_listener(self, listener: Callable[[DeployProgress], None]) -> Callable[[], None]:
        """Call ``listener`` on every step, from any thread; returns an unsubscribe function."""
        ...
