"""The fabric acceptance check on 8 lab nodes: its wall time, and its iperf3 against iperf3 run by hand.

Eight lab nodes with real sshd, paired, their CX-7-like port 0 on one switch
segment (both twins addressed, MTU 9000), every port shaped with tc to
1 Gbit/s so the figures are the link's, not this shared machine's CPU.

- **Full check on 8 nodes** (target ≤ 90 s), with the check's own defaults
  (5 s per iperf3 direction, 4 streams; ib_write_bw and all_gather are "not
  run" here). Anchor, measured in the same run: one link's iperf3 both ways
  by hand (root, ``ip netns exec``, no SSH), times the links the check
  measures: what doing it by hand, one link after another, would take.
- **iperf3 through the check vs by hand on the same link** (target: within
  5 %): n1 -> n2 on twin 0, the same options, alternating hand and check
  runs; medians compared.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time

import pytest

from sparksync.core.fabric.check import CheckOptions, iperf3_once, measured_links, run_check
from sparksync.core.fabric.check_results import Verdict
from sparksync.core.fabric.fabric_links import links_from_plan
from sparksync.core.fabric.node_shell import FleetShell
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.ssh.secrets import SecretStore
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.mesh_lab import FabricNodes, fabric_address
from tests.lab.test_pairing_lab import FAST, pair
from tests.perf.report import Report, assert_targets
from tests.perf.settings import scale_from_env

pytestmark = [pytest.mark.perf, pytest.mark.lab, pytest.mark.timeout(900)]

NODES = 8
FULL_CHECK_TARGET_S = 90.0
IPERF_TARGET = 0.05
LINE_RATE_MBPS = 1000
SECONDS = max(1.0, round(5.0 * scale_from_env(), 1))
STREAMS = 4
ROUNDS = 3  # hand / check pairs for the comparison


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


def by_hand(lab: FabricNodes, source, target, twin: int, port: int = 5301) -> tuple[float, float]:
    """(Gb/s received, seconds) of ``iperf3 -c`` from ``source`` to ``target`` run as a person would, as root."""
    server_ip, client_ip = fabric_address(target, twin), fabric_address(source, twin)
    started = time.monotonic()
    server = lab.ssh_lab.lab.popen(target, ["iperf3", "-s", "-1", "-B", server_ip, "-p", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(40):
            done = lab.ssh_lab.lab.exec(source, ["iperf3", "-c", server_ip, "-B", client_ip, "-p", str(port), "-t",
                                                 f"{SECONDS:g}", "-P", str(STREAMS), "-J"], timeout=SECONDS + 60)
            data = json.loads(done.stdout)
            if "Connection refused" not in data.get("error", ""):
                break
            time.sleep(0.1)
        assert "error" not in data, data.get("error")
        return data["end"]["sum_received"]["bits_per_second"] / 1e9, time.monotonic() - started
    finally:
        server.wait(30)


def test_full_check_on_8_nodes_and_iperf3_through_the_check_against_by_hand(ssh_lab_factory, client_key, perf_out):
    lab = FabricNodes.make(ssh_lab_factory, NODES, client_key, pair)
    for node in lab.nodes:
        lab.fabric.shape(node, 0, "1gbit")
    links = links_from_plan(lab.plan, line_rate_mbps=LINE_RATE_MBPS)
    n1, n2 = lab.nodes[0], lab.nodes[1]
    link = next(link for link in links.links if link.nodes == ("n1", "n2") and link.a.iface == "enp1s0f0np0")
    options = CheckOptions(seconds=SECONDS, streams=STREAMS, topology="switch")
    with Fleet(client_key, dialer=lab.ssh_lab.dialer, settings=FAST) as fleet:
        shell = FleetShell(fleet)
        hand, through = [], []
        hand_s = []
        for _ in range(ROUNDS):  # alternating, so a drift in the machine's load hits both alike
            gbps, seconds = by_hand(lab, n1, n2, 0)
            hand.append(gbps)
            hand_s.append(seconds)
            through.append(iperf3_once(shell, link, False, options))
        started = time.monotonic()
        report = run_check(shell, links, options)
        full_s = time.monotonic() - started
    tested = len(measured_links(links))
    anchor_s = statistics.median(hand_s) * 2 * tested  # both directions of every measured link, by hand
    hand_median, through_median = statistics.median(hand), statistics.median(through)
    gap = abs(through_median - hand_median) / hand_median

    out = Report("fabric_check_8_nodes")
    out.figure("full_check_s", round(full_s, 1), f"full check, {NODES} nodes, {tested} links, {SECONDS:g} s/dir", "s")
    out.figure("by_hand_sequential_s", round(anchor_s, 1), "anchor: the same iperf3 runs by hand, one by one", "s")
    out.figure("iperf3_by_hand_gbps", round(hand_median, 4), "iperf3 n1 -> n2 by hand (median)", "Gb/s")
    out.figure("iperf3_through_check_gbps", round(through_median, 4), "the same through the check (median)", "Gb/s")
    out.figure("iperf3_gap", round(gap, 4), "|check - by hand| / by hand")
    out.note(f"by hand: {[round(x, 4) for x in hand]}; through the check: {[round(x, 4) for x in through]}")
    out.note(f"check: {report.summary()}")
    out.check(f"full check within {FULL_CHECK_TARGET_S:g} s", full_s <= FULL_CHECK_TARGET_S, f"{full_s:.1f} s")
    out.check(f"iperf3 within {IPERF_TARGET:.0%} of by hand", gap <= IPERF_TARGET, f"{gap:.1%}")
    out.check("every link measured both ways", all(len(c.figure("iperf3")) == 2 and
                                                   all(m.value is not None for m in c.figure("iperf3"))
                                                   for c in report.links), report.summary())
    out.check("the check passed every measured link", report.verdict is Verdict.passed, report.summary())
    out.publish(perf_out)
    assert_targets(out)
