"""Golden launches for llama.cpp on 1, 2 and 4 nodes.

Every expected argv below was written by hand from llama.cpp's documentation
(tools/server/README.md for llama-server's flags, ``--slots`` for its
per-slot progress endpoint; tools/rpc/README.md for
``rpc-server -H <host> -p <port>`` on the remote hosts and ``--rpc
host:port,...`` on the main host) and checked against ``--help`` of the build
SparkSync ships. They are not generated from the code under test.
"""

from __future__ import annotations

from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, nodes, sparks, summary

# ggml's gdb backtrace on abort is turned off (see commands/llamacpp.py).
NO_BACKTRACE = {"GGML_NO_BACKTRACE": "1"}
ENV = {**FABRIC_ENV, **NO_BACKTRACE}


def recipe(pipeline: int) -> Recipe:
    return Recipe.model_validate({
        "name": "qwen", "engine": "llama.cpp", "model": "/models/qwen.gguf", "served_name": "qwen",
        "parallelism": {"pipeline": pipeline}, "ports": {"http": 8080, "rpc": 50052},
        "llamacpp": {"context": 8192, "parallel": 2, "gpu_layers": 999},
    })  # fmt: skip


def launches(count: int):
    return build_group("qwen-1", recipe(count), nodes(count), sparks(count)).ranks


SERVER_HEAD = [
    "llama-server", "-m", "/models/qwen.gguf", "--alias", "qwen", "--host", "127.0.0.1", "--port", "8080",
    "-c", "8192", "-np", "2", "-ngl", "999",
]  # fmt: skip


def test_one_node_runs_llama_server_alone_without_fabric():
    assert [summary(r) for r in launches(1)] == [
        {"node": "spark-1", "rank": 0, "role": "llama-server", "stage": 0,
         "argv": [*SERVER_HEAD, "--metrics", "--slots"], "env": NO_BACKTRACE},
    ]  # fmt: skip


def test_two_nodes_put_an_rpc_server_on_the_second_and_point_the_head_at_it():
    assert [summary(r) for r in launches(2)] == [
        {"node": "spark-2", "rank": 1, "role": "rpc-server", "stage": 0,
         "argv": ["rpc-server", "-H", "192.168.100.12", "-p", "50052"], "env": ENV},
        {"node": "spark-1", "rank": 0, "role": "llama-server", "stage": 1,
         "argv": [*SERVER_HEAD, "--rpc", "192.168.100.12:50052", "--metrics", "--slots"], "env": ENV},
    ]  # fmt: skip


def test_four_nodes_list_three_rpc_servers_in_rank_order():
    rpc = ["rpc-server", "-H", None, "-p", "50052"]
    expected = [
        {"node": f"spark-{i}", "rank": i - 1, "role": "rpc-server", "stage": 0,
         "argv": [*rpc[:2], f"192.168.100.1{i}", *rpc[3:]], "env": ENV}
        for i in (2, 3, 4)
    ] + [
        {"node": "spark-1", "rank": 0, "role": "llama-server", "stage": 1,
         "argv": [*SERVER_HEAD, "--rpc", "192.168.100.12:50052,192.168.100.13:50052,192.168.100.14:50052",
                  "--metrics", "--slots"], "env": ENV},
    ]  # fmt: skip
    assert [summary(r) for r in launches(4)] == expected


def test_rpc_servers_are_probed_over_tcp_and_the_head_over_http():
    rpc, head = launches(2)
    assert (rpc.readiness.kind, rpc.readiness.host, rpc.readiness.port) == ("tcp", "192.168.100.12", 50052)
    assert rpc.ports == [50052] and rpc.tokens_source.kind == "none"
    assert (head.readiness.kind, head.readiness.port, head.readiness.path) == ("http", 8080, "/health")
    assert head.ports == [8080]
    assert head.tokens_source.model_dump(include={
        "kind", "port", "path", "decode_counter", "prefill_counter", "slots_path"}) == {
        "kind": "prometheus", "port": 8080, "path": "/metrics", "slots_path": "/slots",
        "decode_counter": "llamacpp:tokens_predicted_total", "prefill_counter": "llamacpp:prompt_tokens_total",
    }  # fmt: skip
    assert [r.log_name for r in (rpc, head)] == ["qwen-1.1.rpc-server.log", "qwen-1.0.llama-server.log"]
