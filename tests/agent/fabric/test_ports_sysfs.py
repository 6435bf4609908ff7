"""The CX-7 netdevs as a fake sysfs tree shows them: names, twins, carrier, speed, RoCE devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparksync_agent.fabric.ports import fabric_netdevs, is_fabric_name, networks_in_use, port_of
from sparksync_agent.fabric.report import FabricInspector

SPARK = {
    # name: (carrier, speed, mtu, mac, roce device)
    "enp1s0f0np0": ("1", "200000", "9000", "4C:BB:47:00:00:01", "rocep1s0f0"),
    "enP2p1s0f0np0": ("1", "200000", "9000", "4c:bb:47:00:00:02", "roceP2p1s0f0"),
    "enp1s0f1np1": ("0", "-1", "1500", "4c:bb:47:00:00:03", "rocep1s0f1"),
    "enP2p1s0f1np1": (None, None, "1500", "4c:bb:47:00:00:04", "roceP2p1s0f1"),  # down: carrier unreadable
    "enP7s7": ("1", "10000", "1500", "4c:bb:47:00:00:07", None),  # management
    "wlP9s9": ("1", None, "1500", "4c:bb:47:00:00:09", None),
    "lo": ("1", None, "65536", "00:00:00:00:00:00", None),
}


def fake_sys(root: Path, interfaces=SPARK) -> Path:
    for name, (carrier, speed, mtu, mac, roce) in interfaces.items():
        base = root / "class" / "net" / name
        base.mkdir(parents=True)
        for attr, value in (("carrier", carrier), ("speed", speed), ("mtu", mtu), ("address", mac),
                            ("operstate", "up" if carrier == "1" else "down")):
            if value is not None:
                (base / attr).write_text(value + "\n")
        if roce:
            (base / "device" / "infiniband" / roce).mkdir(parents=True)
    return root


ADDRESSES = {
    "enp1s0f0np0": ["10.100.0.1/24", "fe80::4ebb:47ff:fe00:1/64"],
    "enP7s7": ["192.168.1.20/24", "fe80::1/64"],
    "wlP9s9": ["10.0.5.7/16"],
    "lo": ["127.0.0.1/8"],
}


@pytest.mark.parametrize(("name", "port", "twin"), [
    ("enp1s0f0np0", 0, 0), ("enP2p1s0f0np0", 0, 1), ("enp1s0f1np1", 1, 0), ("enP2p1s0f1np1", 1, 1)])
def test_cx7_names(name, port, twin):
    assert is_fabric_name(name) and port_of(name) == (port, twin)


@pytest.mark.parametrize("name", ["enP7s7", "wlP9s9", "eth0", "lo", "veth1", "enp1s0f0", "docker0"])
def test_other_names_are_never_fabric(name):
    assert not is_fabric_name(name)


def test_netdevs_from_a_fake_tree(tmp_path):
    netdevs = fabric_netdevs(fake_sys(tmp_path), lambda: ADDRESSES)
    assert [d.name for d in netdevs] == ["enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"]
    first, _, dark, down = netdevs
    assert (first.carrier, first.speed_mbps, first.mtu, first.mac) == (True, 200_000, 9000, "4c:bb:47:00:00:01")
    assert first.rdma_device == "rocep1s0f0" and first.ipv4 == ["10.100.0.1/24"]
    assert first.ipv6_link_local == "fe80::4ebb:47ff:fe00:1"
    assert (dark.carrier, dark.speed_mbps) == (False, None)  # the kernel says -1 with no link
    assert (down.carrier, down.speed_mbps, down.rdma_device) == (None, None, "roceP2p1s0f1")


def test_netdev_without_infiniband_dir_has_no_roce_device(tmp_path):
    tree = {"enp1s0f0np0": ("1", "200000", "1500", "02:00:00:00:00:01", None)}
    [netdev] = fabric_netdevs(fake_sys(tmp_path, tree), lambda: {})
    assert netdev.rdma_device is None


def test_networks_in_use_leave_out_fabric_and_loopback():
    assert networks_in_use(lambda: ADDRESSES) == [("enP7s7", "192.168.1.20/24"), ("wlP9s9", "10.0.5.7/16")]


def test_report_without_probe(tmp_path):
    report = FabricInspector("node-1", fake_sys(tmp_path), lambda: ADDRESSES).report(probe=False)
    assert report.node_id == "node-1" and not report.probed
    assert [(p.index, p.interfaces) for p in report.ports] == [
        (0, ["enp1s0f0np0", "enP2p1s0f0np0"]), (1, ["enp1s0f1np1", "enP2p1s0f1np1"])]
    assert [i.rdma_device for i in report.interfaces] == ["rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "roceP2p1s0f1"]
    assert [(n.interface, n.address) for n in report.networks_in_use] == [
        ("enP7s7", "192.168.1.20/24"), ("wlP9s9", "10.0.5.7/16")]


def test_no_net_dir_means_no_fabric(tmp_path):
    assert fabric_netdevs(tmp_path, lambda: {}) == []
