"""The node list's view-model: paired + discovered + live states, merged into rows."""

from __future__ import annotations

from sparksync.core.discovery.model import DiscoveredNode
from sparksync.core.nodes.rows import FleetState, NodeRows, NodeState
from sparksync.core.nodes.registry import MAX_NODES
from tests.core.node_factory import paired_node


def discovered(
    key: str, hostname: str, address: str, *, fingerprint: str | None = None, seen: float = 100.0, **kw
):
    fps = {"ssh-ed25519": fingerprint} if fingerprint else {}
    return DiscoveredNode(key=key, hostname=hostname, addresses=[address], kind=kw.pop("kind", "spark"),
                          host_key_fingerprints=fps, last_seen=seen, **kw)  # fmt: skip


def test_paired_and_discovered_nodes_each_get_one_row_and_slots_count_paired_only():
    rows = NodeRows()
    seen = []
    rows.add_listener(seen.append)
    a = paired_node("spark-aaaa", 1)
    rows.set_paired([a])
    rows.on_discovery(
        "added",
        discovered("fp:a", "spark-aaaa.local", "10.0.0.1", fingerprint=a.host_key.fingerprint, seen=50),
    )
    rows.on_discovery(
        "added", discovered("host:b", "spark-bbbb.local", "10.0.0.9", seen=60, likely_spark=True)
    )
    by_name = {r.name: r for r in rows.rows()}
    assert set(by_name) == {
        "spark-aaaa",
        "spark-bbbb.local",
    }  # the paired node's sighting is not a second row
    assert by_name["spark-aaaa"].state is NodeState.PAIRED and by_name["spark-aaaa"].last_seen == 50
    assert by_name["spark-aaaa"].reason == "seen on the network"
    b = by_name["spark-bbbb.local"]
    assert b.state is NodeState.DISCOVERED and not b.paired and b.discovered is not None
    assert b.reason == "looks like a DGX Spark; not paired" and b.last_seen == 60
    assert rows.slots_text() == f"1 of {MAX_NODES} slots used" and len(seen) == 3
    rows.on_discovery("removed", b.discovered)
    assert [r.name for r in rows.rows()] == ["spark-aaaa"]


def test_a_sighting_with_other_host_keys_is_another_machine_even_at_the_same_address():
    rows = NodeRows()
    a = paired_node("spark-aaaa", 1)
    rows.set_paired([a])
    rows.on_discovery(
        "added", discovered("fp:x", "spark-aaaa.local", "10.0.0.1", fingerprint="SHA256:" + "x" * 43)
    )
    assert len(rows.rows()) == 2


def test_an_agent_with_the_paired_nodes_id_is_that_node_not_another_row():
    """The node's agent may advertise keys other than sshd's (kept elsewhere): its node id still says who it is."""
    rows = NodeRows()
    a = paired_node("rack-1", 1)
    rows.set_paired([a])
    agent = discovered("fp:y", "spark-aaaa.local", "10.0.0.1", fingerprint="SHA256:" + "y" * 43, kind="agent",
                       node_id=a.node_id, seen=70.0)  # fmt: skip
    rows.on_discovery("added", agent)
    (row,) = rows.rows()
    assert row.paired and row.name == "rack-1" and row.node_id == a.node_id and row.last_seen == 70.0
    assert row.reason == "seen on the network"
    without_keys = discovered("host:s", "somewhere.local", "10.9.9.9", kind="agent", node_id=a.node_id)
    rows.set_discovered([without_keys])  # an agent that told no keys: its id alone is enough
    assert [r.name for r in rows.rows()] == ["rack-1"]


def test_a_copied_disk_with_the_same_agent_id_elsewhere_is_listed_on_its_own():
    rows = NodeRows()
    a = paired_node("rack-1", 1)
    rows.set_paired([a])
    clone = discovered("fp:z", "spark-zzzz.local", "10.0.0.77", fingerprint="SHA256:" + "z" * 43, kind="agent",
                       node_id=a.node_id)  # fmt: skip
    rows.on_discovery("added", clone)
    assert [(r.name, r.paired) for r in rows.rows()] == [("rack-1", True), ("spark-zzzz.local", False)]
    assert rows.rows()[1].node_id == a.node_id


