"""The tools the acceptance check runs on the nodes, and how their output is read.

- sysfs: ``/sys/class/net/<if>/{carrier,speed,mtu}`` (speed in Mb/s);
- ``ping -M do -s <MTU - 28>``: a jumbo frame that may not be fragmented;
- ``iperf3 -J`` (JSON): TCP bandwidth, the receiver's figure;
- ``ib_write_bw --report_gbits`` (perftest): RDMA write bandwidth;
- ``all_gather_perf`` (nccl-tests): its "Avg bus bandwidth" line, GB/s.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# Debian / Ubuntu package that brings each tool, for "not run: install X".
TOOL_PACKAGES = {
    "ping": "iputils-ping",
    "iperf3": "iperf3",
    "ib_write_bw": "perftest",
    "all_gather_perf": "nccl-tests (NVIDIA's github.com/NVIDIA/nccl-tests, built with MPI)",
    "mpirun": "openmpi-bin",
}
IP_ICMP_HEADERS = 28  # IPv4 (20) + ICMP (8): ping -s takes the payload


def tools_script() -> list[str]:
    """Prints each tool of TOOL_PACKAGES the node has on its PATH."""
    names = " ".join(TOOL_PACKAGES)
    return ["sh", "-c", f"for t in {names}; do command -v $t >/dev/null 2>&1 && echo $t; done; true"]


def parse_tools(stdout: str) -> set[str]:
    return {line.strip() for line in stdout.splitlines() if line.strip() in TOOL_PACKAGES}


# --- sysfs --------------------------------------------------------------------------------------

SYSFS_SCRIPT = (
    'for i in "$@"; do d=/sys/class/net/$i; '
    'if [ -d "$d" ]; then c=$(cat $d/carrier 2>/dev/null || echo -); s=$(cat $d/speed 2>/dev/null || echo -); '
    'm=$(cat $d/mtu 2>/dev/null || echo -); echo "$i $c $s $m"; else echo "$i missing"; fi; done'
)


@dataclass(frozen=True)
class PortReading:
    iface: str
    present: bool
    carrier: bool | None = None
    speed_mbps: int | None = None  # None: unknown (-1 or unreadable, e.g. no carrier)
    mtu: int | None = None


def parse_sysfs(stdout: str) -> dict[str, PortReading]:
    found: dict[str, PortReading] = {}
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == "missing":
            found[fields[0]] = PortReading(fields[0], False)
        elif len(fields) == 4:
            name, carrier, speed, mtu = fields
            found[name] = PortReading(name, True, carrier == "1" if carrier in "01" else None,
                                      _positive(speed), _positive(mtu))
    return found


def _positive(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None


# --- ping ----------------------------------------------------------------------------------------


def ping_argv(iface: str, address: str, mtu: int, count: int = 3) -> list[str]:
    return ["ping", "-n", "-M", "do", "-s", str(mtu - IP_ICMP_HEADERS), "-c", str(count), "-i", "0.2", "-W", "2",
            "-I", iface, address]


_LOSS = re.compile(r"(\d+(?:\.\d+)?)% packet loss")


def ping_loss(stdout: str) -> float | None:
    """The packet loss in %, None when ping printed no summary."""
    match = _LOSS.search(stdout)
    return float(match.group(1)) if match else None


# --- iperf3 ----------------------------------------------------------------------------------------


def iperf3_server_argv(address: str, port: int, timeout_s: float) -> list[str]:
    # -1: one test, then exit; timeout(1) ends it should the client never come.
    return ["timeout", f"{timeout_s:g}", "iperf3", "-s", "-1", "-B", address, "-p", str(port)]


def iperf3_client_argv(source: str, server: str, port: int, seconds: float, streams: int,
                       reverse: bool) -> list[str]:
    argv = ["iperf3", "-c", server, "-B", source, "-p", str(port), "-t", f"{seconds:g}", "-P", str(streams), "-J"]
    return argv + (["-R"] if reverse else [])


class ToolOutputError(ValueError):
    """A tool's output could not be read."""


def iperf3_gbps(stdout: str) -> float:
    """The receiver's bandwidth of an ``iperf3 -J`` run, in Gb/s; ToolOutputError with iperf3's error."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise ToolOutputError(f"iperf3 printed no JSON ({stdout.strip()[:120]!r})") from exc
    if data.get("error"):
        raise ToolOutputError(f"iperf3: {data['error']}")
    try:
        return float(data["end"]["sum_received"]["bits_per_second"]) / 1e9
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolOutputError("iperf3's JSON has no end.sum_received.bits_per_second") from exc


def iperf3_refused(stdout: str) -> bool:
    """The client came before the server listened (worth another try)."""
    return "Connection refused" in stdout or "unable to connect" in stdout


# --- ib_write_bw -----------------------------------------------------------------------------------

IB_GID_INDEX = 3  # RoCE v2 over IPv4 on a ConnectX-7 (what NCCL_IB_GID_INDEX is set to on Sparks)


def ib_server_argv(device: str, seconds: float, timeout_s: float) -> list[str]:
    return ["timeout", f"{timeout_s:g}", "ib_write_bw", "-d", device, "-x", str(IB_GID_INDEX), "-F",
            "--report_gbits", "-D", f"{seconds:g}"]


def ib_client_argv(device: str, server: str, seconds: float) -> list[str]:
    return ["ib_write_bw", "-d", device, "-x", str(IB_GID_INDEX), "-F", "--report_gbits", "-D", f"{seconds:g}",
            server]


def ib_write_gbps(stdout: str) -> float:
    """BW average [Gb/sec] from ib_write_bw's result table."""
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        if "BW average" in line:
            header = line.replace("#", "").split("BW average")[0].split()
            column = len(header)  # #bytes #iterations BW peak[Gb/sec] ...: "BW peak" counts as one column
            for row in lines[index + 1:]:
                fields = row.split()
                if fields and fields[0].isdigit():
                    try:
                        return float(fields[column - 1 if "peak" in line else column])
                    except (IndexError, ValueError) as exc:
                        raise ToolOutputError(f"ib_write_bw's result row is unreadable: {row!r}") from exc
    raise ToolOutputError("ib_write_bw printed no result table")


def ib_refused(stdout: str) -> bool:
    return "Couldn't connect" in stdout or "Unable to open file descriptor" in stdout


# --- all_gather_perf -------------------------------------------------------------------------------

_BUSBW = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.]+)")


def all_gather_argv(hosts: list[str], env: dict[str, str]) -> list[str]:
    argv = ["mpirun", "-np", str(len(hosts)), "--host", ",".join(f"{h}:1" for h in hosts)]
    for name, value in env.items():
        argv += ["-x", f"{name}={value}"]
    return argv + ["all_gather_perf", "-b", "16G", "-e", "16G", "-f", "2", "-g", "1"]


def all_gather_busbw(stdout: str) -> float:
    match = _BUSBW.search(stdout)
    if match is None:
        raise ToolOutputError("all_gather_perf printed no 'Avg bus bandwidth' line")
    return float(match.group(1))
