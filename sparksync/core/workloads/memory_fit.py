"""Before launch: does each group's model fit in its own nodes' free memory?

The sums are the planner's (``sparksync.core.planner.fit.plan_on``): each
node of a replica holds weights / shards + its share of the KV cache + the
runtime overhead, against the node's MemAvailable from telemetry. A replica
split T x P ways puts 1/(T x P) of the weights on each node; data-parallel
ranks (training) each hold a whole copy, so every slice of T x P nodes is
checked on its own.

A recipe without ``memory`` numbers, or a node without a memory reading, is
reported as unchecked rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from sparksync.core.planner.fit import GB, FitPlan, NodeMemory, plan_on
from sparksync.core.workloads.errors import MemoryFitError
from sparksync.core.workloads.plan import Plan
from sparksync.core.workloads.recipe import Recipe


class GroupFit(BaseModel):
    group: str
    recipe: str
    nodes: list[str]
    status: Literal["fits", "short", "unchecked"]
    plans: list[FitPlan] = []
    reason: str = ""

    @property
    def margin_bytes(self) -> float | None:
        return min(p.margin_bytes for p in self.plans) if self.plans else None


def check_group(
    group: str, recipe: Recipe, nodes: Sequence[str], memory: Mapping[str, NodeMemory]
) -> GroupFit:
    """The planner's verdict for ``recipe`` on exactly these ``nodes``."""
    base = {"group": group, "recipe": recipe.name, "nodes": list(nodes)}
    if recipe.memory is None:
        return GroupFit(**base, status="unchecked", reason=f"recipe {recipe.name!r} gives no memory numbers")
    unread = [n for n in nodes if n not in memory]
    if unread:
        return GroupFit(**base, status="unchecked", reason=f"no memory reading from {', '.join(unread)}")
    shards = recipe.parallelism.shards
    plans = [
        plan_on(recipe.memory.model, [_named(memory, n) for n in chunk], recipe.memory.options, shards)
        for chunk in _slices(nodes, shards)
    ]
    return GroupFit(**base, status="fits" if all(p.fits for p in plans) else "short", plans=plans)


def check_plan(plan: Plan, recipes: Mapping[str, Recipe], memory: Mapping[str, NodeMemory]) -> list[GroupFit]:
    return [
        check_group(gid, recipes[g.recipe], g.nodes, memory) for gid, g in zip(plan.group_ids(), plan.groups)
    ]


def require_fit(
    plan: Plan, recipes: Mapping[str, Recipe], memory: Mapping[str, NodeMemory]
) -> list[GroupFit]:
    """Every group's verdict; raise MemoryFitError, with the numbers, when any group is short."""
    fits = check_plan(plan, recipes, memory)
    short = [f for f in fits if f.status == "short"]
    if short:
        details = "\n".join(line for f in short for line in explain_shortfall(f))
        raise MemoryFitError(
            f"not enough free memory to launch:\n{details}\n"
            "Free memory on those nodes, give the model more nodes per replica, or lower its "
            "context, concurrency or quantisation."
        )
    return fits


def explain_shortfall(fit: GroupFit) -> list[str]:
    """One line per node that is short, with what it needs and what it has."""
    lines = []
    for plan in fit.plans:
        need = (
            f"{_gb(plan.needed_bytes_per_node)} (weights {_gb(plan.weights_bytes_per_node)} + KV cache "
            f"{_gb(plan.kv_bytes_per_node)} + overhead {_gb(plan.overhead_bytes_per_node)})"
        )
        for node in plan.placement:
            if node.margin_bytes < 0:
                lines.append(
                    f"  {fit.group} ({fit.recipe}): {node.name} needs {need} but has {_gb(node.free_bytes)} "
                    f"free, {_gb(-node.margin_bytes)} short"
                )
    return lines


def _named(memory: Mapping[str, NodeMemory], node: str) -> NodeMemory:
    # The report names nodes as the plan does, whatever name the reading carried.
    return memory[node].model_copy(update={"name": node})


def _slices(nodes: Sequence[str], shards: int) -> list[list[str]]:
    return [list(nodes[i : i + shards]) for i in range(0, len(nodes), shards)]


def _gb(value: float) -> str:
    return f"{value / GB:.1f} GB"
