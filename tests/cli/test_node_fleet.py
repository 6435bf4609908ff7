"""``sparksync node status`` and ``node list`` with paired nodes, without a lab: loopback only."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.nodes.registry import Registry
from tests.core.keyring_fixtures import MemoryKeyring, global_keyring
from tests.core.node_factory import paired_node


@pytest.fixture(autouse=True)
def memory_keyring():
    with global_keyring(MemoryKeyring()) as backend:
        yield backend


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_paired_node_whose_ssh_refuses_is_offline_with_the_reason_in_status_and_list():
    node = paired_node("spark-0001", host="127.0.0.1", addresses=["127.0.0.1"], port=closed_port())
    Registry().add(node)

    listed = json.loads(invoke("node", "list", "--json").stdout)["nodes"]
    assert (listed[0]["state"], listed[0]["reason"], listed[0]["checked_at"]) == ("paired", None, None)

    result = invoke("node", "status", "--json", "--timeout", "30")
    assert result.exit_code == 11, result.output
    [entry] = json.loads(result.stdout)["nodes"]
    assert entry["id"] == node.node_id
    assert (entry["name"], entry["source"], entry["state"], entry["cause"]) == (
        "spark-0001",
        "ssh",
        "offline",
        "refused",
    )
    assert "connection refused" in entry["reason"] and entry["error"] == entry["reason"]
    assert entry["snapshot"] is None and entry["last_seen"] is None
    assert result.stderr.startswith("sparksync: error: spark-0001: Cannot reach 127.0.0.1")

    listed = json.loads(invoke("node", "list", "--json").stdout)["nodes"]
    assert (listed[0]["state"], listed[0]["cause"]) == ("offline", "refused") and listed[0]["checked_at"]
    assert listed[0]["node_id"] == node.node_id
    table = invoke("node", "list").stdout.splitlines()
    assert table[0].split()[-3:] == ["STATE", "LAST", "SEEN"] and table[1].split()[-2:] == [
        "offline",
        "never",
    ]

    checked = json.loads(invoke("node", "list", "--check", "--json", "--timeout", "30").stdout)["nodes"]
    assert checked[0]["state"] == "offline" and checked[0]["checked_at"] > listed[0]["checked_at"]


def test_status_of_an_unknown_name_names_the_paired_nodes():
    Registry().add(paired_node("spark-0001", host="127.0.0.1", port=closed_port()))
    result = invoke("node", "status", "nope")
    assert result.exit_code == 1 and "No paired node is named 'nope' (paired: spark-0001)" in result.stderr


def test_the_status_table_lists_each_node_with_its_state_and_why():
    Registry().add(paired_node("spark-0001", host="127.0.0.1", port=closed_port()))
    result = invoke("node", "status", "--timeout", "30")
    assert result.exit_code == 11
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATE"] and lines[1].split()[:3] == [
        "spark-0001",
        "offline",
        "(refused)",
    ]
    assert "Why:" in lines and any(line.strip().startswith("spark-0001: Cannot reach") for line in lines)
