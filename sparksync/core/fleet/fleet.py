"""Every node as one fleet: the way to each agent, their states, and checks of all of them at once.

``Fleet`` hands out one ``AgentLink`` per node (``agent(name)``), this
computer included: a ``LocalLink`` for this computer (its local agent on
loopback) and an ``SshLink`` per paired node, over one ``NodeTransports``
(one SSH transport per node, kept up with keepalives and reconnects).
``call(name, action)`` runs ``action(client)`` through the node's link, with
one retry after finding a restarted agent again; it is what the workloads,
benchmarks, models and fabric code take as their ``agents``.

The SSH side (and this computer's key, from the keyring) is made on first
use, so a fleet that only ever reaches this computer never asks the keyring.
One fleet serves a whole command in the CLI, and the whole app in the GUI
(opened in a worker, closed when the app quits). ``check_all``
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
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from sparksync_agent.protocol import AgentStatus, Snapshot

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.link import AGENT_TIMEOUT_S, SSH_TIMEOUT_S, AgentLink
from sparksync.core.agents.local_link import LocalLink
from sparksync.core.agents.this_computer import LOCAL_NODE_NAME, canonical_name, is_local
from sparksync.core.base.backoff import Backoff
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.listeners import Listeners
from sparksync.core.fleet.first_sample import wait_first_sample
from sparksync.core.fleet.problems import NodeProblem, collector_problem, degraded, offline
from sparksync.core.fleet.state import Cause, NodeState, NodeStatus, StateTracker, is_change
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.nodes.registry import PairedNode, Registry
from sparksync.core.nodes.rows import FleetListener, FleetState

if TYPE_CHECKING:  # the SSH stack (paramiko, the keyring) loads once a paired node is reached
    from sparksync.core.ssh.client_key import ClientKey
    from sparksync.core.ssh.connection import Dialer, SshSettings
    from sparksync.core.ssh.transports import NodeTransports

log = logging.getLogger(__name__)

DEFAULT_CHECK_TIMEOUT_S = 20.0

ChangeCallback = Callable[[NodeStatus, NodeStatus], None]
KeySource: TypeAlias = "ClientKey | Callable[[], ClientKey] | None"  # None: this computer's key, from the keyring
T = TypeVar("T")


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
    """The way to every node's agent and the paired nodes' states. Close it when done."""

    def __init__(
        self,
        client_key: KeySource = None,
        registry: Registry | None = None,
        *,
        dialer: Dialer | None = None,
        settings: SshSettings | None = None,
        backoff: Backoff | None = None,
        store: NodeStateStore | None = None,
        on_change: ChangeCallback | None = None,
        ssh_timeout: float = SSH_TIMEOUT_S,
        agent_timeout: float = AGENT_TIMEOUT_S,
        sample_hz: float = 1.0,
        local_state_dir: Path | None = None,
    ):
        self.registry = registry if registry is not None else Registry()
        self.store = store if store is not None else NodeStateStore()
        self.on_change = on_change
        self.ssh_timeout = ssh_timeout
        self.agent_timeout = agent_timeout
        self._key_source = client_key
        self._dialer, self._ssh_settings, self._backoff = dialer, settings, backoff
        self._transports: NodeTransports | None = None
        self._local = LocalLink(local_state_dir, sample_hz, agent_timeout=agent_timeout)
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

    def names(self, names: Iterable[str] | None = None) -> list[str]:
        """Every node by its name, this computer first; or the given ones, checked and in their
        canonical spelling (``local`` is this computer; UnknownNodeError for a name not paired)."""
        if names is None:
            return [LOCAL_NODE_NAME, *(n.name for n in self.nodes())]
        wanted = [canonical_name(name) for name in names]
        paired = {n.name for n in self.nodes([n for n in wanted if not is_local(n)])}
        return [n for n in dict.fromkeys(wanted) if is_local(n) or n in paired]

    def cluster(self) -> list[str]:
        """The nodes the cluster's figures count: the paired ones, or this computer while none is."""
        return [n.name for n in self.nodes()] or [LOCAL_NODE_NAME]

    @property
    def local(self) -> LocalLink:
        """This computer's link."""
        return self._local

    def agent(self, name: str) -> AgentLink:
        """The link to ``name``'s agent: this computer's local one, or a paired node's over SSH."""
        if is_local(name):
            return self._local
        with self._lock:
            if self._closed.is_set():
                raise offline(f"The fleet was closed; {name!r} is no longer reached.")
            link = self._links.get(name)
        if link is None:
            transports = self.transports  # may read the keyring: outside the lock
            with self._lock:
                link = self._links.get(name)
                if link is None:
                    from sparksync.core.agents.ssh_link import SshLink

                    link = self._links[name] = SshLink(
                        name, transports, ssh_timeout=self.ssh_timeout, agent_timeout=self.agent_timeout
                    )
        return link

    def call(self, node: str, action: Callable[[AgentClient], T], cancel: threading.Event | None = None) -> T:
        """``action(client)`` against ``node``'s agent; a SparkSyncError says why it could not."""
        return self.agent(node).call(action, cancel)

    @property
    def transports(self) -> NodeTransports:
        """The SSH transports to the paired nodes (made on first use, with this computer's key)."""
        with self._lock:
            if self._transports is not None:
                return self._transports
            if self._closed.is_set():
                raise offline("The fleet was closed; the paired nodes are no longer reached.")
        key = self._client_key()  # the keyring: never under the lock
        with self._lock:
            if self._transports is None:
                from sparksync.core.ssh.transports import NodeTransports

                self._transports = NodeTransports(
                    key, self.registry, dialer=self._dialer, settings=self._ssh_settings, backoff=self._backoff
                )
            return self._transports

    def status(self, node: PairedNode | str) -> NodeStatus:
        return self._tracker(node).status

    def drop(self, name: str) -> None:
        """Forget a paired node's link and SSH transport (unpaired or renamed; the next use connects)."""
        with self._lock:
            link = self._links.pop(name, None)
            transports = self._transports
        if link is not None:
            link.close()
        if transports is not None:
            transports.drop(name)

    # --- checks ---------------------------------------------------------------------------
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

    def apply(
        self, node: PairedNode | str, problem: NodeProblem | None, *, save: bool | None = None
    ) -> NodeStatus:
        """Record ``problem`` (None: online) as the node's state; used by the follower.

        ``save``: None saves only a change of state or cause (a follower hears the
        same news often); True always; False never. This computer's state is
        kept for this run only.
        """
        if isinstance(node, str):
            if is_local(node):
                return self._record_local(problem)
            node = self.nodes([node])[0]
        return self._record([(node, _Found(problem))], save=save)[0].status

    def seen(self, node: PairedNode | str) -> NodeStatus:
        """A sample came in: the node was seen now."""
        return self._tracker(node).seen()

    def save(self, nodes: Iterable[PairedNode | str]) -> None:
        paired = [n for n in nodes if not isinstance(n, str) or not is_local(n)]
        found = [n if isinstance(n, PairedNode) else self.nodes([n])[0] for n in paired]
        self.store.record_many((node, self._tracker(node).status) for node in found)

    def add_listener(self, listener: FleetListener) -> Callable[[], None]:
        """``NodeStateSource`` for the node list: ``listener(name, FleetState)`` on every change
        of state or cause, from any thread. Returns the function that unsubscribes it."""
        return self._listeners.add(listener)

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Drop every link and transport, stop a local agent started here, and wait for checks."""
        self._closed.set()
        with self._lock:
            links, self._links = list(self._links.values()), {}
            pools, self._pools = self._pools, []
            transports = self._transports
        if transports is not None:
            transports.close()  # first: wakes whatever waits on a transport
        for link in [*links, self._local]:
            link.close()
        for pool, _futures in pools:
            pool.shutdown(wait=True)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -------------------------------------------------------------------------------

    def _client_key(self) -> ClientKey:
        from sparksync.core.ssh.client_key import ClientKey

        source = self._key_source
        if isinstance(source, ClientKey):
            return source
        if source is not None:
            return source()
        from sparksync.core.ssh.secrets import SecretStore

        return ClientKey.load_or_create(SecretStore())

    def _tracker(self, node: PairedNode | str) -> StateTracker:
        if isinstance(node, str):
            if is_local(node):
                with self._lock:
                    return self._trackers.setdefault(LOCAL_NODE_NAME, StateTracker.new(LOCAL_NODE_NAME))
            node = self.nodes([node])[0]
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
        link = self.agent(node.name)
        try:
            client, _hello = link.hello(cancel, reread=True)
            agent = link.status(client)
            snapshot = wait_first_sample(client, timeout, cancel) if with_snapshot else None
        except NodeProblem as problem:
            return _Found(problem)
        except SparkSyncError as exc:
            return _Found(link.explain(exc))
        return _Found(collector_problem(node.name, agent), snapshot, agent)

    def _too_slow(self, node: PairedNode, timeout: float) -> NodeProblem:
        if self.agent(node.name).reachable():
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

    def _record_local(self, problem: NodeProblem | None) -> NodeStatus:
        state, cause, reason = (
            (NodeState.ONLINE, None, None) if problem is None else (problem.state, problem.cause, problem.reason)
        )
        old, new = self._tracker(LOCAL_NODE_NAME).move(state, cause, reason)
        if is_change(old, new):
            self._tell(old, new)
        return new

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


def _gather(futures: dict[Future, PairedNode], timeout: float) -> dict[str, _Found]:
    """The results that arrive within ``timeout`` (all nodes started together)."""
    finished, _late = wait(futures, timeout=timeout)
    return {futures[future].name: future.result() for future in finished}


def as_fleet_state(status: NodeStatus) -> FleetState:
    """The node list's view of a status."""
    seen = status.last_seen.timestamp() if status.last_seen is not None else None
    return FleetState(status.state, status.reason, seen)
