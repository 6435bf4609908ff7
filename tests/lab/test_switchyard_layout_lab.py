"""`sparksync switchyard layout` for real: the published layout's 4-node form on lab nodes, in one command.

Four paired lab nodes with real agents and a fabric; the CLI, as its own
process, checks memory first (a model too large for its nodes is refused
before anything starts), then starts one large replica of a tiny llama.cpp
model split over two nodes (llama-server and an rpc-server) and two small
replicas on a node each, as one workload, and the gateway as a workload on
a node over them. Requests through the gateway reach every replica, in the
configured share.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter

import httpx
import pytest

from sparksync.switchyard.config import load_config
from sparksync.switchyard.layout import LARGE_RECIPE, SMALL_RECIPE
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.engines.tinymodel import SMALL, train_tokenizer, write_tiny_model
from tests.lab.test_fleet_lab import agent_python, cli_env, client_key, lab_agents, open_fleet, sparksync  # noqa: F401
from tests.lab.test_workloads_lab import HTTP_PORT, SPLIT_MODEL, binaries, cluster, no_processes_left  # noqa: F401
from tests.lab.workload_lab import SharedDir, engine_tunnel, wait_fabric_reported

pytestmark = [pytest.mark.lab, pytest.mark.engine]

GATEWAY_PORT = 8400


def engine_settings(binaries, folder: SharedDir, spec, option: str) -> list[str]:
    llamacpp = {"server_binary": str(binaries.llama_server), "rpc_binary": str(binaries.rpc_server),
                "threads": 1, "context": 1024, "parallel": 2}  # fmt: skip
    return [f"{option}=model={folder.path / f'{spec.name}.gguf'}", f"{option}=served_name={spec.name}",
            f"{option}=llamacpp={json.dumps(llamacpp)}", f"{option}=ports={json.dumps({'http': HTTP_PORT})}"]  # fmt: skip


def test_the_published_layout_starts_in_one_command_with_its_gateway(
    lab_agents, client_key, real_keyring, binaries, agent_python, tmp_path  # noqa: F811
):
    ssh_lab, agents, _ = cluster(lab_agents, 4, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    with open_fleet(ssh_lab, client_key) as fleet:
        wait_fabric_reported(fleet, names)
    folder = SharedDir(prefix="sparksync-layout-")
    tokenizer = train_tokenizer()
    for spec in (SMALL, SPLIT_MODEL):
        write_tiny_model(folder.path, spec, tokenizer)
    folder.publish()
    env = cli_env(real_keyring)
    config_out = tmp_path / "switchyard.toml"
    layout = ["switchyard", "layout", "--large", "llamacpp-rpc", "--small", "llamacpp-single",
              "--nodes", ",".join(names), *engine_settings(binaries, folder, SPLIT_MODEL, "--set-large"),
              *engine_settings(binaries, folder, SMALL, "--set-small"), "--config-out", str(config_out)]  # fmt: skip
    try:
        # The memory check comes first: 2 trillion parameters in bf16 fit no pair of nodes.
        huge = json.dumps({"model": {"params": 2e12, "quant": "bf16"}})
        refused = sparksync(ssh_lab, env, *layout, f"--set-large=memory={huge}", "--check")
        assert refused.returncode != 0 and "not enough free memory to launch" in refused.stderr, refused.stderr
        assert "switchyard-large-1 (switchyard-large): n1 needs" in refused.stderr
        assert json.loads(sparksync(ssh_lab, env, "workload", "list", "--json").stdout)["workloads"] == []
        gateway_node = names[2]  # beside the first small replica
        started = sparksync(ssh_lab, env, *layout, "--gateway", gateway_node, "--port", str(GATEWAY_PORT),
                            "--program", shlex.join([str(agent_python), "-m", "sparksync"]))  # fmt: skip
        assert started.returncode == 0, started.stderr
        out = started.stdout
        assert "1 x large on 2 node(s) + 2 x small on 1 node(s)" in out
        groups = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  switchyard-")}
        assert groups == {"switchyard-large-1": f"{names[0]}, {names[1]}", "switchyard-small-1": names[2],
                          "switchyard-small-2": names[3]}  # fmt: skip
        assert "memory: switchyard-large-1 on n1, n2: not checked" in out  # the recipes give no model size
        config = load_config(config_out)
        assert config.workload_pools() == {"small": SMALL_RECIPE, "large": LARGE_RECIPE}
        listed = json.loads(sparksync(ssh_lab, env, "workload", "list", "--json").stdout)["workloads"]
        assert sorted(len(w["ranks"]) for w in listed) == [1, 4]  # the gateway; 2 large ranks + 2 small
        assert all(w["state"] == "ready" for w in listed), listed
        with open_fleet(ssh_lab, client_key) as fleet, engine_tunnel(fleet, gateway_node, GATEWAY_PORT) as tunnel:
            url = f"http://127.0.0.1:{tunnel.local_port}"
            served: Counter[str] = Counter()
            replicas = set()
            body = {"model": "switchyard", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
            for _ in range(8):
                answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=120, trust_env=False)
                assert answer.status_code == 200, answer.text
                served[answer.headers["x-switchyard-pool"]] += 1
                replicas.add(answer.headers["x-switchyard-replica"])
        assert served == {"small": 6, "large": 2}  # large_share 1/4
        assert len(replicas) == 3  # both small replicas and the large one answered
    finally:
        for entry in json.loads(sparksync(ssh_lab, env, "workload", "list", "--json").stdout)["workloads"]:
            sparksync(ssh_lab, env, "workload", "stop", entry["workload_id"])
        folder.remove()
    no_processes_left(ssh_lab, agents)
