"""The fabric acceptance check: per link, then for the whole cluster.

``run_check(shell, links)`` runs, with each node reached over its SSH
transport (``NodeShell``) and the tools run on the nodes themselves:

1. per interface, on every node at once: carrier, negotiated speed against
   the link's line rate (a switch port at 100G is flagged), MTU against the
   plan, on both ends;
2. per link, all at once: a jumbo ping with don't-fragment at the planned MTU;
3. per link, in rounds of links that share no node (each round at once):
   TCP bandwidth with ``iperf3``, both directions; then, where both ends
   have a RoCE device, ``ib_write_bw`` against NVIDIA's ~190 Gb/s per cable;
4. for the cluster, where nccl-tests and MPI are on every node:
   ``all_gather_perf`` against NVIDIA's pass marks (21.875 GB/s bus
   bandwidth; 10 GB/s on a ring), started from the first node over the mesh.

On a switch the bandwidth tests pair the nodes of each subnet (n1 with n2,
n3 with n4, ...), so every port sends and receives once; direct and ring
links are each tested. A missing tool is "not run: install X", never a pass.
"""

from __future__ import annotations

import logging
import threading
from functools import partial
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fabric import check_tools as tools
from sparksync.core.fabric.check_results import (
    NCCL_BUSBW_GBPS,
    NCCL_RING_BUSBW_GBPS,
    RDMA_CABLE_GBPS,
    RDMA_MARK_OF_FIGURE,
    TCP_MARK_OF_LINE,
    FabricCheckReport,
    LinkCheck,
    Measurement,
    Verdict,
)
from sparksync.core.fabric.fabric_links import FabricLink, FabricLinks
from sparksync.core.fabric.node_shell import CommandResult, NodeShell, script

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 30.0
CONNECT_RETRIES = 20
RETRY_DELAY_S = 0.25

Progress = Callable[["CheckProgress"], None]


class FabricCheckError(SparkSyncError):
    """The check could not start (no links, no node reachable)."""


@dataclass(frozen=True)
class CheckProgress:
    node: str  # the node (or "cluster") the step ran on
    step: str
    state: str  # "running", "done", "failed"
    detail: str = ""


@dataclass(frozen=True)
class CheckOptions:
    seconds: float = 5.0  # per iperf3 / ib_write_bw direction
    streams: int = 4  # iperf3 -P
    port: int = 5201
    topology: str | None = None  # "ring" judges all_gather against the ring's pass mark
    rdma: bool = True
    nccl: bool = True


def run_check(shell: NodeShell, links: FabricLinks, options: CheckOptions | None = None,
              progress: Progress | None = None) -> FabricCheckReport:
    options = options or CheckOptions()
    tell = progress or (lambda _p: None)
    if not links.links:
        raise FabricCheckError("The fabric has no links to check; plan and apply the fabric first.")
    started = time.monotonic()
    nodes = links.nodes()
    tested = measured_links(links)
    checks = {link.key: _link_check(link) for link in tested}
    node_tools = _tools(shell, nodes, tell)
    readings = _readings(shell, links, tell)
    for link in tested:
        checks[link.key].measurements += _port_checks(link, readings)
    _parallel([partial(_ping, shell, link, checks[link.key], node_tools, tell) for link in tested])
    for round_ in rounds(tested):
        _parallel([partial(_iperf3, shell, link, checks[link.key], node_tools, options, tell) for link in round_])
    for round_ in rounds(tested):
        _parallel([partial(_rdma, shell, link, checks[link.key], node_tools, options, tell) for link in round_])
    cluster = [_all_gather(shell, links, node_tools, options, tell)] if options.nccl else []
    return FabricCheckReport(topology=options.topology, nodes=nodes, links=list(checks.values()), cluster=cluster,
                             duration_s=time.monotonic() - started)


# --- which links, in which order -----------------------------------------------------------------


def measured_links(links: FabricLinks) -> list[FabricLink]:
    """The links the check measures: each point-to-point link; on a switch, a pairing per subnet."""
    by_subnet: dict[str, list[FabricLink]] = {}
    for link in links.links:
        by_subnet.setdefault(link.subnet, []).append(link)
    chosen: list[FabricLink] = []
    for subnet_links in by_subnet.values():
        members = list(dict.fromkeys(n for link in subnet_links for n in link.nodes))
        if len(members) <= 2:
            chosen += subnet_links
            continue
        pairs = [(members[i], members[i + 1]) for i in range(0, len(members) - 1, 2)]
        if len(members) % 2:
            pairs.append((members[-1], members[0]))
        for a, b in pairs:
            chosen += [link for link in subnet_links if set(link.nodes) == {a, b}][:1]
    return chosen


