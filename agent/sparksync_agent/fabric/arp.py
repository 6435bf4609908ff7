"""ARP on the fabric netdevs: each answers and announces only its own addresses.

A CX-7 port's two twins (``enp1s0f0np0`` and ``enP2p1s0f0np0``) share one L2
segment. With Linux's defaults (``arp_ignore=0``, ``arp_announce=0``) every
netdev answers ARP for every address of the host, so the reply for twin 0's
address may come from twin 1's MAC; traffic bound to one netdev (a jumbo
ping with ``-I``, RoCE) then goes out one twin and comes back on the other,
or not at all. The helper sets, per fabric netdev:

- ``net.ipv4.conf.<if>.arp_ignore = 1``: answer only for addresses on the
  netdev the request came in on;
- ``net.ipv4.conf.<if>.arp_announce = 2``: ask with the netdev's own address
  as the source.

Nothing is set at ``all``: for both settings the kernel uses the larger of
``conf/all`` and ``conf/<if>`` (Documentation/networking/ip-sysctl.rst), so
the per-netdev value takes effect whatever ``all`` holds (0 by default), and
the management interfaces keep their behaviour.

Where netplan runs the network (DGX OS) the values also go into
``/etc/sysctl.d/60-sparksync-fabric.conf`` (netplan cannot set sysctls), so
they hold after a reboot: systemd-udevd runs systemd-sysctl for each netdev
as it appears. The previous values and the previous file are saved with the
apply's state and put back by a rollback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sparksync_agent.atomic import write_atomic

PROC_CONF = Path("/proc/sys/net/ipv4/conf")
SYSCTL_FILE = Path("/etc/sysctl.d/60-sparksync-fabric.conf")
WANTED: dict[str, int] = {"arp_ignore": 1, "arp_announce": 2}
HEADER = (
    "# Written by SparkSync: ARP on the ConnectX-7 fabric netdevs, so each twin answers for its own\n"
    "# addresses only. 'sparksync cluster rollback' removes it and puts back the values before.\n"
)


def capture(names: Sequence[str], proc_conf: Path | None = None) -> dict[str, dict[str, int]]:
    """Each netdev's current values (a netdev that is not there is left out)."""
    proc_conf = proc_conf or PROC_CONF
    values: dict[str, dict[str, int]] = {}
    for name in names:
        try:
            values[name] = {key: int((proc_conf / name / key).read_text().strip()) for key in WANTED}
        except (OSError, ValueError):
            continue
    return values


def write(values: Mapping[str, Mapping[str, int]], proc_conf: Path | None = None) -> list[str]:
    """Set each netdev's values now; returns one step line per netdev."""
    proc_conf = proc_conf or PROC_CONF
    steps = []
    for name, settings in values.items():
        for key, value in settings.items():
            (proc_conf / name / key).write_text(f"{int(value)}\n")
        steps.append(f"{name}: " + ", ".join(f"{key}={int(value)}" for key, value in settings.items()))
    return steps


def wanted(names: Sequence[str]) -> dict[str, dict[str, int]]:
    return {name: dict(WANTED) for name in names}


def render(names: Sequence[str]) -> str:
    lines = [HEADER]
    for name in names:
        lines += [f"net.ipv4.conf.{name}.{key} = {value}\n" for key, value in WANTED.items()]
    return "".join(lines)


def read_file(path: Path | None = None) -> str | None:
    path = path or SYSCTL_FILE
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def write_file(text: str | None, path: Path | None = None) -> None:
    """Write (atomically) or, for ``None``, remove the sysctl.d file."""
    path = path or SYSCTL_FILE
    if text is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text, 0o644)
