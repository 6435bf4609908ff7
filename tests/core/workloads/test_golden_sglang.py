"""Golden launches for SGLang on 1, 2 and 4 nodes.

Written by hand from SGLang's multi-node deployment page (the same
``python3 -m sglang.launch_server --model-path M --tp N --dist-init-addr
<first node>:<port> --nnodes N --node-rank R`` on every node), its server
arguments and its production-metrics page (``--enable-metrics``).
"""

from __future__ import annotations

from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, nodes, sparks, summary


def launches(count: int):
    recipe = Recipe.model_validate({
        "name": "sglang", "engine": "sglang", "model": "Qwen/Qwen3-8B",
        "parallelism": {"tensor": count}, "ports": {"http": 30000, "rendezvous": 20000},
    })  # fmt: skip
    return build_group("sglang-1", recipe, nodes(count), sparks(count)).ranks


def server(tp: int, *multi: str) -> list[str]:
    return ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--host", "127.0.0.1",
            "--port", "30000", "--tp", str(tp), *multi, "--enable-metrics"]  # fmt: skip


def multi(count: int, rank: int) -> list[str]:
    return ["--nnodes", str(count), "--node-rank", str(rank), "--dist-init-addr", "192.168.100.11:20000"]


def test_one_node_has_no_multi_node_flags():
    assert [summary(r) for r in launches(1)] == [
        {"node": "spark-1", "rank": 0, "role": "sglang", "stage": 0, "argv": server(1), "env": {}},
    ]


def test_two_nodes_run_the_same_command_but_the_rank():
    assert [summary(r) for r in launches(2)] == [
        {"node": f"spark-{r + 1}", "rank": r, "role": "sglang", "stage": 0, "argv": server(2, *multi(2, r)),
         "env": FABRIC_ENV}
        for r in (0, 1)
    ]  # fmt: skip


def test_four_nodes():
    assert [summary(r) for r in launches(4)] == [
        {"node": f"spark-{r + 1}", "rank": r, "role": "sglang", "stage": 0, "argv": server(4, *multi(4, r)),
         "env": FABRIC_ENV}
        for r in range(4)
    ]  # fmt: skip


def test_only_the_head_serves_and_counts_tokens():
    head, other = launches(2)
    assert (head.readiness.kind, head.readiness.path, head.ports) == ("http", "/health", [30000, 20000])
    assert head.tokens_source.decode_counter == "sglang:generation_tokens_total"
    assert head.tokens_source.prefill_counter == "sglang:prompt_tokens_total"
    assert (other.readiness.kind, other.ports, other.tokens_source.kind) == ("process", [], "none")
