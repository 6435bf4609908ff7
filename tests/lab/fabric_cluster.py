"""A fabric cluster in the lab: paired sshd nodes with CX-7-like ports, cabled, each running a real agent.

    from tests.lab.fabric_cluster import fabric_cluster  # noqa: F401  (with the fixtures below)
    from tests.lab.test_fleet_lab import agent_python, client_key  # noqa: F401

    def test_x(fabric_cluster):
        lab = fabric_cluster(8, "switch")   # or "ring", "direct", or a callable(FabricLab)
        lab.fabric.cut(lab.nodes[2], 0)

Each node's user is an administrator whose ``sudo`` asks for its password
(``PASSWORD``, the lab's login password), as on a Spark. The agents start
after the group is granted, so sudo sees it. Whatever the root helper keeps
under /var/lib/sparksync-fabric for the nodes is removed after the test.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from sparksync_agent.fabric.state import STATE_ROOT

from sparksync.core.nodes.registry import Registry
from tests.lab.fabric_lab import FabricLab, grant_sudo, sudo_missing
from tests.lab.lab_agents import LabAgents
from tests.lab.netlab import LabNode
from tests.lab.sshd import PASSWORD, SshLab
from tests.lab.test_pairing_lab import pair

Cabling = str | Callable[[FabricLab], object]


@dataclass
class FabricCluster:
    ssh_lab: SshLab
    fabric: FabricLab
    agents: LabAgents

    @property
    def nodes(self) -> list[LabNode]:
        return self.ssh_lab.nodes

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.nodes]

    @property
    def password(self) -> str:
        return PASSWORD

    def node_id(self, node: LabNode) -> str:
        return Registry().get(node.name).node_id


def cable(fabric: FabricLab, cabling: Cabling) -> None:
    if callable(cabling):
        cabling(fabric)
    elif cabling == "switch":
        fabric.switch(port=0)
    elif cabling == "ring":
        fabric.ring()
    elif cabling == "direct":
        fabric.direct(*fabric.nodes[:2])
    else:
        raise ValueError(f"unknown cabling {cabling!r}")


@pytest.fixture
def fabric_cluster(ssh_lab_factory, client_key, agent_python):
    reason = sudo_missing()
    if reason:
        pytest.skip(reason)
    made: list[FabricCluster] = []
    node_ids: list[str] = []

    def make(n: int, cabling: Cabling = "switch", sample_hz: float = 1.0) -> FabricCluster:
        ssh_lab = ssh_lab_factory(n)
        fabric = FabricLab(ssh_lab.lab, ssh_lab.nodes)
        cable(fabric, cabling)
        for node in ssh_lab.nodes:
            grant_sudo(ssh_lab.user(node))
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda node: pair(ssh_lab, node, client_key, name=node.name), ssh_lab.nodes))
        node_ids.extend(Registry().get(node.name).node_id for node in ssh_lab.nodes)
        agents = LabAgents(ssh_lab, client_key, agent_python)
        made.append(FabricCluster(ssh_lab, fabric, agents))
        agents.start_many(ssh_lab.nodes, sample_hz)
        return made[-1]

    yield make
    for cluster in made:
        cluster.agents.stop_all()
    for node_id in node_ids:
        shutil.rmtree(STATE_ROOT / node_id, ignore_errors=True)
