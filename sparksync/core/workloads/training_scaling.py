"""Live scaling of training workloads against their one-node baseline (baseline.py).

Per training group (one torchrun replica on N nodes) the live aggregate
tokens/s is compared with the stored one-node figure of the same setup,
with the bench's formula (bench/report.py), so both read alike:

    speed-up = aggregate / baseline;  efficiency = aggregate / (N x baseline)

A one-node group has no scaling to show; its figures become the baseline
when it ends or is stopped (:func:`record_baselines`), with the stable id of
its node and the software its agent reported. Two flags say when the
efficiency should not be believed (bench/flags.py): above 105 %, and a
measured baseline older than what it is compared with (the group runs on
none of the baseline's node, or its nodes run another agent or torch). A
user's baseline says nothing of where it came from and is not flagged stale.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field

from sparksync.core.bench.flags import FigureFlag, efficiency_flag, stale_flag, version_differences
from sparksync.core.bench.report import efficiency, speedup
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.agents.link import NodeAgents
from sparksync.core.workloads.baseline import (
    TRAINING_ROLE,
    Baseline,
    BaselineStore,
    NodeSoftware,
    key_of,
    setup_of,
)
from sparksync.core.workloads.running import WorkloadTokens, WorkloadView, view
from sparksync.core.workloads.workload_store import WorkloadRecord

log = logging.getLogger(__name__)

NO_BASELINE = "no one-node baseline yet: run it on one node first"


@dataclass
class GroupScaling:
    group: str
    recipe: str
    nodes: int
    key: str | None  # None while no rank's command is known (its node could not be asked)
    setup: str | None = None
    tokens_per_s: float | None = None  # the group's live aggregate
    baseline: Baseline | None = None
    speedup: float | None = None
    efficiency: float | None = None
    problem: str | None = None  # the baseline file could not be read
    node_ids: list[str] = field(default_factory=list)  # the stable ids of its nodes that are known
    software: list[NodeSoftware] = field(default_factory=list)  # what each node that answered runs

    @property
    def flag(self) -> FigureFlag | None:
        """The first of :attr:`flags` (the one a one-line view shows first)."""
        return next(iter(self.flags), None)

    @property
    def flags(self) -> list[FigureFlag]:
        """Why the efficiency should not be believed as it stands, and what to do about each."""
        if self.baseline is None:
            return []
        label = f"the baseline {self.key} ({self.baseline.tokens_per_s:,.0f} tok/s, {self.baseline.source})"
        found = [efficiency_flag(self.efficiency, self.nodes, label),
                 stale_flag(label, self.stale_differences()) if self.efficiency is not None else None]  # fmt: skip
        return [f for f in found if f is not None]

    def stale_differences(self) -> list[str]:
        """What differs between the measured baseline's node and software and this group's."""
        base = self.baseline
        if base is None or base.source != "measured":  # a user's figure says nothing of where it ran
            return []
        differences = []
        if base.node_id and self.node_ids and base.node_id not in self.node_ids:
            differences.append(f"it ran on {base.node or base.node_id}, none of this group's nodes")
        differences += version_differences((what, then, ", ".join(now) or None) for what, then, now in (
            ("SparkSync agent", base.agent_version, sorted({s.agent_version for s in self.software if s.agent_version})),
            ("torch", base.torch_version, sorted({s.torch_version for s in self.software if s.torch_version})),
        ))  # fmt: skip
        return differences

    @property
    def note(self) -> str | None:
        """Why there is no efficiency, in words; None when there is one (or nothing to scale)."""
        if self.nodes < 2:
            return None
        if self.problem:
            return self.problem
        if self.key is None:
            return "setup unknown: its nodes could not be asked"
        if self.baseline is None:
            return f"{NO_BASELINE} (or `sparksync workload baseline set {self.key} TOK/S`)"
        if self.tokens_per_s is None:
            return "no tokens/s reported yet"
        return None

    def describe(self) -> str:
        """One short cell: '97.4% (7.79x of 8,737 tok/s)', or why not."""
        if self.efficiency is not None and self.speedup is not None and self.baseline is not None:
            text = f"{self.efficiency:.1%} ({self.speedup:.2f}x of {self.baseline.tokens_per_s:,.0f} tok/s)"
            if any(f.kind == "efficiency_above_100" for f in self.flags):
                text += f" FLAGGED: above 105%, re-measure the baseline (`workload baseline set {self.key}`)"
            if any(f.kind == "stale_baseline" for f in self.flags):
                text += (f" FLAGGED: stale baseline ({'; '.join(self.stale_differences())}), re-measure it "
                         "on one of these nodes with this software")  # fmt: skip
            return text
        if self.nodes < 2:
            return "1 node (baseline)"
        return self.note or "-"

    def as_json(self) -> dict:
        return {
            "group": self.group, "recipe": self.recipe, "nodes": self.nodes, "baseline_key": self.key,
            "setup": self.setup, "tokens_per_s": self.tokens_per_s,
            "baseline_tokens_per_s": self.baseline.tokens_per_s if self.baseline else None,
            "baseline_source": self.baseline.source if self.baseline else None,
            "speedup": self.speedup, "efficiency": self.efficiency, "note": self.note,
            "flag": self.flag.model_dump() if self.flag else None,
            "flags": [f.model_dump() for f in self.flags],
            "baseline_node_id": self.baseline.node_id if self.baseline else None,
            "baseline_agent_version": self.baseline.agent_version if self.baseline else None,
            "baseline_torch_version": self.baseline.torch_version if self.baseline else None,
        }  # fmt: skip


def training_groups(view: WorkloadView) -> list[GroupScaling]:
    """The workload's torchrun groups, with their size and setup key (from a rank's command)."""
    recipes = dict(zip(view.record.plan.group_ids(), (g.recipe for g in view.record.plan.groups)))
    found = []
    for group, recipe in recipes.items():
        ranks = [r for r in view.ranks if r.ref.group == group and r.ref.role == TRAINING_ROLE]
        if not ranks:
            continue
        argv = next((r.status.argv for r in sorted(ranks, key=lambda r: r.ref.rank)
                     if r.status is not None and r.status.argv), None)  # fmt: skip
        names = sorted({r.ref.node for r in ranks})
        key = key_of(recipe, argv) if argv else None
        setup = setup_of(recipe, argv) if argv else None
        ids = [view.record.node_ids[n] for n in names if n in view.record.node_ids]
        found.append(GroupScaling(group=group, recipe=recipe, nodes=len(names), key=key, setup=setup,
                                  node_ids=ids if len(ids) == len(names) else []))  # fmt: skip
    return found


def scaling(view: WorkloadView, tokens: WorkloadTokens, store: BaselineStore) -> list[GroupScaling]:
    """Every training group of the workload with its live efficiency, or why it has none."""
    groups = training_groups(view)
    problem = None
    try:
        known = {b.key: b for b in store.list()} if groups else {}
    except SparkSyncError as exc:  # the live figures still show; the file's problem says why no efficiency
        known, problem = {}, str(exc)
    for item in groups:
        item.problem = problem
        item.tokens_per_s = tokens.group_tps(item.group)
        item.software = [tokens.software[n] for n in _group_nodes(view, item.group) if n in tokens.software]
        item.baseline = known.get(item.key) if item.key else None
        if item.nodes >= 2 and item.baseline is not None:
            item.speedup = speedup(item.tokens_per_s, item.baseline.tokens_per_s)
            item.efficiency = efficiency(item.tokens_per_s, item.baseline.tokens_per_s, item.nodes)
    return groups


def record_baselines(
    agents: NodeAgents, view: WorkloadView, store: BaselineStore, *, only_ended: bool = True
) -> list[Baseline]:
    """Store the median tokens/s of each one-node training group as its setup's baseline.

    With ``only_ended`` a group still running is left for later (its figures are not all in);
    a group already recorded from this workload is not read again, so calling this on every
    poll costs one file read once it is done.
    """
    recorded = []
    for item in training_groups(view):
        if item.nodes != 1 or item.key is None:
            continue
        ranks = [r for r in view.ranks if r.ref.group == item.group]
        if only_ended and any(r.live for r in ranks):
            continue
        old = store.get(item.key)
        if old is not None and old.workload_id == view.workload_id:
            continue
        node = ranks[0].ref.node
        values = _history(agents, node, view.workload_id, item.group)
        if not values:
            continue
        software, agent_id = _software(agents, node)
        baseline = Baseline(key=item.key, tokens_per_s=statistics.median(values), source="measured",
                            setup=item.setup, workload_id=view.workload_id, samples=len(values),
                            node_id=view.record.node_ids.get(node) or agent_id, node=node,
                            agent_version=software.agent_version, torch_version=software.torch_version)  # fmt: skip
        store.put(baseline)
        log.info("one-node baseline %s: %.1f tok/s (median of %d figures from %s)",
                 item.key, baseline.tokens_per_s, len(values), view.workload_id)  # fmt: skip
        recorded.append(baseline)
    return recorded


def record_before_stop(agents: NodeAgents, record: WorkloadRecord, store: BaselineStore) -> list[Baseline]:
    """Before a workload is stopped: a one-node training run's figures become its setup's baseline.

    Never in the way of stopping: a problem is logged, and the workload is stopped all the same.
    """
    if not any(r.role == TRAINING_ROLE for r in record.ranks) or len(record.nodes()) != 1:
        return []
    try:
        return record_baselines(agents, view(agents, record), store, only_ended=False)
    except SparkSyncError as exc:
        log.warning("no baseline recorded for %s: %s", record.workload_id, exc)
        return []


def _group_nodes(view: WorkloadView, group: str) -> list[str]:
    return sorted({r.ref.node for r in view.ranks if r.ref.group == group and r.ref.role == TRAINING_ROLE})


def _software(agents: NodeAgents, node: str) -> tuple[NodeSoftware, str | None]:
    """What the node's agent runs, and the node id it reports; nothing known when it cannot be asked."""
    try:
        snapshot = agents.call(node, lambda client: client.snapshot())
    except SparkSyncError as exc:
        log.warning("cannot ask %s what it runs, for its baseline: %s", node, exc)
        return NodeSoftware(), None
    return NodeSoftware.of(snapshot), snapshot.info.node_id or None


def _history(agents: NodeAgents, node: str, workload_id: str, group: str) -> list[float]:
    """The group's aggregate tokens/s in each telemetry sample the node still holds."""
    try:
        page = agents.call(node, lambda client: client.telemetry(0))
    except SparkSyncError as exc:
        log.warning("cannot read %s's telemetry for the baseline of %s: %s", node, workload_id, exc)
        return []
    values = []
    for sample in page.samples:
        rates = [f.decode_tps for f in sample.workloads or []
                 if f.workload_id == workload_id and f.group == group and f.decode_tps]  # fmt: skip
        if rates:
            values.append(sum(rates))
    return values
