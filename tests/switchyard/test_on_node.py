"""The gateway as a workload on a node: its config resolved for that node, and the launch it makes (golden)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord, WorkloadStore
from sparksync.switchyard.config import parse_config
from sparksync.switchyard.errors import ConfigError
from sparksync.switchyard.on_node import gateway_plan, gateway_recipe, node_config

GOLDEN = Path(__file__).parent / "fixtures" / "gateway_launch.json"
ADDRESSES = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}


def record(workload_id: str, recipe: str, node: str, listen: str, port: int) -> WorkloadRecord:
    """As the orchestrator records it: the agent reaches the engine on loopback, whatever it binds."""
    group = f"{recipe}-1"
    return WorkloadRecord(
        workload_id=workload_id, recipes=[recipe], plan=Plan(groups=[Group(recipe=recipe, nodes=[node])]),
        ranks=[RankRef(node=node, name=f"{group}.0.llama-server", group=group, rank=0, role="llama-server")],
        endpoints=[Endpoint(group=group, node=node, host="127.0.0.1", port=port, listen=listen)], created_at=0,
    )  # fmt: skip


RECORDS = [
    record("small-a", "tiny-small", "n1", "127.0.0.1", 8080),  # on the gateway's node: its loopback will do
    record("large-a", "tiny-large", "n2", "0.0.0.0", 8080),
    record("large-b", "tiny-large", "n3", "0.0.0.0", 8081),
]


def config(listen: dict | None = None):
    return parse_config({
        "listen": listen or {"host": "127.0.0.1", "port": 8400},
        "pools": {"small": {"workload": "tiny-small", "model": "tiny"}, "large": {"workload": "tiny-large"}},
        "policy": {"kind": "fixed_share", "large_share": "1/4", "small": "small", "large": "large"},
    })  # fmt: skip


def test_workload_pools_become_the_urls_the_node_reaches():
    resolved = node_config(config(), RECORDS, "n1", ADDRESSES)
    assert resolved.workload_pools() == {}
    assert resolved.pools["small"].urls == ["http://127.0.0.1:8080"]
    assert resolved.pools["large"].urls == ["http://10.0.0.2:8080", "http://10.0.0.3:8081"]
    assert resolved.upstream_model("small") == "tiny" and resolved.upstream_model("large") == "large"


def test_a_replica_the_node_cannot_reach_or_a_missing_workload_is_refused():
    with pytest.raises(ConfigError, match="gateway on n2 cannot reach .* only that node can reach"):
        node_config(config(), RECORDS, "n2", ADDRESSES)  # small listens on n1's loopback
    with pytest.raises(
        ConfigError, match="pool small follows workload 'tiny-small', but no running workload"
    ):
        node_config(config(), RECORDS[1:], "n2", ADDRESSES)
    with pytest.raises(ConfigError, match="resolve the workload pools first"):
        gateway_recipe(config())


def test_the_gateway_launch_matches_the_golden():
    recipe = gateway_recipe(node_config(config(), RECORDS, "n1", ADDRESSES), ["/opt/sparksync/bin/sparksync"])
    [group] = [build_group("switchyard-gateway-1", recipe, gateway_plan("n1").groups[0].nodes, Fabric())]
    [launch] = group.ranks
    made = {
        "node": launch.node, "role": launch.role, "argv": launch.argv, "ports": launch.ports,
        "readiness": launch.readiness.model_dump(mode="json", exclude_defaults=True),
        "tokens": launch.tokens_source.model_dump(mode="json", exclude_defaults=True),
    }  # fmt: skip
    assert made == json.loads(GOLDEN.read_text())
    # What the node will run parses back into the very config it was made from.
    inline = launch.argv[launch.argv.index("--config-json") + 1]
    assert parse_config(json.loads(inline)) == node_config(config(), RECORDS, "n1", ADDRESSES)


def test_launch_dry_run_prints_the_command_from_the_workload_record(tmp_path):
    store = WorkloadStore()  # nothing is paired here: every replica runs on the gateway's own node
    store.add(RECORDS[0])
    store.add(record("large-c", "tiny-large", "n1", "0.0.0.0", 8081))
    path = tmp_path / "switchyard.json"
    path.write_text(config().model_dump_json())
    result = CliRunner().invoke(
        cli, ["switchyard", "launch", "--config", str(path), "--node", "n1", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    argv = json.loads(result.output)
    assert argv[:4] == ["sparksync", "switchyard", "serve", "--config-json"]
    pools = json.loads(argv[4])["pools"]
    assert (pools["small"]["urls"], pools["large"]["urls"]) == (
        ["http://127.0.0.1:8080"],
        ["http://127.0.0.1:8081"],
    )
