"""The ``GET /v1/fabric`` report: the CX-7 ports, what each sees, and the networks already in use."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from sparksync_agent.fabric.ports import AddressSource, fabric_netdevs, networks_in_use
from sparksync_agent.fabric.probe import PROBE_WAIT_S, probe_all
from sparksync_agent.fabric.state import applied_plan_id, applier
from sparksync_agent.protocol import FabricInterface, FabricPort, FabricReport, NetworkInUse


class FabricInspector:
    """Reads the node's fabric; ``sys_root`` and ``addresses`` are replaceable for tests."""

    def __init__(self, node_id: str, sys_root: Path = Path("/sys"), addresses: AddressSource | None = None,
                 wait_s: float = PROBE_WAIT_S):
        self.node_id = node_id
        self.sys_root = sys_root
        self.addresses = addresses
        self.wait_s = wait_s

    def report(self, probe: bool = True) -> FabricReport:
        netdevs = fabric_netdevs(self.sys_root, self.addresses)
        started = time.monotonic()
        seen = {}
        if probe:
            seen = probe_all([d.name for d in netdevs if d.carrier], self.wait_s)
        probe_s = time.monotonic() - started
        ports: dict[int, list[str]] = {}
        for d in netdevs:
            ports.setdefault(d.port, []).append(d.name)
        return FabricReport(
            node_id=self.node_id,
            hostname=socket.gethostname(),
            ports=[FabricPort(index=i, interfaces=names) for i, names in sorted(ports.items())],
            interfaces=[
                FabricInterface(
                    name=d.name, port=d.port, twin=d.twin, carrier=d.carrier, operstate=d.operstate,
                    speed_mbps=d.speed_mbps, mtu=d.mtu, mac=d.mac, addresses=d.ipv4,
                    ipv6_link_local=d.ipv6_link_local, rdma_device=d.rdma_device,
                    neighbours=seen.get(d.name, []),
                )
                for d in netdevs
            ],  # fmt: skip
            networks_in_use=[NetworkInUse(interface=i, address=a) for i, a in networks_in_use(self.addresses)],
            probed=probe,
            probe_s=round(probe_s, 3),
            applier=applier(),
            applied_plan=applied_plan_id(self.node_id),
        )
