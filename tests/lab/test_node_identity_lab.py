"""A node's stable id through real sshd nodes and real agents: rename keeps everything, one machine is one row.

Each node runs ``sparksync-agent serve`` as its test user with the node's id
in its state dir, as deploy leaves it (``lab_agents``). The CLI runs as its
own process in the lab's client namespace, as a user would run it.
"""

from __future__ import annotations

import json
import time

import pytest
from sparksync_agent.protocol import Sample

from sparksync.core.discovery.model import DiscoveredNode
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.nodes.registry import Registry
from sparksync.core.nodes.rows import NodeRows
from sparksync.core.telemetry.dashboard_model import DashboardModel
from sparksync.core.telemetry.history import HistoryStore
from sparksync.core.telemetry.history_recorder import HistoryRecorder
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.test_fleet_lab import (  # noqa: F401  (fixtures)
    agent_python,
    cli_env,
    client_key,
    lab_agents,
    sparksync,
)

pytestmark = pytest.mark.lab

SLEEPER = '--set=custom={"argv": ["sleep", "600"]}'


def cli_json(ssh_lab, env, *args: str) -> dict:
    done = sparksync(ssh_lab, env, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_rename_keeps_the_nodes_history_state_and_workload_through_its_real_agent(
    lab_agents, real_keyring  # noqa: F811
):
    ssh_lab, _ = lab_agents(1)
    env = cli_env(real_keyring)
    node = Registry().get("n1")
    started = cli_json(ssh_lab, env, "workload", "start", "custom", "--nodes", "n1", SLEEPER, "--json")
    assert started["node_ids"] == {"n1": node.node_id} and started["state"] == "ready"

    # Telemetry from the real agent, as the app's dashboard records it (one row per second, by name).
    model, recorder = DashboardModel(), HistoryRecorder(flush_every_s=0.2).start()
    model.row_listeners.append(recorder.put)
    try:
        seconds: set[int] = set()
        while len(seconds) < 3:
            [report] = cli_json(ssh_lab, env, "node", "status", "n1", "--json")["nodes"]
            assert report["id"] == node.node_id == report["snapshot"]["info"]["node_id"]  # the agent's own id
            sample = Sample.model_validate(report["snapshot"]["latest"])
            model.add_sample("n1", sample)
            seconds.add(int(sample.ts))
        model.flush()
        assert recorder.flush()
    finally:
        recorder.stop()
        assert recorder.join(10)

    renamed = cli_json(ssh_lab, env, "node", "rename", "n1", "rack-1", "--json")
    assert (renamed["id"], renamed["old"], renamed["new"]) == (node.node_id, "n1", "rack-1")

    # The workload is the renamed node's, and its agent is reached under the new name.
    [listed] = cli_json(ssh_lab, env, "workload", "list", "--json")["workloads"]
    assert listed["workload_id"] == started["workload_id"] and listed["nodes"] == ["rack-1"]
    assert listed["node_ids"] == {"rack-1": node.node_id} and listed["state"] == "ready"  # still runs
    assert [r["node"] for r in listed["ranks"]] == ["rack-1"]
    # Its last known state, recorded by the checks above, is still its own.
    [entry] = cli_json(ssh_lab, env, "node", "list", "--json")["nodes"]
    assert (entry["name"], entry["node_id"], entry["state"]) == ("rack-1", node.node_id, "online")
    assert entry["former_names"] == ["n1"]
    # So is its telemetry history.
    with HistoryStore() as history:
        assert set(history.load(3600)) == {node.node_id, "(cluster)"}
        named = history.load_named(3600, NodeNames.current())
    assert "n1" not in named and len(named["rack-1"].t) >= 3
    status = cli_json(ssh_lab, env, "node", "status", "rack-1", "--json")["nodes"][0]
    assert status["id"] == node.node_id and status["snapshot"] is not None

    stopped = sparksync(ssh_lab, env, "workload", "stop", started["workload_id"])
    assert stopped.returncode == 0, stopped.stderr
    assert cli_json(ssh_lab, env, "workload", "list", "--json") == {"workloads": []}


def test_a_paired_nodes_advertising_agent_is_its_row_not_a_second_one(lab_agents, real_keyring):  # noqa: F811
    """The lab's agents advertise this machine's /etc/ssh keys, not their sshd's: the node id joins them."""
    ssh_lab, agents = lab_agents(1)
    node, lab_node = Registry().get("n1"), ssh_lab.nodes[0]
    agents.stop(lab_node)
    agents.start(lab_node, "n1", advertise=True)
    env = cli_env(real_keyring)
    deadline, found = time.monotonic() + 60, []
    while not found and time.monotonic() < deadline:
        seen = cli_json(ssh_lab, env, "node", "discover", "--json", "--timeout", "4",
                        "--interface", ssh_lab.client.ip)  # fmt: skip
        found = [DiscoveredNode.model_validate(d) for d in seen if d.get("node_id") == node.node_id]
    assert found, "the agent's advertisement was not heard"
    (sighting,) = found
    assert sighting.kind == "agent" and lab_node.ip in sighting.addresses

    rows = NodeRows()
    rows.set_paired(Registry().list())
    rows.set_discovered([sighting])
    (row,) = rows.rows()  # one machine, one row: the paired one
    assert row.paired and row.name == "n1" and row.node_id == node.node_id
    assert row.reason == "seen on the network" and row.last_seen == sighting.last_seen
