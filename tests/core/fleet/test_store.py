"""The saved node states: what `node list` shows without reaching the nodes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from sparksync.core.fleet.state import Cause, IllegalTransitionError, NodeState, NodeStatus, utc_now
from sparksync.core.fleet.store import STORE_VERSION, NodeStateStore
from sparksync.core.nodes.registry import PinnedHostKey
from tests.core.node_factory import host_pkey, paired_node


def offline_status(name: str) -> NodeStatus:
    now = utc_now()
    return NodeStatus(
        name=name, state=NodeState.OFFLINE, cause=Cause.TIMEOUT, reason="no answer within 2 s",
        since=now, last_seen=now - timedelta(minutes=1),
    )  # fmt: skip


def test_a_recorded_state_reads_back_and_others_are_paired(tmp_path):
    store = NodeStateStore(tmp_path / "states.json")
    a, b = paired_node("a", 1), paired_node("b", 2)
    store.record(a, offline_status("a"))
    read = store.statuses([a, b])
    status, checked_at = read["a"]
    assert (status.state, status.cause, status.reason) == (
        NodeState.OFFLINE,
        Cause.TIMEOUT,
        "no answer within 2 s",
    )
    assert checked_at is not None and status.last_seen is not None
    assert read["b"][0].state is NodeState.PAIRED and read["b"][1] is None
    assert (tmp_path / "states.json").stat().st_mode & 0o777 == 0o600


def test_a_node_paired_again_starts_afresh(tmp_path):
    store = NodeStateStore(tmp_path / "states.json")
    node = paired_node("a", 1)
    store.record(node, offline_status("a"))
    rekeyed = node.model_copy(update={"host_key": PinnedHostKey.from_pkey(host_pkey())})
    repaired = node.model_copy(update={"added_at": node.added_at + timedelta(hours=1)})
    assert store.status(rekeyed)[0].state is NodeState.PAIRED
    assert store.status(repaired)[0].state is NodeState.PAIRED
    assert store.status(node)[0].state is NodeState.OFFLINE


def test_mark_follows_the_table(tmp_path):
    store = NodeStateStore(tmp_path / "states.json")
    node = paired_node("a", 1)
    assert store.mark(node, NodeState.DEPLOYING, "installing 0.2.0").state is NodeState.DEPLOYING
    assert store.status(node)[0].reason == "installing 0.2.0"
    with pytest.raises(IllegalTransitionError):
        store.mark(node, NodeState.DISCOVERED)
    assert store.status(node)[0].state is NodeState.DEPLOYING


def test_a_corrupt_file_is_moved_aside_and_a_newer_one_left_alone(tmp_path):
    path = tmp_path / "states.json"
    store = NodeStateStore(path)
    node = paired_node("a", 1)
    path.write_text("{not json")
    assert store.status(node)[0].state is NodeState.PAIRED
    store.record(node, offline_status("a"))
    assert (tmp_path / "states.json.bad").read_text() == "{not json"
    assert store.status(node)[0].state is NodeState.OFFLINE

    newer = json.dumps({"version": STORE_VERSION + 1, "nodes": {}, "whatever": 1})
    path.write_text(newer)
    assert store.status(node)[0].state is NodeState.PAIRED
    store.record(node, offline_status("a"))
    assert path.read_text() == newer


def test_a_renamed_node_keeps_its_state_and_unpairing_forgets_it(tmp_path):
    store = NodeStateStore(tmp_path / "states.json")
    node = paired_node("a", 1)
    store.record(node, offline_status("a"))
    renamed = node.model_copy(update={"name": "rack-1", "former_names": ["a"]})
    status, checked_at = store.statuses([renamed])["rack-1"]
    assert status.state is NodeState.OFFLINE and status.name == "rack-1" and checked_at is not None
    data = json.loads((tmp_path / "states.json").read_text())
    assert data["version"] == STORE_VERSION == 2 and list(data["nodes"]) == [node.node_id]
    assert data["nodes"][node.node_id]["name"] == "a"  # the label it had then, for people
    store.forget(renamed)
    assert store.status(renamed)[0].state is NodeState.PAIRED
    assert json.loads((tmp_path / "states.json").read_text())["nodes"] == {}


def test_a_version_1_file_keyed_by_name_is_migrated_to_ids(tmp_path):
    path = tmp_path / "states.json"
    a, b = paired_node("a", 1), paired_node("b", 2)
    recorded = utc_now()
    v1 = {"version": 1, "nodes": {
        name: {"host_key": node.host_key.fingerprint, "paired_at": node.added_at.isoformat(), "state": "offline",
               "cause": "timeout", "reason": "no answer", "since": recorded.isoformat(),
               "last_seen": None, "checked_at": recorded.isoformat()}
        for name, node in (("a", a), ("b", b))
    }}  # fmt: skip
    path.write_text(json.dumps(v1))
    store = NodeStateStore(path)
    renamed = a.model_copy(update={"name": "rack-1"})  # renamed after the file was written: the id finds it
    read = store.statuses([renamed, b])
    assert read["rack-1"][0].reason == "no answer" and read["b"][0].state is NodeState.OFFLINE
    store.record(b, offline_status("b"))  # the next write saves version 2, by id, keeping a's record
    data = json.loads(path.read_text())
    assert data["version"] == 2 and set(data["nodes"]) == {a.node_id, b.node_id}
    assert data["nodes"][a.node_id]["name"] == "a" and data["nodes"][a.node_id]["reason"] == "no answer"
    assert NodeStateStore(path).status(renamed)[0].reason == "no answer"
