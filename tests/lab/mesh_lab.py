"""Lab nodes with an addressed CX-7-like fabric, paired, for the mesh and the acceptance check.

``FabricNodes.make(ssh_lab_factory, n, client_key)``:

- n lab nodes with a real sshd each (own user, own host key), paired with
  this client's key (real pairing, pinned host keys in the registry);
- the four CX-7 netdevs per node (``FabricLab``), port 0 of every node on
  one switch segment;
- the plan a switch gets: twin 0 on 10.101.0.0/24, twin 1 on 10.101.1.0/24,
  node i at .i, MTU 9000 — applied with iproute2 as the fabric's apply does
  in the lab (with arp_ignore=1 / arp_announce=2, since both twins share the
  segment), and stored as the cluster's applied plan;
- each sshd also listening on its fabric addresses, as a Spark's sshd
  (listening on every address) does.
"""

from __future__ import annotations

import secrets
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

from sparksync.core.fabric import FabricPlan, FabricStore, NodePlan, PlannedInterface, PlannedLink, PlanState
from sparksync.core.fabric.topology import FabricKind
from sparksync.core.nodes.registry import Registry

from .fabric_lab import FabricLab
from .netlab import LabError, LabNode
from .sshd import SshLab

TWIN_SUBNETS = ("10.101.0", "10.101.1")
MTU = 9000


def fabric_address(node: LabNode, twin: int) -> str:
    return f"{TWIN_SUBNETS[twin]}.{node.index}"


@dataclass
class FabricNodes:
    ssh_lab: SshLab
    fabric: FabricLab
    plan: FabricPlan

    @property
    def nodes(self) -> list[LabNode]:
        return self.ssh_lab.nodes

    @classmethod
    def make(cls, ssh_lab_factory, n: int, client_key, pair) -> FabricNodes:
        ssh_lab = ssh_lab_factory(n)
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda node: pair(ssh_lab, node, client_key, name=node.name), ssh_lab.nodes))
        fabric = FabricLab(ssh_lab.lab, ssh_lab.nodes)
        fabric.switch(ssh_lab.nodes, port=0)
        for node in ssh_lab.nodes:
            # Both twins sit on one L2 segment here (a switch): each must answer ARP only for its own
            # address, or a reply can come back on the twin (ARP flux) and a socket bound to one is missed.
            for setting in ("net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"):
                ssh_lab.lab.exec(node, ["sysctl", "-q", "-w", setting], check=True)
            for twin in (0, 1):
                iface = fabric.interface(0, twin)
                ssh_lab.lab.exec(node, ["ip", "link", "set", iface, "mtu", str(MTU)], check=True)
                ssh_lab.lab.exec(node, ["ip", "addr", "add", f"{fabric_address(node, twin)}/24", "dev", iface],
                                 check=True)
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda node: ssh_lab.service.add_config(
                ssh_lab.lab, node, *(f"ListenAddress {fabric_address(node, t)}" for t in (0, 1))), ssh_lab.nodes))
        plan = switch_plan(ssh_lab.nodes, fabric)
        FabricStore().save_plan(plan, PlanState.applied)
        return cls(ssh_lab, fabric, plan)


def switch_plan(nodes: list[LabNode], fabric: FabricLab) -> FabricPlan:
    registry = Registry()
    ids = {node.name: registry.get(node.name).node_id for node in nodes}
    plans = {
        ids[node.name]: NodePlan(node_id=ids[node.name], name=node.name, interfaces=[
            PlannedInterface(name=fabric.interface(0, twin), port=0, twin=twin,
                             address=f"{fabric_address(node, twin)}/24", mtu=MTU, link=f"switch-p0#{twin}")
            for twin in (0, 1)])
        for node in nodes
    }
    links = [PlannedLink(key=f"switch-p0#{twin}", kind="switch", twin=twin, subnet=f"{TWIN_SUBNETS[twin]}.0/24",
                         members=[f"{ids[node.name]}:{fabric.interface(0, twin)}" for node in nodes])
             for twin in (0, 1)]
    return FabricPlan(plan_id=secrets.token_hex(6), created_at=datetime.now(timezone.utc),
                      topology=FabricKind.switch, mtu=MTU, nodes=plans, links=links)


def shape_port(fabric: FabricLab, node: LabNode, port: int, rate: str) -> None:
    """A ``tc tbf`` rate limit on both directions of a port's two twins (the node's end and the hub's).

    tbf rather than netem: this kernel's netem is not always there (no sch_netem module).
    """
    lab = fabric.lab
    for twin in (0, 1):
        for argv, dev in ((lab.wrap(node, ["tc"]), fabric.interface(port, twin)),
                          (["ip", "netns", "exec", lab.hub, "tc"], fabric.hub_end(node, port, twin))):
            done = subprocess.run([*argv, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                                   "burst", "64kb", "latency", "100ms"],
                                  capture_output=True, text=True, timeout=15)
            if done.returncode != 0:
                raise LabError(f"tc on {dev} failed: {done.stderr.strip()}")
