"""Fabric reports as agents send them, for a cabling described in a line: for unit tests.

    reports = Cabling(["n1", "n2", "n3", "n4"]).ring().reports()

Each node has the four CX-7 netdevs with MACs of its own; a cable or switch
segment makes every netdev on it list the others' MACs as neighbours (and its
own twin's, as a real L2 segment does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparksync_agent.protocol import FabricInterface, FabricNeighbour, FabricPort, FabricReport, NetworkInUse

PORTS = (("enp1s0f0np0", "enP2p1s0f0np0"), ("enp1s0f1np1", "enP2p1s0f1np1"))
ROCE = (("rocep1s0f0", "roceP2p1s0f0"), ("rocep1s0f1", "roceP2p1s0f1"))


def mac(node_index: int, port: int, twin: int) -> str:
    return f"02:00:00:{node_index:02x}:{port:02x}:{twin:02x}"


@dataclass
class Cabling:
    nodes: list[str]
    segments: list[list[tuple[str, int]]] = field(default_factory=list)
    speed_mbps: dict[tuple[str, int], int] = field(default_factory=dict)
    in_use: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    strangers: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    unprobed: set[str] = field(default_factory=set)

    def cable(self, a: str, pa: int, b: str, pb: int) -> Cabling:
        self.segments.append([(a, pa), (b, pb)])
        return self

    def switch(self, port: int = 0, nodes: list[str] | None = None) -> Cabling:
        self.segments.append([(n, port) for n in nodes or self.nodes])
        return self

    def ring(self) -> Cabling:
        for i, node in enumerate(self.nodes):
            self.cable(node, 1, self.nodes[(i + 1) % len(self.nodes)], 0)
        return self

    def direct(self) -> Cabling:
        return self.cable(self.nodes[0], 0, self.nodes[1], 0)

    def reports(self) -> dict[str, FabricReport]:
        index = {n: i + 1 for i, n in enumerate(self.nodes)}
        on: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for segment in self.segments:
            for end in segment:
                on[end] = segment
        out = {}
        for node in self.nodes:
            interfaces = []
            for port, twins in enumerate(PORTS):
                segment = on.get((node, port))
                for twin, name in enumerate(twins):
                    seen = [] if segment is None else [
                        FabricNeighbour(mac=mac(index[n], p, t))
                        for n, p in segment for t in (0, 1) if (n, p, t) != (node, port, twin)
                    ]
                    seen += [FabricNeighbour(mac=m) for m in self.strangers.get((node, port), [])]
                    carrier = segment is not None or (node, port) in self.strangers
                    interfaces.append(FabricInterface(
                        name=name, port=port, twin=twin, carrier=carrier,
                        speed_mbps=self.speed_mbps.get((node, port), 200_000) if carrier else None,
                        mtu=1500, mac=mac(index[node], port, twin), rdma_device=ROCE[port][twin],
                        neighbours=[] if node in self.unprobed else seen,
                    ))
            out[node] = FabricReport(
                node_id=f"id-{node}", hostname=f"spark-{node}",
                ports=[FabricPort(index=p, interfaces=list(t)) for p, t in enumerate(PORTS)],
                interfaces=interfaces,
                networks_in_use=[NetworkInUse(interface=i, address=a) for i, a in self.in_use.get(node, [])],
                probed=node not in self.unprobed,
            )
        return out
