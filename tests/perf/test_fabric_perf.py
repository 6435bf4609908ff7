"""Fabric detect and apply on 8 lab nodes, beside plain ``ip -j link`` over SSH on each, in the same run.

Eight lab nodes (real sshd, real agents, CX-7-like ports on a switch) are
read, planned and applied through the core as ``sparksync cluster`` does.
The anchor is the least a detect can cost over SSH: one ``ip -j link`` per
node, all eight at once, on the same SSH transports. Detect adds the agent's
one-second neighbour probe; apply adds sudo, netplan generate and iproute2.
Targets (issue 14): detect on 8 nodes within 5 s, apply on 8 in parallel
within 30 s.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sparksync.core.fabric import FabricKind, FabricOperations, make_plan
from sparksync.core.ssh.connection import run
from tests.lab.fabric_cluster import fabric_cluster  # noqa: F401  (a fixture)
from tests.lab.fabric_lab import VETH_SPEED_MBPS
from tests.lab.test_fleet_lab import agent_python, client_key, open_fleet  # noqa: F401  (fixtures)
from tests.perf.report import Report, assert_targets

pytestmark = [pytest.mark.perf, pytest.mark.lab, pytest.mark.timeout(900)]

NODES = 8
DETECT_TARGET_S = 5.0
APPLY_TARGET_S = 30.0
ROUNDS = 3


def ip_link_everywhere(fleet, names) -> float:
    def one(name: str) -> None:
        done = run(fleet.transports.get(name, 10.0), ["ip", "-j", "link"], 10)
        assert done.exit_status == 0

    started = time.monotonic()
    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(one, names))
    return time.monotonic() - started


def test_detect_and_apply_on_eight_nodes(fabric_cluster, client_key, perf_out):  # noqa: F811
    cluster = fabric_cluster(NODES, "switch")
    # Cold, as one `sparksync cluster detect` runs: SSH connections, tunnels and agent tokens first.
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        cold_anchor_s = ip_link_everywhere(fleet, cluster.names)
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        started = time.monotonic()
        FabricOperations(fleet).detect(cluster.names, VETH_SPEED_MBPS)
        cold_detect_s = time.monotonic() - started
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        ip_link_everywhere(fleet, cluster.names)  # transports up, agents found: both sides start warm
        ops.read(cluster.names, probe=False)
        anchors, detects = [], []
        for _ in range(ROUNDS):
            anchors.append(ip_link_everywhere(fleet, cluster.names))
            started = time.monotonic()
            found = ops.detect(cluster.names, VETH_SPEED_MBPS)
            detects.append(time.monotonic() - started)
            assert found.topology.kind is FabricKind.switch
        plan = make_plan(found.topology, found.reports)
        started = time.monotonic()
        applied = ops.apply(plan, cluster.password)
        apply_s = time.monotonic() - started
        assert applied.ok, applied.summary()
        started = time.monotonic()
        rolled = ops.rollback(cluster.names, cluster.password)
        rollback_s = time.monotonic() - started
        assert rolled.ok, rolled.summary()

    detect_s, anchor_s = max(detects), min(anchors)
    report = Report("fabric_detect_apply_8_nodes")
    report.figure("cold_anchor_s", round(cold_anchor_s, 3), "anchor, cold: SSH connect + ip -j link, 8 nodes", "s")
    report.figure("cold_detect_s", round(cold_detect_s, 3), "detect, cold: SSH, tunnels, agents, probe", "s")
    report.figure("anchor_ip_link_s", round(anchor_s, 3), f"anchor: ip -j link over SSH, {NODES} nodes at once", "s")
    report.figure("detect_s", round(detect_s, 3), f"detect (probe included), slowest of {ROUNDS}", "s")
    report.figure("detect_over_anchor_s", round(detect_s - anchor_s, 3), "detect minus anchor", "s")
    report.figure("probe_s", round(max(r.probe_s for r in found.reports.values()), 3), "slowest node's probe", "s")
    report.figure("apply_s", round(apply_s, 3), f"apply, {NODES} nodes in parallel (sudo, netplan generate)", "s")
    report.figure("rollback_s", round(rollback_s, 3), f"rollback, {NODES} nodes in parallel", "s")
    report.check(f"cold detect on {NODES} within {DETECT_TARGET_S:g} s", cold_detect_s <= DETECT_TARGET_S,
                 f"{cold_detect_s:.2f} s")
    report.check(f"detect on {NODES} within {DETECT_TARGET_S:g} s", detect_s <= DETECT_TARGET_S, f"{detect_s:.2f} s")
    report.check(f"apply on {NODES} within {APPLY_TARGET_S:g} s", apply_s <= APPLY_TARGET_S, f"{apply_s:.2f} s")
    report.publish(perf_out)
    assert_targets(report)
