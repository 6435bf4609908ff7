"""What deploy records in the registry, and that entries written before those fields still load."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from sparksync.core.nodes.registry import Registry
from tests.core.node_factory import paired_node


def test_an_entry_without_the_deploy_fields_loads_with_none(tmp_path):
    registry = Registry(tmp_path / "nodes.json")
    registry.add(paired_node("spark-0001", 1))
    data = json.loads(registry.path.read_text())
    for entry in data["nodes"]:  # as an older SparkSync wrote it
        entry.pop("service_mode")
        entry.pop("deployed_at")
    registry.path.write_text(json.dumps(data))
    node = Registry(registry.path).get("spark-0001")
    assert node.service_mode is None and node.deployed_at is None


def test_the_deploy_fields_survive_a_reload(tmp_path):
    registry = Registry(tmp_path / "nodes.json")
    registry.add(paired_node("spark-0001", 1))
    when = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
    node = registry.get("spark-0001").model_copy(
        update={"agent_version": "0.1.0", "service_mode": "supervised", "deployed_at": when}
    )
    registry.update(node)
    again = Registry(registry.path).get("spark-0001")
    assert (again.agent_version, again.service_mode, again.deployed_at) == ("0.1.0", "supervised", when)
