"""The root helper on a lab node's CX-7-like ports, with real iproute2 and real netplan generate."""

from __future__ import annotations

import json
import secrets
import shutil
import sys

import pytest
from sparksync_agent.fabric.state import STATE_ROOT
from sparksync_agent.protocol import FabricResult, InterfacePlan, NodeFabricPlan

from tests.lab.fabric_lab import FabricLab

pytestmark = pytest.mark.lab

PLAN = NodeFabricPlan(plan_id="p1", interfaces=[
    InterfacePlan(name="enp1s0f0np0", addresses=["10.100.0.1/24"]),
    InterfacePlan(name="enP2p1s0f0np0", addresses=["10.100.1.1/24"]),
    InterfacePlan(name="enp1s0f1np1", addresses=["10.100.2.1/24"]),
    InterfacePlan(name="enP2p1s0f1np1", addresses=["10.100.3.1/24"]),
])


@pytest.fixture
def node(lab_factory, tmp_path):
    lab = lab_factory(2)
    fabric = FabricLab(lab)
    fabric.direct(*lab.nodes)
    node_id = "test" + secrets.token_hex(6)
    yield lab, fabric, lab.nodes[0], node_id
    shutil.rmtree(STATE_ROOT / node_id, ignore_errors=True)


def helper(lab, node, tmp_path, node_id, *args, plan: NodeFabricPlan | None = None):
    argv = [sys.executable, "-I", "-m", "sparksync_agent.fabric.helper", *args, "--node-id", node_id]
    if plan is not None:
        request = tmp_path / "request.json"
        request.write_text(plan.model_dump_json())
        argv += ["--request", str(request)]
    done = lab.exec(node, argv)
    return done.returncode, FabricResult.model_validate_json(done.stdout.strip().splitlines()[-1])


def test_apply_then_rollback(node, tmp_path):
    lab, fabric, n1, node_id = node
    lab.exec(n1, ["ip", "addr", "add", "192.168.77.5/24", "dev", "enp1s0f1np1"], check=True)  # the user's own
    lab.exec(n1, ["sysctl", "-qw", "net.ipv4.conf.enP2p1s0f1np1.arp_announce=1"], check=True)  # the user's own
    assert arp_values(lab, n1, "enp1s0f0np0") == (0, 0)
    all_before = arp_values(lab, n1, "all")
    rc, result = helper(lab, n1, tmp_path, node_id, "apply", plan=PLAN)
    assert rc == 0 and result.ok and result.applier == "iproute2", result
    for iface in PLAN.interfaces:  # each twin answers ARP for its own addresses only
        assert arp_values(lab, n1, iface.name) == (1, 2), iface.name
    assert arp_values(lab, n1, "all") == all_before  # the kernel takes max(all, netdev); all is left alone
    assert result.netplan_validated and "10-netplan-enp1s0f0np0.network" in result.steps[0]
    assert "mtu: 9000" in result.netplan_yaml
    for iface in PLAN.interfaces:
        assert fabric.addresses(n1, iface.name) == iface.addresses
        assert fabric.mtu(n1, iface.name) == 9000
    assert json.loads((STATE_ROOT / node_id / "applied.json").read_text())["plan_id"] == "p1"
    # Applying again (a new plan) keeps the state from before SparkSync for the rollback.
    again = PLAN.model_copy(update={"plan_id": "p2"})
    assert helper(lab, n1, tmp_path, node_id, "apply", plan=again)[1].ok
    rc, result = helper(lab, n1, tmp_path, node_id, "rollback")
    assert rc == 0 and result.ok, result
    assert fabric.addresses(n1, "enp1s0f1np1") == ["192.168.77.5/24"]
    assert fabric.addresses(n1, "enp1s0f0np0") == [] and fabric.mtu(n1, "enp1s0f0np0") == 1500
    assert arp_values(lab, n1, "enp1s0f0np0") == (0, 0)
    assert arp_values(lab, n1, "enP2p1s0f1np1") == (0, 1)
    assert not (STATE_ROOT / node_id / "applied.json").exists()


