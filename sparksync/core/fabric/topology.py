"""The cluster's fabric topology, classified from the cabling graph, with each problem named.

- **direct**: two nodes joined by one or more cables;
- **ring**: three or more nodes joined by cables into one cycle, each node
  cabled to exactly two others;
- **switch**: every node has a port on a switch segment, and no cables run
  beside it;
- **mixed** (mixed or broken): anything else, for instance an open ring (a
  chain), a node on no link, cables beside a switch. A mixed fabric is not
  planned until its problems are fixed.

Problems are either **errors** (the fabric cannot be planned as it is) or
**warnings** (it can, but something is below what it should be):

- a port with no carrier (a warning when its node is linked by another port;
  an error when no port of the node has carrier);
- a node cabled to itself (an error);
- a link below the expected speed, e.g. a switch port that negotiated 100G
  (a warning naming the port and both speeds);
- a port linked only to hosts outside the cluster (a warning);
- a node whose agent could not probe its neighbours (an error: its cabling is unknown).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import Enum

from sparksync.core.fabric.cabling import CablingGraph, PortEnd, Segment

CX7_SPEED_MBPS = 200_000


class FabricKind(str, Enum):
    none = "none"  # one node, or nothing cabled
    direct = "direct"
    ring = "ring"
    switch = "switch"
    mixed = "mixed"  # mixed or broken: see the problems


class ProblemKind(str, Enum):
    no_carrier = "no_carrier"
    node_unlinked = "node_unlinked"
    self_cabled = "self_cabled"
    slow_link = "slow_link"
    unknown_neighbour = "unknown_neighbour"
    not_probed = "not_probed"
    open_ring = "open_ring"
    mixed_cabling = "mixed_cabling"


class Severity(str, Enum):
    warning = "warning"
    error = "error"


@dataclass(frozen=True)
class FabricProblem:
    kind: ProblemKind
    severity: Severity
    message: str
    nodes: tuple[str, ...] = ()
    ports: tuple[PortEnd, ...] = ()
    segment: str | None = None  # the segment's key, to mark its edge in a drawing

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind.value, "severity": self.severity.value, "message": self.message,
            "nodes": list(self.nodes), "ports": [{"node": p.node, "port": p.port} for p in self.ports],
            "segment": self.segment,
        }  # fmt: skip


@dataclass(frozen=True)
class FabricTopology:
    kind: FabricKind
    graph: CablingGraph
    problems: tuple[FabricProblem, ...]

    @property
    def errors(self) -> list[FabricProblem]:
        return [p for p in self.problems if p.severity is Severity.error]

    @property
    def warnings(self) -> list[FabricProblem]:
        return [p for p in self.problems if p.severity is Severity.warning]

    @property
    def plannable(self) -> bool:
        return self.kind in (FabricKind.direct, FabricKind.ring, FabricKind.switch) and not self.errors

    def problems_on(self, segment: Segment) -> list[FabricProblem]:
        return [p for p in self.problems if p.segment == segment.key]


def classify(graph: CablingGraph, expected_speed_mbps: int | None = CX7_SPEED_MBPS) -> FabricTopology:
    problems = _port_problems(graph) + _speed_problems(graph, expected_speed_mbps)
    kind, shape = _shape(graph)
    problems += shape
    if kind is not FabricKind.mixed and any(p.severity is Severity.error for p in problems):
        kind = FabricKind.mixed
    return FabricTopology(kind, graph, tuple(problems))


# --- the shape of the graph ------------------------------------------------------------------


def _shape(graph: CablingGraph) -> tuple[FabricKind, list[FabricProblem]]:
    cables, switches = graph.cables, graph.switches
    if len(graph.nodes) < 2 or not graph.segments:
        return FabricKind.none, []
    if switches:
        problems = [
            FabricProblem(
                ProblemKind.mixed_cabling, Severity.error,
                f"a cable runs beside the switch: {cable.label}; cable every node to the switch only",
                cable.nodes, cable.ends, cable.key)
            for cable in cables
        ]  # fmt: skip
        on_switch = {node for s in switches for node in s.nodes}
        problems += _unlinked(graph, on_switch, "is on no switch segment")
        return (FabricKind.mixed if problems else FabricKind.switch), problems
    neighbours: dict[str, set[str]] = defaultdict(set)
    for cable in cables:
        a, b = cable.nodes
        neighbours[a].add(b)
        neighbours[b].add(a)
    linked = set(neighbours)
    problems = _unlinked(graph, linked, "has no cable to another node")
    if len(graph.nodes) == 2:
        return (FabricKind.mixed if problems else FabricKind.direct), problems
    ends = sorted(node for node, others in neighbours.items() if len(others) == 1)
    busy = sorted(node for node, others in neighbours.items() if len(others) > 2)
    if ends:
        problems.append(FabricProblem(
            ProblemKind.open_ring, Severity.error,
            f"the ring is open: {' and '.join(ends)} are cabled to one node only; "
            "cable them to each other to close the ring, or use a switch",
            tuple(ends)))
    if busy:
        problems.append(FabricProblem(
            ProblemKind.mixed_cabling, Severity.error,
            f"{', '.join(busy)} {'is' if len(busy) == 1 else 'are'} cabled to more than two nodes: "
            "a ring joins each node to exactly two",
            tuple(busy)))
    if not problems and not _one_cycle(neighbours):
        problems.append(FabricProblem(
            ProblemKind.mixed_cabling, Severity.error,
            "the cables make more than one ring; join every node into one ring", tuple(graph.nodes)))
    return (FabricKind.mixed if problems else FabricKind.ring), problems


def _unlinked(graph: CablingGraph, linked: set[str], why: str) -> list[FabricProblem]:
    problems = []
    for node in graph.nodes:
        if node in linked or node in graph.unprobed:
            continue
        if not any(state.carrier for end, state in graph.ports.items() if end.node == node):
            continue  # already named: no carrier on any port
        problems.append(FabricProblem(ProblemKind.node_unlinked, Severity.error, f"{node} {why}", (node,)))
    return problems


def _one_cycle(neighbours: dict[str, set[str]]) -> bool:
    start = next(iter(neighbours))
    seen, todo = {start}, [start]
    while todo:
        for other in neighbours[todo.pop()]:
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return len(seen) == len(neighbours)


# --- per port ---------------------------------------------------------------------------------


def _port_problems(graph: CablingGraph) -> list[FabricProblem]:
    problems = []
    for node in graph.unprobed:
        problems.append(FabricProblem(
            ProblemKind.not_probed, Severity.error,
            f"{node}'s agent could not probe its neighbours, so its cabling is unknown", (node,)))
    for a, b in graph.self_cabled:
        problems.append(FabricProblem(
            ProblemKind.self_cabled, Severity.error,
            f"{a.node} is cabled to itself ({a.label} to port {b.port}): move one end to another node",
            (a.node,), (a, b)))
    by_node: dict[str, list[PortEnd]] = defaultdict(list)
    for end in sorted(graph.ports):
        by_node[end.node].append(end)
    for node, ends in by_node.items():
        dark = [end for end in ends if not graph.ports[end].carrier]
        if not dark:
            continue
        if len(dark) == len(ends):
            problems.append(FabricProblem(
                ProblemKind.no_carrier, Severity.error,
                f"{node} has no carrier on any fabric port: check its cables", (node,), tuple(dark)))
            continue
        for end in dark:
            problems.append(FabricProblem(
                ProblemKind.no_carrier, Severity.warning, f"{end.label} has no carrier (nothing plugged in, "
                "or the other end is down)", (node,), (end,)))
    for end, macs in sorted(graph.unknown.items()):
        problems.append(FabricProblem(
            ProblemKind.unknown_neighbour, Severity.warning,
            f"{end.label} is linked only to hosts outside the cluster ({', '.join(macs[:3])}"
            f"{' ...' if len(macs) > 3 else ''})", (end.node,), (end,)))
    return problems


def _speed_problems(graph: CablingGraph, expected_mbps: int | None) -> list[FabricProblem]:
    if not expected_mbps:
        return []
    problems = []
    for segment in graph.segments:
        for end in segment.ends:
            speed = graph.ports[end].speed_mbps
            if speed is not None and speed < expected_mbps:
                where = "its switch port" if not segment.is_cable else "the cable"
                problems.append(FabricProblem(
                    ProblemKind.slow_link, Severity.warning,
                    f"{end.label} runs at {_gbps(speed)}, below the expected {_gbps(expected_mbps)}: "
                    f"check {where} and what the other end negotiated",
                    (end.node,), (end,), segment.key))
    return problems


def _gbps(mbps: int) -> str:
    return f"{mbps / 1000:g} Gb/s"
