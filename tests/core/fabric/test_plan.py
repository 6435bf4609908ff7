"""The address plan: per-link subnets, twins apart, MTU 9000, the environment, clashes refused."""

from __future__ import annotations

import ipaddress

import pytest

from sparksync.core.fabric import (
    FabricPlan,
    FabricPlanError,
    FabricStore,
    PlanState,
    SubnetClashError,
    build_cabling,
    classify,
    make_plan,
)
from tests.core.fabric.reports import Cabling

NODES8 = [f"n{i}" for i in range(1, 9)]


def plan_for(cabling: Cabling, **options) -> FabricPlan:
    reports = cabling.reports()
    return make_plan(classify(build_cabling(reports)), reports, **options)


def subnet(address: str) -> ipaddress.IPv4Network:
    return ipaddress.ip_interface(address).network


def test_ring_of_eight_gives_each_cable_two_subnets_and_twins_differ():
    plan = plan_for(Cabling(NODES8).ring())
    assert plan.topology.value == "ring" and len(plan.links) == 16
    assert len({link.subnet for link in plan.links}) == 16
    for node in plan.nodes.values():
        assert [i.name for i in node.interfaces] == ["enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"]
        assert all(i.mtu == 9000 for i in node.interfaces)
        by_port: dict[int, set] = {}
        for i in node.interfaces:
            by_port.setdefault(i.port, set()).add(subnet(i.address))
        assert all(len(subnets) == 2 for subnets in by_port.values())  # twins on different subnets
    # The two ends of each cable share its subnets: n1 port 1 and n2 port 0.
    n1, n2 = plan.node("n1"), plan.node("n2")
    assert subnet(n1.interfaces[2].address) == subnet(n2.interfaces[0].address)
    assert subnet(n1.interfaces[3].address) == subnet(n2.interfaces[1].address)
    assert any("ring of 8" in w and "NCCL" in w for w in plan.warnings)


def test_ring_of_three_has_no_ring_warning():
    assert not [w for w in plan_for(Cabling(NODES8[:3]).ring()).warnings if "ring" in w]


def test_switch_one_subnet_per_twin_numbered_in_node_order():
    plan = plan_for(Cabling(NODES8).switch(0))
    assert [link.subnet for link in plan.links] == ["10.100.0.0/24", "10.100.1.0/24"]
    assert [plan.node(n).interfaces[0].address for n in NODES8] == [f"10.100.0.{i}/24" for i in range(1, 9)]
    assert [plan.node(n).interfaces[1].address for n in NODES8] == [f"10.100.1.{i}/24" for i in range(1, 9)]


def test_environment_names_the_planned_interfaces_and_all_four_roce_devices():
    plan = plan_for(Cabling(NODES8[:4]).ring())
    env = plan.env("n1")
    names = "enp1s0f0np0,enP2p1s0f0np0,enp1s0f1np1,enP2p1s0f1np1"
    assert env == {
        "NCCL_SOCKET_IFNAME": names, "UCX_NET_DEVICES": names, "OMPI_MCA_btl_tcp_if_include": names,
        "GLOO_SOCKET_IFNAME": "enp1s0f0np0",
        "NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0,rocep1s0f1,roceP2p1s0f1",
    }  # fmt: skip
    assert plan.node("n1").fabric_ip == "10.100.0.1"  # n1 port 0 (cabled to n4 port 1) is planned first


def test_plan_is_keyed_by_node_id():
    plan = plan_for(Cabling(["a", "b"]).direct())
    assert set(plan.nodes) == {"id-a", "id-b"} and plan.node("a").node_id == "id-a"


def test_clash_is_refused_naming_subnet_and_node():
    cabling = Cabling(NODES8[:4]).ring()
    cabling.in_use["n3"] = [("eth0", "10.100.5.20/24")]
    with pytest.raises(SubnetClashError) as err:
        plan_for(cabling)
    assert err.value.subnet == "10.100.5.0/24" and err.value.node == "n3"
    assert "10.100.5.0/24" in str(err.value) and "node n3" in str(err.value)
    plan = plan_for(cabling, base="10.200.0.0/16")  # another range is fine
    assert plan.links[0].subnet == "10.200.0.0/24"


def test_a_wide_network_in_use_clashes_with_the_whole_range():
    cabling = Cabling(["a", "b"]).direct()
    cabling.in_use["b"] = [("docker0", "10.0.0.1/8")]
    with pytest.raises(SubnetClashError, match="docker0 of node b"):
        plan_for(cabling)


def test_broken_cabling_is_not_planned():
    cabling = Cabling(NODES8[:4]).cable("n1", 1, "n2", 0).cable("n2", 1, "n3", 0).cable("n3", 1, "n4", 0)
    with pytest.raises(FabricPlanError, match="ring is open"):
        plan_for(cabling)


def test_range_too_small_is_refused():
    with pytest.raises(FabricPlanError, match="too few"):
        plan_for(Cabling(NODES8).ring(), base="10.100.0.0/22")


def test_store_round_trip_and_relabel(tmp_path):
    from sparksync.core.nodes.identity import NodeNames

    store = FabricStore(tmp_path / "cluster_fabric.json")
    assert store.applied() is None
    plan = plan_for(Cabling(["a", "b"]).direct())
    store.save_plan(plan)
    assert store.applied() is None and store.load().plan == plan
    store.set_state(PlanState.applied)
    assert store.applied() == plan
    assert (tmp_path / "cluster_fabric.json").stat().st_mode & 0o777 == 0o600

    renamed = FabricStore(tmp_path / "cluster_fabric.json", names=lambda: NodeNames({"id-a": "alpha", "id-b": "b"}))
    assert renamed.applied().node("alpha").node_id == "id-a"


def test_store_refuses_a_newer_file(tmp_path):
    from sparksync.core.fabric import FabricStoreError

    path = tmp_path / "cluster_fabric.json"
    path.write_text('{"version": 99}')
    with pytest.raises(FabricStoreError, match="newer"):
        FabricStore(path).load()


def test_a_new_plan_leaves_the_applied_one_until_it_is_applied(tmp_path):
    store = FabricStore(tmp_path / "cluster_fabric.json")
    first = plan_for(Cabling(["a", "b"]).direct())
    store.save_plan(first)
    store.set_state(PlanState.applied)
    second = plan_for(Cabling(["a", "b"]).direct(), base="10.150.0.0/16")
    store.save_plan(second)
    stored = store.load()
    assert stored.plan == second and stored.state is PlanState.planned and stored.applied == first
    store.set_state(PlanState.applied)
    assert store.applied() == second
    store.set_state(PlanState.rolled_back)
    assert store.applied() is None and store.load().plan == second


def test_both_ports_on_one_switch_segment_get_subnets_of_their_own():
    cabling = Cabling(NODES8[:4])
    cabling.segments.append([(n, p) for n in NODES8[:4] for p in (0, 1)])  # all 8 ports on one L2 segment
    plan = plan_for(cabling)
    assert plan.topology.value == "switch" and len(plan.links) == 4
    for node in plan.nodes.values():
        subnets = [subnet(i.address) for i in node.interfaces]
        assert len(node.interfaces) == 4 and len(set(subnets)) == 4  # no two netdevs on one subnet
