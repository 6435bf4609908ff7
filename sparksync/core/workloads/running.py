"""A started workload as one thing: its ranks' states across nodes, stop, logs and tokens/s.

Each node's agent knows only its own processes; these functions ask every
node the client record (``workload_store``) names and put the answers
together. A node that cannot be asked shows as such, never as "stopped".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from sparksync_agent.protocol import LogPage, RankState, RankStatus, Snapshot, WorkloadFigures, WorkloadStatus

from sparksync.core.agents.client import LogItem
from sparksync.core.base.errors import AgentRequestError, SparkSyncError
from sparksync.core.agents.link import NodeAgents
from sparksync.core.workloads.baseline import NodeSoftware
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.workload_store import RankRef, WorkloadRecord

log = logging.getLogger(__name__)

DEFAULT_STOP_GRACE_S = 10.0
WATCH_POLL_S = 1.0
LIVE = (RankState.starting, RankState.ready, RankState.restarting, RankState.stopping)


@dataclass
class RankView:
    """One process: what its agent said, or why its agent could not be asked."""

    ref: RankRef
    status: RankStatus | None = None
    problem: str | None = None

    @property
    def state(self) -> str:
        if self.status is not None:
            return self.status.state.value
        return "unreachable" if self.problem else "gone"

    @property
    def live(self) -> bool:
        return self.status is not None and self.status.state in LIVE

    def why(self) -> str:
        """Why this process is not running, for people: the agent's message, or the node's problem."""
        if self.problem:
            return self.problem
        if self.status is None:
            return "its agent no longer knows it (forgotten, or the node was reinstalled)"
        return self.status.message or self.status.state.value


@dataclass
class WorkloadView:
    record: WorkloadRecord
    ranks: list[RankView] = field(default_factory=list)

    @property
    def workload_id(self) -> str:
        return self.record.workload_id

    @property
    def state(self) -> str:
        """ready, starting, failed, stopped, exited, unreachable or gone, for the workload as a whole."""
        states = {r.state for r in self.ranks}
        for bad in ("failed", "lost"):
            if bad in states:
                return "failed"
        if "unreachable" in states:
            return "unreachable"
        if states == {"ready"}:
            return "ready"
        if states & {"starting", "restarting"}:
            return "starting"
        if "stopping" in states:
            return "stopping"
        if states <= {"stopped", "exited"} and states:
            return "exited" if states == {"exited"} else "stopped"
        return "gone" if states == {"gone"} else "partly running"

    def failed(self) -> list[RankView]:
        return [r for r in self.ranks if r.state in ("failed", "lost")]

    def live(self) -> list[RankView]:
        return [r for r in self.ranks if r.live]


T = TypeVar("T")


def parallel(nodes: Sequence[str], action: Callable[[str], T]) -> dict[str, T | SparkSyncError]:
    """``action(node)`` for every node at once; each result, or the SparkSyncError it raised."""
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="workload-node") as pool:
        futures = {node: pool.submit(_catching, action, node) for node in nodes}
        return {node: future.result() for node, future in futures.items()}


def _catching(action: Callable[[str], T], node: str) -> T | SparkSyncError:
    try:
        return action(node)
    except SparkSyncError as exc:
        return exc


def view(agents: NodeAgents, record: WorkloadRecord) -> WorkloadView:
    """Ask every node of the workload for its processes' states."""
    answers = parallel(record.nodes(), lambda node: _node_status(agents, node, record.workload_id))
    return assemble(record, answers)


def _node_status(agents: NodeAgents, node: str, workload_id: str) -> WorkloadStatus | None:
    try:
        return agents.call(node, lambda client: client.workload(workload_id))
    except AgentRequestError as exc:
        if exc.status == 404:
            return None  # the agent does not know it (any more)
        raise


def assemble(record: WorkloadRecord, answers: Mapping[str, object]) -> WorkloadView:
    ranks = []
    for ref in record.ranks:
        answer = answers.get(ref.node)
        if isinstance(answer, SparkSyncError):
            ranks.append(RankView(ref, problem=f"node {ref.node}: {answer}"))
            continue
        found = {s.name: s for s in answer.ranks} if isinstance(answer, WorkloadStatus) else {}
        ranks.append(RankView(ref, status=found.get(ref.name)))
    return WorkloadView(record, ranks)


def stop(
    agents: NodeAgents,
    record: WorkloadRecord,
    grace_s: float = DEFAULT_STOP_GRACE_S,
    nodes: Sequence[str] | None = None,
) -> dict[str, SparkSyncError]:
    """Stop the workload on every node at once (SIGTERM, SIGKILL after ``grace_s``); the nodes that failed."""
    targets = list(nodes) if nodes is not None else record.nodes()
    answers = parallel(targets, lambda node: _stop_on(agents, node, record.workload_id, grace_s))
    return {node: answer for node, answer in answers.items() if isinstance(answer, SparkSyncError)}


def _stop_on(agents: NodeAgents, node: str, workload_id: str, grace_s: float) -> None:
    try:
        agents.call(node, lambda client: client.stop_workload(workload_id, grace_s))
    except AgentRequestError as exc:
        if exc.status != 404:  # nothing of it ever started there: nothing to stop
            raise


def forget(agents: NodeAgents, record: WorkloadRecord) -> dict[str, SparkSyncError]:
    """Drop the (stopped) workload from every agent's list, with its log files."""
    answers = parallel(record.nodes(), lambda node: _forget_on(agents, node, record.workload_id))
    return {node: answer for node, answer in answers.items() if isinstance(answer, SparkSyncError)}