def rounds(links: Sequence[FabricLink]) -> list[list[FabricLink]]:
    """Links in rounds where no node is in two links at once (each round can run in parallel)."""
    left, result = list(links), []
    while left:
        busy: set[str] = set()
        round_ = []
        for link in list(left):
            if not busy & set(link.nodes):
                round_.append(link)
                busy |= set(link.nodes)
                left.remove(link)
        result.append(round_)
    return result


def _parallel(work: list[Callable[[], None]]) -> None:
    if not work:
        return
    with ThreadPoolExecutor(len(work), thread_name_prefix="fabric-check") as pool:
        for future in [pool.submit(job) for job in work]:
            future.result()


def _link_check(link: FabricLink) -> LinkCheck:
    return LinkCheck(key=link.key, a=str(link.a), b=str(link.b), a_address=link.a.address,
                     b_address=link.b.address, subnet=link.subnet, line_rate_gbps=link.line_rate_mbps / 1000,
                     mtu=link.mtu)


def _percent(gbps: float, link: FabricLink) -> float:
    return 100.0 * gbps * 1000 / link.line_rate_mbps


def _run(shell: NodeShell, node: str, argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> CommandResult:
    return shell.run(node, argv, timeout)


def _text(result: CommandResult) -> str:
    return (result.stdout + result.stderr).decode(errors="replace")


# --- tools and ports ------------------------------------------------------------------------------


def _tools(shell: NodeShell, nodes: list[str], tell: Progress) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    lock = threading.Lock()

    def one(node: str) -> None:
        tell(CheckProgress(node, "tools", "running"))
        try:
            have = tools.parse_tools(_run(shell, node, tools.tools_script()).stdout.decode(errors="replace"))
        except SparkSyncError as exc:
            tell(CheckProgress(node, "tools", "failed", str(exc)))
            have = set()
        with lock:
            found[node] = have
        tell(CheckProgress(node, "tools", "done", ", ".join(sorted(have)) or "none"))

    _parallel([partial(one, node) for node in nodes])
    return found


def _readings(shell: NodeShell, links: FabricLinks, tell: Progress) -> dict[str, dict[str, tools.PortReading] | str]:
    """Per node: its interfaces' readings, or why they could not be read."""
    found: dict[str, dict[str, tools.PortReading] | str] = {}
    lock = threading.Lock()

    def one(node: str) -> None:
        tell(CheckProgress(node, "ports", "running"))
        ifaces = [end.iface for end in links.ends(node)]
        try:
            result = _run(shell, node, script(tools.SYSFS_SCRIPT, *ifaces))
            value: dict[str, tools.PortReading] | str = tools.parse_sysfs(result.stdout.decode(errors="replace"))
            tell(CheckProgress(node, "ports", "done", f"{len(ifaces)} interface(s)"))
        except SparkSyncError as exc:
            value = f"{node} could not be reached: {exc}"
            tell(CheckProgress(node, "ports", "failed", value))
        with lock:
            found[node] = value

    _parallel([partial(one, node) for node in links.nodes()])
    return found


def _port_checks(link: FabricLink, readings: dict[str, dict[str, tools.PortReading] | str]) -> list[Measurement]:
    out: list[Measurement] = []
    mtus: list[int | None] = []
    for end in (link.a, link.b):
        where = str(end)
        node_readings = readings.get(end.node)
        if isinstance(node_readings, str) or node_readings is None:
            why = node_readings or "not read"
            out.append(Measurement(test="carrier", where=where, verdict=Verdict.failed, detail=why))
            mtus.append(None)
            continue
        port = node_readings.get(end.iface)
        if port is None or not port.present:
            out.append(Measurement(test="carrier", where=where, verdict=Verdict.failed,
                                   detail=f"{end.iface} does not exist on {end.node}"))
            mtus.append(None)
            continue
        out.append(Measurement(test="carrier", where=where,
                               verdict=Verdict.passed if port.carrier else Verdict.failed,
                               detail="" if port.carrier else "no carrier: check the cable and the port"))
        line = link.line_rate_mbps
        if port.speed_mbps is None:
            out.append(Measurement(test="speed", where=where, verdict=Verdict.failed if not port.carrier
                                   else Verdict.degraded, detail="the speed is unknown"))
        else:
            slow = port.speed_mbps < line
            out.append(Measurement(
                test="speed", where=where, verdict=Verdict.degraded if slow else Verdict.passed,
                value=port.speed_mbps / 1000, unit="Gb/s", mark=line / 1000,
                percent_of_line=100.0 * port.speed_mbps / line,
                detail=f"negotiated {port.speed_mbps / 1000:g} Gb/s, expected {line / 1000:g} Gb/s" if slow else ""))
        mtus.append(port.mtu)
        wrong = port.mtu != link.mtu
        out.append(Measurement(test="mtu", where=where, verdict=Verdict.failed if wrong else Verdict.passed,
                               value=port.mtu, unit="bytes", mark=link.mtu,
                               detail=f"MTU {port.mtu}, the plan says {link.mtu}" if wrong else ""))
    if len(mtus) == 2 and None not in mtus and mtus[0] != mtus[1]:
        out.append(Measurement(test="mtu", where=f"{link.a} <-> {link.b}", verdict=Verdict.failed,
                               detail=f"the two ends differ: {mtus[0]} and {mtus[1]}"))
    return out


# --- ping -----------------------------------------------------------------------------------------------


def _not_run(test: str, where: str, tool: str) -> Measurement:
    return Measurement(test=test, where=where, verdict=Verdict.not_run,
                       detail=f"not run: install {tools.TOOL_PACKAGES[tool]}")


def _ping(shell: NodeShell, link: FabricLink, check: LinkCheck, have: dict[str, set[str]], tell: Progress) -> None:
    where = f"{link.a.node} -> {link.b.node}"
    if "ping" not in have.get(link.a.node, set()):
        check.measurements.append(_not_run("jumbo ping", where, "ping"))
        return
    tell(CheckProgress(link.a.node, "jumbo ping", "running", f"to {link.b.address}"))
    try:
        result = _run(shell, link.a.node, tools.ping_argv(link.a.iface, link.b.address, link.mtu))
    except SparkSyncError as exc:
        check.measurements.append(Measurement(test="jumbo ping", where=where, verdict=Verdict.failed, detail=str(exc)))
        tell(CheckProgress(link.a.node, "jumbo ping", "failed", str(exc)))
        return
    loss = tools.ping_loss(result.stdout.decode(errors="replace"))
    ok = result.exit_status == 0 and loss == 0.0
    detail = "" if ok else _ping_failure(link, loss, result)
    check.measurements.append(Measurement(test="jumbo ping", where=where,
                                          verdict=Verdict.passed if ok else Verdict.failed,
                                          value=link.mtu, unit="bytes", mark=link.mtu, detail=detail))
    tell(CheckProgress(link.a.node, "jumbo ping", "done" if ok else "failed", detail))


def _ping_failure(link: FabricLink, loss: float | None, result: CommandResult) -> str:
    if loss is None:
        text = _text(result).strip()
        return text.splitlines()[-1] if text else f"ping exited with status {result.exit_status}"
    if loss < 100:
        return f"{loss:g} % of {link.mtu}-byte frames lost with don't-fragment"
    return (f"no {link.mtu}-byte frame with don't-fragment came back on {link.a.iface}: check the MTU on both ends "
            "and on the switch; where both twins share one L2 segment, replies may arrive on the twin "
            "unless each netdev has arp_ignore=1 and arp_announce=2, which 'sparksync cluster apply' sets")


# --- iperf3 -------------------------------------------------------------------------------------------------


def _iperf3(shell: NodeShell, link: FabricLink, check: LinkCheck, have: dict[str, set[str]],
            options: CheckOptions, tell: Progress) -> None:
    for reverse in (False, True):
        source, target = (link.b, link.a) if reverse else (link.a, link.b)
        where = f"{source.node} -> {target.node}"
        missing = [n for n in link.nodes if "iperf3" not in have.get(n, set())]
        if missing:
            check.measurements.append(_not_run("iperf3", where, "iperf3"))
            continue
        tell(CheckProgress(source.node, "iperf3", "running", f"to {target.node} ({target.address})"))
        try:
            gbps = iperf3_once(shell, link, reverse, options)
        except (SparkSyncError, tools.ToolOutputError) as exc:
            check.measurements.append(Measurement(test="iperf3", where=where, verdict=Verdict.failed, detail=str(exc)))
            tell(CheckProgress(source.node, "iperf3", "failed", str(exc)))
            continue
        mark = link.line_rate_mbps / 1000 * TCP_MARK_OF_LINE
        low = gbps < mark
        check.measurements.append(Measurement(
            test="iperf3", where=where, verdict=Verdict.degraded if low else Verdict.passed, value=gbps, unit="Gb/s",
            mark=mark, percent_of_line=_percent(gbps, link),
            detail=f"below {mark:g} Gb/s ({TCP_MARK_OF_LINE:.0%} of line rate)" if low else ""))
        tell(CheckProgress(source.node, "iperf3", "done", f"{gbps:.3g} Gb/s to {target.node}"))


def iperf3_once(shell: NodeShell, link: FabricLink, reverse: bool, options: CheckOptions) -> float:
    """One iperf3 test, the server on ``link.b`` and the client on ``link.a`` (``reverse``: b sends)."""
    timeout = options.seconds + 30
    argv = tools.iperf3_client_argv(link.a.address, link.b.address, options.port, options.seconds,
                                    options.streams, reverse)
    with _Server(shell, link.b.node, tools.iperf3_server_argv(link.b.address, options.port, timeout), timeout) as server:
        for _attempt in range(CONNECT_RETRIES):
            result = _run(shell, link.a.node, argv, timeout)
            text = result.stdout.decode(errors="replace")
            if tools.iperf3_refused(text):  # iperf3 3.12 -J exits 0 even then
                if server.alive():
                    time.sleep(RETRY_DELAY_S)
                    continue
                raise tools.ToolOutputError(f"the iperf3 server on {link.b.node} ended: {server.output()}")
            return tools.iperf3_gbps(text)
    raise tools.ToolOutputError(f"iperf3 on {link.b.node} did not start listening on {link.b.address}")


class _Server:
    """A tool's server side, run on a node for one test in a thread of its own.

    It writes its pid first, so one that no client ever reached is ended by
    its pid rather than left waiting for its timeout.
    """

    _SCRIPT = 'mkdir -p "$HOME/.cache" && echo $$ >"$HOME/.cache/$1" && shift && exec "$@"'

    def __init__(self, shell: NodeShell, node: str, argv: list[str], timeout: float):
        self.shell, self.node, self.argv, self.timeout = shell, node, argv, timeout
        self.pid_file = f"sparksync-check-{threading.get_ident()}-{time.monotonic_ns()}.pid"
        self.result: CommandResult | BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name=f"check-server-{node}")

    def _serve(self) -> None:
        try:
            self.result = self.shell.run(self.node, script(self._SCRIPT, self.pid_file, *self.argv), self.timeout + 10)
        except BaseException as exc:  # the test's own client says what went wrong
            self.result = exc

    def alive(self) -> bool:
        return self._thread.is_alive()

    def output(self) -> str:
        """What the server said, once it ended (for an error message)."""
        self._thread.join(5)
        if isinstance(self.result, CommandResult):
            text = _text(self.result).strip()
            return text.splitlines()[-1] if text else f"exit status {self.result.exit_status}"
        return str(self.result)

    def __enter__(self) -> _Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.alive():
            try:
                _run(self.shell, self.node, script('f="$HOME/.cache/$1"; [ -f "$f" ] && kill "$(cat "$f")"; true',
                                                   self.pid_file))
            except SparkSyncError as error:
                log.warning("could not end the test server on %s: %s", self.node, error)
        self._thread.join(self.timeout + 15)
        try:
            _run(self.shell, self.node, script('rm -f "$HOME/.cache/$1"', self.pid_file))
        except SparkSyncError:
            pass


