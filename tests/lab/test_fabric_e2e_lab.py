"""The whole issue end to end on 8 lab nodes: detect, plan, apply (real agents, real sudo), mesh, mesh check, check.

A ring of 8 (each cable its own L2 segment) with real sshd, real agents and
real iperf3: the fabric's own detect/plan/apply, then node-to-node SSH over
the applied addresses and the acceptance check against the veths' 10 Gb/s,
stored in the history; finally a rollback leaves the nodes as they were.
"""

from __future__ import annotations

import pytest

from sparksync.core.fabric import FabricKind, FabricOperations, FabricStore, PlanState, make_plan
from sparksync.core.fabric.check import CheckOptions, run_check
from sparksync.core.fabric.check_history import FabricCheckHistory
from sparksync.core.fabric.check_results import Verdict
from sparksync.core.fabric.fabric_links import links_from_plan
from sparksync.core.fabric.mesh import check_mesh, plan_mesh, setup_mesh
from sparksync.core.fabric.node_shell import FleetShell
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.fabric_cluster import fabric_cluster  # noqa: F401  (a fixture)
from tests.lab.fabric_lab import VETH_SPEED_MBPS
from tests.lab.test_fleet_lab import agent_python, client_key, open_fleet  # noqa: F401

pytestmark = pytest.mark.lab


def test_ring_of_eight_detected_planned_applied_meshed_and_checked(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(8, "ring")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        assert found.topology.kind is FabricKind.ring
        plan = make_plan(found.topology, found.reports)
        assert ops.apply(plan, cluster.password).ok
        FabricStore().save_plan(plan, PlanState.applied)
        try:
            # A Spark's sshd listens on every address; the lab's on its management one, plus now the fabric's.
            for node in cluster.nodes:
                addresses = [i.address.split("/")[0] for i in plan.node(node.name).interfaces]
                cluster.ssh_lab.service.add_config(cluster.ssh_lab.lab, node, *(f"ListenAddress {a}" for a in addresses))
            # A cable's two twins share its L2 segment; the apply made each answer ARP for its own address only
            # (no lab sysctl here), so the jumbo pings below, each bound to one netdev, prove it did.
            links = links_from_plan(plan, line_rate_mbps=VETH_SPEED_MBPS)
            shell = FleetShell(fleet)
            mesh = plan_mesh(links, fleet.registry)
            setup_mesh(shell, mesh)
            proof = check_mesh(shell, mesh)
            assert proof.ok, proof.failed
            assert len(proof.checked) == 8 * 2 * 2  # each node to its two neighbours, over both twins
            assert len([p for p in proof.pairs if p.address is None]) == 8 * 5  # a ring: the others are not near
            report = run_check(shell, links, CheckOptions(seconds=1, streams=1, topology="ring"))
            assert len(report.links) == 16
            for link in report.links:
                assert [m.verdict for m in link.figure("carrier")] == [Verdict.passed] * 2, link
                assert all(m.verdict is Verdict.passed for m in link.figure("mtu")), link
                assert [m.verdict for m in link.figure("jumbo ping")] == [Verdict.passed], link.figure("jumbo ping")
                assert len(link.figure("iperf3")) == 2 and all(m.value for m in link.figure("iperf3")), link
            FabricCheckHistory().add(report)
            assert FabricCheckHistory().list()[0].links == 16
        finally:
            assert ops.rollback(cluster.names, cluster.password).ok
