"""``sparksync node rename | ssh``, ``sparksync app ...`` and ``sparksync settings ...``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.apps.autostart import autostart_dir
from sparksync.core.apps.custom_apps import CustomApps
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.apps.settings import load_settings
from sparksync.core.ssh.unpair import node_secret_name
from tests.core.keyring_fixtures import MemoryKeyring, global_keyring
from tests.core.node_factory import paired_node


@pytest.fixture(autouse=True)
def memory_keyring(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    with global_keyring(MemoryKeyring()) as backend:
        yield backend


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_rename(memory_keyring):
    node = paired_node("spark-aaaa", 1)
    Registry().add(node)
    SecretStore().set("node/spark-aaaa/agent-token", "tok")  # where an older SparkSync kept it
    done = invoke("node", "rename", "spark-aaaa", "rack-1", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {
        "id": node.node_id,
        "old": "spark-aaaa",
        "new": "rack-1",
        "secrets_moved": ["agent-token"],
        "warnings": [],
    }
    assert Registry().names() == ["rack-1"]
    assert SecretStore().get(node_secret_name(node.node_id, "agent-token")) == "tok"
    by_id = invoke("node", "rename", node.node_id, "rack-2")
    assert by_id.exit_code == 0 and by_id.output == "Renamed 'rack-1' to 'rack-2'.\n"
    assert invoke("node", "rename", "rack-2", "rack-1").exit_code == 0
    refused = invoke("node", "rename", "rack-1", "no good")
    assert refused.exit_code == 1 and "cannot be a node name" in refused.output
    assert invoke("node", "rename", "rack-1", "spark-aaaa").output == "Renamed 'rack-1' to 'spark-aaaa'.\n"


def test_ssh_prints_the_command_with_our_exported_config():
    Registry().add(paired_node("n1", 1))
    done = invoke("node", "ssh", "n1", "--print")
    assert done.exit_code == 0 and done.output.startswith("ssh -F ") and done.output.strip().endswith(" n1")


def test_apps_add_list_remove():
    assert (
        invoke(
            "app", "add", "Jupyter", "--port", "8888", "--script", "jupyter lab", "--browser-path", "/lab"
        ).exit_code
        == 0
    )
    assert [a.name for a in CustomApps().list()] == ["Jupyter"]
    listed = json.loads(invoke("app", "list", "--json").output)
    assert [(a["name"], a["remote_port"]) for a in listed] == [("DGX Dashboard", 11000), ("Jupyter", 8888)]
    bad = invoke("app", "add", "X", "--port", "80", "--browser-path", "lab")
    assert bad.exit_code != 0 and "/" in bad.output
    assert invoke("app", "remove", "Jupyter").exit_code == 0 and CustomApps().list() == []


def test_settings_set_and_show():
    assert invoke("settings", "set", "window_s", "3600").output == "window_s = 3600.0\n"
    assert invoke("settings", "set", "start_at_login", "on").exit_code == 0
    assert (autostart_dir() / "sparksync.desktop").exists()
    assert invoke("settings", "set", "start_at_login", "off").exit_code == 0
    assert not (autostart_dir() / "sparksync.desktop").exists()
    refused = invoke("settings", "set", "window_s", "61")
    assert refused.exit_code == 1 and "window_s" in refused.output
    shown = json.loads(invoke("settings", "show", "--json").output)
    assert shown["settings"]["window_s"] == 3600.0 and shown["keyring"]["usable"] is True
    assert load_settings().window_s == 3600.0
