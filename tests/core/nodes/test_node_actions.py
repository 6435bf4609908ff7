"""Renaming a paired node: it keeps its id and all filed under it; the ssh alias follows the name."""

from __future__ import annotations

import time

import pytest

from sparksync.core.bench.history import HistoryStore as BenchHistory
from sparksync.core.fleet.state import NodeState
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.telemetry.history import HistoryStore
from sparksync.core.workloads.last_workload import Launches
from sparksync.core.workloads.launch_choice import LaunchChoice
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.reach import workload_endpoints
from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord, WorkloadStore
from tests.core.bench.records import inference_run
from sparksync.core.ssh.client_key import KEY_FILE
from sparksync.core.nodes.actions import rename_node
from sparksync.core.base.paths import config_dir
from sparksync.core.nodes.registry import DuplicateNodeError, InvalidNodeNameError, Registry, UnknownNodeError
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.unpair import node_secret_name
from sparksync.core.ssh.config_export import export_ssh_config
from tests.core.keyring_fixtures import MemoryKeyring
from tests.core.node_factory import paired_node


@pytest.fixture
def registry() -> Registry:
    registry = Registry()
    registry.add(paired_node("spark-aaaa", 1))
    registry.add(paired_node("spark-bbbb", 2))
    return registry


def test_rename_keeps_the_id_and_its_secrets_and_moves_the_ssh_alias(registry):
    store = SecretStore(backend=MemoryKeyring())
    node_id = registry.get("spark-aaaa").node_id
    store.set(node_secret_name(node_id, "agent-token"), "t0ken")
    exported = export_ssh_config(registry.list(), config_dir() / "keys" / KEY_FILE)

    result = rename_node("spark-aaaa", "rack-1", registry=registry, secrets=store)

    assert Registry().names() == ["rack-1", "spark-bbbb"]  # read back from disk
    assert result.node.name == "rack-1" and result.node.node_id == node_id and not result.warnings
    assert result.old_name == "spark-aaaa" and result.secrets_moved == []  # keyed by id: nothing to move
    assert store.get(node_secret_name(node_id, "agent-token")) == "t0ken"
    config = exported.config_path.read_text()
    assert "Host rack-1\n" in config and "Host spark-aaaa\n" not in config
    assert "sparksync-rack-1 " in exported.known_hosts_path.read_text()


def test_rename_moves_a_secret_an_older_sparksync_kept_under_the_name_to_the_id(registry):
    store = SecretStore(backend=MemoryKeyring())
    store.set("node/spark-aaaa/agent-token", "t0ken")  # named as before node ids
    result = rename_node("spark-aaaa", "rack-1", registry=registry, secrets=store)
    assert result.secrets_moved == ["agent-token"] and not result.warnings
    assert store.get(node_secret_name(result.node.node_id, "agent-token")) == "t0ken"
    assert store.get("node/spark-aaaa/agent-token") is None and store.get("node/rack-1/agent-token") is None


def test_a_node_can_be_renamed_by_its_id(registry):
    node_id = registry.get("spark-bbbb").node_id
    result = rename_node(node_id, "rack-2", registry=registry, secrets=SecretStore(backend=MemoryKeyring()))
    assert result.old_name == "spark-bbbb" and Registry().get(node_id).name == "rack-2"


def test_rename_refuses_bad_taken_and_unknown_names_and_changes_nothing(registry):
    store = SecretStore(backend=MemoryKeyring())
    with pytest.raises(InvalidNodeNameError, match="cannot be a node name"):
        rename_node("spark-aaaa", "has space", registry=registry, secrets=store)
    with pytest.raises(DuplicateNodeError, match="already paired"):
        rename_node("spark-aaaa", "spark-bbbb", registry=registry, secrets=store)
    with pytest.raises(UnknownNodeError, match="spark-zzzz"):
        rename_node("spark-zzzz", "x", registry=registry, secrets=store)
    assert Registry().names() == ["spark-aaaa", "spark-bbbb"]


def test_a_keyring_failure_leaves_the_rename_done_and_says_what_to_move(registry):
    class Broken(MemoryKeyring):
        def get_password(self, service, username):
            raise RuntimeError("D-Bus went away")

    result = rename_node("spark-aaaa", "rack-1", registry=registry, secrets=SecretStore(backend=Broken()))
    assert Registry().names() == ["rack-1", "spark-bbbb"]
    assert len(result.warnings) == 1 and "node/spark-aaaa/*" in result.warnings[0]


def test_after_a_rename_every_store_still_answers_for_the_node(registry):
    """History, node states, workloads, launches, benchmark runs and Switchyard pools, queried by the new name."""
    node = registry.get("spark-aaaa")
    t = int(time.time())
    with HistoryStore() as telemetry:  # what the app's recorder wrote, filed by id
        telemetry.write([(node.node_id, SecondRow(t - i, {"mem.used": 1.0})) for i in range(10)],
                        {node.node_id: "spark-aaaa"})  # fmt: skip
    NodeStateStore().mark(node, NodeState.DEPLOYING, "installing 0.2.0")
    plan = Plan(groups=[Group(recipe="llamacpp-single", nodes=["spark-aaaa"])])
    rank = RankRef(node="spark-aaaa", name="llamacpp-single-1.0.llama-server", group="llamacpp-single-1", rank=0,
                   role="llama-server")  # fmt: skip
    endpoint = Endpoint(group="llamacpp-single-1", node="spark-aaaa", host="127.0.0.1", port=8080)
    WorkloadStore().add(WorkloadRecord(workload_id="w1", recipes=["llamacpp-single"], plan=plan, ranks=[rank],
                                       endpoints=[endpoint]))  # fmt: skip
    Launches().add("w1", LaunchChoice(recipe="llamacpp-single", nodes=["spark-aaaa"]))
    run_id = BenchHistory().add(inference_run(1, 11.86, 1500.0, nodes=("spark-aaaa",)))

    rename_node("spark-aaaa", "rack-1", registry=registry, secrets=SecretStore(backend=MemoryKeyring()))
    renamed = Registry().get("rack-1")

    with HistoryStore() as telemetry:
        assert len(telemetry.load_named(3600, NodeNames.current())["rack-1"].t) == 10
    assert NodeStateStore().statuses([renamed])["rack-1"][0].reason == "installing 0.2.0"
    assert WorkloadStore().get("w1").nodes() == ["rack-1"]
    assert Launches().last().choice.nodes == ["rack-1"]
    assert BenchHistory().get(run_id).context.nodes == ("rack-1",)
    (pooled,) = workload_endpoints(WorkloadStore().list(), "llamacpp-single")  # a Switchyard pool's replicas
    assert pooled.node == "rack-1"
