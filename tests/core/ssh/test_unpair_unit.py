"""Unpair with --forget: no network, no key; the entry and its secrets go, the keyring may fail."""

from __future__ import annotations

import json

import pytest
from keyring.backends import fail

from sparksync.core.fleet.state import NodeState
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.nodes.registry import Registry, UnknownNodeError
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.unpair import node_secret_name, unpair_node
from tests.core.keyring_fixtures import MemoryKeyring
from tests.core.node_factory import paired_node


def never_called():
    raise AssertionError("forget must not need the client key")


@pytest.fixture
def registry(tmp_path) -> Registry:
    registry = Registry(tmp_path / "nodes.json")
    registry.add(paired_node("n1", 1))
    registry.add(paired_node("n2", 2))
    return registry


def test_forget_removes_the_entry_and_its_secrets_only(registry):
    secrets = SecretStore(backend=MemoryKeyring())
    n1, n2 = registry.get("n1"), registry.get("n2")
    secrets.set(node_secret_name(n1.node_id, "agent-token"), "t1")
    secrets.set("node/n1/agent-token", "t1-old")  # kept under the name by an older SparkSync
    secrets.set(node_secret_name(n2.node_id, "agent-token"), "t2")
    result = unpair_node("n1", client_key=never_called, registry=registry, secrets=secrets, forget=True)
    assert result.forgotten_only and not result.key_removed and result.secrets_removed == ["agent-token"]
    assert Registry(registry.path).names() == ["n2"]
    assert secrets.get(node_secret_name(n1.node_id, "agent-token")) is None
    assert secrets.get("node/n1/agent-token") is None
    assert secrets.get(node_secret_name(n2.node_id, "agent-token")) == "t2"


def test_unpairing_drops_the_nodes_last_known_state(registry):
    store, n1 = NodeStateStore(), registry.get("n1")
    store.mark(n1, NodeState.DEPLOYING, "installing")
    unpair_node("n1", client_key=never_called, registry=registry, secrets=SecretStore(backend=MemoryKeyring()),
                forget=True)  # fmt: skip
    assert n1.node_id not in json.loads(store.path.read_text())["nodes"]


def test_a_broken_keyring_leaves_a_warning_not_a_half_done_unpair(registry):
    result = unpair_node(
        "n1",
        client_key=never_called,
        registry=registry,
        secrets=SecretStore(backend=fail.Keyring()),
        forget=True,
    )
    assert Registry(registry.path).names() == ["n2"]
    assert any("could not be removed from the keyring" in w for w in result.warnings)


def test_an_unknown_name_changes_nothing(registry):
    with pytest.raises(UnknownNodeError):
        unpair_node("nope", client_key=never_called, registry=registry, forget=True)
    assert Registry(registry.path).names() == ["n1", "n2"]
