"""The paired nodes as one fleet: their links, their states, and checks of all of them at once.

``Fleet`` owns one ``NodeTransports`` (one SSH transport per node, kept up
with keepalives and reconnects) and one ``AgentLink`` per node. ``check_all``
asks every node at once, each in its own thread with its own deadline, so
one slow or unreachable node never holds the others back beyond its own
timeout. Every result moves the node's ``StateTracker`` (illegal moves are
refused), is saved in the ``NodeStateStore`` for `sparksync node list`, and
a change of state or cause goes to ``on_change(old, new)``: the tray turns
offline/online moves into notifications.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime

from sparksync_agent.protocol import AgentStatus, Snapshot

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.agent_link import AGENT_TIMEOUT_S, SSH_TIMEOUT_S, AgentLink
from sparksync.core.fleet.first_sample import wait_first_sample
from sparksync.core.fleet.problems import NodeProblem, degraded, offline
from sparksync.core.fleet.state import Cause, NodeState, NodeStatus, StateTracker, is_change
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.base.listeners import Listeners
from sparksync.core.nodes.rows import FleetListener, FleetState
from sparksync.core.nodes.registry import PairedNode, Registry
from sparksync.core.ssh.connection import Dialer, SshSettings
from sparksync.core.ssh.transports import Backoff, NodeTransports

log = logging.getLogger(__name__)

DEFAULT_CHECK_TIMEOUT_S = 20.0

ChangeCallback = Callable[[NodeStatus, NodeStatus], None]


@dataclass(frozen=True)
class NodeReport:
    """What one check of one node found."""

    node: PairedNode
    status: NodeStatus
    snapshot: Snapshot | None = None  # with_snapshot checks of a reachable agent
    agent: AgentStatus | None = None

    @property
    def ok(self) -> bool:
        return self.status.state is NodeState.ONLINE


@dataclass(frozen=True)
class _Found:
    problem: NodeProblem | None
    snapshot: Snapshot | None = None
    agent: AgentStatus | None = None


class Fleet:
    """Links to the paired nodes and their states. Close it when done."""

    def __init__(
        self,
        client_key: ClientKey,
        registry: Registry | None = None,
        *,
        dialer: Dialer | None = None,
        settings: SshSettings | None = None,
        backoff: Backoff | None = None,
        store: NodeStateStore | None = None,
        on_change: ChangeCallback | None = None,
        ssh_timeout: float = SSH_TIMEOUT_S,
        agent_timeout: float = AGENT_TIMEOUT_S,
    ):
        self.registry = registry if registry is not None else Registry()
        self.store = store if store is not None else NodeStateStore()
        self.on_change = on_change
        self.ssh_timeout = ssh_timeout
        self.agent_timeout = agent_timeout
        self.transports = NodeTransports(
            client_key, self.registry, dialer=dialer, settings=settings, backoff=backoff
        )
        self._links: dict[str, AgentLink] = {}
        self._listeners: Listeners[FleetListener] = Listeners()
        self._trackers: dict[str, StateTracker] = {}
        self._pools: list[tuple[ThreadPoolExecutor, list[Future]]] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()

    # --- the nodes ----------------------------------------------------------------------

    def nodes(self, names: Iterable[str] | None = None) -> list[PairedNode]:
        """The paired nodes (a fresh read), or the named ones (UnknownNodeError for others)."""
        registry = Registry(self.registry.path)
        if names is None:
            return registry.list()
        return [registry.get(name) for name in dict.fromkeys(names)]

    def link(self, name: str) -> AgentLink:
        with self._lock:
            if self._closed.is_set():
                raise offline(f"The fleet was closed; {name!r} is no longer reached.")
            link = self._links.get(name)
            if link is None:
                link = self._links[name] = AgentLink(
                    name, self.transports, ssh_timeout=self.ssh_timeout, agent_timeout=self.agent_timeout
                )
            return link

    def status(self, node: PairedNode) -> NodeStatus:
        return self._tracker(node).status

    # --- checks ---------------------------------------------------------------------------

    def check(
        self,
        node: PairedNode,
        *,
        with_snapshot: bool = False,
        timeout: float = DEFAULT_CHECK_TIMEOUT_S,
        cancel: threading.Event | None = None,
    ) -> NodeReport:
        """Check one node now (in this thread) and record what was found."""
        found = self._probe(node, with_snapshot, timeout, cancel)
        return self._record([(node, found)])[0]

    def check_all(
        self,
        names: Iterable[str] | None = None,
        *,
        with_snapshot: bool = False,
        timeout: float = DEFAULT_CHECK_TIMEOUT_S,
    ) -> list[NodeReport]:
        """Check the nodes in parallel, each within ``timeout``; reports in registry order."""
        nodes = self.nodes(names)
        if not nodes:
            return []
        pool = ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="fleet-check")
        cancels = {node.name: threading.Event() for node in nodes}
        futures: dict[Future, PairedNode] = {
            pool.submit(self._probe, node, with_snapshot, timeout, cancels[node.name]): node for node in nodes
        }
        pool.shutdown(wait=False)  # its threads end on their own; close() waits for stragglers
        with self._lock:
            # Forget the pools of earlier calls whose checks all ended; keep this one until its do.
            self._pools = [(p, fs) for p, fs in self._pools if not all(f.done() for f in fs)]
            self._pools.append((pool, list(futures)))
        found = _gather(futures, timeout)
        results = []
        for node in nodes:
            if node.name not in found:
                cancels[node.name].set()
                found[node.name] = _Found(self._too_slow(node, timeout))
            results.append((node, found[node.name]))
        return self._record(results)

    def apply(self, node: PairedNode, problem: NodeProblem | None, *, save: bool | None = None) -> NodeStatus:
        """Record ``problem`` (None: online) as the node's state; used by the follower.

        ``save``: None saves only a change of state or cause (a follower hears the
        same news often); True always; False never.
        """
        return self._record([(node, _Found(problem))], save=save)[0].status

    def seen(self, node: PairedNode) -> NodeStatus:
        """A sample came in: the node was seen now."""
        return self._tracker(node).seen()

    def save(self, nodes: Iterable[PairedNode]) -> None:
        self.store.record_many((node, self._tracker(node).status) for node in nodes)

    def add_listener(self, listener: FleetListener) -> Callable[[], None]:
        """``NodeStateSource`` for the node list: ``listener(name, FleetState)`` on every change
        of state or cause, from any thread. Returns the function that unsubscribes it."""
        return self._listeners.add(listener)

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Drop every link and transport, and wait for checks still running."""
        self._closed.set()
        with self._lock:
            links, self._links = list(self._links.values()), {}
            pools, self._pools = self._pools, []
        self.transports.close()  # first: wakes whatever waits on a transport
        for link in links:
            link.close()
        for pool, _futures in pools:
            pool.shutdown(wait=True)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -------------------------------------------------------------------------------

    def _tracker(self, node: PairedNode) -> StateTracker:
        with self._lock:
            tracker = self._trackers.get(node.name)
            if tracker is None:
                status, _ = self.store.status(node)
                if status.state in (NodeState.DISCOVERED, NodeState.PAIRING):
                    # The registry entry proves the pairing finished, whatever a crashed run saved.
                    status = status.model_copy(
                        update={"state": NodeState.PAIRED, "cause": None, "reason": None}
                    )
                tracker = self._trackers[node.name] = StateTracker(status)
            return tracker

    def _probe(
        self, node: PairedNode, with_snapshot: bool, timeout: float, cancel: threading.Event | None
    ) -> _Found:
        link = self.link(node.name)
        try:
            client, _hello = link.hello(cancel, reread=True)
            agent = link.status(client)
            snapshot = wait_first_sample(client, timeout, cancel) if with_snapshot else None
        except NodeProblem as problem:
            return _Found(problem)
        except SparkSyncError as exc:
            return _Found(link.explain(exc))
        return _Found(collector_problem(node, agent), snapshot, agent)

    def _too_slow(self, node: PairedNode, timeout: float) -> NodeProblem:
        if self.link(node.name).ssh_up():
            return degraded(
                Cause.AGENT_NOT_ANSWERING, f"The agent on {node.name!r} gave no answer within {timeout:g} s."
            )
        return offline(f"{node.name!r} ({node.host}) gave no answer within {timeout:g} s")

    def _record(self, results: list[tuple[PairedNode, _Found]], save: bool | None = True) -> list[NodeReport]:
        reports, changes = [], []
        for node, found in results:
            problem = found.problem
            state, cause, reason = (
                (NodeState.ONLINE, None, None)
                if problem is None
                else (problem.state, problem.cause, problem.reason)
            )
            old, new = self._tracker(node).move(state, cause, reason)
            if is_change(old, new):
                changes.append((old, new))
            reports.append(NodeReport(node, new, found.snapshot, found.agent))
        if save or (save is None and changes):
            try:
                self.store.record_many((report.node, report.status) for report in reports)
            except OSError as exc:  # the states are a convenience; a full disk must not stop a check
                log.warning("could not save node states: %s", exc)
        for old, new in changes:
            self._tell(old, new)
        return reports

    def _tell(self, old: NodeStatus, new: NodeStatus) -> None:
        log.info("node %s: %s -> %s (%s)", new.name, old.state.value, new.state.value, new.reason or "ok")
        listeners = self._listeners.snapshot()
        state = as_fleet_state(new)
        calls: list[Callable[[], None]] = [functools.partial(f, new.name, state) for f in listeners]
        if self.on_change is not None:
            calls.append(functools.partial(self.on_change, old, new))
        for call in calls:
            try:
                call()
            except Exception:
                log.exception("node state listener failed")


def collector_problem(node: PairedNode, agent: AgentStatus) -> NodeProblem | None:
    disabled = [c for c in agent.collectors if not c.enabled]
    if not disabled:
        return None
    which = "; ".join(f"{c.name} ({c.reason or 'no reason given'})" for c in disabled)
    return degraded(
        Cause.COLLECTORS_DISABLED,
        f"The agent on {node.name!r} disabled collectors after errors: {which}. "
        "Its other telemetry still flows; restart the agent once the cause is fixed.",
    )


def _gather(futures: dict[Future, PairedNode], timeout: float) -> dict[str, _Found]:
    """The results that arrive within ``timeout`` (all nodes started together)."""
    finished, _late = wait(futures, timeout=timeout)
    return {futures[future].name: future.result() for future in finished}


def as_fleet_state(status: NodeStatus) -> FleetState:
    """The node list's view of a status."""
    seen = status.last_seen.timestamp() if status.last_seen is not None else None
    return FleetState(status.state, status.reason, seen)


def last_seen_text(when: datetime | None) -> str:
    return "never" if when is None else when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
