"""Node states and telemetry through SSH tunnels, against real sshd nodes running real agents.

Each node runs ``sparksync-agent serve`` as its test user with the deploy
layout's state dir (``lab_agents``); the client core reads the token and
endpoint over SFTP and reaches the agent through a tunnel. The CLI runs as
its own process inside the lab's client namespace, as a user would run it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest
from sparksync_agent.protocol import Sample

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.fleet.follower import Gap, SampleIn, TelemetryFollower
from sparksync.core.fleet.state import Cause, NodeState
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.connection import SshSettings
from sparksync.core.base.backoff import Backoff
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.lab_agents import LabAgents, make_agent_python
from tests.lab.nsnet import in_netns
from tests.lab.test_pairing_lab import pair

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
# A cut link is noticed in about keepalive + dead_after; retries come quickly once it is back.
LINK = SshSettings(
    connect_timeout_s=1, handshake_timeout_s=5, auth_timeout_s=10, keepalive_s=0.5, dead_after_s=2
)
QUICK_RETRY = Backoff(first_s=0.2, factor=2.0, max_s=1.0)
WAIT_S = 120.0  # generous: the machine is shared and loaded


@pytest.fixture(scope="session")
def agent_python():
    python, root = make_agent_python()
    yield python
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


@pytest.fixture
def lab_agents(ssh_lab_factory, client_key, agent_python):
    """``make(n, sample_hz)``: n paired lab nodes (named n1..), each running a real agent."""
    made: list[LabAgents] = []

    def make(n: int, sample_hz: float = 2.0):
        ssh_lab = ssh_lab_factory(n)
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda node: pair(ssh_lab, node, client_key, name=node.name), ssh_lab.nodes))
        agents = LabAgents(ssh_lab, client_key, agent_python)
        made.append(agents)
        agents.start_many(ssh_lab.nodes, sample_hz)
        return ssh_lab, agents

    yield make
    for agents in made:
        agents.stop_all()  # even when the test failed; the lab's teardown then removes the users


def open_fleet(ssh_lab, client_key, **options) -> Fleet:
    return Fleet(client_key, dialer=ssh_lab.dialer, settings=LINK, backoff=QUICK_RETRY, **options)


def sparksync(ssh_lab, env: dict[str, str], *args: str):
    """``sparksync ARGS`` as its own process inside the lab's client namespace."""
    argv = [sys.executable, "-m", "sparksync", *args]
    return ssh_lab.lab.exec(ssh_lab.client, argv, env=env, cwd=REPO, timeout=300)


def cli_env(keyring) -> dict[str, str]:
    env = {**os.environ, **keyring.env}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    return env


def wait_for(predicate, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def agent_last_seq(agents: LabAgents, node) -> int:
    """The agent's newest seq, asked directly inside the node (not through SSH)."""
    port, token = agents.endpoint(node).port, agents.token(node)

    def ask() -> int:
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10, trust_env=False) as http:
            return http.get(f"http://127.0.0.1:{port}/v1/status").json()["last_seq"]

    return in_netns(node.netns, ask)


# --- eight nodes at once -------------------------------------------------------------------------


def test_status_reads_telemetry_from_eight_nodes_through_tunnels(lab_agents, real_keyring):  # noqa: F811
    ssh_lab, agents = lab_agents(8)
    env = cli_env(real_keyring)

    result = sparksync(ssh_lab, env, "node", "status", "--json", "--timeout", "90")
    assert result.returncode == 0, result.stderr
    nodes = json.loads(result.stdout)["nodes"]
    assert [n["name"] for n in nodes] == Registry().names()  # paired in parallel: the registry's order
    by_name = {n["name"]: n for n in nodes}
    assert sorted(by_name) == sorted(n.name for n in ssh_lab.nodes)
    for node in ssh_lab.nodes:
        entry = by_name[node.name]
        assert (entry["source"], entry["state"], entry["cause"], entry["error"]) == (
            "ssh",
            "online",
            None,
            None,
        )
        snapshot = entry["snapshot"]
        # Each answer came from that node's own agent: its hostname, its run.
        assert snapshot["info"]["hostname"] == ssh_lab.hostname(node)
        assert snapshot["run_id"] == agents.endpoint(node).run_id
        assert snapshot["latest"]["seq"] >= 1 and snapshot["latest"]["memory"]["total_bytes"] > 0
        assert entry["last_seen"] is not None

    listed = json.loads(sparksync(ssh_lab, env, "node", "list", "--json").stdout)["nodes"]
    assert sorted((n["name"], n["state"]) for n in listed) == [(n.name, "online") for n in ssh_lab.nodes]
    assert all(n["last_seen"] and n["checked_at"] and n["host_key"]["fingerprint"] for n in listed)

    table = sparksync(ssh_lab, env, "node", "status", "n3", "n5")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATE"]
    assert [line.split()[:2] for line in lines[1:3]] == [["n3", "online"], ["n5", "online"]]


# --- a cut link ----------------------------------------------------------------------------------


