"""What the Workloads panel asks to launch, as one small model: a recipe, nodes in order, replicas, a model.

The panel (and the tray's "start last workload") keep this choice so the
same launch can be made again (restart). ``resolve_choice`` turns it into a
plan and its recipe as ``launch_request.resolve`` does for the CLI, with one
addition: ``replicas`` splits the chosen nodes into that many equal groups,
each running one copy of the recipe stretched over its own nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sparksync.core.planner.fit import GB
from sparksync.core.planner.model import ModelSpec
from sparksync.core.workloads.errors import PlanError, RecipeNotFoundError
from sparksync.core.workloads.launch_request import apply_overrides, fit_to_nodes
from sparksync.core.workloads.memory_fit import GroupFit
from sparksync.core.workloads.plan import Plan, plan_in_order
from sparksync.core.workloads.recipe import Recipe


class LaunchChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipe: str
    nodes: list[str] = Field(description="In rank order: the first node of each group is its head.")
    replicas: int = Field(1, ge=1, description="Groups the nodes are split into, one copy each.")
    model: str = Field("", description="The model path on the head node(s); empty keeps the recipe's.")
    params_b: float | None = Field(None, gt=0, description="Model size in billions, for the memory check.")
    quant: str | None = Field(None, description="Its quantisation (bf16, q4_k_m...), with params_b.")
    http_port: int | None = Field(None, ge=1, le=65535, description="The engine's HTTP port; empty keeps the recipe's.")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Any other recipe fields, nested as `--set` gives them."
    )

    def describe(self) -> str:
        return f"{self.recipe} on {', '.join(self.nodes)}"


def groups_of(nodes: Sequence[str], replicas: int) -> list[list[str]]:
    """The chosen nodes cut into ``replicas`` equal groups, in order; refuses an uneven split."""
    if not nodes:
        raise PlanError("choose at least one node.")
    if replicas < 1 or len(nodes) % replicas:
        raise PlanError(
            f"{len(nodes)} node(s) cannot be split into {replicas} equal groups: "
            "choose a multiple of the number of replicas."
        )
    size = len(nodes) // replicas
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def overrides_of(choice: LaunchChoice) -> dict[str, Any]:
    changes: dict[str, Any] = dict(choice.settings)
    if choice.model.strip():
        changes["model"] = choice.model.strip()
    if choice.http_port is not None:
        changes["ports"] = {"http": choice.http_port}
    if choice.params_b is not None:
        spec = ModelSpec(params=choice.params_b * 1e9, quant=choice.quant or "bf16")
        changes["memory"] = {"model": spec.model_dump(exclude_none=True)}
    return changes


def resolve_choice(choice: LaunchChoice, recipes: Mapping[str, Recipe]) -> tuple[Plan, dict[str, Recipe]]:
    """The plan and recipe for the choice: each group runs one replica over all its own nodes."""
    base = recipes.get(choice.recipe)
    if base is None:
        known = ", ".join(sorted(recipes)) or "none"
        raise RecipeNotFoundError(f"no recipe named {choice.recipe!r}. Known recipes: {known}.")
    groups = groups_of(choice.nodes, choice.replicas)
    recipe = apply_overrides(base, overrides_of(choice))
    one = recipe.updated(parallelism={**recipe.parallelism.model_dump(), "replicas": 1})
    one = fit_to_nodes(one, len(groups[0]))
    if one.nodes_per_replica != len(groups[0]):
        raise PlanError(
            f"recipe {recipe.name} needs {one.nodes_per_replica} node(s) per group "
            f"({one.parallelism.describe()}), but each group has {len(groups[0])}."
        )
    final = one.updated(parallelism={**one.parallelism.model_dump(), "replicas": choice.replicas})
    return plan_in_order([final], choice.nodes), {final.name: final}


def fit_lines(fits: Sequence[GroupFit]) -> list[str]:
    """Each group's memory check in plain words: what one node needs, what each node has free."""
    lines = []
    for fit in fits:
        where = f"{fit.group} on {', '.join(fit.nodes)}"
        if fit.status == "unchecked":
            lines.append(f"{where}: not checked ({fit.reason}).")
            continue
        for plan in fit.plans:
            free = ", ".join(f"{n.name} {_gb(n.free_bytes)}" for n in plan.placement)
            verdict = "fits" if plan.fits else f"short by {_gb(-plan.margin_bytes)}"
            lines.append(
                f"{where}: needs {_gb(plan.needed_bytes_per_node)} per node, free {free}: {verdict}."
            )
    return lines


def _gb(value: float) -> str:
    return f"{value / GB:.1f} GB"
