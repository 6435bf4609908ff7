"""Topology inference from hand-built samples: direct, ring, switch, slow ports and MTU mismatches."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sparksync.core.topology import (
    LinkKind,
    TopologyKind,
    TopologySettings,
    WarningKind,
    build_topology,
    switch_name,
)
from sparksync.core.topology.ports import ipv4_interfaces
from tests.core.topology_samples import (
    GBIT,
    PORTS,
    direct_pair,
    management,
    port,
    ring,
    roce,
    sample,
    switched,
)


def test_two_nodes_on_one_subnet_are_a_direct_cable_with_each_directions_rate():
    topo = build_topology(direct_pair())
    assert topo.kind is TopologyKind.direct
    (link,) = topo.links
    assert (link.kind, link.a, link.b, str(link.network)) == (LinkKind.cable, "spark-1", "spark-2", "10.0.0.0/31")
    assert link.a_to_b_bits_per_s == pytest.approx(40e9)
    assert link.b_to_a_bits_per_s == pytest.approx(8e9)
    assert topo.warnings == () and topo.switches == ()


def test_the_management_network_is_no_fabric_link():
    samples = {n: sample(management(f"192.168.1.{i}")) for i, n in enumerate(("a", "b", "c"), 1)}
    topo = build_topology(samples)
    assert topo.kind is TopologyKind.none and topo.links == () and topo.warnings == ()


@pytest.mark.parametrize("n", [3, 4, 8])
def test_nodes_each_cabled_to_two_neighbours_make_a_ring(n):
    topo = build_topology(ring(n))
    assert topo.kind is TopologyKind.ring
    assert len(topo.links) == n and {link.kind for link in topo.links} == {LinkKind.cable}
    pairs = {frozenset((link.a, link.b)) for link in topo.links}
    assert frozenset(("spark-1", f"spark-{n}")) in pairs  # the ring closes
    assert topo.warnings == ()


def test_a_ring_with_one_cable_missing_is_no_ring():
    samples = ring(4)
    spark4 = samples["spark-4"]
    samples["spark-4"] = sample(*[p for p in spark4.net if p.name != PORTS[1]])  # 4 -> 1 unplugged
    topo = build_topology(samples)
    assert topo.kind is TopologyKind.mixed  # a chain
    assert len(topo.links) == 3
    assert [p.label for p in topo.unlinked_ports] == ["spark-1 enp1s0f0np0"]


def test_many_nodes_on_one_subnet_are_a_switch_with_up_and_down_rates():
    topo = build_topology(switched(8))
    assert topo.kind is TopologyKind.switch
    assert topo.switches == (switch_name(ipv4_interfaces(["10.10.0.1"])[0].network),) == ("switch 10.10.0.0/24",)
    assert len(topo.links) == 8 and all(link.b == "switch 10.10.0.0/24" for link in topo.links)
    three = next(link for link in topo.links if link.a == "spark-3")
    assert three.a_to_b_bits_per_s == pytest.approx(3e9)  # spark-3 sends 3 Gb/s into the switch
    assert three.b_to_a_bits_per_s == pytest.approx(2e9)  # and receives 2 Gb/s from it
    assert topo.warnings == ()


def test_a_port_negotiated_below_200_gbs_is_flagged_on_its_link():
    topo = build_topology(direct_pair(speed_mbps=100_000))
    (warning,) = topo.warnings
    assert warning.kind is WarningKind.slow_port and warning.nodes == ("spark-2",)
    assert "spark-2 enp1s0f0np0 runs at 100 Gb/s, below the expected 200 Gb/s" in warning.message
    assert topo.warnings_for(topo.links[0]) == [warning]


def test_the_expected_speed_is_a_setting():
    assert build_topology(direct_pair(speed_mbps=100_000), TopologySettings(expected_speed_mbps=100_000)).warnings == ()
    assert build_topology(direct_pair(speed_mbps=100_000), TopologySettings(expected_speed_mbps=None)).warnings == ()
    (warning,) = build_topology(direct_pair(), TopologySettings(expected_speed_mbps=400_000)).warnings[:1]
    assert "expected 400 Gb/s" in warning.message


def test_an_unknown_speed_is_not_a_slow_one():
    assert build_topology(direct_pair(speed_mbps=None)).warnings == ()


def test_an_mtu_mismatch_between_the_ends_of_a_cable_is_flagged():
    topo = build_topology(direct_pair(mtu=1500))
    (warning,) = topo.warnings
    assert warning.kind is WarningKind.mtu_mismatch
    assert "spark-1 enp1s0f0np0 has 9000, spark-2 enp1s0f0np0 has 1500" in warning.message
    assert warning.link_keys == (topo.links[0].key,)


def test_an_mtu_mismatch_on_a_switch_highlights_the_odd_port_only():
    topo = build_topology(switched(5, mtus={4: 1500}))
    (warning,) = topo.warnings
    assert warning.kind is WarningKind.mtu_mismatch and warning.nodes == ("spark-4",)
    odd = next(link for link in topo.links if link.a == "spark-4")
    assert warning.link_keys == (odd.key,)
    assert ("MTU mismatch on switch subnet 10.10.0.0/24: spark-4 enp1s0f0np0 has 1500 where the other ports "
            "have 9000") in warning.message


def test_roce_traffic_counts_in_the_link_rate():
    samples = direct_pair()
    first = samples["spark-1"]
    samples["spark-1"] = sample(*first.net, rdma=[roce("rocep1s0f0", rx=0, tx=10 * GBIT)])
    link = build_topology(samples).links[0]
    assert link.a_to_b_bits_per_s == pytest.approx(50e9)  # 40 Gb/s of TCP + 10 Gb/s of RDMA
    assert link.a_port.rdma_device == "rocep1s0f0"


def test_a_node_without_a_fabric_link_is_warned_about_once_the_others_are_linked():
    samples = {**direct_pair(), "spark-3": sample(management("192.168.1.13")), "spark-4": None}
    topo = build_topology(samples)
    no_link = [w for w in topo.warnings if w.kind is WarningKind.no_link]
    assert [w.nodes for w in no_link] == [("spark-3",), ("spark-4",)]
    assert "no fabric port is up" in no_link[0].message


def test_down_ports_and_ipv6_link_local_addresses_are_left_out():
    samples = direct_pair()
    samples["spark-3"] = sample(port(PORTS[0], "10.0.0.1/31", up=False), port(PORTS[1], "fe80::1%enp1s0f1np1"))
    topo = build_topology(samples)
    assert topo.kind is TopologyKind.direct and len(topo.links) == 1


def test_two_cables_between_the_same_two_nodes_are_two_links():
    samples = {
        "a": sample(port(PORTS[0], "10.0.0.1/30"), port(PORTS[1], "10.0.1.1/30")),
        "b": sample(port(PORTS[0], "10.0.0.2/30"), port(PORTS[1], "10.0.1.2/30")),
    }
    topo = build_topology(samples)
    assert topo.kind is TopologyKind.direct
    assert [(lk.a_port.name, lk.b_port.name) for lk in topo.links] == [(PORTS[0], PORTS[0]), (PORTS[1], PORTS[1])]
    assert len({lk.key for lk in topo.links}) == 2


def test_a_switch_plus_cables_is_mixed():
    samples = switched(3)
    samples["spark-1"] = sample(*samples["spark-1"].net, port(PORTS[1], "10.0.9.1/31"))
    samples["spark-2"] = sample(*samples["spark-2"].net, port(PORTS[1], "10.0.9.0/31"))
    assert build_topology(samples).kind is TopologyKind.mixed


def test_bare_link_local_addresses_of_a_direct_cable_are_one_subnet():
    samples = {"a": sample(port(PORTS[0], "169.254.12.7")), "b": sample(port(PORTS[0], "169.254.200.31"))}
    topo = build_topology(samples)
    assert topo.kind is TopologyKind.direct and str(topo.links[0].network) == "169.254.0.0/16"


def test_the_prefix_of_bare_addresses_is_a_setting():
    samples = {"a": sample(port(PORTS[0], "10.1.0.1")), "b": sample(port(PORTS[0], "10.1.5.2"))}
    assert build_topology(samples).kind is TopologyKind.none  # two /24s
    assert build_topology(samples, TopologySettings(default_prefix=16)).kind is TopologyKind.direct


@pytest.mark.parametrize("netdev", ["enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1", "enP7s7", "eth0"])
def test_the_roce_device_follows_the_fabric_modules_naming_rule(netdev):
    from sparksync.core.topology.ports import rdma_device_for
    from sparksync.core.workloads.fabric import rdma_device_for as fabric_rule

    assert rdma_device_for(netdev) == fabric_rule(netdev)


def test_the_topology_does_not_load_the_ssh_stack():
    """It is imported by the app's window: paramiko would add most of a second to start-up."""
    code = "import sys, sparksync.core.topology; sys.exit('paramiko' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


def test_a_ring_whose_cables_share_one_slash_24_is_told_apart_by_the_reported_prefixes():
    # Cables 10.0.0.0/30, 10.0.0.4/30, ... all fall in one /24: bare addresses would read as a switch.
    samples = {}
    for node, ring_sample in ring(4).items():
        net = []
        for p in ring_sample.net:
            third, host = p.addresses[0].split("/")[0].split(".")[2:]
            address = f"10.0.0.{int(third) * 4 + int(host)}"
            net.append(p.model_copy(update={"addresses": [address], "networks": [f"{address}/30"]}))
        samples[node] = sample(*net)
    assert build_topology(samples).kind is TopologyKind.ring
    bare = {n: sample(*(p.model_copy(update={"networks": []}) for p in s.net)) for n, s in samples.items()}
    assert build_topology(bare).kind is not TopologyKind.ring  # what the prefixes are for
