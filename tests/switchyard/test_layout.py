"""The published layout: its plans on 8, 4 and 2 nodes, the memory check over them, and the gateway's config."""

from __future__ import annotations

import pytest

from sparksync.core.planner.fit import GB, NodeMemory
from sparksync.core.workloads.errors import MemoryFitError, PlanError
from sparksync.core.workloads.memory_fit import require_fit
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.recipe_files import find_recipe
from sparksync.switchyard.config import load_config, save_config
from sparksync.switchyard.layout import LARGE_RECIPE, SMALL_RECIPE, gateway_config, layout_plan

NODES = [f"spark-{i}" for i in range(1, 9)]


def recipes(large_engine: str = "llamacpp") -> tuple[Recipe, Recipe]:
    large = (find_recipe("llamacpp-rpc").updated(model="/models/qwen.gguf", served_name="qwen3.8-flash-next")
             if large_engine == "llamacpp" else find_recipe("vllm-ray").updated(model="Qwen/Qwen3.8-Flash-Next"))  # fmt: skip
    small = find_recipe("llamacpp-single").updated(model="/models/minicpm.gguf", served_name="minicpm5-2b")
    return large, small


def test_eight_nodes_take_the_published_shape():
    plan, made, form = layout_plan(*recipes(), NODES)
    assert form.describe() == "3 x large on 2 node(s) + 2 x small on 1 node(s)"
    assert [(gid, g.nodes) for gid, g in zip(plan.group_ids(), plan.groups)] == [
        ("switchyard-large-1", ["spark-1", "spark-2"]), ("switchyard-large-2", ["spark-3", "spark-4"]),
        ("switchyard-large-3", ["spark-5", "spark-6"]),
        ("switchyard-small-1", ["spark-7"]), ("switchyard-small-2", ["spark-8"]),
    ]  # fmt: skip
    large, small = made[LARGE_RECIPE], made[SMALL_RECIPE]
    assert (large.parallelism.pipeline, large.parallelism.tensor, large.parallelism.replicas) == (2, 1, 3)
    assert (small.nodes_per_replica, small.parallelism.replicas) == (1, 2)
    assert large.model == "/models/qwen.gguf" and large.http_host == "127.0.0.1"  # the rest as the recipe says


def test_the_scaled_down_forms_and_a_vllm_large_model():
    plan, made, _ = layout_plan(*recipes("vllm"), NODES[:4], gateway_on_node=True)
    assert [g.nodes for g in plan.groups] == [["spark-1", "spark-2"], ["spark-3"], ["spark-4"]]
    large = made[LARGE_RECIPE]
    assert (large.parallelism.tensor, large.parallelism.pipeline, large.parallelism.replicas) == (2, 1, 1)
    # A gateway on a node reaches the engines at their nodes' addresses: they listen beyond loopback.
    assert {r.http_host for r in made.values()} == {"0.0.0.0"}
    plan, made, form = layout_plan(*recipes(), NODES[:2])
    assert [g.nodes for g in plan.groups] == [["spark-1"], ["spark-2"]] and form.large_nodes == 1
    for count in (1, 3, 5, 9):
        with pytest.raises(PlanError, match="choose 2, 4 or 8 nodes"):
            layout_plan(*recipes(), [f"n{i}" for i in range(count)])
    with pytest.raises(PlanError, match="named twice"):
        layout_plan(*recipes(), ["a", "b", "a", "c"])
    with pytest.raises(PlanError, match="does not serve a model"):
        layout_plan(find_recipe("torchrun"), recipes()[1], NODES[:2])


def test_the_memory_check_refuses_a_large_model_its_nodes_cannot_hold():
    """A 235 B model in bf16 (470 GB) on 2 nodes of 128 GB each is short; 2 B in bf16 fits a node."""
    large, small = recipes()
    large = large.updated(memory={"model": {"params": 235e9, "quant": "bf16"}})
    small = small.updated(memory={"model": {"params": 2e9, "quant": "bf16"}})
    plan, made, _ = layout_plan(large, small, NODES)
    memory = {n: NodeMemory(name=n, total_bytes=int(121.7 * 2**30), free_bytes=int(115 * GB), source="telemetry")
              for n in NODES}  # fmt: skip
    with pytest.raises(MemoryFitError) as refused:
        require_fit(plan, made, memory)
    message = str(refused.value)
    assert "switchyard-large-1 (switchyard-large): spark-1 needs" in message and "short" in message
    assert "switchyard-small" not in message  # the small replicas fit
    fits = require_fit(*layout_plan(large.updated(memory={"model": {"params": 27e9, "quant": "nvfp4"}}), small,
                                    NODES)[:2], memory)  # fmt: skip
    assert [f.status for f in fits] == ["fits"] * 5


def test_the_gateways_config_follows_the_two_recipes(tmp_path):
    _, made, _ = layout_plan(*recipes(), NODES)
    config = gateway_config(made, {"kind": "fixed_share", "large_share": "1/4"}, port=8500)
    assert config.workload_pools() == {"small": SMALL_RECIPE, "large": LARGE_RECIPE}
    assert config.upstream_model("large") == "qwen3.8-flash-next" and config.upstream_model("small") == "minicpm5-2b"
    assert config.listen.port == 8500 and str(config.policy.large_share) == "1/4"
    for name in ("switchyard.toml", "switchyard.json"):
        save_config(config, tmp_path / name)
        assert load_config(tmp_path / name) == config  # written as a person would, read back the same
    rules = gateway_config(made, {"kind": "rules", "threshold": 1.5})
    assert rules.policy.kind == "rules" and rules.policy.threshold == 1.5


def test_cli_layout_refuses_before_reaching_any_node(tmp_path):
    from click.testing import CliRunner

    from sparksync.cli.main import cli

    base = ["switchyard", "layout", "--large", "llamacpp-rpc", "--small", "llamacpp-single"]
    three = CliRunner().invoke(cli, [*base, "--nodes", "a,b,c"])
    assert three.exit_code == 2 and "choose 2, 4 or 8 nodes" in three.stderr
    taken = tmp_path / "switchyard.toml"
    taken.write_text("# mine\n")
    kept = CliRunner().invoke(cli, [*base, "--nodes", "a,b", "--config-out", str(taken)])
    assert kept.exit_code != 0 and "pass --force to replace it" in kept.stderr
    assert taken.read_text() == "# mine\n"
