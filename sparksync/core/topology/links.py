"""Links between nodes, inferred from the subnets their fabric ports share.

Ports in one IPv4 subnet are on one network segment:

- a subnet shared by exactly two nodes is a **cable** between them (a
  direct connection, or one hop of a ring); two nodes with two ports each in
  that subnet have two cables, paired in port-name order;
- a subnet shared by three or more nodes is a **switch**: each node's port
  is a link to a switch node named after the subnet;
- a subnet with one node only is an **unlinked** port (its peer is down, not
  reported yet, or not cabled).

The cluster's topology follows from the links: two nodes joined by cables
only are ``direct``; three or more nodes joined by cables into one cycle in
which every node has two neighbours are a ``ring``; nodes joined only
through switches are ``switch``; anything else (a chain, a partial mesh, a
switch plus cables) is ``mixed``.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from sparksync.core.topology.ports import FabricPortState


class LinkKind(str, Enum):
    cable = "cable"
    switch = "switch"


class TopologyKind(str, Enum):
    none = "none"  # no fabric link seen (yet)
    direct = "direct"
    ring = "ring"
    switch = "switch"
    mixed = "mixed"


@dataclass(frozen=True)
class Link:
    """One edge to draw: a cable from ``a`` to node ``b``, or ``a``'s port to switch ``b``."""

    kind: LinkKind
    network: ipaddress.IPv4Network
    a: str
    b: str
    a_port: FabricPortState
    b_port: FabricPortState | None = None  # None on a switch link: the switch reports nothing

    @property
    def key(self) -> str:
        """Stable across samples, so the view can keep an edge's drawing and its warnings apart."""
        return f"{self.kind.value}:{self.network}:{self.a}:{self.a_port.name}"

    @property
    def a_to_b_bits_per_s(self) -> float:
        # What the sender counts as sent; the receiver's count of the same bytes would do as well.
        return self.a_port.tx_bits_per_s

    @property
    def b_to_a_bits_per_s(self) -> float:
        return self.b_port.tx_bits_per_s if self.b_port is not None else self.a_port.rx_bits_per_s

    @property
    def ports(self) -> tuple[FabricPortState, ...]:
        return (self.a_port,) if self.b_port is None else (self.a_port, self.b_port)


def switch_name(network: ipaddress.IPv4Network) -> str:
    return f"switch {network}"


def infer_links(ports: Iterable[FabricPortState]) -> tuple[list[Link], list[FabricPortState]]:
    """The links the ports make, and the ports that have no peer among them."""
    links: list[Link] = []
    unlinked: list[FabricPortState] = []
    for network, members in sorted(_by_network(ports).items(), key=lambda kv: kv[0]):
        nodes = sorted({p.node for p in members})
        if len(nodes) == 1:
            unlinked.extend(members)
        elif len(nodes) == 2:
            links.extend(_cables(network, nodes, members))
        else:
            links.extend(Link(LinkKind.switch, network, p.node, switch_name(network), p)
                         for p in sorted(members, key=lambda p: (p.node, p.name)))
    return links, unlinked


def classify(nodes: Sequence[str], links: Sequence[Link]) -> TopologyKind:
    if not links:
        return TopologyKind.none
    kinds = {link.kind for link in links}
    if kinds == {LinkKind.switch}:
        return TopologyKind.switch
    if kinds != {LinkKind.cable}:
        return TopologyKind.mixed
    neighbours = _neighbours(links)
    if len(neighbours) == 2:
        return TopologyKind.direct
    if _is_one_cycle(neighbours):
        return TopologyKind.ring
    return TopologyKind.mixed


def _by_network(ports: Iterable[FabricPortState]) -> dict[ipaddress.IPv4Network, list[FabricPortState]]:
    groups: dict[ipaddress.IPv4Network, list[FabricPortState]] = defaultdict(list)
    for port in ports:
        groups[port.network].append(port)
    return groups


def _cables(network: ipaddress.IPv4Network, nodes: list[str], members: list[FabricPortState]) -> list[Link]:
    first = sorted((p for p in members if p.node == nodes[0]), key=lambda p: p.name)
    second = sorted((p for p in members if p.node == nodes[1]), key=lambda p: p.name)
    return [Link(LinkKind.cable, network, nodes[0], nodes[1], a, b) for a, b in zip(first, second, strict=False)]


def _neighbours(links: Sequence[Link]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for link in links:
        graph[link.a].add(link.b)
        graph[link.b].add(link.a)
    return graph


def _is_one_cycle(graph: dict[str, set[str]]) -> bool:
    """Every node has two neighbours and a walk from any node reaches them all."""
    if len(graph) < 3 or any(len(n) != 2 for n in graph.values()):
        return False
    start = next(iter(graph))
    seen, todo = {start}, [start]
    while todo:
        for other in graph[todo.pop()]:
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return len(seen) == len(graph)
