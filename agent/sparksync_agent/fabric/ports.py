"""The node's CX-7 netdevs as sysfs shows them.

A ConnectX-7 netdev is named by its PCI path plus its physical port
(``enp1s0f0np0``, its twin on the second PCI domain ``enP2p1s0f0np0``).
``np<N>`` is the QSFP port; a name with an upper-case ``P<domain>`` after
``en`` is the twin on the second domain. The RoCE device behind a netdev is
the one entry of ``/sys/class/net/<if>/device/infiniband/``.

Management interfaces (``enP7s7``, ``wlP9s9``) never match the name rule,
so nothing here (and nothing the helper applies) ever touches them.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sparksync_agent.collectors.sysfs import read_attr, read_int_attr

CX7_NAME = re.compile(r"^en(?P<domain>P\d+)?p\d+s\d+f\d+np(?P<port>\d+)$")

AddressSource = Callable[[], Mapping[str, list[str]]]


def is_fabric_name(name: str) -> bool:
    return CX7_NAME.match(name) is not None


def port_of(name: str) -> tuple[int, int]:
    """(QSFP port, twin) of a CX-7 netdev name: enP2p1s0f1np1 -> (1, 1)."""
    match = CX7_NAME.match(name)
    if match is None:
        raise ValueError(f"{name} is not a ConnectX-7 netdev name")
    return int(match["port"]), 1 if match["domain"] else 0


@dataclass
class NetdevState:
    name: str
    port: int
    twin: int
    carrier: bool | None
    operstate: str | None
    speed_mbps: int | None
    mtu: int | None
    mac: str | None
    rdma_device: str | None
    ipv4: list[str] = field(default_factory=list)
    ipv6_link_local: str | None = None


def fabric_netdevs(sys_root: Path = Path("/sys"), addresses: AddressSource | None = None) -> list[NetdevState]:
    """Every CX-7 netdev under ``sys_root``/class/net, in port and twin order."""
    net = sys_root / "class" / "net"
    try:
        names = sorted(n for n in os.listdir(net) if is_fabric_name(n))
    except OSError:
        return []
    known = (addresses or psutil_addresses)()
    states = []
    for name in names:
        base = net / name
        port, twin = port_of(name)
        carrier = read_int_attr(f"{base}/carrier")  # EINVAL while the interface is down
        speed = read_int_attr(f"{base}/speed")
        mine = known.get(name, [])
        states.append(NetdevState(
            name=name, port=port, twin=twin,
            carrier=None if carrier is None else carrier == 1,
            operstate=read_attr(f"{base}/operstate"),
            speed_mbps=speed if speed is not None and speed > 0 else None,
            mtu=read_int_attr(f"{base}/mtu"),
            mac=(read_attr(f"{base}/address") or "").lower() or None,
            rdma_device=rdma_device(base),
            ipv4=[a for a in mine if _version(a) == 4],
            ipv6_link_local=next((a.split("/")[0] for a in mine if _is_link_local6(a)), None),
        ))  # fmt: skip
    return sorted(states, key=lambda s: (s.port, s.twin, s.name))


def rdma_device(netdev_dir: Path) -> str | None:
    """The RoCE device behind a netdev, from its PCI device's infiniband directory."""
    try:
        entries = sorted(os.listdir(netdev_dir / "device" / "infiniband"))
    except OSError:
        return None
    return entries[0] if entries else None


def networks_in_use(addresses: AddressSource | None = None) -> list[tuple[str, str]]:
    """(interface, address/prefix) of every IPv4 address on a non-fabric, non-loopback interface."""
    found = []
    for name, addrs in sorted((addresses or psutil_addresses)().items()):
        if name == "lo" or is_fabric_name(name):
            continue
        found += [(name, a) for a in addrs if _version(a) == 4 and "/" in a]
    return found


def psutil_addresses() -> dict[str, list[str]]:
    from sparksync_agent.collectors.network import psutil_addresses as read

    return read()


def _version(address: str) -> int | None:
    try:
        return ipaddress.ip_interface(address.split("%", 1)[0]).version
    except ValueError:
        return None


def _is_link_local6(address: str) -> bool:
    try:
        return ipaddress.ip_interface(address.split("%", 1)[0]).ip.is_link_local and _version(address) == 6
    except ValueError:
        return False