def test_the_fleet_hook_sets_state_reason_and_last_seen_of_paired_nodes():
    rows = NodeRows()
    rows.set_paired([paired_node("n1", 1), paired_node("n2", 2)])
    rows.set_state("n1", FleetState(NodeState.ONLINE, None, 1234.0))
    rows.set_state("n2", FleetState(NodeState.OFFLINE, "no answer within 10 s", 1000.0))
    rows.set_state("gone", FleetState(NodeState.ONLINE))  # not paired: no row
    states = {r.name: (r.state, r.reason, r.last_seen) for r in rows.rows()}
    assert states == {
        "n1": (NodeState.ONLINE, None, 1234.0),
        "n2": (NodeState.OFFLINE, "no answer within 10 s", 1000.0),
    }
    rows.set_paired([paired_node("n1", 1)])  # n2 unpaired: its state is forgotten
    assert [r.name for r in rows.rows()] == ["n1"]


def test_pairing_marks_the_discovered_row_or_adds_one_for_a_typed_host():
    rows = NodeRows()
    node = discovered("host:b", "spark-bbbb.local", "10.0.0.9")
    rows.on_discovery("added", node)
    rows.set_pairing("host:b", True)
    rows.set_pairing("10.0.0.77", True)
    states = {r.key: r.state for r in rows.rows()}
    assert states == {"host:b": NodeState.PAIRING, "pairing:10.0.0.77": NodeState.PAIRING}
    rows.set_pairing("host:b", False)
    rows.set_pairing("10.0.0.77", False)
    assert {r.key: r.state for r in rows.rows()} == {"host:b": NodeState.DISCOVERED}


def test_full_cluster():
    rows = NodeRows()
    rows.set_paired([paired_node(f"n{i}", i) for i in range(1, MAX_NODES + 1)])
    assert rows.is_full() and rows.slots_text() == f"{MAX_NODES} of {MAX_NODES} slots used"


def test_an_agent_older_than_this_clients_offers_an_upgrade_and_the_hello_wins_over_the_registry():
    from sparksync.core.nodes.rows import client_agent_version, is_older

    rows = NodeRows()
    rows.set_paired([
        paired_node("old", 1, agent_version="0.0.1"),
        paired_node("same", 2, agent_version=client_agent_version()),
        paired_node("unknown", 3),
    ])  # fmt: skip
    by_name = {r.name: r for r in rows.rows()}
    assert [by_name[n].upgrade_available for n in ("old", "same", "unknown")] == [True, False, False]
    rows.set_agent_version("old", client_agent_version())  # the agent's hello after an upgrade elsewhere
    assert not rows.row("paired:old").upgrade_available
    rows.set_agent_version("same", "0.0.9")  # what actually runs, whatever the registry remembers
    assert rows.row("paired:same").upgrade_available
    assert is_older("0.1.0", "0.10.0") and not is_older("0.10.0", "0.9.0")  # versions, not strings
    assert not is_older("not a version", "1.0")


def test_a_deploy_shows_its_nodes_as_deploying_over_the_fleets_news_until_it_ends():
    rows = NodeRows()
    rows.set_paired([paired_node("n1", 1, agent_version="0.0.1")])
    rows.set_agent_version("n1", "0.0.2")
    rows.set_deploying("n1", "deploying the agent")
    rows.set_state("n1", FleetState(NodeState.DEGRADED, "the agent is not running"))  # restarting meanwhile
    assert (rows.row("paired:n1").state, rows.row("paired:n1").reason) == (
        NodeState.DEPLOYING,
        "deploying the agent",
    )
    rows.set_deploying("n1", None)
    rows.set_state("n1", FleetState(NodeState.ONLINE))
    row = rows.row("paired:n1")
    assert row.state is NodeState.ONLINE and row.agent_version == "0.0.1"  # the hello of the old run is gone


def test_telemetry_samples_move_the_last_seen_time_without_a_redraw():
    rows = NodeRows()
    rows.set_paired([paired_node("n1", 1)])
    redraws = []
    rows.add_listener(redraws.append)
    rows.note_sample("n1", 1000.0)
    rows.note_sample("n1", 1001.0)
    rows.note_sample("other", 5.0)  # not paired: no row
    assert rows.row("paired:n1").last_seen == 1001.0 and redraws == []
    rows.set_state("n1", FleetState(NodeState.ONLINE, None, 900.0))  # the fleet's older news keeps it
    assert rows.row("paired:n1").last_seen == 1001.0
