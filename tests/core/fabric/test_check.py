"""The acceptance check's logic over a scripted shell: what it runs, how it judges, what is never a pass."""

from __future__ import annotations

import json
import threading

from sparksync.core.fabric import check_tools as tools
from sparksync.core.fabric.check import CheckOptions, rounds, run_check, measured_links
from sparksync.core.fabric.check_results import Verdict
from sparksync.core.fabric.fabric_links import FabricLink, FabricLinks, LinkEnd
from sparksync.core.ssh.connection import CommandResult


def ok(out: str = "") -> CommandResult:
    return CommandResult(0, out.encode(), b"")


def iperf_json(gbps: float) -> str:
    return json.dumps({"end": {"sum_received": {"bits_per_second": gbps * 1e9}}})


class ScriptedNodes:
    """Answers the check's commands as nodes would: per node its tools, ports and link speeds."""

    def __init__(self, tools_by_node, ports, tcp_gbps, rdma=None):
        self.tools, self.ports, self.tcp, self.rdma = tools_by_node, ports, tcp_gbps, rdma or {}
        self.calls: list[tuple[str, list[str]]] = []
        self.lock = threading.Lock()

    def run(self, node, argv, timeout, stdin=None):
        with self.lock:
            self.calls.append((node, argv))
        text = " ".join(argv)
        if "command -v $t" in text:
            return ok("\n".join(self.tools[node]))
        if "/sys/class/net" in text:
            return ok("\n".join(self.ports[node]))
        if argv[0] == "ping":
            return ok("3 packets transmitted, 3 received, 0% packet loss")
        if argv[:2] == ["sh", "-c"] and "exec" in argv[2]:  # a server: ends when its client is done
            return ok()
        if argv[0] == "iperf3":
            source = argv[argv.index("-B") + 1]
            server = argv[argv.index("-c") + 1]
            sender = server if "-R" in argv else source
            return ok(iperf_json(self.tcp[sender]))
        if argv[0] == "ib_write_bw":
            return ok(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"
                      f" 65536 1000 {self.rdma[node]:.2f} {self.rdma[node]:.2f} 0.17\n")
        return ok()

    def edit(self, node, relpath, change):
        raise AssertionError("the check never edits files")

    def read(self, node, relpath):
        raise AssertionError("the check never reads files")


def port_line(iface: str, carrier: int = 1, speed: int = 200000, mtu: int = 9000) -> str:
    return f"{iface} {carrier} {speed} {mtu}"


def direct_pair(rdma: bool = False) -> FabricLinks:
    dev = (lambda d: d) if rdma else (lambda d: None)
    return FabricLinks.of([
        FabricLink(LinkEnd("n1", "enp1s0f0np0", "10.100.0.1", 24, dev("rocep1s0f0")),
                   LinkEnd("n2", "enp1s0f0np0", "10.100.0.2", 24, dev("rocep1s0f0")), cable="c1"),
        FabricLink(LinkEnd("n1", "enP2p1s0f0np0", "10.100.1.1", 24, dev("roceP2p1s0f0")),
                   LinkEnd("n2", "enP2p1s0f0np0", "10.100.1.2", 24, dev("roceP2p1s0f0")), cable="c1"),
    ])


PORTS_OK = {n: [port_line("enp1s0f0np0"), port_line("enP2p1s0f0np0")] for n in ("n1", "n2")}


def test_a_healthy_link_passes_and_missing_tools_are_not_run_never_passed():
    nodes = ScriptedNodes({"n1": ["ping", "iperf3"], "n2": ["ping", "iperf3"]}, PORTS_OK,
                          {"10.100.0.1": 150, "10.100.0.2": 160, "10.100.1.1": 140, "10.100.1.2": 145})
    report = run_check(nodes, direct_pair(rdma=True), CheckOptions(seconds=1))
    link = report.links[0]
    assert [round(m.value) for m in link.figure("iperf3")] == [150, 160]
    assert [round(m.percent_of_line) for m in link.figure("iperf3")] == [75, 80]
    assert all(m.verdict is Verdict.passed for m in link.figure("iperf3") + link.figure("jumbo ping"))
    (rdma,) = link.figure("ib_write_bw")
    assert rdma.verdict is Verdict.not_run and rdma.detail == "not run: install perftest"
    (nccl,) = report.cluster
    assert nccl.verdict is Verdict.not_run and "install nccl-tests" in nccl.detail
    assert report.verdict is Verdict.passed and len(report.not_run) == 3
    assert "3 not run" in report.summary()


