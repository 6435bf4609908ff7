"""The memory check before launch: the planner's sums against each group's own nodes.

Worked by hand: a 70 B model in BF16 is 140 GB of weights; on 2 nodes each
holds 70 GB. Its KV cache (80 layers x 8 KV heads x 128 x 2 (K,V) x 2 bytes
= 327,680 B per token) over 8,192 tokens is 2.684 GB, and each of 2 nodes
holds half the KV heads: 1.342 GB. With 4 GB of overhead a node needs
75.342 GB.
"""

from __future__ import annotations

import pytest
from sparksync_agent.protocol import MemorySample

from sparksync.core.planner.fit import GB, NodeMemory
from sparksync.core.planner.model import ModelSpec
from sparksync.core.workloads.errors import MemoryFitError
from sparksync.core.workloads.memory_fit import check_group, require_fit
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.recipe import Recipe

LLAMA_70B = ModelSpec(params=70e9, quant="bf16", layers=80, kv_heads=8, head_dim=128, hidden=8192)
NEEDED_GB = 70 + 1.34217728 + 4


def recipe(name: str = "llama", **parallelism) -> Recipe:
    return Recipe.model_validate({
        "name": name, "engine": "vllm", "model": "meta-llama/Llama-3.3-70B",
        "parallelism": parallelism or {"tensor": 2}, "memory": {"model": LLAMA_70B.model_dump()},
    })  # fmt: skip


def free(**gb: float) -> dict[str, NodeMemory]:
    return {name.replace("_", "-"): NodeMemory(name="x", total_bytes=int(128 * GB), free_bytes=int(v * GB),
                                               source="telemetry") for name, v in gb.items()}  # fmt: skip


def plan(*groups: list[str], name: str = "llama") -> Plan:
    return Plan(groups=[Group(recipe=name, nodes=g) for g in groups])


def test_a_group_that_fits():
    fit = check_group("llama-1", recipe(), ["spark-1", "spark-2"], free(spark_1=120, spark_2=110))
    assert fit.status == "fits"
    assert fit.plans[0].needed_bytes_per_node == pytest.approx(NEEDED_GB * GB)
    assert fit.margin_bytes == pytest.approx((110 - NEEDED_GB) * GB)


def test_a_short_group_is_refused_with_the_numbers():
    memory = free(spark_1=120, spark_2=70, spark_3=120, spark_4=120)
    two = recipe(tensor=2, replicas=2)
    with pytest.raises(MemoryFitError) as caught:
        require_fit(plan(["spark-1", "spark-2"], ["spark-3", "spark-4"]), {"llama": two}, memory)
    message = str(caught.value)
    assert (
        "llama-1 (llama): spark-2 needs 75.3 GB (weights 70.0 GB + KV cache 1.3 GB + overhead 4.0 GB) "
        "but has 70.0 GB free, 5.3 GB short"
    ) in message
    assert "spark-1" not in message and "llama-2" not in message  # only what is short
    assert "Free memory on those nodes" in message


def test_each_group_is_checked_against_its_own_nodes_only():
    memory = free(spark_1=120, spark_2=120, spark_3=50)
    recipes = {"llama": recipe(tensor=2), "small": recipe("small", replicas=1)}
    recipes["small"] = Recipe.model_validate({
        "name": "small", "engine": "llama.cpp", "model": "/m.gguf",
        "memory": {"model": ModelSpec(params=2e9, quant="q8_0").model_dump()},
    })  # fmt: skip
    layout = Plan(
        groups=[Group(recipe="llama", nodes=["spark-1", "spark-2"]), Group(recipe="small", nodes=["spark-3"])]
    )
    fits = require_fit(layout, recipes, memory)
    assert [f.status for f in fits] == ["fits", "fits"]


def test_unchecked_when_numbers_or_readings_are_missing():
    bare = Recipe.model_validate(
        {"name": "bare", "engine": "vllm", "model": "m", "parallelism": {"tensor": 2}}
    )
    fit = check_group("bare-1", bare, ["a", "b"], free(a=10, b=10))
    assert (fit.status, fit.reason) == ("unchecked", "recipe 'bare' gives no memory numbers")
    fit = check_group("llama-1", recipe(), ["a", "b"], free(a=120))
    assert (fit.status, fit.reason) == ("unchecked", "no memory reading from b")
    assert require_fit(plan(["a", "b"], name="bare"), {"bare": bare}, {})[0].status == "unchecked"


def test_data_parallel_ranks_each_hold_the_whole_model():
    # 7 B in BF16 = 14 GB + 4 GB overhead per node (no KV shape given: not counted).
    small = ModelSpec(params=7e9, quant="bf16")
    train = Recipe.model_validate({
        "name": "train", "engine": "torchrun", "parallelism": {"data": 2}, "training": {"script": "t.py"},
        "memory": {"model": small.model_dump()},
    })  # fmt: skip
    fit = check_group("train-1", train, ["a", "b"], free(a=20, b=17))
    assert [p.needed_bytes_per_node for p in fit.plans] == [pytest.approx(18 * GB)] * 2
    assert fit.status == "short" and fit.plans[1].placement[0].name == "b"


def test_telemetry_readings_are_used_as_memavailable():
    sample = MemorySample(total_bytes=int(128 * GB), used_bytes=int(40 * GB), available_bytes=int(88 * GB),
                          free_bytes=int(10 * GB), cached_bytes=0, buffers_bytes=0, swap_total_bytes=0,
                          swap_used_bytes=0)  # fmt: skip
    memory = {n: NodeMemory.from_sample(n, sample) for n in ("a", "b")}
    assert check_group("llama-1", recipe(), ["a", "b"], memory).status == "fits"  # 75.3 of 88 GB