# --- RDMA ---------------------------------------------------------------------------------------------------


def _rdma(shell: NodeShell, link: FabricLink, check: LinkCheck, have: dict[str, set[str]],
          options: CheckOptions, tell: Progress) -> None:
    where = f"{link.a.node} -> {link.b.node}"
    if not options.rdma:
        return
    if not link.has_rdma:
        check.measurements.append(Measurement(test="ib_write_bw", where=where, verdict=Verdict.not_run,
                                              detail="not run: no RoCE device on this link"))
        return
    if any("ib_write_bw" not in have.get(n, set()) for n in link.nodes):
        check.measurements.append(_not_run("ib_write_bw", where, "ib_write_bw"))
        return
    assert link.a.rdma_device is not None and link.b.rdma_device is not None  # has_rdma
    tell(CheckProgress(link.a.node, "ib_write_bw", "running", f"{link.a.rdma_device} to {link.b.rdma_device}"))
    timeout = options.seconds + 30
    try:
        gbps = None
        server_argv = tools.ib_server_argv(link.b.rdma_device, options.seconds, timeout)
        with _Server(shell, link.b.node, server_argv, timeout) as server:
            for _attempt in range(CONNECT_RETRIES):
                result = _run(shell, link.a.node, tools.ib_client_argv(link.a.rdma_device, link.b.address,
                                                                       options.seconds), timeout)
                text = _text(result)
                if result.exit_status != 0 and tools.ib_refused(text) and server.alive():
                    time.sleep(RETRY_DELAY_S)
                    continue
                gbps = tools.ib_write_gbps(text)
                break
        if gbps is None:
            raise tools.ToolOutputError(f"ib_write_bw on {link.b.node} did not start listening")
    except (SparkSyncError, tools.ToolOutputError) as exc:
        check.measurements.append(Measurement(test="ib_write_bw", where=where, verdict=Verdict.failed, detail=str(exc)))
        tell(CheckProgress(link.a.node, "ib_write_bw", "failed", str(exc)))
        return
    # A cable's two twin links share NVIDIA's ~190 Gb/s; each RoCE pair is judged against its share.
    figure = RDMA_CABLE_GBPS / (2 if link.cable else 1)
    mark = figure * RDMA_MARK_OF_FIGURE
    low = gbps < mark
    check.measurements.append(Measurement(
        test="ib_write_bw", where=where, verdict=Verdict.degraded if low else Verdict.passed, value=gbps,
        unit="Gb/s", mark=mark, percent_of_line=_percent(gbps, link),
        detail=f"below {mark:.3g} Gb/s (90 % of NVIDIA's {figure:g} Gb/s for this RoCE pair)" if low else ""))
    tell(CheckProgress(link.a.node, "ib_write_bw", "done", f"{gbps:.3g} Gb/s"))


