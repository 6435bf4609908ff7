"""The app's list of launches (restart, the tray's last workload): it follows renamed nodes."""

from __future__ import annotations

import json

from sparksync.core.nodes.registry import Registry
from sparksync.core.workloads.last_workload import LAUNCHES_VERSION, Launches
from sparksync.core.workloads.launch_choice import LaunchChoice
from tests.core.node_factory import paired_node


def test_the_last_launch_names_its_nodes_as_they_are_called_now(tmp_path):
    registry = Registry()
    a, b = paired_node("spark-1", 1), paired_node("spark-2", 2)
    registry.add(a)
    registry.add(b)
    launches = Launches(tmp_path / "launches.json")
    launches.add("w1", LaunchChoice(recipe="llamacpp-rpc", nodes=["spark-1", "spark-2"]))
    saved = json.loads((tmp_path / "launches.json").read_text())
    assert saved["version"] == LAUNCHES_VERSION == 2
    assert saved["launches"][0]["node_ids"] == {"spark-1": a.node_id, "spark-2": b.node_id}
    registry.rename("spark-1", "rack-1")
    last = Launches(tmp_path / "launches.json").last()
    assert last is not None and last.choice.nodes == ["rack-1", "spark-2"]
    assert last.choice.describe() == "llamacpp-rpc on rack-1, spark-2"


def test_a_version_1_launch_list_is_read_by_name_and_written_with_ids(tmp_path):
    registry = Registry()
    a = paired_node("spark-1", 1)
    registry.add(a)
    path = tmp_path / "launches.json"
    old = {"workload_id": "w1", "choice": LaunchChoice(recipe="r", nodes=["spark-1"]).model_dump(mode="json")}
    path.write_text(json.dumps({"version": 1, "last": "w1", "launches": [old]}))
    registry.rename("spark-1", "rack-1")
    launches = Launches(path)
    assert launches.choice("w1").nodes == ["rack-1"]
    launches.add("w2", LaunchChoice(recipe="r", nodes=["rack-1"]))
    data = json.loads(path.read_text())
    assert data["version"] == 2 and [item["node_ids"] for item in data["launches"]] == [
        {"rack-1": a.node_id}, {"rack-1": a.node_id}
    ]
