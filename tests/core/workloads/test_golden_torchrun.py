"""Golden launches for torchrun training on 1, 2 and 4 nodes, and nanochat.

Written by hand from torchrun's documentation ("torchrun (Elastic Launch)":
``--nnodes --nproc-per-node --node-rank --master-addr --master-port`` on every
node, or ``--rdzv-backend=c10d --rdzv-endpoint --rdzv-id``; ``--standalone``
on one node; ``-m`` to run a module) and nanochat's README
(``torchrun ... -m scripts.base_train`` from the checkout).
"""

from __future__ import annotations

import re

import pytest

from sparksync.core.workloads.builtin_recipes import builtin_recipes
from sparksync.core.workloads.errors import RecipeError
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, nodes, sparks, summary

NANOCHAT_LINE = (
    "step 00009/00010 (90.00%) | loss: 7.620000 | lrm: 1.00 | dt: 110.00ms | tok/sec: 4,649 | "
    "bf16_mfu: 0.31 | epoch: 1 | total time: 0.02m"
)


def recipe(count: int, rendezvous: str = "static") -> Recipe:
    return Recipe.model_validate({
        "name": "train", "engine": "torchrun", "parallelism": {"data": count}, "ports": {"rendezvous": 29500},
        "training": {"script": "train.py", "args": ["--steps", "10"], "rendezvous": rendezvous},
    })  # fmt: skip


def launches(count: int, **kw):
    return build_group("train-1", recipe(count, **kw), nodes(count), sparks(count)).ranks


def static(count: int, rank: int) -> list[str]:
    return ["torchrun", "--nnodes", str(count), "--nproc_per_node", "1", "--node_rank", str(rank),
            "--master_addr", "192.168.100.11", "--master_port", "29500",
            "--local_addr", f"192.168.100.1{rank + 1}", "train.py", "--steps", "10"]  # fmt: skip


def test_one_node_is_standalone():
    assert [summary(r) for r in launches(1)] == [
        {"node": "spark-1", "rank": 0, "role": "torchrun", "stage": 0,
         "argv": ["torchrun", "--standalone", "--nproc_per_node", "1", "train.py", "--steps", "10"], "env": {}},
    ]  # fmt: skip


def test_two_nodes_meet_at_the_first_nodes_fabric_ip():
    assert [summary(r) for r in launches(2)] == [
        {"node": f"spark-{r + 1}", "rank": r, "role": "torchrun", "stage": 0, "argv": static(2, r),
         "env": FABRIC_ENV}
        for r in (0, 1)
    ]  # fmt: skip


def test_four_nodes():
    assert [r.argv for r in launches(4)] == [static(4, r) for r in range(4)]
    assert [r.ports for r in launches(4)] == [[29500], [], [], []]


def test_c10d_rendezvous():
    assert [r.argv for r in launches(2, rendezvous="c10d")] == [
        ["torchrun", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", "192.168.100.11:29500", "--rdzv-id", "train-1",
         "--local_addr", f"192.168.100.1{i}", "train.py", "--steps", "10"]
        for i in (1, 2)
    ]  # fmt: skip


def test_every_rank_reads_its_own_tok_per_sec():
    for launch in launches(2):
        source = launch.tokens_source
        assert (source.kind, source.scope) == ("log", "rank")
        match = re.search(source.pattern, NANOCHAT_LINE)
        assert match and match.group("tokens_per_s", "step", "loss") == ("4,649", "00009", "7.620000")


def nanochat(workdir: str) -> Recipe:
    base = builtin_recipes()["nanochat-base-train"].model_dump()
    base["training"]["workdir"] = workdir
    return Recipe.model_validate(base)


def test_nanochat_runs_base_train_as_a_module_from_the_checkout():
    head, other = build_group("nanochat-1", nanochat("/home/me/nanochat"), nodes(2), sparks(2)).ranks
    assert head.argv == [
        "torchrun",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--node_rank",
        "0",
        "--master_addr",
        "192.168.100.11",
        "--master_port",
        "29500",
        "--local_addr",
        "192.168.100.11",
        "-m",
        "scripts.base_train",
    ]
    assert other.argv[5:7] == ["--node_rank", "1"]
    assert head.cwd == other.cwd == "/home/me/nanochat"
    # nanochat prints the whole run's tok/sec on rank 0 only.
    assert (head.tokens_source.kind, head.tokens_source.scope) == ("log", "workload")
    assert other.tokens_source.kind == "none"
    assert re.search(head.tokens_source.pattern, NANOCHAT_LINE).group("tokens_per_s") == "4,649"
    assert head.readiness.kind == "log" and re.search(head.readiness.pattern, NANOCHAT_LINE)


def test_nanochat_without_a_checkout_says_which_field_to_fill():
    with pytest.raises(RecipeError, match=r"template: fill in training\.workdir \(<path of your nanochat"):
        build_group("nanochat-1", builtin_recipes()["nanochat-base-train"], nodes(2), sparks(2))
