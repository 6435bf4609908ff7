"""Classifying the cabling: direct, ring, switch, and each broken cabling with its problem named."""

from __future__ import annotations

import pytest

from sparksync.core.fabric import FabricKind, PortEnd, ProblemKind, Severity, build_cabling, classify
from tests.core.fabric.reports import Cabling

NODES8 = [f"n{i}" for i in range(1, 9)]


def topology(cabling: Cabling, expected: int | None = 200_000):
    return classify(build_cabling(cabling.reports()), expected)


def kinds(top) -> set[ProblemKind]:
    return {p.kind for p in top.problems}


def test_direct_pair_is_direct_and_names_the_empty_ports():
    top = topology(Cabling(["a", "b"]).direct())
    assert top.kind is FabricKind.direct and top.plannable
    assert [s.ends for s in top.graph.segments] == [(PortEnd("a", 0), PortEnd("b", 0))]
    empty = [p for p in top.problems if p.kind is ProblemKind.no_carrier]
    assert {p.ports for p in empty} == {(PortEnd("a", 1),), (PortEnd("b", 1),)}
    assert all(p.severity is Severity.warning for p in empty)


def test_two_cables_between_two_nodes_are_still_direct():
    top = topology(Cabling(["a", "b"]).cable("a", 0, "b", 0).cable("a", 1, "b", 1))
    assert top.kind is FabricKind.direct and not top.problems


@pytest.mark.parametrize("n", [3, 4, 8])
def test_rings(n):
    top = topology(Cabling(NODES8[:n]).ring())
    assert top.kind is FabricKind.ring and not top.problems
    assert len(top.graph.cables) == n


@pytest.mark.parametrize("n", [3, 8])
def test_switch(n):
    top = topology(Cabling(NODES8[:n]).switch(0))
    assert top.kind is FabricKind.switch and top.plannable
    assert len(top.graph.switches) == 1 and len(top.graph.switches[0].ends) == n


def test_both_ports_of_every_node_on_the_switch_is_a_switch_not_self_cabling():
    top = topology(Cabling(NODES8[:4]).switch(0).switch(1))
    assert top.kind is FabricKind.switch and not top.problems


def test_open_ring_names_the_two_ends():
    cabling = Cabling(NODES8[:4]).cable("n1", 1, "n2", 0).cable("n2", 1, "n3", 0).cable("n3", 1, "n4", 0)
    top = topology(cabling)
    assert top.kind is FabricKind.mixed and not top.plannable
    [problem] = [p for p in top.problems if p.kind is ProblemKind.open_ring]
    assert problem.nodes == ("n1", "n4") and "n1 and n4" in problem.message


def test_node_cabled_to_itself():
    top = topology(Cabling(["a", "b", "c"]).cable("a", 1, "b", 0).cable("b", 1, "a", 0).cable("c", 0, "c", 1))
    assert top.kind is FabricKind.mixed
    [problem] = [p for p in top.problems if p.kind is ProblemKind.self_cabled]
    assert problem.nodes == ("c",) and "c is cabled to itself" in problem.message


def test_slow_switch_link_is_named_with_its_speed():
    cabling = Cabling(NODES8[:3]).switch(0)
    cabling.speed_mbps[("n2", 0)] = 100_000
    top = topology(cabling)
    assert top.kind is FabricKind.switch  # still a switch: slow, not broken
    [problem] = [p for p in top.problems if p.kind is ProblemKind.slow_link]
    assert "n2 port 0 runs at 100 Gb/s, below the expected 200 Gb/s" in problem.message
    assert problem.segment == top.graph.switches[0].key


def test_cable_beside_a_switch_is_mixed():
    top = topology(Cabling(NODES8[:4]).switch(0).cable("n1", 1, "n2", 1))
    assert top.kind is FabricKind.mixed and ProblemKind.mixed_cabling in kinds(top)


def test_node_with_no_carrier_anywhere_is_an_error():
    top = topology(Cabling(NODES8[:3]).switch(0, ["n1", "n2"]))
    assert top.kind is FabricKind.mixed
    [problem] = [p for p in top.problems if p.kind is ProblemKind.no_carrier and p.severity is Severity.error]
    assert problem.nodes == ("n3",)


def test_node_linked_only_outside_the_cluster():
    cabling = Cabling(NODES8[:3]).switch(0, ["n1", "n2"])
    cabling.strangers[("n3", 0)] = ["0a:00:00:00:00:01"]
    top = topology(cabling)
    assert ProblemKind.unknown_neighbour in kinds(top) and ProblemKind.node_unlinked in kinds(top)
    assert top.kind is FabricKind.mixed


def test_node_not_probed_is_an_error():
    cabling = Cabling(["a", "b"]).direct()
    cabling.unprobed.add("b")
    top = topology(cabling)
    assert ProblemKind.not_probed in kinds(top) and not top.plannable


def test_two_separate_rings_are_not_one_ring():
    cabling = Cabling(NODES8[:6])
    for group in (NODES8[:3], NODES8[3:6]):
        for i, node in enumerate(group):
            cabling.cable(node, 1, group[(i + 1) % 3], 0)
    top = topology(cabling)
    assert top.kind is FabricKind.mixed and ProblemKind.mixed_cabling in kinds(top)
