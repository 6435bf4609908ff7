"""Golden launches for TensorRT-LLM on 1, 2 and 4 nodes.

Written by hand from trtllm-serve's command reference (``trtllm-serve <model>
--backend pytorch --tp_size N --host --port``), NVIDIA's DGX Spark TRT-LLM
playbook ("Run on two Sparks": ``mpirun -x ... trtllm-llmapi-launch
trtllm-serve $MODEL --tp_size 2 --backend pytorch``, run on the primary node
only) and Open MPI's mpirun(1) (``-H host1,host2 -np N -x NAME``).
"""

from __future__ import annotations

import pytest

from sparksync.core.workloads.errors import FabricError
from sparksync.core.workloads.fabric import Fabric, NodeFabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, net, nodes, rdma, spark, sparks, summary


def recipe(count: int) -> Recipe:
    return Recipe.model_validate({
        "name": "trt", "engine": "trtllm", "model": "nvidia/Qwen3-8B-FP4",
        "parallelism": {"tensor": count}, "ports": {"http": 8355},
    })  # fmt: skip


def launches(count: int):
    return build_group("trt-1", recipe(count), nodes(count), sparks(count)).ranks


def serve(tp: int) -> list[str]:
    return ["trtllm-serve", "nvidia/Qwen3-8B-FP4", "--host", "127.0.0.1", "--port", "8355", "--backend", "pytorch",
            "--tp_size", str(tp)]  # fmt: skip


EXPORTED = ["-x", "GLOO_SOCKET_IFNAME", "-x", "NCCL_IB_HCA", "-x", "NCCL_SOCKET_IFNAME",
            "-x", "OMPI_MCA_btl_tcp_if_include", "-x", "TP_SOCKET_IFNAME", "-x", "UCX_NET_DEVICES"]  # fmt: skip


def test_one_node_is_a_plain_trtllm_serve():
    assert [summary(r) for r in launches(1)] == [
        {"node": "spark-1", "rank": 0, "role": "trtllm-serve", "stage": 0, "argv": serve(1), "env": {}},
    ]


def test_two_nodes_are_one_mpirun_on_the_head():
    assert [summary(r) for r in launches(2)] == [
        {"node": "spark-1", "rank": 0, "role": "trtllm-serve", "stage": 0,
         "argv": ["mpirun", "-H", "192.168.100.11,192.168.100.12", "-np", "2", *EXPORTED,
                  "trtllm-llmapi-launch", *serve(2)],
         "env": FABRIC_ENV},
    ]  # fmt: skip


def test_four_nodes():
    hosts = "192.168.100.11,192.168.100.12,192.168.100.13,192.168.100.14"
    assert [summary(r) for r in launches(4)] == [
        {"node": "spark-1", "rank": 0, "role": "trtllm-serve", "stage": 0,
         "argv": ["mpirun", "-H", hosts, "-np", "4", *EXPORTED, "trtllm-llmapi-launch", *serve(4)],
         "env": FABRIC_ENV},
    ]  # fmt: skip


def test_recipe_env_is_exported_to_every_rank_too():
    with_token = recipe(2).model_copy(update={"env": {"HF_TOKEN": "hf_x"}})
    (launch,) = build_group("trt-1", with_token, nodes(2), sparks(2)).ranks
    assert launch.argv[5:7] == ["-x", "GLOO_SOCKET_IFNAME"] and ["-x", "HF_TOKEN"] == launch.argv[7:9]
    assert launch.env["HF_TOKEN"] == "hf_x"


def test_nodes_with_differently_named_interfaces_are_refused():
    odd = NodeFabric.from_samples("spark-2", [net("enP2p1s0f0np0", "192.168.100.12")], [rdma("roceP2p1s0f0")])
    fabric = Fabric.of([spark(1), odd])
    with pytest.raises(FabricError, match="spark-2 name their fabric interfaces .* differently from spark-1"):
        build_group("trt-1", recipe(2), nodes(2), fabric)
