"""From the seed's plan to every rank's launch, on a fabric of eight fake Sparks."""

from __future__ import annotations

import pytest

from sparksync.core.workloads.commands import llamacpp
from sparksync.core.workloads.errors import PlanError, RecipeError
from sparksync.core.workloads.launches import plan_launches, shell_command
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, nodes, sparks

QWEN = Recipe.model_validate({
    "name": "qwen", "engine": "vllm", "model": "Qwen/Qwen3.8-Flash-Next", "parallelism": {"tensor": 2, "replicas": 3},
})  # fmt: skip
MINICPM = Recipe.model_validate({
    "name": "minicpm", "engine": "llama.cpp", "model": "/models/minicpm5-2b.gguf", "parallelism": {"replicas": 2},
})  # fmt: skip
RECIPES = {"qwen": QWEN, "minicpm": MINICPM}
SEED = Plan(groups=[
    Group(recipe="qwen", nodes=["spark-1", "spark-2"]), Group(recipe="qwen", nodes=["spark-3", "spark-4"]),
    Group(recipe="qwen", nodes=["spark-5", "spark-6"]),
    Group(recipe="minicpm", nodes=["spark-7"]), Group(recipe="minicpm", nodes=["spark-8"]),
])  # fmt: skip


def test_the_seeds_layout_becomes_one_launch_list_per_replica():
    groups = plan_launches(SEED, RECIPES, sparks(8), cluster=nodes(8))
    assert [(g.group, g.nodes) for g in groups] == [
        ("qwen-1", ["spark-1", "spark-2"]), ("qwen-2", ["spark-3", "spark-4"]), ("qwen-3", ["spark-5", "spark-6"]),
        ("minicpm-1", ["spark-7"]), ("minicpm-2", ["spark-8"]),
    ]  # fmt: skip
    qwen2 = groups[1]
    assert [[(r.node, r.role) for r in stage] for stage in qwen2.stages] == [
        [("spark-3", "ray-head")],
        [("spark-4", "ray-worker")],
        [("spark-3", "vllm-serve")],
    ]
    # Each replica meets at its own head's fabric IP.
    assert qwen2.ranks[1].argv[3:5] == ["--address", "192.168.100.13:6379"]
    assert qwen2.ranks[2].env["RAY_ADDRESS"] == "192.168.100.13:6379"
    assert qwen2.ranks[0].env == {
        **FABRIC_ENV,
        "VLLM_HOST_IP": "192.168.100.13",
        "RAY_memory_monitor_refresh_ms": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": qwen2.ranks[1].env["RAY_AUTH_TOKEN"],
    }
    # Each replica is a Ray cluster of its own, with a token of its own.
    assert groups[0].ranks[0].env["RAY_AUTH_TOKEN"] != qwen2.ranks[0].env["RAY_AUTH_TOKEN"]
    # The small model's replicas are single-node llama-servers that need no fabric.
    for group in groups[3:]:
        (only,) = group.ranks
        assert only.role == "llama-server" and only.env == llamacpp.ENGINE_ENV and "--rpc" not in only.argv


def test_an_invalid_plan_builds_nothing():
    bad = Plan(groups=[*SEED.groups[:4], Group(recipe="minicpm", nodes=["spark-1"])])
    with pytest.raises(PlanError, match="node spark-1 is in qwen-1 and minicpm-2"):
        plan_launches(bad, RECIPES, sparks(8))


def test_a_launch_prints_as_a_shell_line_with_secrets_hidden():
    recipe = Recipe.model_validate({
        "name": "t", "engine": "torchrun", "training": {"script": "train.py", "workdir": "/home/me/my code"},
        "env": {"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "k", "OMP_NUM_THREADS": "4"},
    })  # fmt: skip
    (launch,) = plan_launches(Plan(groups=[Group(recipe="t", nodes=["a"])]), {"t": recipe}, sparks(1))[
        0
    ].ranks
    assert shell_command(launch) == (
        "cd '/home/me/my code' && env 'HF_TOKEN=<hidden>' 'WANDB_API_KEY=<hidden>' OMP_NUM_THREADS=4 "
        "torchrun --standalone --nproc_per_node 1 train.py"
    )
    assert "HF_TOKEN=hf_abc" in shell_command(launch, reveal=True)


def test_recipes_are_updated_with_validation():
    assert MINICPM.updated(model="/other.gguf").model == "/other.gguf"
    with pytest.raises(RecipeError, match="parallelism"):
        MINICPM.updated(parallelism={"tensor": 2})