def test_a_cut_link_goes_offline_comes_back_and_loses_no_sample(lab_agents, client_key):
    ssh_lab, agents = lab_agents(2, sample_hz=10)
    cut, other = ssh_lab.nodes
    samples: dict[str, list[Sample]] = defaultdict(list)
    states: dict[str, list[NodeState]] = defaultdict(list)
    lock = threading.Lock()

    def on_event(event) -> None:
        if isinstance(event, SampleIn):
            with lock:
                samples[event.node].append(event.sample)

    def on_change(old, new) -> None:
        with lock:
            states[new.name].append(new.state)

    def count(name: str) -> int:
        with lock:
            return len(samples[name])

    fleet = open_fleet(ssh_lab, client_key, on_change=on_change)
    with fleet, TelemetryFollower(fleet, fleet.cluster(), on_event=on_event) as follower:
        wait_for(lambda: count(cut.name) >= 20 and count(other.name) >= 20, "samples from both nodes")
        before_cut = follower.position(cut.name).last_seq
        try:
            ssh_lab.set_link(cut, up=False)
            cut_at = time.monotonic()
            wait_for(lambda: NodeState.OFFLINE in states[cut.name], "the cut node going offline")
            noticed = time.monotonic() - cut_at
            # The agent keeps sampling into its ring while nobody can reach it.
            wait_for(lambda: agent_last_seq(agents, cut) >= before_cut + 50, "samples taken during the cut")
            during_cut = agent_last_seq(agents, cut)
            other_during_cut = count(other.name)
        finally:
            ssh_lab.set_link(cut, up=True)
        back_at = time.monotonic()
        wait_for(lambda: states[cut.name][-1:] == [NodeState.ONLINE], "the node coming back online")
        wait_for(lambda: follower.position(cut.name).last_seq >= during_cut + 10, "the missed samples")
        caught_up = time.monotonic() - back_at
        wait_for(lambda: count(other.name) > other_during_cut + 10, "the other node still flowing")
        position = follower.position(cut.name)
    print(
        f"\ncut noticed (offline) after {noticed:.1f} s; {during_cut - before_cut} samples taken during the "
        f"cut; all fetched {caught_up:.1f} s after the link came back"
    )

    seqs = [s.seq for s in samples[cut.name]]
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "a gap or a duplicate in the resumed telemetry"
    assert set(range(before_cut + 1, during_cut + 1)) <= set(seqs)  # what the ring kept during the cut
    assert position.lost == 0 and position.run_id == agents.endpoint(cut).run_id
    assert states[cut.name][0] is NodeState.ONLINE and states[cut.name][-1] is NodeState.ONLINE
    assert NodeState.OFFLINE in states[cut.name]
    assert NodeState.OFFLINE not in states[other.name]
    other_seqs = [s.seq for s in samples[other.name]]
    assert other_seqs == list(range(other_seqs[0], other_seqs[-1] + 1))


# --- an agent that stopped, and its token ------------------------------------------------------


def test_a_stopped_agent_is_degraded_with_the_reason_and_a_restarted_one_is_found(lab_agents, client_key):
    ssh_lab, agents = lab_agents(1)
    node = ssh_lab.nodes[0]
    changes = []
    with open_fleet(ssh_lab, client_key, on_change=lambda old, new: changes.append(new.state)) as fleet:
        paired = fleet.nodes([node.name])[0]
        assert fleet.check(paired, with_snapshot=True).ok

        agents.stop(node, signal.SIGKILL)  # killed: its endpoint.json stays behind
        report = fleet.check(paired)
        assert (report.status.state, report.status.cause) == (
            NodeState.DEGRADED,
            Cause.AGENT_NOT_RUNNING,
        ), report.status.reason
        assert "nothing listens on its port" in report.status.reason

        restarted = agents.start(node, node.name)  # a new run on another port
        report = fleet.check(paired, with_snapshot=True)
        assert report.ok and report.snapshot.run_id == restarted.run_id

        agents.stop(node, signal.SIGTERM)  # a clean stop removes endpoint.json
        report = fleet.check(paired)
        assert (report.status.state, report.status.cause) == (NodeState.DEGRADED, Cause.AGENT_NOT_RUNNING)
        assert LAYOUT.endpoint in report.status.reason and "is missing" in report.status.reason

        token = agents.home(node) / LAYOUT.token
        token.chmod(0)  # the SSH user can no longer read it
        report = fleet.check(paired)
        assert (report.status.state, report.status.cause) == (NodeState.DEGRADED, Cause.TOKEN_UNREADABLE)
        assert "permission denied" in report.status.reason
    assert changes == [
        NodeState.ONLINE,
        NodeState.DEGRADED,
        NodeState.ONLINE,
        NodeState.DEGRADED,
        NodeState.DEGRADED,
    ]


# --- host keys and refused connections ---------------------------------------------------------


