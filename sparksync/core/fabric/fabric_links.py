"""The fabric's links as the mesh and the acceptance check see them.

A ``FabricLink`` is one interface-level link: an interface on one node, an
interface on another, both addressed on one subnet. A CX-7 cable carries two
(its twin interfaces sit on different subnets), which share a ``cable``
label; on a switch each pair of nodes on a subnet is one. This small shape
is all the mesh and the check need from the fabric plan, so they do not
depend on how the plan was made.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparksync.core.fabric.plan import FabricPlan

CX7_LINE_RATE_MBPS = 200_000  # one ConnectX-7 port, as NVIDIA specifies it
DEFAULT_MTU = 9000


@dataclass(frozen=True)
class LinkEnd:
    node: str  # the node's name (a label: the registry turns it into its id)
    iface: str  # e.g. enp1s0f0np0
    address: str  # its fabric IPv4 address, without the prefix
    prefix_len: int = 24
    rdma_device: str | None = None  # e.g. rocep1s0f0; None where the interface has none

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Interface(f"{self.address}/{self.prefix_len}").network

    def __str__(self) -> str:
        return f"{self.node}:{self.iface}"


@dataclass(frozen=True)
class FabricLink:
    a: LinkEnd
    b: LinkEnd
    mtu: int = DEFAULT_MTU
    line_rate_mbps: int = CX7_LINE_RATE_MBPS  # what the link should run at: the figures' 100 %
    cable: str | None = None  # twin links of one cable share it; None: the link is its own cable

    def __post_init__(self) -> None:
        if self.a.node == self.b.node:
            raise ValueError(f"a link joins two nodes, not {self.a.node} to itself")
        if self.a.network != self.b.network:
            raise ValueError(f"{self.a} ({self.a.network}) and {self.b} ({self.b.network}) are on different subnets")

    @property
    def key(self) -> str:
        """A stable name for the link: its two ends, in order."""
        first, second = sorted((str(self.a), str(self.b)))
        return f"{first}--{second}"

    @property
    def subnet(self) -> str:
        return str(self.a.network)

    @property
    def nodes(self) -> tuple[str, str]:
        return self.a.node, self.b.node

    @property
    def has_rdma(self) -> bool:
        return self.a.rdma_device is not None and self.b.rdma_device is not None

    def end(self, node: str) -> LinkEnd:
        return self.a if node == self.a.node else self.b

    def other(self, node: str) -> LinkEnd:
        return self.b if node == self.a.node else self.a


@dataclass(frozen=True)
class FabricLinks:
    """Every link of the fabric, and what the mesh derives from them."""

    links: tuple[FabricLink, ...]

    @classmethod
    def of(cls, links: Iterable[FabricLink]) -> FabricLinks:
        return cls(tuple(links))

    def nodes(self) -> list[str]:
        return list(dict.fromkeys(n for link in self.links for n in link.nodes))

    def ends(self, node: str) -> list[LinkEnd]:
        """``node``'s fabric interfaces, each once."""
        found: dict[tuple[str, str], LinkEnd] = {}
        for link in self.links:
            for end in (link.a, link.b):
                if end.node == node:
                    found.setdefault((end.iface, end.address), end)
        return list(found.values())

    def addresses(self, node: str) -> list[str]:
        return [end.address for end in self.ends(node)]

    def subnets(self) -> list[str]:
        return list(dict.fromkeys(link.subnet for link in self.links))

    def routes(self, source: str, target: str) -> list[tuple[LinkEnd, LinkEnd]]:
        """(source's end, target's end) for every subnet the two share: the ways ``source`` reaches ``target``."""
        return [
            (link.end(source), link.end(target))
            for link in self.links
            if set(link.nodes) == {source, target}
        ]

    def between(self, names: Sequence[str]) -> FabricLinks:
        """Only the links whose both ends are among ``names``."""
        wanted = set(names)
        return FabricLinks(tuple(link for link in self.links if set(link.nodes) <= wanted))


def links_from_plan(
    plan: FabricPlan, name_of: Callable[[str], str | None] | None = None, line_rate_mbps: int = CX7_LINE_RATE_MBPS
) -> FabricLinks:
    """The plan's links, each end named by its node's name now (``name_of(node id)``, else the plan's label).

    A cable's subnet is one link; a switch segment's subnet gives one link per
    pair of its members. Twin links of one cable or segment share its ``cable``.
    """
    interfaces = {
        (node_id, iface.name): (node, iface) for node_id, node in plan.nodes.items() for iface in node.interfaces
    }
    out: list[FabricLink] = []
    for planned in plan.links:
        ends = []
        for member in planned.members:
            node_id, _, iface_name = member.partition(":")
            node, iface = interfaces[(node_id, iface_name)]
            address = ipaddress.ip_interface(iface.address)
            name = (name_of(node_id) if name_of else None) or node.name
            ends.append(LinkEnd(name, iface.name, str(address.ip), address.network.prefixlen, iface.rdma_device))
        cable = planned.key.rsplit("#", 1)[0]
        for i, a in enumerate(ends):
            for b in ends[i + 1:]:
                out.append(FabricLink(a, b, mtu=plan.mtu, line_rate_mbps=line_rate_mbps, cable=cable))
    return FabricLinks(tuple(out))
