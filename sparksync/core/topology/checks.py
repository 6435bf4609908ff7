"""What is wrong with the fabric: ports below their expected speed, and MTU mismatches.

A DGX Spark's ConnectX-7 ports are 200 Gb/s; a port that negotiated less
(a bad cable, a 100 Gb/s switch port) caps every collective that crosses it.
Two ends of a link (or the ports on one switch subnet) with different MTUs
make large frames drop or fragment, which shows as stalls, not errors.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from sparksync.core.topology.links import Link, LinkKind
from sparksync.core.topology.ports import FabricPortState
from sparksync.core.base.units import format_bits_per_s

CX7_SPEED_MBPS = 200_000
MBPS = 1_000_000  # bits/s in one Mb/s


class WarningKind(str, Enum):
    slow_port = "slow_port"
    mtu_mismatch = "mtu_mismatch"
    no_link = "no_link"


@dataclass(frozen=True)
class TopologyWarning:
    kind: WarningKind
    message: str
    link_keys: tuple[str, ...] = ()  # the links to highlight
    nodes: tuple[str, ...] = ()


def check_links(links: Sequence[Link], expected_speed_mbps: int | None = CX7_SPEED_MBPS) -> list[TopologyWarning]:
    warnings = slow_ports(links, expected_speed_mbps) if expected_speed_mbps else []
    warnings += [w for link in links if link.kind is LinkKind.cable and (w := cable_mtu(link))]
    warnings += switch_mtus(links)
    return warnings


def slow_ports(links: Sequence[Link], expected_speed_mbps: int) -> list[TopologyWarning]:
    found = []
    for link in links:
        for port in link.ports:
            if port.speed_mbps is not None and 0 < port.speed_mbps < expected_speed_mbps:
                found.append(TopologyWarning(
                    WarningKind.slow_port,
                    f"{port.label} runs at {_speed(port.speed_mbps)}, below the expected "
                    f"{_speed(expected_speed_mbps)}: check the cable and what the other end negotiated",
                    (link.key,), (port.node,)))
    return found


def cable_mtu(link: Link) -> TopologyWarning | None:
    a, b = link.a_port, link.b_port
    if b is None or a.mtu is None or b.mtu is None or a.mtu == b.mtu:
        return None
    return TopologyWarning(
        WarningKind.mtu_mismatch,
        f"MTU mismatch on {link.network}: {a.label} has {a.mtu}, {b.label} has {b.mtu}; "
        "set the same MTU on both ends",
        (link.key,), (a.node, b.node))


def switch_mtus(links: Sequence[Link]) -> list[TopologyWarning]:
    """Per switch subnet: the ports whose MTU differs from the most common one."""
    by_network: dict[object, list[Link]] = defaultdict(list)
    for link in links:
        if link.kind is LinkKind.switch and link.a_port.mtu is not None:
            by_network[link.network].append(link)
    found = []
    for network, members in by_network.items():
        counts = Counter(link.a_port.mtu for link in members)
        if len(counts) < 2:
            continue
        (common, n_common), (_, n_next) = counts.most_common(2)
        tie = n_common == n_next
        odd = members if tie else [m for m in members if m.a_port.mtu != common]
        listed = ", ".join(f"{m.a_port.label} has {m.a_port.mtu}" for m in odd)
        rest = "" if tie else f" where the other ports have {common}"
        found.append(TopologyWarning(
            WarningKind.mtu_mismatch,
            f"MTU mismatch on switch subnet {network}: {listed}{rest}; set the same MTU on every port",
            tuple(m.key for m in odd), tuple(sorted({m.a for m in odd}))))
    return found


def unlinked_nodes(nodes: Sequence[str], ports: Sequence[FabricPortState], links: Sequence[Link]) -> list[TopologyWarning]:
    """Nodes with no fabric link while others have one: they would talk over the management network."""
    if not links:
        return []
    linked = {link.a for link in links} | {link.b for link in links}
    has_ports = {p.node for p in ports}
    found = []
    for node in nodes:
        if node in linked:
            continue
        why = "its fabric ports have no peer among the nodes" if node in has_ports else "no fabric port is up"
        found.append(TopologyWarning(WarningKind.no_link, f"{node} has no fabric link: {why}", (), (node,)))
    return found


def _speed(mbps: int) -> str:
    return format_bits_per_s(mbps * MBPS)
