"""Detect, apply and roll back the fabric across the cluster, through each node's agent.

Every node is reached through the one seam (``NodeAgents``: the fleet), in
parallel, one thread per node, and each step reports per-node progress.

Apply is **all or nothing**. Before anything changes, every node is read
again (without the probe) and the plan is checked against what it finds now
(its netdevs, and no new network that clashes). Then every node applies its
part at once; each node's helper puts that node back by itself if one of its
steps fails. If any node failed, every node that succeeded undoes that apply
(its helper's ``rollback --last``), so the cluster is as it was before, and
the report names the failure. The sudo password is one, asked once, used for
each node's call and dropped with the call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sparksync_agent.protocol import FabricReport, FabricResult

from sparksync.core.agents.link import NodeAgents
from sparksync.core.base.errors import AgentRequestError, SparkSyncError
from sparksync.core.fabric.cabling import build_cabling
from sparksync.core.fabric.errors import FabricSetupError
from sparksync.core.fabric.plan import FabricPlan, check_plan
from sparksync.core.fabric.topology import CX7_SPEED_MBPS, FabricTopology, classify

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FabricProgress:
    node: str
    stage: str  # "detect", "check", "apply", "undo", "rollback"
    message: str
    ok: bool | None = None  # None: under way


ProgressFn = Callable[[FabricProgress], None]


@dataclass
class Detection:
    reports: dict[str, FabricReport]
    topology: FabricTopology
    elapsed_s: float


@dataclass
class NodeOutcome:
    node: str
    ok: bool
    result: FabricResult | None = None
    error: str | None = None
    code: str | None = None  # the agent's error code (sudo_refused, ...)
    undone: bool | None = None  # after another node failed: this node's apply was undone


@dataclass
class ApplyReport:
    action: str  # "apply" or "rollback"
    plan_id: str | None
    outcomes: dict[str, NodeOutcome] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes.values())

    @property
    def failed(self) -> list[NodeOutcome]:
        return [o for o in self.outcomes.values() if not o.ok]

    def as_dict(self) -> dict[str, object]:
        return {
            "action": self.action, "plan_id": self.plan_id, "ok": self.ok, "elapsed_s": round(self.elapsed_s, 3),
            "summary": self.summary(),
            "nodes": {
                name: {"ok": o.ok, "error": o.error, "code": o.code, "undone": o.undone,
                       "result": o.result.model_dump(mode="json") if o.result else None}
                for name, o in self.outcomes.items()
            },
        }  # fmt: skip

    def summary(self) -> str:
        if self.ok:
            return f"{self.action} done on {len(self.outcomes)} node(s)"
        failures = "; ".join(f"{o.node}: {o.error}" for o in self.failed)
        undone = [o.node for o in self.outcomes.values() if o.undone]
        tail = f"; undone on {', '.join(undone)}" if undone else ""
        left = [o.node for o in self.outcomes.values() if o.undone is False]
        if left:
            tail += f"; COULD NOT UNDO on {', '.join(left)}: run 'sparksync cluster rollback'"
        return f"{self.action} failed on {failures}{tail}"


class FabricOperations:
    def __init__(self, agents: NodeAgents, on_progress: ProgressFn | None = None):
        self.agents = agents
        self.on_progress = on_progress

    # --- detect ---------------------------------------------------------------------------

    def read(self, nodes: Sequence[str], probe: bool = True) -> dict[str, FabricReport]:
        """Every node's report, in parallel; a node that cannot be read stops it, named."""
        answers = self._each(nodes, "detect", lambda n: self.agents.call(n, lambda c: c.fabric(probe)),
                             lambda r: f"{len(r.interfaces)} CX-7 netdev(s), {_seen(r)} neighbour(s)")
        failed = {n: a for n, a in answers.items() if isinstance(a, BaseException)}
        if failed:
            raise FabricSetupError("cannot read the fabric of " + "; ".join(f"{n} ({e})" for n, e in failed.items()))
        return {n: a for n, a in answers.items() if isinstance(a, FabricReport)}

    def detect(self, nodes: Sequence[str], expected_speed_mbps: int | None = CX7_SPEED_MBPS) -> Detection:
        started = time.monotonic()
        reports = self.read(nodes)
        topology = classify(build_cabling(reports), expected_speed_mbps)
        return Detection(reports, topology, time.monotonic() - started)

    # --- apply and rollback ------------------------------------------------------------------

    def apply(self, plan: FabricPlan, sudo_password: str) -> ApplyReport:
        started = time.monotonic()
        names = [p.name for p in plan.nodes.values()]
        reports = self.read(names, probe=False)
        check_plan(plan, reports)  # raises before anything changes
        wire = {p.name: p.wire(plan.plan_id) for p in plan.nodes.values()}
        answers = self._each(
            names, "apply", lambda n: self.agents.call(n, lambda c: c.fabric_apply(wire[n], sudo_password)),
            lambda r: f"applied ({r.applier}{', netplan validated' if r.netplan_validated else ''})",
        )
        report = ApplyReport("apply", plan.plan_id, {n: _outcome(n, a) for n, a in answers.items()})
        if not report.ok:
            done = [n for n, o in report.outcomes.items() if o.ok]
            undo = self._each(done, "undo", lambda n: self.agents.call(
                n, lambda c: c.fabric_rollback(sudo_password, last=True)), lambda r: "put back as it was")
            for name, answer in undo.items():
                report.outcomes[name].undone = _outcome(name, answer).ok
        report.elapsed_s = time.monotonic() - started
        return report

    def rollback(self, nodes: Sequence[str], sudo_password: str, plan_id: str | None = None) -> ApplyReport:
        started = time.monotonic()
        answers = self._each(nodes, "rollback", lambda n: self.agents.call(
            n, lambda c: c.fabric_rollback(sudo_password)), lambda r: "; ".join(r.steps[-2:]) or "rolled back")
        report = ApplyReport("rollback", plan_id, {n: _outcome(n, a) for n, a in answers.items()})
        report.elapsed_s = time.monotonic() - started
        return report

    # --- internals -------------------------------------------------------------------------

    def _each(self, nodes: Sequence[str], stage: str, call: Callable[[str], object],
              done_text: Callable) -> dict[str, object]:
        if not nodes:
            return {}

        def one(node: str) -> object:
            self._tell(FabricProgress(node, stage, f"{stage}..."))
            try:
                answer = call(node)
            except SparkSyncError as exc:
                self._tell(FabricProgress(node, stage, str(exc), ok=False))
                return exc
            if isinstance(answer, FabricResult) and not answer.ok:
                self._tell(FabricProgress(node, stage, answer.error or "failed", ok=False))
            else:
                self._tell(FabricProgress(node, stage, done_text(answer), ok=True))
            return answer

        with ThreadPoolExecutor(len(nodes), thread_name_prefix=f"fabric-{stage}") as pool:
            return dict(zip(nodes, pool.map(one, nodes)))

    def _tell(self, progress: FabricProgress) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(progress)
        except Exception:  # a display's bug must not leave the fabric half-applied
            log.exception("fabric progress callback failed")


def _outcome(node: str, answer: object) -> NodeOutcome:
    if isinstance(answer, FabricResult):
        if answer.ok:
            return NodeOutcome(node, True, answer)
        restored = " (this node was put back as it was)" if answer.restored else ""
        return NodeOutcome(node, False, answer, (answer.error or "failed") + restored)
    code = answer.code if isinstance(answer, AgentRequestError) else None
    return NodeOutcome(node, False, None, str(answer), code)


def _seen(report: FabricReport) -> int:
    return len({n.mac for i in report.interfaces for n in i.neighbours})

