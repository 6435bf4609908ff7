"""Placement plans: the cluster's nodes, split into groups, one group per replica.

The seed's layout on 8 nodes is a plan of five groups: three replicas of a
large model on two nodes each, and two replicas of a small model on one
node each::

    Plan(groups=[
        Group(recipe="qwen", nodes=["n1", "n2"]), Group(recipe="qwen", nodes=["n3", "n4"]),
        Group(recipe="qwen", nodes=["n5", "n6"]),
        Group(recipe="minicpm", nodes=["n7"]), Group(recipe="minicpm", nodes=["n8"]),
    ])

The first node of a group is its head: rank 0 and the rendezvous address.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sparksync.core.agents.this_computer import canonical_name
from sparksync.core.workloads.errors import PlanError
from sparksync.core.workloads.recipe import MAX_NODES, Recipe

PLAN_VERSION = 1


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipe: str
    nodes: list[str] = Field(min_length=1, description="In rank order: the first is the head.")

    @field_validator("nodes")
    @classmethod
    def _one_name_for_this_computer(cls, nodes: list[str]) -> list[str]:
        # "local" and "this computer" are one node: records and the faces name it one way.
        return [canonical_name(node) for node in nodes]

    @property
    def head(self) -> str:
        return self.nodes[0]


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(PLAN_VERSION, ge=1)
    groups: list[Group] = Field(min_length=1)

    def group_ids(self) -> list[str]:
        """'<recipe>-<n>', numbering each recipe's replicas from 1 in plan order."""
        seen: Counter[str] = Counter()
        ids = []
        for group in self.groups:
            seen[group.recipe] += 1
            ids.append(f"{group.recipe}-{seen[group.recipe]}")
        return ids

    def nodes(self) -> list[str]:
        """Every node the plan uses, in plan order."""
        return list(dict.fromkeys(n for g in self.groups for n in g.nodes))


def plan_in_order(recipes: Sequence[Recipe], nodes: Sequence[str]) -> Plan:
    """Fill ``nodes`` in order: each recipe's replicas, each replica its nodes_per_replica."""
    needed = sum(r.nodes_per_replica * r.parallelism.replicas for r in recipes)
    if needed > len(nodes):
        raise PlanError(
            f"the recipes need {needed} nodes ({_needs(recipes)}) but only {len(nodes)} were given: "
            "give more nodes, or fewer replicas."
        )
    groups, at = [], 0
    for recipe in recipes:
        for _ in range(recipe.parallelism.replicas):
            groups.append(Group(recipe=recipe.name, nodes=list(nodes[at : at + recipe.nodes_per_replica])))
            at += recipe.nodes_per_replica
    return Plan(groups=groups)


def validate_plan(plan: Plan, recipes: Mapping[str, Recipe], cluster: Sequence[str] | None = None) -> None:
    """Raise PlanError listing every problem: a plan either runs whole or not at all."""
    problems = (
        _too_many_nodes(plan)
        + _unknown_nodes(plan, cluster)
        + _overlaps(plan)
        + _recipe_problems(plan, recipes)
    )
    if problems:
        raise PlanError("the plan cannot run:\n  - " + "\n  - ".join(problems))


def _too_many_nodes(plan: Plan) -> list[str]:
    used = plan.nodes()
    if len(used) <= MAX_NODES:
        return []
    too_many = len(used) - MAX_NODES
    listed = ", ".join(used)
    return [f"it uses {len(used)} nodes ({listed}); a cluster holds at most {MAX_NODES}: remove {too_many}."]


def _unknown_nodes(plan: Plan, cluster: Sequence[str] | None) -> list[str]:
    if cluster is None:
        return []
    unknown = [n for n in plan.nodes() if n not in set(cluster)]
    if not unknown:
        return []
    return [f"{', '.join(unknown)} not in the cluster ({', '.join(cluster) or 'no nodes'}): pair them first."]


def _overlaps(plan: Plan) -> list[str]:
    where: dict[str, list[str]] = {}
    for gid, group in zip(plan.group_ids(), plan.groups):
        for node in group.nodes:
            where.setdefault(node, []).append(gid)
    return [
        f"node {node} is in {' and '.join(gids)}: a node runs one group (and once per group) at a time."
        for node, gids in where.items()
        if len(gids) > 1
    ]


def _recipe_problems(plan: Plan, recipes: Mapping[str, Recipe]) -> list[str]:
    problems = []
    for gid, group in zip(plan.group_ids(), plan.groups):
        recipe = recipes.get(group.recipe)
        if recipe is None:
            problems.append(f"{gid}: no recipe named {group.recipe!r}. Save it first, or fix the name.")
        elif len(group.nodes) != recipe.nodes_per_replica:
            problems.append(
                f"{gid} has {len(group.nodes)} node(s) but recipe {recipe.name!r} needs "
                f"{recipe.nodes_per_replica} ({recipe.parallelism.describe()}): give it "
                f"{recipe.nodes_per_replica}, or change the recipe's parallelism."
            )
    return problems + _replica_counts(plan, recipes)


def _replica_counts(plan: Plan, recipes: Mapping[str, Recipe]) -> list[str]:
    counts = Counter(g.recipe for g in plan.groups)
    return [
        f"recipe {name!r} asks for {recipes[name].parallelism.replicas} replica(s) but the plan has "
        f"{count} group(s) for it: add or remove groups, or change its replicas."
        for name, count in counts.items()
        if name in recipes and recipes[name].parallelism.replicas != count
    ]


def _needs(recipes: Sequence[Recipe]) -> str:
    return ", ".join(f"{r.name}: {r.parallelism.replicas} x {r.nodes_per_replica}" for r in recipes)
