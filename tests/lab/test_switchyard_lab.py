"""Switchyard over running workloads on lab nodes: pools named by workload, replicas picked up by themselves.

Two workloads of two tiny llama.cpp models (a small one on n1, a larger one
on n2) are started through the agents exactly as ``sparksync workload
start`` does. The gateway's config names the workloads, not URLs; its
``WorkloadPools`` source reads the client's workload record and reaches each
head through an SSH tunnel. A fixed ¼ share sends every fourth request to
the large pool, and each engine's own counters show it served them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from sparksync.core.workloads import running
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.workloads.launch_request import resolve
from sparksync.core.workloads.orchestrator import Orchestrator
from sparksync.core.workloads.reach import TunnelReach
from sparksync.core.workloads.workload_store import WorkloadRecord, WorkloadStore
from sparksync.switchyard.config import SwitchyardConfig, parse_config
from sparksync.switchyard.on_node import gateway_plan, gateway_recipe, node_config
from sparksync.switchyard.server import GatewayThread
from sparksync.switchyard.workload_pools import WorkloadPools
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.engines.tinymodel import SMALL, ModelShape, train_tokenizer, write_tiny_model
from tests.lab.test_fleet_lab import agent_python, client_key, lab_agents, open_fleet  # noqa: F401
from tests.lab.test_workloads_lab import HTTP_PORT, SPLIT_MODEL, binaries, no_processes_left  # noqa: F401
from tests.lab.workload_lab import SharedDir, add_fabric, engine_tunnel

pytestmark = [pytest.mark.lab, pytest.mark.engine]

GATEWAY_PORT = 8400


@dataclass
class TwoModels:
    """The small and the large workload, and the fleet that reaches them."""

    fleet: object
    agents: Fleet
    store: WorkloadStore
    small: WorkloadRecord
    large: WorkloadRecord
    fabric: dict[str, str]  # node name -> fabric address (when asked for)


def model_dir(large: ModelShape) -> SharedDir:
    folder = SharedDir(prefix="sparksync-sy-")
    tokenizer = train_tokenizer()
    for spec in (SMALL, large):
        write_tiny_model(folder.path, spec, tokenizer)
    folder.publish()
    return folder


def start_model(orchestrator: Orchestrator, bins, folder: SharedDir, spec: ModelShape, node: str,
                parallel: int = 1, http_host: str = "127.0.0.1") -> WorkloadRecord:  # fmt: skip
    overrides = {
        "model": str(folder.path / f"{spec.name}.gguf"),
        "served_name": spec.name,
        "http_host": http_host,
        "ports": {"http": HTTP_PORT},
        "llamacpp": {"server_binary": str(bins.llama_server), "threads": 1, "context": 1024,
                     "parallel": parallel},
    }  # fmt: skip
    plan, recipes = resolve("llamacpp-single", [node], None, overrides)
    view = orchestrator.start(orchestrator.prepare(plan, recipes, label=spec.name))
    assert view.state == "ready", view
    return view.record


@contextmanager
def two_models(make_agents, key, bins, large: ModelShape = SPLIT_MODEL, parallel: int = 1,
               fabric: bool = False, http_host: str = "127.0.0.1") -> Iterator[TwoModels]:  # fmt: skip
    """The small model on the first lab node, ``large`` on the second; both stopped at the end."""
    ssh_lab, agents = make_agents(2)
    addresses = add_fabric(ssh_lab.lab, ssh_lab.nodes) if fabric else {}
    folder = model_dir(large)
    store = WorkloadStore()
    try:
        with open_fleet(ssh_lab, key) as fleet:
            nodes_agents = fleet
            orchestrator = Orchestrator(nodes_agents, store)
            names = [node.name for node in ssh_lab.nodes]
            small = start_model(orchestrator, bins, folder, SMALL, names[0], parallel, http_host)
            try:
                big = start_model(orchestrator, bins, folder, large, names[1], parallel, http_host)
                try:
                    yield TwoModels(fleet, nodes_agents, store, small, big, addresses)
                finally:
                    running.stop(nodes_agents, big, grace_s=5)
            finally:
                running.stop(nodes_agents, small, grace_s=5)
        no_processes_left(ssh_lab, agents)
    finally:
        folder.remove()


def gateway_config(small: str, large: str, share: str, large_name: str, port: int = 0) -> SwitchyardConfig:
    return parse_config({
        "listen": {"host": "127.0.0.1", "port": port},
        "pools": {"small": {"workload": small, "model": SMALL.name},
                  "large": {"workload": large, "model": large_name}},
        "policy": {"kind": "fixed_share", "large_share": share, "small": "small", "large": "large"},
        "health": {"interval_s": 0.5, "timeout_s": 5},
    })  # fmt: skip


def predicted_tokens(fleet, node: str) -> float:
    """llama-server's own count of generated tokens, read on its node."""
    with engine_tunnel(fleet, node, HTTP_PORT) as tunnel:
        text = httpx.get(f"http://127.0.0.1:{tunnel.local_port}/metrics", timeout=30, trust_env=False).text
    match = re.search(r"^llamacpp:tokens_predicted_total\s+(\S+)", text, re.MULTILINE)
    assert match, text[:500]
    return float(match[1])


