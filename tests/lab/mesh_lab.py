"""Lab nodes with an addressed CX-7-like fabric, paired, for the mesh and the acceptance check.

``FabricNodes.make(ssh_lab_factory, n, client_key)``:

- n lab nodes with a real sshd each (own user, own host key), paired with
  this client's key (real pairing, pinned host keys in the registry);
- the four CX-7 netdevs per node (``FabricLab``), port 0 of every node on
  one switch segment;
- the plan a switch gets: twin 0 on 10.101.0.0/24, twin 1 on 10.101.1.0/24,
  node i at .i, MTU 9000 — applied on each node by the fabric's own root
  helper (iproute2, as in the lab; it also sets arp_ignore/arp_announce, which
  twins on one segment need), run as root in the node's namespace, and stored
  as the cluster's applied plan;
- each sshd also listening on its fabric addresses, as a Spark's sshd
  (listening on every address) does.
"""

from __future__ import annotations

import secrets
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

from sparksync.core.fabric import FabricPlan, FabricStore, NodePlan, PlannedInterface, PlannedLink, PlanState
from sparksync.core.fabric.topology import FabricKind
from sparksync.core.nodes.registry import Registry
from sparksync_agent.fabric.state import state_dir
from sparksync_agent.protocol import InterfacePlan, NodeFabricPlan

from .fabric_lab import FabricLab
from .netlab import LabError, LabNode, NodeService
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
        plan = switch_plan(ssh_lab.nodes, fabric)
        ssh_lab.lab.add_service(_HelperState(plan), ssh_lab.nodes)
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda node: apply_with_helper(ssh_lab, node, plan), ssh_lab.nodes))
            list(pool.map(lambda node: ssh_lab.service.add_config(
                ssh_lab.lab, node, *(f"ListenAddress {fabric_address(node, t)}" for t in (0, 1))), ssh_lab.nodes))
        FabricStore().save_plan(plan, PlanState.applied)
        return cls(ssh_lab, fabric, plan)


def apply_with_helper(ssh_lab: SshLab, node: LabNode, plan: FabricPlan) -> None:
    """The node's part of ``plan`` through the fabric's root helper, as root in the node's namespace."""
    node_plan = plan.node(node.name)
    assert node_plan is not None, node.name
    request = NodeFabricPlan(plan_id=plan.plan_id, interfaces=[
        InterfacePlan(name=i.name, addresses=[i.address], mtu=i.mtu) for i in node_plan.interfaces])
    done = ssh_lab.lab.exec(node, [sys.executable, "-I", "-m", "sparksync_agent.fabric.helper", "apply",
                                   "--node-id", node_plan.node_id, "--request", "/dev/stdin"],
                            input=request.model_dump_json())
    if done.returncode != 0:
        raise LabError(f"the fabric helper on {node.name} failed: {done.stdout.strip()} {done.stderr.strip()}")


class _HelperState(NodeService):
    """Removes the helper's state for the lab's node ids (under /var/lib/sparksync-fabric) at teardown."""

    def __init__(self, plan: FabricPlan) -> None:
        self.plan = plan

    def start(self, lab, node: LabNode) -> None:
        pass

    def stop(self, lab, node: LabNode) -> None:
        node_plan = self.plan.node(node.name)
        if node_plan is not None:
            shutil.rmtree(state_dir(node_plan.node_id), ignore_errors=True)


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