def test_failure_mid_apply_leaves_the_node_as_it_was(node, tmp_path):
    lab, fabric, n1, node_id = node
    fabric.remove_interface(n1, "enP2p1s0f1np1")  # the last step then fails
    rc, result = helper(lab, n1, tmp_path, node_id, "apply", plan=PLAN)
    assert rc == 1 and not result.ok and result.restored
    assert "enP2p1s0f1np1" in result.error
    assert any(step.startswith("enp1s0f0np0: MTU 9000") for step in result.steps)  # it had begun
    for name in ("enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1"):
        assert fabric.addresses(n1, name) == [] and fabric.mtu(n1, name) == 1500
        assert arp_values(lab, n1, name) == (0, 0)
    assert not (STATE_ROOT / node_id / "applied.json").exists()
    assert not (STATE_ROOT / node_id / "previous.json").exists()


def test_undo_last_apply_returns_to_the_plan_before(node, tmp_path):
    lab, fabric, n1, node_id = node
    assert helper(lab, n1, tmp_path, node_id, "apply", plan=PLAN)[1].ok
    moved = NodeFabricPlan(plan_id="p2", interfaces=[InterfacePlan(name="enp1s0f0np0", addresses=["10.200.0.1/24"])])
    assert helper(lab, n1, tmp_path, node_id, "apply", plan=moved)[1].ok
    rc, result = helper(lab, n1, tmp_path, node_id, "rollback", "--last")
    assert rc == 0 and result.ok
    assert fabric.addresses(n1, "enp1s0f0np0") == ["10.100.0.1/24"]
    assert json.loads((STATE_ROOT / node_id / "applied.json").read_text())["plan_id"] == "p1"


@pytest.mark.parametrize(("interfaces", "why"), [
    ([InterfacePlan(name="enP7s7", addresses=["10.100.0.1/24"])], "not a ConnectX-7"),
    ([InterfacePlan(name="eth0", addresses=["10.100.0.1/24"])], "not a ConnectX-7"),
    ([InterfacePlan(name="enp1s0f0np0", addresses=["10.100.0.1/24"]),
      InterfacePlan(name="enP2p1s0f0np0", addresses=["10.100.0.2/24"])], "share subnet"),
    ([InterfacePlan(name="enp1s0f0np0", addresses=["10.100.0.1/24"], mtu=20000)], "MTU 20000"),
])
def test_refusals_change_nothing(node, tmp_path, interfaces, why):
    lab, fabric, n1, node_id = node
    before = links(lab, n1)
    rc, result = helper(lab, n1, tmp_path, node_id, "apply", plan=NodeFabricPlan(plan_id="x", interfaces=interfaces))
    assert rc == 2 and why in result.error
    assert links(lab, n1) == before
    assert not (STATE_ROOT / node_id).exists()


def links(lab, node) -> dict[str, tuple]:
    """Every interface's MTU, flags and IPv4 addresses (IPv6 DAD flags change on their own)."""
    entries = json.loads(lab.exec(node, ["ip", "-j", "addr"], check=True).stdout)
    return {e["ifname"]: (e["mtu"], tuple(e["flags"]), tuple(sorted(
        f"{a['local']}/{a['prefixlen']}" for a in e.get("addr_info", []) if a["family"] == "inet")))
        for e in entries}


def arp_values(lab, node, name: str) -> tuple[int, int]:
    """(arp_ignore, arp_announce) of one netdev (or ``all``), read inside the node's namespace."""
    conf = f"/proc/sys/net/ipv4/conf/{name}"
    done = lab.exec(node, ["cat", f"{conf}/arp_ignore", f"{conf}/arp_announce"], check=True)
    ignore, announce = done.stdout.split()
    return int(ignore), int(announce)