def test_pools_named_by_workload_route_a_fixed_share_to_each_workload(lab_agents, client_key, binaries):  # noqa: F811
    with two_models(lab_agents, client_key, binaries) as models:
        # Both workloads come from the same recipe, so each pool names its workload by id.
        config = gateway_config(models.small.workload_id, models.large.workload_id, "1/4", SPLIT_MODEL.name)
        source = WorkloadPools(config, models.store.list, TunnelReach(models.fleet))
        with GatewayThread(config, source) as gw:
            replicas = {name: [r.url for r in pool.replicas] for name, pool in gw.gateway.pools.pools.items()}
            assert all(
                len(urls) == 1 and urls[0].startswith("http://127.0.0.1:") for urls in replicas.values()
            )
            pools: Counter[str] = Counter()
            body = {
                "model": "switchyard",
                "messages": [{"role": "user", "content": "hello"}],
                "max_tokens": 4,
            }
            for _ in range(8):
                answer = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=120, trust_env=False)
                assert answer.status_code == 200, answer.text
                pools[answer.headers["x-switchyard-pool"]] += 1
            # Streaming through a tunnelled replica works as well.
            with httpx.stream("POST", gw.url + "/v1/chat/completions", json={**body, "stream": True},
                              timeout=120, trust_env=False) as streamed:  # fmt: skip
                assert streamed.status_code == 200
                assert any(line.startswith("data: ") for line in streamed.iter_lines())
        assert pools == {"small": 6, "large": 2}
        assert source.reaching() == 0  # the gateway closed its tunnels on the way out
        for record in (models.small, models.large):
            assert predicted_tokens(models.fleet, record.endpoints[0].node) > 0  # each engine really served


def routed_pools(base_url: str, requests: int = 8) -> Counter[str]:
    pools: Counter[str] = Counter()
    body = {"model": "switchyard", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    for _ in range(requests):
        answer = httpx.post(base_url + "/v1/chat/completions", json=body, timeout=120, trust_env=False)
        assert answer.status_code == 200, answer.text
        pools[answer.headers["x-switchyard-pool"]] += 1
    return pools


def test_the_gateway_runs_on_a_node_as_a_workload_through_its_agent(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,  # noqa: F811
    agent_python,  # noqa: F811
):
    """``switchyard launch``'s workload: on n1, the small model on its loopback, the large one across the fabric."""
    with two_models(lab_agents, client_key, binaries, fabric=True, http_host="0.0.0.0") as models:
        head, other = models.small.endpoints[0].node, models.large.endpoints[0].node
        config = gateway_config(models.small.workload_id, models.large.workload_id, "1/4", SPLIT_MODEL.name,
                                port=GATEWAY_PORT)  # fmt: skip
        resolved = node_config(config, models.store.list(), head, models.fabric)
        assert resolved.pools["small"].urls == [f"http://127.0.0.1:{HTTP_PORT}"]
        assert resolved.pools["large"].urls == [f"http://{models.fabric[other]}:{HTTP_PORT}"]
        recipe = gateway_recipe(resolved, [str(agent_python), "-m", "sparksync"])
        orchestrator = Orchestrator(models.agents, models.store)
        view = orchestrator.start(orchestrator.prepare(gateway_plan(head), {recipe.name: recipe}, "switchyard"))
        try:
            assert view.state == "ready", [(r.ref.name, r.state, r.why()) for r in view.ranks]
            with engine_tunnel(models.fleet, head, GATEWAY_PORT) as tunnel:
                pools = routed_pools(f"http://127.0.0.1:{tunnel.local_port}")
        finally:
            running.stop(models.agents, view.record, grace_s=5)
        assert pools == {"small": 6, "large": 2}
