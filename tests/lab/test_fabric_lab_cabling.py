"""The CX-7-like lab fabric itself: carrier follows the cabling, twins share a cable's segment."""

from __future__ import annotations

import json
import subprocess
import pytest

from tests.lab.fabric_lab import CX7_INTERFACES, FabricLab

pytestmark = pytest.mark.lab


def carrier(lab, node, name: str) -> str:
    return lab.exec(node, ["cat", f"/sys/class/net/{name}/carrier"], check=True).stdout.strip()


def neighbours(lab, node, name: str) -> set[str]:
    """MACs that answer an all-nodes ping on ``name`` (the way the agent probes)."""
    lab.exec(node, ["ping", "-6", "-c", "2", "-i", "0.2", "-w", "2", f"ff02::1%{name}"])
    out = lab.exec(node, ["ip", "-6", "neigh", "show", "dev", name], check=True).stdout
    return {line.split("lladdr")[1].split()[0] for line in out.splitlines() if "lladdr" in line}


def test_ring_of_four_cables_port1_to_next_port0(lab_factory):
    lab = lab_factory(4)
    fabric = FabricLab(lab)
    fabric.ring()
    n1, n2 = lab.nodes[0], lab.nodes[1]
    for node in lab.nodes:
        assert all(carrier(lab, node, name) == "1" for name in CX7_INTERFACES)
    seen = neighbours(lab, n1, "enp1s0f1np1")
    assert seen == {fabric.mac(n2, "enp1s0f0np0"), fabric.mac(n2, "enP2p1s0f0np0"), fabric.mac(n1, "enP2p1s0f1np1")}


def test_uncabled_and_cut_ports_have_no_carrier(lab_factory):
    lab = lab_factory(2)
    fabric = FabricLab(lab)
    a, b = lab.nodes
    fabric.direct(a, b)
    assert carrier(lab, a, "enp1s0f0np0") == "1"
    assert carrier(lab, a, "enp1s0f1np1") == "0"  # port 1: nothing plugged in
    fabric.cut(b, 0)
    assert carrier(lab, b, "enp1s0f0np0") == "0"
    fabric.plug(b, 0)
    assert carrier(lab, b, "enp1s0f0np0") == "1"


def test_switch_puts_every_node_on_one_segment(lab_factory):
    lab = lab_factory(3)
    fabric = FabricLab(lab)
    fabric.switch(port=0)
    a = lab.nodes[0]
    seen = neighbours(lab, a, "enp1s0f0np0")
    others = {fabric.mac(n, name) for n in lab.nodes[1:] for name in ("enp1s0f0np0", "enP2p1s0f0np0")}
    assert others <= seen


def test_a_shaped_port_caps_both_directions(lab_factory):
    lab = lab_factory(2)
    fabric = FabricLab(lab)
    a, b = lab.nodes
    fabric.direct(a, b)
    lab.exec(b, ["ip", "addr", "add", "10.99.0.2/24", "dev", "enp1s0f0np0"], check=True)
    lab.exec(a, ["ip", "addr", "add", "10.99.0.1/24", "dev", "enp1s0f0np0"], check=True)

    def mbits(*extra: str) -> float:
        """One second of iperf3 from a to b (``-R``: b to a), as received."""
        server = lab.popen(b, ["iperf3", "-s", "-B", "10.99.0.2", "-1", "--forceflush"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
        try:
            while "listening" not in lab.read_line(server, 10):
                pass
            done = lab.exec(a, ["iperf3", "-c", "10.99.0.2", "-t", "1", "-J", *extra])
            result = json.loads(done.stdout)
            assert done.returncode == 0 and "error" not in result, done.stdout
            return result["end"]["sum_received"]["bits_per_second"] / 1e6
        finally:
            server.wait(10)
            server.stdout.close()

    assert mbits() > 200  # a veth carries far more than the cap below
    fabric.shape(b, 0, rate="50mbit")
    assert mbits() < 75  # the far end's ingress is capped
    assert mbits("-R") < 75  # and its egress
    fabric.unshape(b, 0)
    assert mbits() > 200
