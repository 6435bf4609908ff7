"""Starting a workload: from a plan and its recipes to every rank running, ready, on its node.

    orchestrator = Orchestrator(fleet, on_progress=print)    # fleet: any node's agent, this computer too
    prepared = orchestrator.prepare(plan, recipes)     # reads the nodes; refuses before anything starts
    workload = orchestrator.start(prepared)            # stage by stage; all or nothing

``prepare`` asks every node for its latest telemetry (fabric interfaces and
free memory), computes the launches (``launches.plan_launches``) and checks
the memory fit (``memory_fit.require_fit``, which refuses with the numbers).
``start`` records the workload (``workload_store``), then starts the ranks
of stage 0 on all their nodes at once, waits until all of them are ready,
then stage 1, and so on. If a rank cannot start or fails before it is
ready, or the caller cancels (Ctrl-C), every node is told to stop the
workload and the error names the rank, why, and its last log lines.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from sparksync_agent.protocol import RankLaunch, Snapshot

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.first_sample import wait_first_sample
from sparksync.core.planner.fit import NodeMemory
from sparksync.core.workloads import running
from sparksync.core.agents.link import NodeAgents
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.fabric.plan import FabricPlan
from sparksync.core.fabric.store import FabricStore
from sparksync.core.workloads.fabric import Fabric, FabricPort, FabricSettings, NodeFabric, Topology
from sparksync.core.workloads.launches import GroupLaunch, plan_launches
from sparksync.core.workloads.memory_fit import GroupFit, require_fit
from sparksync.core.workloads.plan import Plan
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.workload_store import (
    Endpoint,
    RankRef,
    WorkloadRecord,
    WorkloadStore,
    new_workload_id,
)

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often the client asks the nodes whether the stage is ready (during a start only)
# Network probes run on the node's loopback or fabric and cost next to nothing; a short
# interval keeps launch latency close to what the engine itself needs.
PROBE_INTERVAL_S = 0.05
SAMPLE_WAIT_S = 30.0  # a freshly started agent may hold no sample yet
READY_MARGIN_S = 30.0  # beyond the agent's own probe timeout, for a node that stopped answering
LAST_LINES = 20

Event = Literal["reading", "starting", "started", "ready", "failed", "stopping", "stopped"]


class WorkloadStartError(WorkloadError):
    """A rank could not start or failed before the workload was ready; the others were stopped."""

    exit_code = 9

    def __init__(
        self, message: str, workload_id: str, rank: RankRef | None = None, lines: Sequence[str] = ()
    ):
        super().__init__(message)
        self.workload_id, self.rank, self.lines = workload_id, rank, list(lines)


class WorkloadCancelled(WorkloadError):
    """Starting was cancelled; what had started was stopped."""

    exit_code = 130


@dataclass(frozen=True)
class Progress:
    """One step of a launch, for a status line or a per-rank list."""

    event: Event
    message: str
    node: str | None = None
    name: str | None = None


ProgressCallback = Callable[[Progress], None]


@dataclass
class Prepared:
    """Everything checked; nothing started."""

    workload_id: str
    plan: Plan
    recipes: dict[str, Recipe]
    groups: list[GroupLaunch]
    fits: list[GroupFit]
    snapshots: dict[str, Snapshot] = field(default_factory=dict)

    @property
    def launches(self) -> list[RankLaunch]:
        return [launch for group in self.groups for launch in group.ranks]

    @property
    def stages(self) -> list[list[RankLaunch]]:
        """Every group's stage 0, then every group's stage 1, ..."""
        numbers = sorted({launch.stage for launch in self.launches})
        return [[launch for launch in self.launches if launch.stage == n] for n in numbers]

    @property
    def warnings(self) -> list[str]:
        return [w for group in self.groups for w in group.warnings]

    def record(self) -> WorkloadRecord:
        return WorkloadRecord(
            workload_id=self.workload_id,
            recipes=sorted({g.recipe for g in self.plan.groups}),
            plan=self.plan,
            ranks=[_ref(launch) for launch in self.launches],
            endpoints=_endpoints(self.groups, self.recipes),
        )


def _ref(launch: RankLaunch) -> RankRef:
    return RankRef(node=launch.node, name=launch.process_name, group=launch.group, rank=launch.rank,
                   role=launch.role, stage=launch.stage)  # fmt: skip


def _endpoints(groups: Sequence[GroupLaunch], recipes: Mapping[str, Recipe]) -> list[Endpoint]:
    """The HTTP API of each serving group, on its head (where the tokens source reads it)."""
    found = []
    for group in groups:
        for launch in group.ranks:
            source = launch.tokens_source
            if launch.node == group.nodes[0] and source.kind == "prometheus" and source.port:
                listen = recipes[group.recipe].http_host if group.recipe in recipes else None
                found.append(Endpoint(group=group.group, node=launch.node, host=source.host, port=source.port,
                                      listen=listen))  # fmt: skip
                break
    return found


class Orchestrator:
    """Starts workloads through the nodes' agents; thread-safe to use from one worker at a time."""

    def __init__(
        self,
        agents: NodeAgents,
        store: WorkloadStore | None = None,
        *,
        fabric_settings: FabricSettings | None = None,
        fabric_store: FabricStore | None = None,
        on_progress: ProgressCallback | None = None,
        poll_s: float = POLL_S,
        stop_grace_s: float = running.DEFAULT_STOP_GRACE_S,
    ):
        self.agents = agents
        self.store = store if store is not None else WorkloadStore()
        self.fabric_settings = fabric_settings or FabricSettings()
        # The applied fabric plan, read at each prepare: its per-node environment feeds every launch.
        self.fabric_store = fabric_store if fabric_store is not None else FabricStore()
        self.on_progress = on_progress
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s

    # --- before anything starts ----------------------------------------------------------------

    def prepare(self, plan: Plan, recipes: Mapping[str, Recipe], label: str | None = None) -> Prepared:
        """Read the nodes, compute the launches and check memory; raises before anything starts."""
        recipes = dict(recipes)
        nodes = plan.nodes()
        self._tell("reading", f"reading {len(nodes)} node(s): {', '.join(nodes)}")
        snapshots = self.read_nodes(nodes)
        fabric = fabric_of(snapshots, self.fabric_settings, self.fabric_store.applied())
        groups = plan_launches(plan, recipes, fabric)
        fits = require_fit(plan, recipes, memory_of(snapshots))
        workload_id = new_workload_id(label or plan.groups[0].recipe)
        groups = [_quick_probes(group) for group in groups]
        return Prepared(workload_id, plan, recipes, groups, fits, snapshots)

    def read_nodes(self, nodes: Sequence[str]) -> dict[str, Snapshot]:
        """Every node's snapshot with a sample in it, all at once; the first unreachable node is an error."""
        answers = running.parallel(
            nodes, lambda node: self.agents.call(node, lambda c: wait_first_sample(c, SAMPLE_WAIT_S))
        )
        problems = [
            f"{node}: {answer}" for node, answer in answers.items() if isinstance(answer, SparkSyncError)
        ]
        if problems:
            raise WorkloadError("cannot read every node of the plan, so nothing was started:\n  " +
                                "\n  ".join(problems))  # fmt: skip
        return answers  # type: ignore[return-value]

    # --- starting --------------------------------------------------------------------------------

    def start(self, prepared: Prepared, cancel: threading.Event | None = None) -> running.WorkloadView:
        """Start every rank, stage by stage; on any failure or cancel, stop them all and raise."""
        cancel = cancel or threading.Event()
        record = prepared.record()
        self.store.add(record)
        timeout = max(launch.readiness.timeout_s for launch in prepared.launches) + READY_MARGIN_S
        try:
            for stage in prepared.stages:
                self._start_stage(record, stage, cancel)
                self._wait_ready(record, stage, cancel, time.monotonic() + timeout)
        except BaseException as exc:
            self._abort(record, exc)
            if isinstance(exc, KeyboardInterrupt):
                raise WorkloadCancelled(
                    f"cancelled; every process of workload {record.workload_id} was stopped."
                ) from None
            raise
        final = running.view(self.agents, record)
        self._tell("ready", f"workload {record.workload_id} is ready on {', '.join(record.nodes())}")
        return final

    def _start_stage(self, record: WorkloadRecord, stage: list[RankLaunch], cancel: threading.Event) -> None:
        """POST every launch of the stage at once; the first refusal (port taken...) is an error."""
        if cancel.is_set():
            raise WorkloadCancelled(f"cancelled; every process of workload {record.workload_id} was stopped.")
        for launch in stage:
            self._tell("starting", f"starting {launch.process_name} on {launch.node}", launch)
        pool = ThreadPoolExecutor(max_workers=len(stage), thread_name_prefix="workload-start")
        futures: list[tuple[RankLaunch, Future]] = [
            (launch, pool.submit(self._start_one, record.workload_id, launch)) for launch in stage
        ]
        try:
            # Collected in order; every start is awaited (shutdown below) before the caller can abort,
            # so a stop never overtakes a start still on its way and leaves that rank running.
            for launch, future in futures:
                error = future.exception()
                if error is not None:
                    raise self._refused(record, launch, error)
                self._tell("started", f"{launch.process_name} runs on {launch.node}", launch)
        finally:
            pool.shutdown(wait=True)

    def _start_one(self, workload_id: str, launch: RankLaunch):
        # Engines installed by `sparksync engine install` live in ~/.local/bin: the agent
        # puts its engine directories on each rank's PATH, so a bare name is enough here.
        return self.agents.call(launch.node, lambda client: client.start_rank(workload_id, launch))

    def _refused(
        self, record: WorkloadRecord, launch: RankLaunch, error: BaseException
    ) -> WorkloadStartError:
        ref = _ref(launch)
        self._tell("failed", f"{launch.process_name} on {launch.node} did not start: {error}", launch)
        return WorkloadStartError(
            f"workload {record.workload_id}: rank {launch.rank} ({launch.role}) of {launch.group} on "
            f"{launch.node} did not start: {error}. The other processes were stopped.",
            record.workload_id, ref,
        )  # fmt: skip

    def _wait_ready(
        self, record: WorkloadRecord, stage: list[RankLaunch], cancel: threading.Event, deadline: float
    ) -> None:
        names = {launch.process_name for launch in stage}
        reported: set[str] = set()
        while True:
            current = running.view(self.agents, record)
            ranks = [r for r in current.ranks if r.ref.name in names]
            for rank in ranks:
                if rank.state == "ready" and rank.ref.name not in reported:
                    reported.add(rank.ref.name)
                    self._tell("ready", f"{rank.ref.name} is ready on {rank.ref.node}", node=rank.ref.node,
                               name=rank.ref.name)  # fmt: skip
            bad = [r for r in ranks if _broken(r)]
            if bad:
                raise self._failed(record, bad[0])
            if all(r.state == "ready" for r in ranks):
                return
            if time.monotonic() > deadline:
                waiting = ", ".join(
                    f"{r.ref.name} on {r.ref.node} ({r.state})" for r in ranks if r.state != "ready"
                )
                raise WorkloadStartError(
                    f"workload {record.workload_id}: {waiting} not ready in time. The processes were stopped.",
                    record.workload_id,
                )
            if cancel.wait(self.poll_s):
                raise WorkloadCancelled(
                    f"cancelled; every process of workload {record.workload_id} was stopped."
                )

    def _failed(self, record: WorkloadRecord, rank: running.RankView) -> WorkloadStartError:
        lines = rank.status.last_lines if rank.status is not None else []
        if rank.status is not None and not lines:
            lines = self._last_lines(record, rank.ref)
        ref = rank.ref
        self._tell("failed", f"{ref.name} on {ref.node} failed: {rank.why()}", node=ref.node, name=ref.name)
        shown = "\n".join(f"    {line}" for line in lines[-LAST_LINES:])
        tail = f"\n  last log lines:\n{shown}" if shown else ""
        return WorkloadStartError(
            f"workload {record.workload_id}: rank {ref.rank} ({ref.role}) of {ref.group} on {ref.node} "
            f"failed: {rank.why()}. The other processes were stopped.{tail}",
            record.workload_id, ref, lines,
        )  # fmt: skip

    def _last_lines(self, record: WorkloadRecord, ref: RankRef) -> list[str]:
        try:
            page = running.logs(self.agents, record.workload_id, ref)
        except SparkSyncError:
            return []
        return [line.text for line in page.lines[-LAST_LINES:]]

    def _abort(self, record: WorkloadRecord, cause: BaseException) -> None:
        """Stop the workload on every node it touches, whatever was started there."""
        self._tell("stopping", f"stopping workload {record.workload_id} on {', '.join(record.nodes())}")
        failures = running.stop(self.agents, record, self.stop_grace_s)
        for node, error in failures.items():
            log.warning("could not stop workload %s on %s: %s", record.workload_id, node, error)
        if failures and isinstance(cause, WorkloadError):
            nodes = ", ".join(failures)
            hint = f"run `sparksync workload stop {record.workload_id}` once they answer"
            cause.args = (f"{cause} It could not be stopped on {nodes}: {hint}.",)
        self._tell("stopped", f"workload {record.workload_id} stopped")

    def _tell(self, event: Event, message: str, launch: RankLaunch | None = None, *,
              node: str | None = None, name: str | None = None) -> None:  # fmt: skip
        if launch is not None:
            node, name = launch.node, launch.process_name
        log.info("%s", message)
        if self.on_progress is not None:
            try:
                self.on_progress(Progress(event, message, node, name))
            except Exception:  # a display's bug must not leave ranks running
                log.exception("progress callback failed")