def test_a_slow_link_is_flagged_with_its_figure_and_a_100g_port_with_its_speed():
    ports = {"n1": [port_line("enp1s0f0np0"), port_line("enP2p1s0f0np0")],
             "n2": [port_line("enp1s0f0np0", speed=100000), port_line("enP2p1s0f0np0", mtu=1500)]}
    nodes = ScriptedNodes({n: ["ping", "iperf3"] for n in ("n1", "n2")}, ports,
                          {"10.100.0.1": 0.5, "10.100.0.2": 150, "10.100.1.1": 150, "10.100.1.2": 150})
    report = run_check(nodes, direct_pair(), CheckOptions(seconds=1, nccl=False))
    first, second = report.links
    slow = first.figure("iperf3")[0]
    assert slow.verdict is Verdict.degraded and slow.where == "n1 -> n2" and slow.value == 0.5
    assert slow.percent_of_line == 0.25
    speed = [m for m in first.figure("speed") if m.where == "n2:enp1s0f0np0"][0]
    assert speed.verdict is Verdict.degraded and "negotiated 100 Gb/s" in speed.detail
    assert any(m.verdict is Verdict.failed and "1500" in m.detail for m in second.figure("mtu"))
    assert report.verdict is Verdict.failed
    rdma = first.figure("ib_write_bw")[0]
    assert rdma.verdict is Verdict.not_run and "no RoCE device" in rdma.detail


def test_rdma_pairs_are_judged_against_their_share_of_nvidias_figure():
    nodes = ScriptedNodes({n: ["ping", "iperf3", "ib_write_bw"] for n in ("n1", "n2")}, PORTS_OK,
                          {a: 150 for a in ("10.100.0.1", "10.100.0.2", "10.100.1.1", "10.100.1.2")},
                          rdma={"n1": 92.6})
    report = run_check(nodes, direct_pair(rdma=True), CheckOptions(seconds=1, nccl=False))
    (rdma,) = report.links[0].figure("ib_write_bw")
    assert rdma.verdict is Verdict.passed and rdma.value == 92.6 and rdma.mark == 95 * 0.9
    client = [argv for node, argv in nodes.calls if argv[0] == "ib_write_bw"][0]
    assert client[-1] == "10.100.0.2" and "rocep1s0f0" in client


def test_a_switch_is_tested_in_pairs_and_rounds_never_share_a_node():
    ends = [LinkEnd(f"n{i}", "enp1s0f0np0", f"10.100.0.{i}") for i in range(1, 9)]
    links = FabricLinks.of(FabricLink(a, b) for i, a in enumerate(ends) for b in ends[i + 1:])
    chosen = measured_links(links)
    assert [link.nodes for link in chosen] == [("n1", "n2"), ("n3", "n4"), ("n5", "n6"), ("n7", "n8")]
    ring = [FabricLink(ends[i], ends[(i + 1) % 8]) for i in range(8)]
    for round_ in rounds(ring):
        used = [n for link in round_ for n in link.nodes]
        assert len(used) == len(set(used))
    assert len(rounds(ring)) == 2


def test_tool_outputs_are_read():
    assert tools.ping_loss("3 packets transmitted, 0 received, 100% packet loss, time 2ms") == 100.0
    assert tools.parse_sysfs("enp1s0f0np0 1 200000 9000\nenp1s0f1np1 0 -1 1500\nx missing")["enp1s0f1np1"] == \
        tools.PortReading("enp1s0f1np1", True, False, None, 1500)
    assert tools.all_gather_busbw("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 21.9143 \n") == 21.9143
    sample = ("---------------------------------------------------------------------------------------\n"
              " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
              " 65536      1000             97.41              97.30              0.185587\n")
    assert tools.ib_write_gbps(sample) == 97.30
    assert tools.iperf3_gbps(iperf_json(9.4)) == 9.4
