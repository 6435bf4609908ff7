"""Renaming a paired node: registry, exported ssh config and keyring entries follow."""

from __future__ import annotations

import pytest

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


def test_rename_moves_the_entry_its_secrets_and_its_ssh_alias(registry):
    store = SecretStore(backend=MemoryKeyring())
    store.set(node_secret_name("spark-aaaa", "agent-token"), "t0ken")
    exported = export_ssh_config(registry.list(), config_dir() / "keys" / KEY_FILE)

    result = rename_node("spark-aaaa", "rack-1", registry=registry, secrets=store)

    assert Registry().names() == ["rack-1", "spark-bbbb"]  # read back from disk
    assert result.node.name == "rack-1" and result.secrets_moved == ["agent-token"] and not result.warnings
    assert store.get(node_secret_name("rack-1", "agent-token")) == "t0ken"
    assert store.get(node_secret_name("spark-aaaa", "agent-token")) is None
    config = exported.config_path.read_text()
    assert "Host rack-1\n" in config and "Host spark-aaaa\n" not in config
    assert "sparksync-rack-1 " in exported.known_hosts_path.read_text()


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
