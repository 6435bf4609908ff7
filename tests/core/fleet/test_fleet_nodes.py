"""The fleet names every node, this computer first; hands out a link per node; keeps this computer's state."""

from __future__ import annotations

import pytest

from sparksync.core.agents import LocalLink, SshLink
from sparksync.core.fleet import Fleet, NodeState, NodeStateStore, degraded
from sparksync.core.fleet.state import Cause
from sparksync.core.nodes.registry import Registry, UnknownNodeError
from tests.core.node_factory import paired_node


@pytest.fixture
def registry(tmp_path) -> Registry:
    return Registry(tmp_path / "nodes.json")


def make(tmp_path, registry, asked: list) -> Fleet:
    def key():
        asked.append("key")
        return object()  # never used to connect here

    return Fleet(key, registry, store=NodeStateStore(tmp_path / "states.json"))


def test_with_nothing_paired_this_computer_is_every_node_and_the_cluster(tmp_path, registry):
    asked = []
    with make(tmp_path, registry, asked) as fleet:
        assert fleet.names() == ["this computer"] and fleet.cluster() == ["this computer"]
        assert fleet.names(["Local"]) == ["this computer"]
        assert isinstance(fleet.agent("local"), LocalLink) and fleet.agent("this computer") is fleet.local
    assert asked == []  # this computer needs no SSH key, so the keyring was never asked


def test_paired_nodes_join_this_computer_and_make_the_cluster(tmp_path, registry):
    for i, name in enumerate(["spark-1", "spark-2"], start=1):
        registry.add(paired_node(name, i))
    asked = []
    with make(tmp_path, registry, asked) as fleet:
        assert fleet.names() == ["this computer", "spark-1", "spark-2"]
        assert fleet.cluster() == ["spark-1", "spark-2"]
        assert fleet.names(["spark-2", "local", "spark-2"]) == ["spark-2", "this computer"]
        with pytest.raises(UnknownNodeError):
            fleet.names(["spark-9"])
        link = fleet.agent("spark-1")
        assert isinstance(link, SshLink) and fleet.agent("spark-1") is link and link.kind == "ssh"
        assert asked == ["key"]  # read once, when the first SSH link was made
        fleet.drop("spark-1")
        assert fleet.agent("spark-1") is not link


def test_this_computers_state_is_kept_and_told_but_not_saved(tmp_path, registry):
    heard = []
    with make(tmp_path, registry, []) as fleet:
        fleet.add_listener(lambda name, state: heard.append((name, state.state)))
        assert fleet.apply("local", None).state is NodeState.ONLINE
        down = fleet.apply("this computer", degraded(Cause.AGENT_NOT_RUNNING, "This computer's agent stopped."))
        assert (down.state, down.cause) == (NodeState.DEGRADED, Cause.AGENT_NOT_RUNNING)
        assert fleet.status("this computer").reason == "This computer's agent stopped."
        fleet.seen("this computer")
        fleet.save(["this computer"])  # nothing to write for it
    assert heard == [("this computer", NodeState.ONLINE), ("this computer", NodeState.DEGRADED)]
    assert not (tmp_path / "states.json").exists()
