"""Which port is cabled to which: the cabling graph, from every node's fabric report.

Each node's agent pings the IPv6 all-nodes group on each carrier-up CX-7
netdev and reports the MACs that answered. A MAC that belongs to another
node's report places that node's port on the same L2 segment. Everything
here is per **physical port** (``PortEnd``: a node and its QSFP port 0 or
1): a port's two twin netdevs share the cable, so what either of them sees
counts for the port, and a port seeing its own twin is no news.

Ports that see each other form a segment:

- two ports: a **cable** (a direct connection, or one hop of a ring);
- three or more: a **switch** segment (all its ports on one L2 network);
- a segment of one node's own two ports only: that node is **cabled to itself**.

A carrier-up port whose neighbours are all unknown (MACs in no report) is
linked to something outside the cluster (a node not paired, or a switch with
other hosts); a carrier-down port is empty.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from sparksync_agent.protocol import FabricInterface, FabricReport


@dataclass(frozen=True, order=True)
class PortEnd:
    """One physical QSFP port of one node."""

    node: str
    port: int

    @property
    def label(self) -> str:
        return f"{self.node} port {self.port}"


@dataclass(frozen=True)
class Segment:
    """Ports on one L2 segment: a cable (two ports) or a switch (three or more)."""

    ends: tuple[PortEnd, ...]

    @property
    def is_cable(self) -> bool:
        return len(self.ends) == 2

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({end.node for end in self.ends}))

    @property
    def key(self) -> str:
        return "+".join(f"{e.node}:{e.port}" for e in self.ends)

    @property
    def label(self) -> str:
        if self.is_cable:
            return f"{self.ends[0].label} <-> {self.ends[1].label}"
        return "switch segment of " + ", ".join(e.label for e in self.ends)


@dataclass(frozen=True)
class PortState:
    """What the two netdevs of a port say about the link."""

    end: PortEnd
    interfaces: tuple[FabricInterface, ...]

    @property
    def carrier(self) -> bool:
        return any(i.carrier for i in self.interfaces)

    @property
    def speed_mbps(self) -> int | None:
        speeds = [i.speed_mbps for i in self.interfaces if i.carrier and i.speed_mbps and i.speed_mbps > 0]
        return min(speeds) if speeds else None


@dataclass
class CablingGraph:
    """Every node's ports, the segments they form, and what could not be placed."""

    nodes: tuple[str, ...]
    ports: dict[PortEnd, PortState] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    self_cabled: list[tuple[PortEnd, PortEnd]] = field(default_factory=list)
    unknown: dict[PortEnd, list[str]] = field(default_factory=dict)  # port -> MACs in no report
    unprobed: tuple[str, ...] = ()  # nodes whose agent did not probe neighbours

    def segment_of(self, end: PortEnd) -> Segment | None:
        return next((s for s in self.segments if end in s.ends), None)

    @property
    def cables(self) -> list[Segment]:
        return [s for s in self.segments if s.is_cable]

    @property
    def switches(self) -> list[Segment]:
        return [s for s in self.segments if not s.is_cable]

    def interfaces(self, end: PortEnd) -> tuple[FabricInterface, ...]:
        state = self.ports.get(end)
        return state.interfaces if state else ()


def build_cabling(reports: Mapping[str, FabricReport]) -> CablingGraph:
    """The cabling of the nodes in ``reports`` (node name -> its agent's fabric report)."""
    owner: dict[str, PortEnd] = {}
    ports: dict[PortEnd, PortState] = {}
    for node, report in reports.items():
        by_port: dict[int, list[FabricInterface]] = defaultdict(list)
        for iface in report.interfaces:
            by_port[iface.port].append(iface)
            if iface.mac:
                owner[iface.mac.lower()] = PortEnd(node, iface.port)
        for index, members in sorted(by_port.items()):
            end = PortEnd(node, index)
            ports[end] = PortState(end, tuple(sorted(members, key=lambda i: i.twin)))

    sees: dict[PortEnd, set[PortEnd]] = defaultdict(set)
    unknown: dict[PortEnd, list[str]] = {}
    for end, state in ports.items():
        strangers: list[str] = []
        for iface in state.interfaces:
            if not iface.carrier:
                continue
            for neighbour in iface.neighbours:
                other = owner.get(neighbour.mac.lower())
                if other is None:
                    strangers.append(neighbour.mac.lower())
                elif other != end:  # the port's own twin shares its cable: no news
                    sees[end].add(other)
        if strangers and not sees[end]:
            unknown[end] = sorted(set(strangers))

    segments, self_cabled = [], []
    for segment in _segments(sees):
        if len(segment.nodes) == 1:
            # Only one node's ports on it: a cable from its port to its other port. (On a switch
            # a node's two ports may share the segment with the others; that is as it should be.)
            self_cabled.append((segment.ends[0], segment.ends[-1]))
        else:
            segments.append(segment)
    return CablingGraph(
        nodes=tuple(reports),
        ports=ports,
        segments=segments,
        self_cabled=self_cabled,
        unknown=unknown,
        unprobed=tuple(n for n, r in reports.items() if not r.probed),
    )


def _segments(sees: Mapping[PortEnd, set[PortEnd]]) -> list[Segment]:
    """Connected groups of ports that see one another (a one-way sighting counts as a link)."""
    graph: dict[PortEnd, set[PortEnd]] = defaultdict(set)
    for end, others in sees.items():
        for other in others:
            graph[end].add(other)
            graph[other].add(end)
    seen: set[PortEnd] = set()
    segments = []
    for start in sorted(graph):
        if start in seen:
            continue
        group, todo = {start}, [start]
        while todo:
            for other in graph[todo.pop()]:
                if other not in group:
                    group.add(other)
                    todo.append(other)
        seen |= group
        segments.append(Segment(tuple(sorted(group))))
    return segments
