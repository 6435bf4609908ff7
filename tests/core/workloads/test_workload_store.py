"""The client's workload record and what users type at launch (--nodes, --set, --plan)."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from sparksync_agent.protocol import NAME_PATTERN

from sparksync.core.workloads.errors import FabricError, PlanError, RecipeError
from sparksync.core.workloads.fabric import FabricSettings, Topology
from sparksync.core.workloads.fabric_settings import load_fabric_settings, save_fabric_settings
from sparksync.core.workloads.launch_request import apply_overrides, parse_settings, resolve
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.recipe_files import find_recipe
from sparksync.core.nodes.registry import Registry
from sparksync.core.workloads.workload_store import (
    STORE_VERSION,
    Endpoint,
    RankRef,
    UnknownWorkloadError,
    WorkloadRecord,
    WorkloadStore,
    WorkloadStoreError,
    new_workload_id,
)
from tests.core.node_factory import paired_node


def record(workload_id: str) -> WorkloadRecord:
    plan = Plan(groups=[Group(recipe="r", nodes=["a", "b"])])
    ranks = [RankRef(node="b", name="r-1.1.rpc-server", group="r-1", rank=1, role="rpc-server"),
             RankRef(node="a", name="r-1.0.llama-server", group="r-1", rank=0, role="llama-server", stage=1)]  # fmt: skip
    return WorkloadRecord(workload_id=workload_id, recipes=["r"], plan=plan, ranks=ranks)


def test_records_survive_a_new_store_and_concurrent_writers(tmp_path):
    path = tmp_path / "workloads.json"
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: WorkloadStore(path).add(record(f"w{i}")), range(8)))
    store = WorkloadStore(path)
    assert sorted(r.workload_id for r in store.list()) == [f"w{i}" for i in range(8)]
    assert store.get("w3").nodes() == ["b", "a"]
    store.remove("w3")
    with pytest.raises(UnknownWorkloadError, match="workload list"):
        WorkloadStore(path).get("w3")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert json.loads(path.read_text())["version"] == STORE_VERSION == 2


def test_a_newer_or_broken_record_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps({"version": 99, "workloads": []}))
    with pytest.raises(WorkloadStoreError, match="newer SparkSync"):
        WorkloadStore(path).add(record("w"))
    assert json.loads(path.read_text())["version"] == 99
    path.write_text("{not json")
    with pytest.raises(WorkloadStoreError, match="not a valid workload record"):
        WorkloadStore(path).list()


def test_workload_ids_are_valid_names_on_the_nodes():
    for label in ("llamacpp-rpc", "x" * 120):
        workload_id = new_workload_id(label)
        assert re.match(NAME_PATTERN, workload_id) and len(workload_id) <= 80
    assert new_workload_id("a") != new_workload_id("a")


def test_settings_are_nested_and_typed():
    assert parse_settings(["llamacpp.threads=2", "model=/m.gguf", "training.args=[\"--steps\", \"5\"]"]) == {
        "llamacpp": {"threads": 2}, "model": "/m.gguf", "training": {"args": ["--steps", "5"]},
    }  # fmt: skip
    with pytest.raises(RecipeError, match="KEY=VALUE"):
        parse_settings(["threads"])
    recipe = apply_overrides(find_recipe("llamacpp-single"), {"llamacpp": {"threads": 2}})
    assert recipe.llamacpp.threads == 2 and recipe.llamacpp.context == 8192  # merged, not replaced
    with pytest.raises(RecipeError, match="llamacpp.thread"):
        apply_overrides(recipe, {"llamacpp": {"thread": 2}})  # a misspelt field is an error


def test_nodes_stretch_llamacpp_and_torchrun_recipes_over_all_of_them():
    plan, recipes = resolve("llamacpp-rpc", ["a", "b", "c", "d"], None, {"model": "/m.gguf"})
    assert plan.groups[0].nodes == ["a", "b", "c", "d"] and recipes["llamacpp-rpc"].parallelism.pipeline == 4
    plan, recipes = resolve("torchrun", ["a", "b", "c"], None, {"training": {"script": "/t.py"}})
    assert recipes["torchrun"].parallelism.data == 3
    with pytest.raises(PlanError, match="--nodes"):
        resolve("llamacpp-single", [], None, {})


def test_a_plan_file_names_the_groups(tmp_path):
    path = tmp_path / "plan.json"
    plan = Plan(
        groups=[Group(recipe="llamacpp-single", nodes=["a"]), Group(recipe="llamacpp-single", nodes=["b"])]
    )
    path.write_text(plan.model_dump_json())
    loaded, recipes = resolve("llamacpp-single", [], path, {"model": "/m.gguf"})
    assert loaded == plan and recipes["llamacpp-single"].model == "/m.gguf"
    path.write_text('{"groups": []}')
    with pytest.raises(PlanError, match="plan file"):
        resolve("llamacpp-single", [], path, {})


def test_fabric_settings_default_round_trip_and_refuse_a_broken_file(tmp_path):
    path = tmp_path / "fabric.json"
    assert load_fabric_settings(path) == FabricSettings()
    chosen = FabricSettings(topology=Topology.ring, primary_interface={"spark-1": "enP2p1s0f1np1"})
    save_fabric_settings(chosen, path)
    assert load_fabric_settings(path) == chosen
    path.write_text('{"topology": "mesh"}')
    with pytest.raises(FabricError, match="topology"):
        load_fabric_settings(path)


# --- identity: records follow their nodes through renames ------------------------------------


def _pair(*names: str) -> list:
    registry = Registry()
    nodes = [paired_node(name, i) for i, name in enumerate(names, 1)]
    for node in nodes:
        registry.add(node)
    return nodes


def test_a_record_keeps_its_nodes_ids_and_shows_their_names_now(tmp_path):
    a, b = _pair("a", "b")
    store = WorkloadStore(tmp_path / "workloads.json")
    with_endpoint = record("w").model_copy(
        update={"endpoints": [Endpoint(group="r-1", node="a", host="127.0.0.1", port=8080)]}
    )
    store.add(with_endpoint)
    saved = json.loads((tmp_path / "workloads.json").read_text())["workloads"][0]
    assert saved["node_ids"] == {"a": a.node_id, "b": b.node_id}
    Registry().rename("a", "rack-a")
    got = WorkloadStore(tmp_path / "workloads.json").get("w")
    assert got.plan.groups[0].nodes == ["rack-a", "b"] and got.nodes() == ["b", "rack-a"]
    assert got.endpoints[0].node == "rack-a" and got.node_ids == {"rack-a": a.node_id, "b": b.node_id}
    store.add(record("w2"))  # a change writes the current names back, with the same ids
    again = json.loads((tmp_path / "workloads.json").read_text())["workloads"][0]
    assert again["node_ids"] == {"rack-a": a.node_id, "b": b.node_id} and again["ranks"][1]["node"] == "rack-a"


def test_a_version_1_record_finds_its_nodes_by_name_even_after_a_rename(tmp_path):
    a, _ = _pair("a", "b")
    path = tmp_path / "workloads.json"
    v1 = {"version": 1, "workloads": [record("w").model_dump(mode="json", exclude={"node_ids"})]}
    path.write_text(json.dumps(v1))
    Registry().rename("a", "rack-a")  # before any SparkSync with ids read the file
    store = WorkloadStore(path)
    assert store.get("w").nodes() == ["b", "rack-a"]
    store.remove("nothing")  # any change writes version 2
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["workloads"][0]["node_ids"]["rack-a"] == a.node_id


def test_a_record_of_an_unpaired_node_keeps_its_old_name(tmp_path):
    a, b = _pair("a", "b")
    store = WorkloadStore(tmp_path / "workloads.json")
    store.add(record("w"))
    Registry().remove("a")
    got = store.get("w")
    assert got.nodes() == ["b", "a"] and got.node_ids == {"a": a.node_id, "b": b.node_id}


def test_fabric_settings_are_filed_by_node_id_and_read_by_name(tmp_path):
    (a,) = _pair("spark-1")
    path = tmp_path / "fabric.json"
    save_fabric_settings(FabricSettings(primary_interface={"spark-1": "enP2p1s0f1np1", "elsewhere": "eth9"}), path)
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["primary_interface"] == {a.node_id: "enP2p1s0f1np1", "elsewhere": "eth9"}
    Registry().rename("spark-1", "rack-1")
    assert load_fabric_settings(path).primary_interface == {"rack-1": "enP2p1s0f1np1", "elsewhere": "eth9"}


def test_version_1_fabric_settings_by_name_are_read_and_saved_by_id(tmp_path):
    (a,) = _pair("spark-1")
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps({"version": 1, "topology": "ring", "primary_interface": {"spark-1": "enp1s0f0np0"}}))
    Registry().rename("spark-1", "rack-1")  # the former name still finds the node
    settings = load_fabric_settings(path)
    assert settings.primary_interface == {"rack-1": "enp1s0f0np0"} and settings.topology is Topology.ring
    save_fabric_settings(settings, path)
    assert json.loads(path.read_text())["primary_interface"] == {a.node_id: "enp1s0f0np0"}


def test_a_gone_nodes_old_name_taken_by_another_node_is_not_mixed_up_with_it(tmp_path):
    a, b = _pair("a", "b")
    store = WorkloadStore(tmp_path / "workloads.json")
    store.add(record("w"))
    Registry().remove("a")
    Registry().rename("b", "a")  # the name "a" now belongs to b
    got = store.get("w")
    assert got.plan.groups[0].nodes == ["a (unpaired)", "a"]
    assert got.node_ids == {"a (unpaired)": a.node_id, "a": b.node_id}