# --- NCCL -----------------------------------------------------------------------------------------------------


def _all_gather(shell: NodeShell, links: FabricLinks, have: dict[str, set[str]], options: CheckOptions,
                tell: Progress) -> Measurement:
    nodes = links.nodes()
    ring = options.topology == "ring"
    mark = NCCL_RING_BUSBW_GBPS if ring else NCCL_BUSBW_GBPS
    missing = [n for n in nodes if not {"all_gather_perf", "mpirun"} <= have.get(n, set())]
    if missing:
        tool = "all_gather_perf" if any("all_gather_perf" not in have.get(n, set()) for n in missing) else "mpirun"
        return Measurement(test="all_gather", where="cluster", verdict=Verdict.not_run, mark=mark, unit="GB/s",
                           detail=f"not run: install {tools.TOOL_PACKAGES[tool]} on {', '.join(missing)}")
    first = nodes[0]
    hosts = [first_address(links, first, node) for node in nodes]
    ends = links.ends(first)
    env = {"NCCL_SOCKET_IFNAME": ",".join(e.iface for e in ends),
           "NCCL_IB_HCA": ",".join(e.rdma_device for e in ends if e.rdma_device)}
    tell(CheckProgress("cluster", "all_gather", "running", f"{len(nodes)} ranks from {first}"))
    try:
        result = _run(shell, first, tools.all_gather_argv(hosts, {k: v for k, v in env.items() if v}), 600)
        busbw = tools.all_gather_busbw(_text(result))
    except (SparkSyncError, tools.ToolOutputError) as exc:
        tell(CheckProgress("cluster", "all_gather", "failed", str(exc)))
        return Measurement(test="all_gather", where="cluster", verdict=Verdict.failed, mark=mark, detail=str(exc))
    line = min(link.line_rate_mbps for link in links.links) / 1000
    low = busbw < mark
    tell(CheckProgress("cluster", "all_gather", "done", f"{busbw:g} GB/s"))
    return Measurement(test="all_gather", where="cluster", verdict=Verdict.degraded if low else Verdict.passed,
                       value=busbw, unit="GB/s", mark=mark, percent_of_line=100.0 * busbw * 8 / line,
                       detail=f"below NVIDIA's {mark:g} GB/s pass mark" if low else "")


def first_address(links: FabricLinks, source: str, node: str) -> str:
    """The address ``source`` reaches ``node`` at over the fabric (its own first one for itself)."""
    if node == source:
        return links.addresses(source)[0]
    routes = links.routes(source, node)
    return routes[0][1].address if routes else links.addresses(node)[0]
