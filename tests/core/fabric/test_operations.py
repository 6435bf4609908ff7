"""All or nothing across nodes, against agent-shaped fakes (the real path is tests/lab/test_fabric_lab.py)."""

from __future__ import annotations

import threading

import pytest
from sparksync_agent.protocol import FabricResult, NetworkInUse

from sparksync.core.base.errors import AgentRequestError, AgentUnreachableError
from sparksync.core.fabric import (
    FabricOperations,
    FabricSetupError,
    SubnetClashError,
    build_cabling,
    classify,
    make_plan,
)
from tests.core.fabric.reports import Cabling

NODES = [f"n{i}" for i in range(1, 9)]
PASSWORD = "pw"


class FakeClient:
    def __init__(self, cluster: FakeAgents, node: str):
        self.cluster, self.node = cluster, node

    def fabric(self, probe: bool = True):
        return self.cluster.reports[self.node]

    def fabric_apply(self, plan, sudo_password):
        self.cluster.log(self.node, "apply", sudo_password)
        if self.node in self.cluster.fail:
            return FabricResult(ok=False, action="apply", applier="iproute2", error="mtu refused", restored=True)
        if sudo_password != PASSWORD:
            raise AgentRequestError("sudo refused: 1 incorrect password attempt", status=403, code="sudo_refused")
        return FabricResult(ok=True, action="apply", applier="iproute2", plan_id=plan.plan_id)

    def fabric_rollback(self, sudo_password, last=False):
        self.cluster.log(self.node, "undo" if last else "rollback", sudo_password)
        return FabricResult(ok=True, action="rollback", applier="iproute2")


class FakeAgents:
    def __init__(self, cabling: Cabling):
        self.reports = cabling.reports()
        self.fail: set[str] = set()
        self.unreachable: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def call(self, node, action):
        if node in self.unreachable:
            raise AgentUnreachableError(f"no answer from {node}'s agent")
        return action(FakeClient(self, node))

    def log(self, node, what, password):
        with self.lock:
            self.calls.append((node, what))

    def did(self, what):
        return sorted(n for n, w in self.calls if w == what)


def plan_of(agents: FakeAgents):
    return make_plan(classify(build_cabling(agents.reports)), agents.reports)


def test_every_node_applies_and_progress_is_per_node():
    agents = FakeAgents(Cabling(NODES).switch())
    seen = []
    report = FabricOperations(agents, seen.append).apply(plan_of(agents), PASSWORD)
    assert report.ok and agents.did("apply") == NODES and not agents.did("undo")
    done = {(p.node, p.stage) for p in seen if p.ok}
    assert {(n, "apply") for n in NODES} <= done and {(n, "detect") for n in NODES} <= done


def test_a_failure_on_node_5_undoes_the_others_and_names_it():
    agents = FakeAgents(Cabling(NODES).switch())
    agents.fail.add("n5")
    report = FabricOperations(agents).apply(plan_of(agents), PASSWORD)
    assert not report.ok
    assert agents.did("undo") == [n for n in NODES if n != "n5"]
    assert report.outcomes["n5"].error == "mtu refused (this node was put back as it was)"
    assert "apply failed on n5: mtu refused" in report.summary() and "undone on n1" in report.summary()


def test_wrong_password_everywhere_undoes_nothing():
    agents = FakeAgents(Cabling(NODES).switch())
    report = FabricOperations(agents).apply(plan_of(agents), "nope")
    assert not report.ok and not agents.did("undo")
    assert {o.code for o in report.outcomes.values()} == {"sudo_refused"}


def test_an_unreachable_node_stops_before_anything_changes():
    agents = FakeAgents(Cabling(NODES).switch())
    plan = plan_of(agents)
    agents.unreachable.add("n3")
    with pytest.raises(FabricSetupError, match="n3"):
        FabricOperations(agents).apply(plan, PASSWORD)
    assert not agents.did("apply")


def test_a_clash_that_appeared_since_the_plan_is_refused_before_anything_changes():
    agents = FakeAgents(Cabling(NODES).switch())
    plan = plan_of(agents)
    agents.reports["n7"].networks_in_use.append(NetworkInUse(interface="wg0", address="10.100.1.9/24"))
    with pytest.raises(SubnetClashError, match="node n7"):
        FabricOperations(agents).apply(plan, PASSWORD)
    assert not agents.did("apply")
