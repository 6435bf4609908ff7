"""The cluster's fabric topology, inferred from the nodes' latest telemetry samples.

    topology = build_topology({"spark-1": sample1, "spark-2": sample2})
    topology.kind            # TopologyKind.direct
    topology.links[0].a_to_b_bits_per_s
    topology.warnings        # slow ports, MTU mismatches, unlinked nodes

Qt-free; the GUI's Topology view draws it (sparksync/gui/topology).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sparksync_agent.protocol import Sample

from sparksync.core.topology.checks import (
    CX7_SPEED_MBPS,
    TopologyWarning,
    WarningKind,
    check_links,
    unlinked_nodes,
)
from sparksync.core.topology.links import Link, LinkKind, TopologyKind, classify, infer_links, switch_name
from sparksync.core.topology.ports import DEFAULT_PREFIX, FabricPortState, ports_of

__all__ = [
    "CX7_SPEED_MBPS", "DEFAULT_PREFIX", "ClusterTopology", "FabricPortState", "Link", "LinkKind",
    "TopologyKind", "TopologySettings", "TopologyWarning", "WarningKind", "build_topology", "switch_name",
]


@dataclass(frozen=True)
class TopologySettings:
    expected_speed_mbps: int | None = CX7_SPEED_MBPS  # None: no speed check
    default_prefix: int = DEFAULT_PREFIX  # the subnet of an address reported without its prefix


@dataclass(frozen=True)
class ClusterTopology:
    kind: TopologyKind
    nodes: tuple[str, ...]
    switches: tuple[str, ...]
    links: tuple[Link, ...]
    warnings: tuple[TopologyWarning, ...]
    unlinked_ports: tuple[FabricPortState, ...] = field(default=())

    def warnings_for(self, link: Link) -> list[TopologyWarning]:
        return [w for w in self.warnings if link.key in w.link_keys]

    @property
    def total_bits_per_s(self) -> float:
        return sum(link.a_to_b_bits_per_s + link.b_to_a_bits_per_s for link in self.links)


def build_topology(samples: Mapping[str, Sample | None],
                   settings: TopologySettings | None = None) -> ClusterTopology:
    """The topology of the nodes in ``samples`` (node name -> its latest sample; None: none yet)."""
    settings = settings or TopologySettings()
    nodes = tuple(samples)
    ports = [p for node, s in samples.items() if s is not None for p in ports_of(node, s, settings.default_prefix)]
    links, unlinked = infer_links(ports)
    warnings = check_links(links, settings.expected_speed_mbps) + unlinked_nodes(nodes, ports, links)
    switches = tuple(sorted({link.b for link in links if link.kind is LinkKind.switch}))
    return ClusterTopology(classify(nodes, links), nodes, switches, tuple(links), tuple(warnings), tuple(unlinked))
