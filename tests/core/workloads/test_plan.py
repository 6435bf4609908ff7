"""Placement plans: the seed's 8-node layout, overlaps, wrong sizes and a ninth node."""

from __future__ import annotations

import pytest

from sparksync.core.workloads.errors import PlanError
from sparksync.core.workloads.plan import Group, Plan, plan_in_order, validate_plan
from sparksync.core.workloads.recipe import Recipe

QWEN = Recipe.model_validate({
    "name": "qwen", "engine": "vllm", "model": "Qwen/Qwen3.8-Flash-Next",
    "parallelism": {"tensor": 2, "replicas": 3},
})  # fmt: skip
MINICPM = Recipe.model_validate({
    "name": "minicpm", "engine": "llama.cpp", "model": "/models/minicpm5-2b.gguf", "parallelism": {"replicas": 2},
})  # fmt: skip
RECIPES = {"qwen": QWEN, "minicpm": MINICPM}
CLUSTER = [f"n{i}" for i in range(1, 9)]

SEED = Plan(groups=[
    Group(recipe="qwen", nodes=["n1", "n2"]),
    Group(recipe="qwen", nodes=["n3", "n4"]),
    Group(recipe="qwen", nodes=["n5", "n6"]),
    Group(recipe="minicpm", nodes=["n7"]),
    Group(recipe="minicpm", nodes=["n8"]),
])  # fmt: skip


def test_the_seeds_layout_is_a_valid_plan():
    validate_plan(SEED, RECIPES, CLUSTER)
    assert SEED.group_ids() == ["qwen-1", "qwen-2", "qwen-3", "minicpm-1", "minicpm-2"]
    assert SEED.nodes() == CLUSTER
    assert [g.head for g in SEED.groups] == ["n1", "n3", "n5", "n7", "n8"]


def test_filling_nodes_in_order_gives_the_seeds_layout():
    assert plan_in_order([QWEN, MINICPM], CLUSTER) == SEED


def test_filling_needs_enough_nodes():
    with pytest.raises(PlanError, match=r"need 8 nodes \(qwen: 3 x 2, minicpm: 2 x 1\) but only 7"):
        plan_in_order([QWEN, MINICPM], CLUSTER[:7])


def problems(plan: Plan, recipes=RECIPES, cluster=CLUSTER) -> str:
    with pytest.raises(PlanError) as caught:
        validate_plan(plan, recipes, cluster)
    return str(caught.value)


def test_a_node_in_two_groups_is_refused():
    plan = SEED.model_copy(deep=True)
    plan.groups[3].nodes = ["n6"]
    assert "node n6 is in qwen-3 and minicpm-1" in problems(plan)


def test_a_node_twice_in_one_group_is_refused():
    plan = SEED.model_copy(deep=True)
    plan.groups[0].nodes = ["n1", "n1"]
    assert "node n1 is in qwen-1 and qwen-1" in problems(plan)


def test_group_size_must_match_the_recipes_parallelism():
    plan = SEED.model_copy(deep=True)
    plan.groups[1].nodes = ["n3"]
    assert "qwen-2 has 1 node(s) but recipe 'qwen' needs 2 (tensor 2 x pipeline 1 x data 1)" in problems(plan)


def test_a_ninth_node_is_refused():
    plan = SEED.model_copy(deep=True)
    plan.groups.append(Group(recipe="minicpm", nodes=["n9"]))
    three = Recipe.model_validate({**MINICPM.model_dump(), "parallelism": {"replicas": 3}})
    message = problems(plan, {**RECIPES, "minicpm": three}, cluster=None)
    assert "it uses 9 nodes" in message and "a cluster holds at most 8: remove 1." in message


def test_replica_count_must_match_the_recipe():
    plan = Plan(groups=SEED.groups[:4])
    message = problems(plan)
    assert "recipe 'minicpm' asks for 2 replica(s) but the plan has 1 group(s)" in message


def test_unknown_recipe_and_unpaired_node_are_named():
    plan = Plan(groups=[Group(recipe="ghost", nodes=["n1"]), Group(recipe="minicpm", nodes=["x9"]),
                        Group(recipe="minicpm", nodes=["n2"])])  # fmt: skip
    message = problems(plan)
    assert "ghost-1: no recipe named 'ghost'" in message
    assert "x9 not in the cluster" in message


def test_every_problem_is_listed_at_once():
    plan = Plan(groups=[Group(recipe="qwen", nodes=["n1"]), Group(recipe="qwen", nodes=["n1", "n2"])])
    message = problems(plan)
    assert "node n1 is in qwen-1 and qwen-2" in message
    assert "qwen-1 has 1 node(s)" in message
    assert "asks for 3 replica(s) but the plan has 2" in message


def test_parallelism_beyond_eight_nodes_is_refused_in_the_recipe():
    with pytest.raises(ValueError, match="3 replica.s. of 4 node.s. need 12 nodes; a cluster has at most 8"):
        Recipe.model_validate({"name": "big", "engine": "vllm", "parallelism": {"tensor": 4, "replicas": 3}})