def _broken(rank: running.RankView) -> bool:
    if rank.status is None:
        return True  # unreachable node, or an agent that lost the rank
    return rank.status.state.finished  # 'restarting' waits: the recipe asked for restarts


def _quick_probes(group: GroupLaunch) -> GroupLaunch:
    ranks = [
        launch.model_copy(update={"readiness": launch.readiness.model_copy(
            update={"interval_s": min(launch.readiness.interval_s, PROBE_INTERVAL_S)})})
        if launch.readiness.kind in ("http", "tcp") else launch
        for launch in group.ranks
    ]  # fmt: skip
    return group.model_copy(update={"ranks": ranks})


def fabric_of(
    snapshots: Mapping[str, Snapshot], settings: FabricSettings, applied: FabricPlan | None = None
) -> Fabric:
    """The fabric as the applied plan sets it (``sparksync cluster apply``), else as each node's
    agent reports it in its latest sample."""
    reports = []
    for node, snap in snapshots.items():
        planned = applied.node(node) if applied is not None else None
        if planned is not None and planned.interfaces:
            reports.append(NodeFabric(node=node, env=planned.env, ports=[
                FabricPort(name=i.name, ipv4=str(ipaddress.ip_interface(i.address).ip), rdma_device=i.rdma_device)
                for i in planned.interfaces
            ]))  # fmt: skip
        elif snap.latest is not None:
            reports.append(NodeFabric.from_samples(node, snap.latest.net or [], snap.latest.rdma or []))
    if applied is not None and applied.topology.value in {t.value for t in Topology}:
        settings = settings.model_copy(update={"topology": Topology(applied.topology.value)})
    return Fabric.of(reports, settings)


def memory_of(snapshots: Mapping[str, Snapshot]) -> dict[str, NodeMemory]:
    return {
        node: NodeMemory.from_sample(node, snap.latest.memory)
        for node, snap in snapshots.items()
        if snap.latest is not None and snap.latest.memory is not None
    }