def test_a_changed_host_key_and_a_stopped_sshd_show_as_offline_with_the_reason(lab_agents, real_keyring):  # noqa: F811
    ssh_lab, _agents = lab_agents(1)
    node = ssh_lab.nodes[0]
    env = cli_env(real_keyring)
    old_fp = ssh_lab.fingerprint(node)
    ssh_lab.regenerate_host_key(node)

    result = sparksync(ssh_lab, env, "node", "status", "--json", "--timeout", "60")
    assert result.returncode == 11, result.stderr
    [entry] = json.loads(result.stdout)["nodes"]
    assert (entry["state"], entry["cause"], entry["snapshot"]) == ("offline", "host-key-changed", None)
    assert old_fp in entry["reason"] and ssh_lab.fingerprint(node) in entry["reason"]
    assert entry["error"] == entry["reason"] and "host key" in result.stderr
    listed = json.loads(sparksync(ssh_lab, env, "node", "list", "--json").stdout)["nodes"]
    assert (listed[0]["state"], listed[0]["cause"]) == ("offline", "host-key-changed")

    ssh_lab.stop_sshd(node)
    result = sparksync(ssh_lab, env, "node", "status", "--json", "--timeout", "60")
    assert result.returncode == 11, result.stderr
    [entry] = json.loads(result.stdout)["nodes"]
    assert (entry["state"], entry["cause"]) == ("offline", "refused")
    assert "connection refused" in entry["reason"]

    ssh_lab.service.restart(ssh_lab.lab, node)  # sshd back (with the new key): still refused by us
    checked = sparksync(ssh_lab, env, "node", "list", "--check", "--json", "--timeout", "60")
    assert checked.returncode == 0, checked.stderr
    [listed] = json.loads(checked.stdout)["nodes"]
    assert (listed["state"], listed["cause"]) == ("offline", "host-key-changed")


# --- every node through the fleet's links ------------------------------------------------------


def test_the_fleet_reaches_this_computer_locally_and_the_paired_nodes_through_tunnels(lab_agents, client_key):
    ssh_lab, agents = lab_agents(2)
    with open_fleet(ssh_lab, client_key) as fleet:
        # this computer first, then the paired nodes (in the order they were paired: here concurrently)
        names = fleet.names()
        assert names[0] == LOCAL_NODE_NAME and sorted(names[1:]) == sorted(n.name for n in ssh_lab.nodes)
        assert fleet.cluster() == names[1:]  # this computer is beside the cluster
        assert [fleet.agent(name).kind for name in fleet.names()] == ["local", "ssh", "ssh"]
        first, second = ssh_lab.nodes
        assert fleet.call(first.name, lambda c: c.snapshot()).info.hostname == ssh_lab.hostname(first)
        assert fleet.call(second.name, lambda c: c.hello()).run_id == agents.endpoint(second).run_id
        here = fleet.call("local", lambda c: c.snapshot())  # the client-run agent, on this computer's loopback
        assert fleet.local.agent is not None and here.run_id == fleet.local.agent.endpoint.run_id
        agent_pid = fleet.local.agent.pid
    assert not psutil.pid_exists(agent_pid)  # the fleet stopped the local agent it started


def test_the_follower_finds_a_restarted_agent_on_its_new_port(lab_agents, client_key):
    ssh_lab, agents = lab_agents(1, sample_hz=10)
    node = ssh_lab.nodes[0]
    states: list[NodeState] = []
    seen: dict[str, int] = defaultdict(int)
    events: list = []

    def on_event(event) -> None:
        events.append(event)
        if isinstance(event, SampleIn):
            seen[follower.position(event.node).run_id or ""] += 1

    fleet = open_fleet(ssh_lab, client_key, on_change=lambda old, new: states.append(new.state))
    follower = TelemetryFollower(fleet, [node.name], on_event=on_event)
    first = agents.endpoint(node)
    with fleet, follower:
        wait_for(lambda: seen[first.run_id] >= 10, "samples from the first run")
        agents.stop(node, signal.SIGTERM)
        stopped_at = time.time()
        wait_for(lambda: states[-1:] == [NodeState.DEGRADED], "the node reading degraded")
        second = agents.start(node, node.name, sample_hz=10)
        started_at = time.time()
        wait_for(lambda: seen[second.run_id] >= 10, "samples from the restarted agent")
    assert second.run_id != first.run_id
    assert states[0] is NodeState.ONLINE and states[-1] is NodeState.ONLINE
    assert fleet.status(fleet.nodes([node.name])[0]).cause is None
    # The time the agent was away is marked: from the old run's last sample to the new run's first.
    [gap] = [e for e in events if isinstance(e, Gap)]
    samples = [e.sample for e in events if isinstance(e, SampleIn)]
    i = events.index(gap)
    before = [e for e in events[:i] if isinstance(e, SampleIn)][-1].sample
    after = events[i + 1].sample  # the gap is told just before the sample that ends it
    assert gap.reason == "the agent restarted" and (gap.start, gap.end) == (before.ts, after.ts)
    assert gap.start <= stopped_at + 1 and gap.end >= started_at - 1  # it spans the downtime
    assert after.seq < before.seq and samples.index(after) == samples.index(before) + 1
