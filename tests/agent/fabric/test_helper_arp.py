"""The root helper's ARP settings on the netplan path (DGX OS), where the lab cannot run netplan apply.

The netdevs are a fake /proc/sys tree and iproute2 and netplan apply are stubbed: what this covers is the
sysctl.d file and the per-netdev values, saved, written and put back by rollback. The iproute2 path runs
for real in tests/lab/test_fabric_helper_lab.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sparksync_agent.fabric import arp, helper
from sparksync_agent.protocol import InterfacePlan, NodeFabricPlan

PLAN = NodeFabricPlan(plan_id="p1", interfaces=[
    InterfacePlan(name="enp1s0f0np0", addresses=["10.100.0.1/24"]),
    InterfacePlan(name="enP2p1s0f0np0", addresses=["10.100.1.1/24"]),
])


@pytest.fixture
def node(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    for name, ignore, announce in (("all", 0, 0), ("enp1s0f0np0", 0, 0), ("enP2p1s0f0np0", 0, 1), ("enP7s7", 0, 0)):
        (proc / name).mkdir(parents=True)
        (proc / name / "arp_ignore").write_text(f"{ignore}\n")
        (proc / name / "arp_announce").write_text(f"{announce}\n")
    monkeypatch.setattr(arp, "PROC_CONF", proc)
    monkeypatch.setattr(arp, "SYSCTL_FILE", tmp_path / "etc" / "sysctl.d" / "60-sparksync-fabric.conf")
    monkeypatch.setattr(helper, "NETPLAN_FILE", tmp_path / "etc" / "netplan" / "40-sparksync-fabric.yaml")
    netdevs = {i.name: {"exists": True, "mtu": 1500, "up": True, "addresses": []} for i in PLAN.interfaces}
    applied: list[str] = []

    def netplan_apply() -> None:  # what netplan would do with the file: the netdevs get the plan
        applied.append(helper.NETPLAN_FILE.read_text() if helper.NETPLAN_FILE.exists() else "")
        for iface in PLAN.interfaces:
            if helper.NETPLAN_FILE.exists():
                netdevs[iface.name].update(mtu=iface.mtu, addresses=list(iface.addresses))

    monkeypatch.setattr(helper, "_netplan_apply", netplan_apply)
    monkeypatch.setattr(helper, "capture", lambda names: {n: dict(netdevs.get(n, {"exists": False})) for n in names})
    monkeypatch.setattr(helper, "configure", lambda name, addresses, mtu, up=True: netdevs[name].update(
        mtu=mtu, addresses=list(addresses), up=up))
    monkeypatch.setattr(helper.netplan, "validate", lambda text: (True, "netplan generate wrote 10-netplan.network"))
    return tmp_path, proc, applied


def values(proc: Path, name: str) -> tuple[int, int]:
    return int((proc / name / "arp_ignore").read_text()), int((proc / name / "arp_announce").read_text())


def test_netplan_apply_writes_our_sysctl_file_and_rollback_removes_it(node):
    root, proc, applied = node
    result = helper.apply(PLAN, "n1", root=root / "state", mode="netplan")
    assert result.ok, result
    text = arp.SYSCTL_FILE.read_text()
    for name in ("enp1s0f0np0", "enP2p1s0f0np0"):
        assert f"net.ipv4.conf.{name}.arp_ignore = 1\n" in text
        assert f"net.ipv4.conf.{name}.arp_announce = 2\n" in text
        assert values(proc, name) == (1, 2)  # set now too, not only at the next boot
    assert "enP7s7" not in text and values(proc, "enP7s7") == (0, 0) and values(proc, "all") == (0, 0)
    assert arp.SYSCTL_FILE.stat().st_mode & 0o777 == 0o644
    rollback = helper.rollback("n1", root=root / "state", mode="netplan")
    assert rollback.ok, rollback
    assert not arp.SYSCTL_FILE.exists()
    assert values(proc, "enp1s0f0np0") == (0, 0) and values(proc, "enP2p1s0f0np0") == (0, 1)


def test_rollback_restores_a_sysctl_file_that_was_there(node):
    root, proc, _ = node
    arp.SYSCTL_FILE.parent.mkdir(parents=True)
    arp.SYSCTL_FILE.write_text("# the admin's own\n")
    assert helper.apply(PLAN, "n1", root=root / "state", mode="netplan").ok
    assert helper.apply(PLAN.model_copy(update={"plan_id": "p2"}), "n1", root=root / "state", mode="netplan").ok
    assert "arp_ignore = 1" in arp.SYSCTL_FILE.read_text()
    assert helper.rollback("n1", root=root / "state", mode="netplan").ok
    assert arp.SYSCTL_FILE.read_text() == "# the admin's own\n"
    assert values(proc, "enP2p1s0f0np0") == (0, 1)


def test_a_failed_apply_puts_the_values_back(node, monkeypatch):
    root, proc, _ = node

    def broken() -> None:
        raise helper.StepFailed("netplan apply failed: boom")

    monkeypatch.setattr(helper, "_netplan_apply", broken)
    result = helper.apply(PLAN, "n1", root=root / "state", mode="netplan")
    assert not result.ok and result.restored and "boom" in result.error
    assert not arp.SYSCTL_FILE.exists()
    assert values(proc, "enp1s0f0np0") == (0, 0) and values(proc, "enP2p1s0f0np0") == (0, 1)
