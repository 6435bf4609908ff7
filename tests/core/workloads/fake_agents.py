"""Agent-shaped fakes for orchestrator tests: per-node clients that keep rank states like an agent.

A ``FakeCluster`` holds one ``FakeNodeClient`` per node. A started rank is
``starting``; it turns ``ready`` after ``ready_after`` status reads (so the
test sees the client poll), or ``failed`` with last lines when its role is
in ``fail_roles``. Refusals (port taken) are ``AgentRequestError`` as the
real client raises them. Every call is logged in order for assertions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sparksync_agent.protocol import (
    TelemetryPage,
    EngineCheck,
    EngineReport,
    LogLine,
    LogPage,
    MemorySample,
    NodeInfo,
    RankLaunch,
    RankState,
    RankStatus,
    Sample,
    Snapshot,
    WorkloadStatus,
)

from sparksync.core.base.errors import AgentRequestError
from tests.core.workloads.fakes import spark_samples

GB = 1024**3


class FakeCluster:
    def __init__(self, names: list[str], free_gb: float = 100.0, ready_after: int = 2):
        self.calls: list[tuple[str, str, str]] = []  # (node, what, process name or "")
        self.lock = threading.Lock()
        self.clients = {
            name: FakeNodeClient(self, name, i + 1, free_gb, ready_after) for i, name in enumerate(names)
        }
        self.refuse: dict[str, AgentRequestError] = {}  # process name -> refusal
        self.fail_roles: set[str] = set()
        self.off_path: dict[str, str] = {}  # binaries the agent's PATH lacks -> where detection found them
        self.on_status: Callable[[], None] | None = None

    def call(self, node, action):
        return action(self.clients[node])

    def log(self, node: str, what: str, name: str = "") -> None:
        with self.lock:
            self.calls.append((node, what, name))

    def what(self, what: str) -> list[tuple[str, str]]:
        return [(node, name) for node, w, name in self.calls if w == what]


class FakeNodeClient:
    def __init__(self, cluster: FakeCluster, name: str, index: int, free_gb: float, ready_after: int):
        self.cluster, self.name, self.index = cluster, name, index
        self.free_gb, self.ready_after = free_gb, ready_after
        self.ranks: dict[str, dict[str, RankStatus]] = {}
        self.reads: dict[str, int] = {}

    def snapshot(self) -> Snapshot:
        nets, devices = spark_samples(self.index)
        memory = MemorySample(
            total_bytes=128 * GB, used_bytes=int((128 - self.free_gb) * GB), available_bytes=int(self.free_gb * GB),
            free_bytes=int(self.free_gb * GB), cached_bytes=0, buffers_bytes=0, swap_total_bytes=0,
            swap_used_bytes=0,
        )  # fmt: skip
        info = NodeInfo(node_id=self.name, hostname=self.name, arch="aarch64", os="linux", kernel="6",
                        cpu_count=20, boot_time=0.0)  # fmt: skip
        sample = Sample(seq=1, ts=time.time(), memory=memory, net=nets, rdma=devices)
        return Snapshot(info=info, run_id="run", sample_hz=1.0, latest=sample)

    def telemetry(self, since: int = 0, limit: int | None = None) -> TelemetryPage:
        """The node's held samples: the latest only (no workload figures)."""
        latest = self.snapshot().latest
        return TelemetryPage(run_id="run", since=since, samples=[latest] if latest and since < 1 else [], last_seq=1)

    def start_rank(self, workload_id: str, launch: RankLaunch) -> RankStatus:
        name = launch.process_name
        self.cluster.log(self.name, "start", name)
        if name in self.cluster.refuse:
            raise self.cluster.refuse[name]
        if "/" not in launch.argv[0] and launch.argv[0] in self.cluster.off_path:
            raise AgentRequestError(
                f"{launch.argv[0]!r} is not an executable", status=400, code="command_not_found"
            )
        status = RankStatus(workload_id=workload_id, name=name, group=launch.group, rank=launch.rank,
                            role=launch.role, state=RankState.starting, pid=1000 + len(self.cluster.calls),
                            argv=launch.argv)  # fmt: skip
        self.ranks.setdefault(workload_id, {})[name] = status
        self.reads[name] = 0
        return status

    def workload(self, workload_id: str) -> WorkloadStatus:
        if self.cluster.on_status is not None:
            self.cluster.on_status()
        if workload_id not in self.ranks:
            raise AgentRequestError("no workload", status=404, code="unknown_workload")
        for name, status in self.ranks[workload_id].items():
            self._advance(name, status)
        return WorkloadStatus(workload_id=workload_id, ranks=list(self.ranks[workload_id].values()))

    def _advance(self, name: str, status: RankStatus) -> None:
        if status.state is not RankState.starting:
            return
        self.reads[name] += 1
        if status.role in self.cluster.fail_roles:
            status.state, status.exit_code = RankState.failed, 1
            status.message, status.last_lines = "exited with status 1", ["loading", "error: out of memory"]
        elif self.reads[name] >= self.ready_after:
            status.state = RankState.ready
            self.cluster.log(self.name, "ready", name)

    def stop_workload(self, workload_id: str, grace_s: float = 10.0) -> WorkloadStatus:
        self.cluster.log(self.name, "stop", workload_id)
        if workload_id not in self.ranks:
            raise AgentRequestError("no workload", status=404, code="unknown_workload")
        for status in self.ranks[workload_id].values():
            if not status.state.finished:
                status.state = RankState.stopped
        return WorkloadStatus(workload_id=workload_id, ranks=list(self.ranks[workload_id].values()))

    def engines(self, refresh: bool = False) -> EngineReport:
        checks = [
            EngineCheck(name=n, kind="binary", available=True, path=p)
            for n, p in self.cluster.off_path.items()
        ]
        return EngineReport(checked_at=0.0, checks=checks)

    def forget_workload(self, workload_id: str) -> None:
        self.cluster.log(self.name, "forget", workload_id)
        self.ranks.pop(workload_id, None)

    def logs(
        self, workload_id: str, name: str | None = None, since: int = 0, limit: int | None = None
    ) -> LogPage:
        lines = [LogLine(seq=1, text=f"{name} says hello")]
        return LogPage(workload_id=workload_id, name=name or "", since=since, lines=lines, last_seq=1)
