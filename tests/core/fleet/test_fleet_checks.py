"""Fleet checks with fake agents: parallel, bounded per node, states recorded and announced."""

from __future__ import annotations

import threading

from sparksync.core.fleet.fleet import as_fleet_state
from sparksync.core.fleet.problems import offline
from sparksync.core.fleet.state import Cause, NodeState
from sparksync.core.nodes.rows import NodeState as RowState
from tests.core.fleet.fakes import FakeFleet, FakeLink


def test_one_slow_node_is_cut_off_at_its_timeout_while_the_others_report(tmp_path):
    changes = []
    with FakeFleet(
        tmp_path, ["a", "b", "slow"], on_change=lambda old, new: changes.append((new.name, new.state))
    ) as fleet:
        slow_link = fleet.fakes["slow"]
        slow_link.hold, slow_link.link_up = threading.Event(), False
        reports = fleet.check_all(timeout=1.0, with_snapshot=True)
        # The slow probe is still held: check_all came back without waiting for it.
        assert not slow_link.probe_ended.is_set()
        slow_link.hold.set()
        by_name = {r.node.name: r for r in reports}
        assert [r.node.name for r in reports] == ["a", "b", "slow"]
        assert by_name["a"].ok and by_name["a"].snapshot.latest.seq == 1
        assert by_name["b"].ok
        slow = by_name["slow"].status
        assert slow.state is NodeState.OFFLINE and "gave no answer within 1 s" in slow.reason
        assert fleet.fakes["slow"].probe_ended.wait(30)  # cancelled, so it ends
    assert sorted(changes) == [("a", NodeState.ONLINE), ("b", NodeState.ONLINE), ("slow", NodeState.OFFLINE)]
    saved = {n: s.state for n, (s, _) in fleet.store.statuses(fleet.nodes()).items()}
    assert saved == {"a": NodeState.ONLINE, "b": NodeState.ONLINE, "slow": NodeState.OFFLINE}


def test_problems_and_disabled_collectors_become_states_with_reasons(tmp_path):
    with FakeFleet(tmp_path, ["up", "down", "sick"]) as fleet:
        fleet.fakes["down"].problem = offline(
            "Cannot reach 10.0.0.2 on SSH port 22 (10.0.0.2: connection refused)"
        )
        fleet.fakes["sick"] = FakeLink("sick", disabled={"rdma": "OSError: [Errno 5] Input/output error"})
        reports = {r.node.name: r.status for r in fleet.check_all(timeout=10)}
    assert reports["up"].state is NodeState.ONLINE and reports["up"].reason is None
    assert (reports["down"].state, reports["down"].cause) == (NodeState.OFFLINE, Cause.REFUSED)
    assert (reports["sick"].state, reports["sick"].cause) == (NodeState.DEGRADED, Cause.COLLECTORS_DISABLED)
    assert "rdma (OSError: [Errno 5] Input/output error)" in reports["sick"].reason


def test_listeners_hear_changes_only_until_they_unsubscribe(tmp_path):
    heard = []
    with FakeFleet(tmp_path, ["a"]) as fleet:
        unsubscribe = fleet.add_listener(lambda name, state: heard.append((name, state.state)))
        node = fleet.nodes(["a"])[0]
        fleet.check_all(timeout=10)
        fleet.check_all(timeout=10)  # still online: no news
        fleet.apply(node, offline("connection lost (closed by the node, or no answer to keepalives)"))
        unsubscribe()
        fleet.apply(node, None)
    assert heard == [("a", RowState.ONLINE), ("a", RowState.OFFLINE)]
    assert as_fleet_state(fleet.status(node)).last_seen is not None


def test_a_listener_that_raises_does_not_stop_the_checks(tmp_path):
    def broken(old, new):
        raise RuntimeError("bug in a listener")

    with FakeFleet(tmp_path, ["a"], on_change=broken) as fleet:
        [report] = fleet.check_all(timeout=10)
    assert report.ok


def test_close_waits_for_checks_that_outlived_their_timeout(tmp_path):
    fleet = FakeFleet(tmp_path, ["slow"])
    fleet.fakes["slow"].block_until_cancelled = True
    fleet.check_all(timeout=0.5)
    fleet.close()
    assert fleet.fakes["slow"].probe_ended.is_set()
    assert not [t for t in threading.enumerate() if t.name.startswith("fleet-check")]
