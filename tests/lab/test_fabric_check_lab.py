"""The fabric acceptance check on 8 lab nodes: real iperf3 and ping over the CX-7-like ports, via SSH.

The lab's veth ports report 10 Gb/s and carry what the machine's CPU can
push; the check is told a 1 Gb/s line rate, so a port shaped with tc to
100 Mbit/s is 10 % of it and must be flagged with its figure, while the
others pass.
"""

from __future__ import annotations

import pytest

from sparksync.core.bench.history import HistoryStore
from sparksync.core.fabric.check import CheckOptions, run_check
from sparksync.core.fabric.check_history import FabricCheckHistory
from sparksync.core.fabric.check_results import Verdict
from sparksync.core.fabric.fabric_links import links_from_plan
from sparksync.core.fabric.node_shell import FleetShell
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.ssh.secrets import SecretStore
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.mesh_lab import FabricNodes
from tests.lab.test_pairing_lab import FAST, pair

pytestmark = pytest.mark.lab

LINE_RATE_MBPS = 1000


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


def test_a_port_shaped_to_a_lower_rate_is_flagged_with_its_figure(ssh_lab_factory, client_key):
    lab = FabricNodes.make(ssh_lab_factory, 8, client_key, pair)
    n3 = lab.nodes[2]
    lab.fabric.shape(n3, 0, "100mbit")
    links = links_from_plan(lab.plan, line_rate_mbps=LINE_RATE_MBPS)
    events = []
    with Fleet(client_key, dialer=lab.ssh_lab.dialer, settings=FAST) as fleet:
        report = run_check(FleetShell(fleet), links, CheckOptions(seconds=2, streams=2, topology="switch"),
                           events.append)
    assert len(report.links) == 8  # 4 pairs on each twin subnet
    for link in report.links:
        tcp = link.figure("iperf3")
        assert len(tcp) == 2 and all(m.value is not None for m in tcp), [m.detail for m in tcp]
        assert all(m.verdict is Verdict.passed for m in link.figure("carrier") + link.figure("mtu")), link
        assert [m.verdict for m in link.figure("jumbo ping")] == [Verdict.passed]
        if "n3" in link.nodes:
            assert all(m.verdict is Verdict.degraded for m in tcp), tcp
            assert all(0.02 < m.value < 0.11 and m.percent_of_line < 11 for m in tcp), tcp
            assert all("below 0.5 Gb/s" in m.detail for m in tcp)
        else:
            assert all(m.verdict is Verdict.passed and m.value > 0.5 for m in tcp), tcp
        (rdma,) = link.figure("ib_write_bw")
        assert rdma.verdict is Verdict.not_run  # the lab has no RDMA
    (nccl,) = report.cluster
    assert nccl.verdict is Verdict.not_run and nccl.detail.startswith("not run: install nccl-tests")
    assert report.verdict is Verdict.degraded
    assert {e.node for e in events if e.step == "iperf3" and e.state == "done"} == {n.name for n in lab.nodes}

    history = FabricCheckHistory(HistoryStore())
    check_id = history.add(report)
    (row,) = history.list()
    assert row.id == check_id and row.verdict == "degraded" and row.flagged == 4 and row.links == 8
    assert 0.02 < row.min_tcp_gbps < 0.11
    assert history.get(check_id).links[0].figure("iperf3")[0].value == report.links[0].figure("iperf3")[0].value
