"""The cluster ports of multi-node engines: bound to the fabric address, secrets in the environment only.

Checked on the generated launches of every engine that talks between nodes:
no launch binds a wildcard address, llama.cpp's rpc-server (which has no
authentication at all) listens on its node's fabric address only, Ray
runs with token authentication and its dashboard on loopback, and no value
of a secret-named variable ever appears on a command line.
"""

from __future__ import annotations

import re

import pytest

from sparksync.core.workloads.commands.common import WILDCARD_HOSTS
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import nodes, sparks

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
FABRIC = {f"spark-{i}": f"192.168.100.1{i}" for i in range(1, 5)}

RECIPES = {
    "llamacpp": {"engine": "llama.cpp", "model": "/models/m.gguf", "parallelism": {"tensor": 1, "pipeline": 4}},
    "vllm": {"engine": "vllm", "model": "Qwen/Qwen3-8B", "parallelism": {"tensor": 4}},
    "vllm-container": {"engine": "vllm", "model": "Qwen/Qwen3-8B", "parallelism": {"tensor": 4},
                       "container": {"image": "nvcr.io/nvidia/vllm:25.11-py3"}},
    "torchrun": {"engine": "torchrun", "parallelism": {"data": 4}, "training": {"script": "train.py"}},
    "torchrun-c10d": {"engine": "torchrun", "parallelism": {"data": 4},
                      "training": {"script": "train.py", "rendezvous": "c10d"}},
}  # fmt: skip


def launches(kind: str):
    recipe = Recipe.model_validate({"name": kind, **RECIPES[kind]})
    return build_group(f"{kind}-1", recipe, nodes(4), sparks(4)).ranks


@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_no_launch_binds_a_wildcard_address_or_carries_a_secret_on_its_command_line(kind):
    for launch in launches(kind):
        argv = [*launch.argv, *launch.stop_argv]
        assert not set(argv) & {h for h in WILDCARD_HOSTS if h}, (launch.role, argv)
        for name, value in launch.env.items():
            if SECRET_NAME.search(name):
                assert not any(value in part for part in argv), (launch.role, name)


def test_rpc_servers_listen_on_their_fabric_address_only():
    servers = [r for r in launches("llamacpp") if r.role == "rpc-server"]
    assert [r.node for r in servers] == ["spark-2", "spark-3", "spark-4"]
    for server in servers:
        assert server.argv[server.argv.index("-H") + 1] == FABRIC[server.node]
        assert (server.readiness.kind, server.readiness.host) == ("tcp", FABRIC[server.node])


def test_ray_has_token_auth_and_a_loopback_dashboard_on_every_node():
    ranks = launches("vllm")
    tokens = {r.env["RAY_AUTH_TOKEN"] for r in ranks}
    assert len(tokens) == 1 and all(r.env["RAY_AUTH_MODE"] == "token" for r in ranks)
    head = next(r for r in ranks if r.role == "ray-head")
    assert head.argv[head.argv.index("--dashboard-host") + 1] == "127.0.0.1"
    for r in ranks:
        if r.role.startswith("ray-"):
            assert r.argv[r.argv.index("--node-ip-address") + 1] == FABRIC[r.node]


@pytest.mark.parametrize("kind", ["torchrun", "torchrun-c10d"])
def test_torchrun_ranks_name_themselves_by_their_fabric_address(kind):
    for r in launches(kind):
        assert r.argv[r.argv.index("--local_addr") + 1] == FABRIC[r.node]
