"""Live scaling of training workloads against their one-node baseline (baseline.py).

Per training group (one torchrun replica on N nodes) the live aggregate
tokens/s is compared with the stored one-node figure of the same setup,
with the bench's formula (bench/report.py), so both read alike:

    speed-up = aggregate / baseline;  efficiency = aggregate / (N x baseline)

A one-node group has no scaling to show; its figures become the baseline
when it ends or is stopped (:func:`record_baselines`).
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass

from sparksync.core.bench.flags import FigureFlag, efficiency_flag
from sparksync.core.bench.report import efficiency, speedup
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.agents.link import NodeAgents
from sparksync.core.workloads.baseline import TRAINING_ROLE, Baseline, BaselineStore, key_of, setup_of
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

    @property
    def flag(self) -> FigureFlag | None:
        """An efficiency above 105 %: the baseline is suspect, not the cluster a marvel."""
        if self.baseline is None:
            return None
        return efficiency_flag(self.efficiency, self.nodes, f"the baseline {self.key} "
                               f"({self.baseline.tokens_per_s:,.0f} tok/s, {self.baseline.source})")

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
            if self.flag is not None:
                text += f" FLAGGED: above 105%, re-measure the baseline (`workload baseline set {self.key}`)"
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
        nodes = len({r.ref.node for r in ranks})
        key = key_of(recipe, argv) if argv else None
        setup = setup_of(recipe, argv) if argv else None
        found.append(GroupScaling(group=group, recipe=recipe, nodes=nodes, key=key, setup=setup))
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
        values = _history(agents, ranks[0].ref.node, view.workload_id, item.group)
        if not values:
            continue
        baseline = Baseline(key=item.key, tokens_per_s=statistics.median(values), source="measured",
                            setup=item.setup, workload_id=view.workload_id, samples=len(values))  # fmt: skip
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
