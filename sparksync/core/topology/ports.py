"""A node's fabric ports as the topology sees them: address and subnet, speed, MTU and live rates.

The agent reports each interface's addresses (with their prefix length
when it knows it, ``10.0.0.1/31``; a bare ``10.0.0.1`` otherwise). A bare
address is placed in a subnet of ``default_prefix`` bits: point-to-point
cables are usually /30 or /31 and shared switch subnets /24, so /24 groups
a switch's nodes and still keeps the distinct subnets of a ring's cables
apart as long as each cable has its own /24. A bare link-local address
(169.254.x.y, which an unconfigured direct cable gets) is placed in its /16.

Rates are in bits per second, as links are rated. A RoCE port's traffic
bypasses the kernel's network stack, so it shows in the RDMA port counters
and not in the netdev's; the two are disjoint and a port's rate is their sum.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparksync_agent.protocol import InterfaceKind, NetInterfaceSample, RdmaPortSample, Sample

from sparksync.core.base.units import bits_per_s

DEFAULT_PREFIX = 24
# A CX-7 netdev is "en" + PCI path + "np" + port, its RoCE device "roce" + the same PCI path
# (enP2p1s0f1np1 -> roceP2p1s0f1), the rule the workloads' fabric module follows too. Kept here
# so drawing the topology does not load the SSH stack that module's registry import brings.
_NETDEV_RE = re.compile(r"^en(?P<pci>\w+?)np\d+$")
LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
LINK_LOCAL_PREFIX = 16


@dataclass(frozen=True)
class FabricPortState:
    """One fabric interface address of one node, with what the node last said about the interface."""

    node: str
    name: str
    interface: ipaddress.IPv4Interface
    speed_mbps: int | None
    mtu: int | None
    rx_bits_per_s: float
    tx_bits_per_s: float
    rdma_device: str | None = None

    @property
    def network(self) -> ipaddress.IPv4Network:
        return self.interface.network

    @property
    def label(self) -> str:
        return f"{self.node} {self.name}"


def ports_of(node: str, sample: Sample, default_prefix: int = DEFAULT_PREFIX) -> list[FabricPortState]:
    """The fabric ports of ``node`` that are up and have an IPv4 address, one per address."""
    rdma = _rdma_rates(sample.rdma or [])
    ports: list[FabricPortState] = []
    for iface in sample.net or []:
        if iface.kind is not InterfaceKind.fabric or not iface.is_up:
            continue
        # Prefer the agent's address/prefix pairs; older agents sent bare addresses only.
        for interface in ipv4_interfaces(iface.networks or iface.addresses, default_prefix):
            ports.append(_port(node, iface, interface, rdma))
    return ports


def ipv4_interfaces(addresses: Sequence[str], default_prefix: int = DEFAULT_PREFIX) -> list[ipaddress.IPv4Interface]:
    """IPv4 addresses with their subnet; link-local IPv6 and anything unreadable are left out."""
    found = []
    for text in addresses:
        text = text.split("%", 1)[0].strip()
        try:
            interface = ipaddress.ip_interface(text if "/" in text else f"{text}/{_prefix_of(text, default_prefix)}")
        except ValueError:
            continue
        if isinstance(interface, ipaddress.IPv4Interface):
            found.append(interface)
    return found


def rdma_device_for(netdev: str) -> str | None:
    match = _NETDEV_RE.match(netdev)
    return f"roce{match['pci']}" if match else None


def _prefix_of(address: str, default_prefix: int) -> int:
    # A link-local address (what a direct cable gets with no configuration) is random within the /16.
    try:
        return LINK_LOCAL_PREFIX if ipaddress.ip_address(address) in LINK_LOCAL else default_prefix
    except ValueError:
        return default_prefix


def _port(node: str, iface: NetInterfaceSample, interface: ipaddress.IPv4Interface,
          rdma: dict[str, tuple[float, float]]) -> FabricPortState:
    device = rdma_device_for(iface.name)
    rdma_rx, rdma_tx = rdma.get(device or "", (0.0, 0.0))
    return FabricPortState(
        node=node, name=iface.name, interface=interface, speed_mbps=iface.speed_mbps, mtu=iface.mtu,
        rx_bits_per_s=bits_per_s(iface.rx_bytes_per_s + rdma_rx),
        tx_bits_per_s=bits_per_s(iface.tx_bytes_per_s + rdma_tx),
        rdma_device=device if device in rdma else None,
    )


def _rdma_rates(ports: Sequence[RdmaPortSample]) -> dict[str, tuple[float, float]]:
    """bytes/s received and sent per RDMA device, over its ports."""
    rates: dict[str, tuple[float, float]] = {}
    for port in ports:
        rx, tx = rates.get(port.device, (0.0, 0.0))
        rates[port.device] = (rx + port.rx_bytes_per_s, tx + port.tx_bytes_per_s)
    return rates
