"""Training workloads as agents would report them, for the baseline and scaling tests.

``TrainingAgents`` answers ``workload`` (rank states with the real torchrun
argv from the command builder), ``snapshot`` (the latest figures) and
``telemetry`` (the figures history) per node, like a node's agent does.
"""

from __future__ import annotations

import time

from sparksync_agent.protocol import (
    AGENT_VERSION,
    EngineCheck,
    EngineReport,
    NodeInfo,
    RankState,
    RankStatus,
    Sample,
    Snapshot,
    TelemetryPage,
    WorkloadFigures,
    WorkloadStatus,
)

from sparksync.core.base.errors import AgentRequestError
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.workload_store import RankRef, WorkloadRecord
from tests.core.workloads.fakes import nodes, sparks


def train_recipe(args: list[str] | None = None) -> Recipe:
    return Recipe.model_validate({
        "name": "train", "engine": "torchrun", "ports": {"rendezvous": 29500},
        "training": {"script": "train.py", "args": args if args is not None else ["--batch", "32"]},
    })  # fmt: skip


def training_record(workload_id: str, count: int, args: list[str] | None = None):
    """A torchrun workload on ``count`` nodes: its client record and each rank's launch argv."""
    names = nodes(count)
    group = build_group("train-1", train_recipe(args), names, sparks(count))
    refs = [RankRef(node=r.node, name=r.process_name, group=r.group, rank=r.rank, role=r.role)
            for r in group.ranks]  # fmt: skip
    record = WorkloadRecord(workload_id=workload_id, recipes=["train"],
                            plan=Plan(groups=[Group(recipe="train", nodes=names)]), ranks=refs)  # fmt: skip
    return record, {r.node: r.argv for r in group.ranks}


class TrainingAgents:
    """One training workload's nodes. ``history[node]`` lists per-sample tokens/s (None: no figure)."""

    def __init__(self, record: WorkloadRecord, argv: dict[str, list[str]], state=RankState.ready):
        self.record, self.argv, self.state = record, argv, state
        self.history: dict[str, list[float | None]] = {}
        self.telemetry_reads = 0
        self.torch: dict[str, str] = {}  # node -> the torch version its engine check finds
        self.agent_version: dict[str, str] = {}  # node -> its agent's version (default: this one's)
        self.node_id: dict[str, str] = {}  # node -> the node id its agent reports (default: its name)

    def call(self, node, action):
        return action(_Client(self, node))

    def figure(self, node: str, tps: float) -> WorkloadFigures:
        ref = next(r for r in self.record.ranks if r.node == node)
        return WorkloadFigures(workload_id=self.record.workload_id, name=ref.name, group=ref.group,
                               rank=ref.rank, role=ref.role, state=RankState.ready, decode_tps=tps)  # fmt: skip

    def sample(self, node: str, seq: int, tps: float | None) -> Sample:
        return Sample(seq=seq, ts=time.time(), workloads=[] if tps is None else [self.figure(node, tps)])


class _Client:
    def __init__(self, agents: TrainingAgents, node: str):
        self.agents, self.node = agents, node

    def workload(self, workload_id: str) -> WorkloadStatus:
        if workload_id != self.agents.record.workload_id:
            raise AgentRequestError("no workload", status=404, code="unknown_workload")
        ranks = [RankStatus(workload_id=workload_id, name=r.name, group=r.group, rank=r.rank, role=r.role,
                            state=self.agents.state, argv=self.agents.argv[r.node])
                 for r in self.agents.record.ranks if r.node == self.node]  # fmt: skip
        return WorkloadStatus(workload_id=workload_id, ranks=ranks)

    def snapshot(self) -> Snapshot:
        info = NodeInfo(node_id=self.agents.node_id.get(self.node, self.node), hostname=self.node,
                        arch="aarch64", os="linux", kernel="6", cpu_count=20, boot_time=0.0,
                        agent_version=self.agents.agent_version.get(self.node, AGENT_VERSION))  # fmt: skip
        values = self.agents.history.get(self.node) or [None]
        latest = self.agents.sample(self.node, len(values), values[-1])
        torch = self.agents.torch.get(self.node)
        engines = None if torch is None else EngineReport(checked_at=0.0, checks=[
            EngineCheck(name="torchrun", kind="binary", available=True),
            EngineCheck(name="python:torch", kind="python", available=True, version=torch),
        ])  # fmt: skip
        return Snapshot(info=info, run_id="run", sample_hz=1.0, latest=latest, engines=engines)

    def telemetry(self, since: int, limit: int | None = None) -> TelemetryPage:
        self.agents.telemetry_reads += 1
        values = self.agents.history.get(self.node, [])
        samples = [self.agents.sample(self.node, i + 1, v) for i, v in enumerate(values)][since:]
        return TelemetryPage(run_id="run", since=since, samples=samples, last_seq=len(values))

    def stop_workload(self, workload_id: str, grace_s: float = 10.0) -> WorkloadStatus:
        self.agents.state = RankState.stopped
        return self.workload(workload_id)

    def forget_workload(self, workload_id: str) -> None:
        pass
