"""Golden launches for a custom command: placeholders filled per rank, other braces untouched."""

from __future__ import annotations

import pytest

from sparksync.core.workloads.errors import RecipeError
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, nodes, sparks, summary

ARGV = ["python3", "serve.py", "--rank", "{rank}", "--of", "{nnodes}", "--at", "{head_ip}:{rendezvous_port}",
        "--me", "{node_ip}", "--config", '{"group": "{group}", "x": {rank}}', "{unknown}"]  # fmt: skip


def recipe(count: int, **custom) -> Recipe:
    return Recipe.model_validate({
        "name": "mine", "engine": "custom", "parallelism": {"data": count},
        "custom": {"argv": ARGV, **custom}, "env": {"MY_FLAG": "1"},
    })  # fmt: skip


def expected(count: int, rank: int, ip: str) -> list[str]:
    return ["python3", "serve.py", "--rank", str(rank), "--of", str(count), "--at", f"{HEAD[count]}:29500",
            "--me", ip, "--config", f'{{"group": "mine-1", "x": {rank}}}', "{unknown}"]  # fmt: skip


HEAD = {1: "127.0.0.1", 2: "192.168.100.11", 4: "192.168.100.11"}


def test_one_node():
    (only,) = build_group("mine-1", recipe(1), nodes(1), sparks(1)).ranks
    assert summary(only) == {
        "node": "spark-1",
        "rank": 0,
        "role": "custom",
        "stage": 0,
        "argv": expected(1, 0, "127.0.0.1"),
        "env": {"MY_FLAG": "1"},
    }


@pytest.mark.parametrize("count", [2, 4])
def test_every_node_gets_its_own_rank_and_address(count):
    ranks = build_group("mine-1", recipe(count), nodes(count), sparks(count)).ranks
    assert [summary(r) for r in ranks] == [
        {"node": f"spark-{r + 1}", "rank": r, "role": "custom", "stage": 0,
         "argv": expected(count, r, f"192.168.100.1{r + 1}"), "env": {**FABRIC_ENV, "MY_FLAG": "1"}}
        for r in range(count)
    ]  # fmt: skip


def test_head_only():
    ranks = build_group("mine-1", recipe(2, head_only=True), nodes(2), sparks(2)).ranks
    assert [r.node for r in ranks] == ["spark-1"]


def test_no_command_is_refused():
    empty = Recipe.model_validate({"name": "mine", "engine": "custom"})
    with pytest.raises(RecipeError, match="has no command: set custom.argv"):
        build_group("mine-1", empty, nodes(1), sparks(1))