def _forget_on(agents: NodeAgents, node: str, workload_id: str) -> None:
    try:
        agents.call(node, lambda client: client.forget_workload(workload_id))
    except AgentRequestError as exc:
        if exc.status != 404:
            raise


# --- logs ---------------------------------------------------------------------------------


def select_ranks(record: WorkloadRecord, rank: int | None = None, group: str | None = None) -> list[RankRef]:
    chosen = [
        r for r in record.ranks if (rank is None or r.rank == rank) and (group is None or r.group == group)
    ]
    if not chosen:
        have = ", ".join(f"{r.name} on {r.node}" for r in record.ranks)
        raise WorkloadError(f"workload {record.workload_id} has no such process; it has: {have}.")
    return chosen


def logs(
    agents: NodeAgents, workload_id: str, ref: RankRef, since: int = 0, limit: int | None = None
) -> LogPage:
    return agents.call(ref.node, lambda client: client.logs(workload_id, ref.name, since, limit))


def follow(agents: NodeAgents, workload_id: str, ref: RankRef, since: int | None = None) -> Iterator[LogItem]:
    """Live lines of one process until it ends (the stream resumes by itself after a cut)."""
    # The stream holds one client for its whole life: take it from the agent source once.
    holder: list[Iterator[LogItem]] = []
    agents.call(ref.node, lambda client: holder.append(client.log_stream(workload_id, ref.name, since)))
    yield from holder[0]


# --- tokens/s ----------------------------------------------------------------------------------


@dataclass
class WorkloadTokens:
    """The workload's live figures, from its nodes' latest telemetry samples."""

    ranks: list[WorkloadFigures] = field(default_factory=list)
    software: dict[str, NodeSoftware] = field(default_factory=dict)  # node name -> what its agent runs

    @property
    def decode_tps(self) -> float | None:
        return _total([f.decode_tps for f in self.ranks])

    @property
    def prefill_tps(self) -> float | None:
        return _total([f.prefill_tps for f in self.ranks])

    def group_tps(self, group: str) -> float | None:
        """One group's (replica's) tokens/s: a training run's aggregate, for its scaling efficiency."""
        return _total([f.decode_tps for f in self.ranks if f.group == group])


def _total(values: list[float | None]) -> float | None:
    # 'rank' figures add up; a 'workload' figure is read on one rank only, so adding is right too.
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass(frozen=True)
class LastTokens:
    """What an ended workload last generated: its decode tokens/s and when (Unix time)."""

    decode_tps: float
    at: float


def last_tokens(agents: NodeAgents, record: WorkloadRecord) -> LastTokens | None:
    """An ended workload's last decode tokens/s above zero, from its nodes' telemetry history.

    The agents keep their recent samples, so the figure outlives the workload (not an agent
    restart, nor the ring's length: then None). Each node's last figure is its ranks' sum, and
    the workload's is the sum over its nodes, as when it ran.
    """
    answers = parallel(record.nodes(), lambda node: agents.call(node, lambda client: client.telemetry(0)))
    found: list[LastTokens] = []
    for answer in answers.values():
        if isinstance(answer, SparkSyncError):
            continue  # a node that cannot be asked adds nothing
        for sample in reversed(answer.samples):
            rates = [f.decode_tps for f in sample.workloads or [] if f.workload_id == record.workload_id]
            total = sum(r for r in rates if r)
            if total > 0:
                found.append(LastTokens(total, sample.ts))
                break
    if not found:
        return None
    return LastTokens(sum(f.decode_tps for f in found), max(f.at for f in found))


def ended_at(current: WorkloadView) -> float:
    """When the workload ended: its last rank's end, or (gone: nobody knows) when it was started."""
    ends = [r.status.ended_at for r in current.ranks if r.status is not None and r.status.ended_at]
    return max(ends) if ends else current.record.created_at


def tokens(agents: NodeAgents, record: WorkloadRecord) -> WorkloadTokens:
    answers = parallel(record.nodes(), lambda node: agents.call(node, lambda client: client.snapshot()))
    figures = []
    software = {}
    for node, answer in answers.items():
        if not isinstance(answer, Snapshot):
            continue  # a node that could not be asked adds nothing
        software[node] = NodeSoftware.of(answer)
        if answer.latest is not None:
            figures += [f for f in answer.latest.workloads or [] if f.workload_id == record.workload_id]
    return WorkloadTokens(figures, software)


# --- watching -------------------------------------------------------------------------------


def enforce(agents: NodeAgents, current: WorkloadView, grace_s: float = DEFAULT_STOP_GRACE_S) -> bool:
    """A workload is whole or not at all: once a rank failed, stop the others. True when it did."""
    if not current.failed() or not current.live():
        return False
    names = ", ".join(f"{r.ref.name} on {r.ref.node}" for r in current.failed())
    log.warning("workload %s: %s failed; stopping the other processes", current.workload_id, names)
    stop(agents, current.record, grace_s, nodes=sorted({r.ref.node for r in current.live()}))
    return True


def watch(
    agents: NodeAgents,
    record: WorkloadRecord,
    cancel: threading.Event,
    on_view: Callable[[WorkloadView], None] | None = None,
    poll_s: float = WATCH_POLL_S,
    grace_s: float = DEFAULT_STOP_GRACE_S,
) -> WorkloadView:
    """Poll until the workload has ended or ``cancel``; a failed rank stops the rest. The last view."""
    while True:
        current = view(agents, record)
        if enforce(agents, current, grace_s):
            current = view(agents, record)
        if on_view is not None:
            on_view(current)
        if not current.live() and current.state != "unreachable":
            return current
        if cancel.wait(poll_s):
            return current
