"""Where the topology's nodes and switches go on the canvas (no Qt: plain coordinates).

Nodes sit on a circle, in ring order when the cabling is a ring so its
cables draw as the circle's chords without crossing; switches sit in the
middle (several on a smaller inner circle).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sparksync.core.topology import ClusterTopology, Link, LinkKind, TopologyKind

NODE_RADIUS = 220.0
SWITCH_RADIUS = 70.0
Point = tuple[float, float]


def positions(topology: ClusterTopology) -> dict[str, Point]:
    order = ring_order(topology.nodes, topology.links) if topology.kind is TopologyKind.ring else topology.nodes
    placed = _circle(order, NODE_RADIUS if len(order) > 1 else 0.0)
    placed.update(_circle(topology.switches, SWITCH_RADIUS if len(topology.switches) > 1 else 0.0))
    return placed


def ring_order(nodes: Sequence[str], links: Sequence[Link]) -> list[str]:
    """The nodes as met walking the ring from the first one; nodes off the ring follow."""
    neighbours: dict[str, list[str]] = {}
    for link in links:
        if link.kind is LinkKind.cable:
            neighbours.setdefault(link.a, []).append(link.b)
            neighbours.setdefault(link.b, []).append(link.a)
    order: list[str] = []
    current = next((n for n in nodes if n in neighbours), None)
    while current is not None and current not in order:
        order.append(current)
        current = next((n for n in sorted(neighbours[current]) if n not in order), None)
    return order + [n for n in nodes if n not in order]


def _circle(names: Sequence[str], radius: float) -> dict[str, Point]:
    count = max(1, len(names))
    # Start at the top and go clockwise (the scene's y axis points down).
    return {name: (radius * math.sin(2 * math.pi * i / count), -radius * math.cos(2 * math.pi * i / count))
            for i, name in enumerate(names)}
