"""The plan as the mesh and the check see it: one link per cable subnet, a pair per switch subnet member."""

from __future__ import annotations

from sparksync.core.fabric import build_cabling, classify, make_plan
from sparksync.core.fabric.fabric_links import links_from_plan
from sparksync.core.fabric.mesh import MeshMember, MeshPlan
from tests.core.fabric.reports import Cabling


def plan_for(cabling: Cabling):
    reports = cabling.reports()
    return make_plan(classify(build_cabling(reports)), reports)


def test_a_ring_gives_each_cable_two_twin_links_and_neighbours_only_routes():
    links = links_from_plan(plan_for(Cabling(["n1", "n2", "n3", "n4"]).ring()))
    assert len(links.links) == 8 and len(links.subnets()) == 8
    twins = [link for link in links.links if set(link.nodes) == {"n1", "n2"}]
    assert len(twins) == 2 and twins[0].cable == twins[1].cable and twins[0].subnet != twins[1].subnet
    assert {link.a.rdma_device for link in twins} == {"rocep1s0f1", "roceP2p1s0f1"}
    assert all(link.mtu == 9000 and link.line_rate_mbps == 200_000 for link in links.links)
    assert links.routes("n1", "n3") == []  # not neighbours in a ring
    assert len(links.routes("n1", "n2")) == 2


def test_a_switch_gives_every_pair_on_each_twin_subnet():
    nodes = [f"n{i}" for i in range(1, 9)]
    plan = plan_for(Cabling(nodes).switch())
    links = links_from_plan(plan, {p.node_id: f"renamed-{p.name}" for p in plan.nodes.values()}.get)
    assert len(links.links) == 2 * 28 and len(links.subnets()) == 2
    assert links.nodes()[0] == "renamed-n1"
    mesh = MeshPlan(tuple(MeshMember(n, n, "u", None, tuple(links.addresses(n))) for n in links.nodes()),  # type: ignore[arg-type]
                    tuple(links.subnets()), links)
    assert len(mesh.routes("renamed-n1", "renamed-n8")) == 2
