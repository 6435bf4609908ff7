"""The fabric's address plan: subnets per link, MTU 9000, and each node's environment.

Rules (docs/fabric.md):

- **direct and ring**: one subnet per cable and per twin. A cable joins two
  ports; each port has two twin netdevs (``enp1s0f0np0``, ``enP2p1s0f0np0``),
  and twin 0 of one end shares a subnet with twin 0 of the other, twin 1
  with twin 1 on another subnet. A port's twins are therefore always on
  **different** subnets: full bandwidth needs both RoCE devices, and two
  interfaces on one subnet would make the kernel answer for both on one.
- **switch**: one subnet per twin and per switch segment, every node's port
  on the segment numbered in node order; with both ports of every node on
  one switch, each port number has its own pair of subnets.
- **MTU 9000** on every planned interface.
- Subnets are taken in order from ``base`` (default ``10.100.0.0/16``), each
  ``/prefix`` (default /24). One that overlaps a network any node already
  uses on a non-fabric interface (the management network, docker, a VPN) is
  **refused**, naming the subnet and the node: pick another base.
- Only CX-7 netdevs are ever planned; management interfaces (``enP7s7``,
  Wi-Fi) never are.
- A ring of 4 or more is planned with a warning: NVIDIA's set-up script
  refuses those rings, and NCCL needs every rank to reach every other.

Each node's environment (``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA``,
``GLOO_SOCKET_IFNAME``, ``UCX_NET_DEVICES``, ``OMPI_MCA_btl_tcp_if_include``)
follows from its planned interfaces and their RoCE devices, and is stored
with the plan, so a workload started later uses it as it is.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field
from sparksync_agent.protocol import FABRIC_MTU, FabricReport, InterfacePlan, NodeFabricPlan

from sparksync.core.fabric.cabling import PortEnd, Segment
from sparksync.core.fabric.errors import FabricPlanError, SubnetClashError
from sparksync.core.fabric.topology import FabricKind, FabricTopology

PLAN_VERSION = 1
DEFAULT_BASE = "10.100.0.0/16"
DEFAULT_PREFIX = 24
NVIDIA_RING_LIMIT = 3  # NVIDIA's set-up script handles a 3-node ring and refuses 4 or more

ENV_KEYS = (
    "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "GLOO_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include",
)  # fmt: skip


class PlannedInterface(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    port: int
    twin: int
    address: str = Field(description="address/prefix, e.g. 10.100.0.1/24")
    mtu: int = FABRIC_MTU
    rdma_device: str | None = None
    link: str = Field(description="The key of the link (cable or switch segment) it sits on.")


class NodePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_id: str
    name: str = Field(description="A label: the node's name when the plan was made.")
    interfaces: list[PlannedInterface] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def fabric_ip(self) -> str:
        """The node's rendezvous address: its first planned interface's IPv4."""
        return str(ipaddress.ip_interface(self.interfaces[0].address).ip)

    def wire(self, plan_id: str) -> NodeFabricPlan:
        return NodeFabricPlan(
            plan_id=plan_id,
            interfaces=[InterfacePlan(name=i.name, addresses=[i.address], mtu=i.mtu) for i in self.interfaces],
        )


class PlannedLink(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    kind: str = Field(description="'cable' or 'switch'")
    twin: int
    subnet: str
    members: list[str] = Field(description="'<node id>:<interface>' on this subnet, in address order.")


class FabricPlan(BaseModel):
    """A whole cluster's plan; nodes are keyed by their stable id."""

    model_config = ConfigDict(extra="forbid")

    version: int = PLAN_VERSION
    plan_id: str
    created_at: datetime
    topology: FabricKind
    mtu: int = FABRIC_MTU
    base: str = DEFAULT_BASE
    prefix: int = DEFAULT_PREFIX
    nodes: dict[str, NodePlan] = Field(default_factory=dict)
    links: list[PlannedLink] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def node(self, name_or_id: str) -> NodePlan | None:
        if name_or_id in self.nodes:
            return self.nodes[name_or_id]
        return next((p for p in self.nodes.values() if p.name == name_or_id), None)

    def env(self, name_or_id: str) -> dict[str, str]:
        plan = self.node(name_or_id)
        return dict(plan.env) if plan else {}


def make_plan(
    topology: FabricTopology,
    reports: Mapping[str, FabricReport],
    *,
    base: str = DEFAULT_BASE,
    prefix: int = DEFAULT_PREFIX,
    mtu: int = FABRIC_MTU,
) -> FabricPlan:
    """The plan for a classified fabric (node name -> its report); refuses what cannot be planned."""
    if not topology.plannable:
        raise FabricPlanError(_why_not(topology))
    network = _network(base)
    if prefix < network.prefixlen or prefix > 30:
        raise FabricPlanError(f"a /{prefix} subnet does not fit in {network} (use /{network.prefixlen} to /30)")
    subnets = network.subnets(new_prefix=prefix)
    graph = topology.graph
    nodes = {
        name: NodePlan(node_id=reports[name].node_id, name=name) for name in graph.nodes
    }
    links: list[PlannedLink] = []
    for segment in graph.segments:
        for key, members in _address_groups(segment):
            for twin in (0, 1):
                subnet = _next(subnets, network, prefix)
                hosts = subnet.hosts()
                link = PlannedLink(key=f"{key}#{twin}", kind="cable" if segment.is_cable else "switch",
                                   twin=twin, subnet=str(subnet), members=[])
                for end in members:
                    iface = next((i for i in graph.interfaces(end) if i.twin == twin), None)
                    if iface is None:
                        raise FabricPlanError(f"{end.label} reported no twin {twin} netdev; its driver may be down")
                    address = f"{next(hosts)}/{subnet.prefixlen}"
                    nodes[end.node].interfaces.append(PlannedInterface(
                        name=iface.name, port=end.port, twin=twin, address=address, mtu=mtu,
                        rdma_device=iface.rdma_device, link=link.key))
                    link.members.append(f"{reports[end.node].node_id}:{iface.name}")
                links.append(link)
    _refuse_clashes(links, reports)
    for plan in nodes.values():
        plan.interfaces.sort(key=lambda i: (i.port, i.twin))
        plan.env = node_env(plan.interfaces)
    return FabricPlan(
        plan_id=secrets.token_hex(6), created_at=datetime.now(timezone.utc), topology=topology.kind,
        mtu=mtu, base=str(network), prefix=prefix,
        nodes={p.node_id: p for p in nodes.values()}, links=links,
        warnings=[p.message for p in topology.warnings] + _ring_warning(topology),
    )  # fmt: skip


def check_plan(plan: FabricPlan, reports: Mapping[str, FabricReport]) -> None:
    """Before an apply: the plan still fits the nodes as they are now (node name -> a fresh report)."""
    for node in plan.nodes.values():
        report = reports.get(node.name)
        if report is None:
            raise FabricPlanError(f"{node.name} is in the plan but was not read; plan again")
        if report.node_id != node.node_id:
            raise FabricPlanError(
                f"{node.name} is now another machine (node id {report.node_id[:8]}, planned for "
                f"{node.node_id[:8]}); plan again")
        present = {i.name for i in report.interfaces}
        missing = [i.name for i in node.interfaces if i.name not in present]
        if missing:
            raise FabricPlanError(f"{node.name} no longer has {', '.join(missing)}; detect and plan again")
    _refuse_clashes(plan.links, reports)


def node_env(interfaces: Sequence[PlannedInterface]) -> dict[str, str]:
    """The fabric environment of one node's planned interfaces (primary first)."""
    names = ",".join(i.name for i in interfaces)
    env = {
        "NCCL_SOCKET_IFNAME": names,
        "GLOO_SOCKET_IFNAME": interfaces[0].name,
        "UCX_NET_DEVICES": names,
        "OMPI_MCA_btl_tcp_if_include": names,
    }
    hcas = list(dict.fromkeys(i.rdma_device for i in interfaces if i.rdma_device))
    if hcas:
        env["NCCL_IB_HCA"] = ",".join(hcas)
    return env


def ring_warning(size: int) -> str:
    return (
        f"a switchless ring of {size} nodes: NVIDIA's set-up script refuses rings of 4 or more. Each cable "
        "gets its own subnets, so a node reaches only its two neighbours; NCCL needs every rank to reach "
        "every other (routes through the ring, with IP forwarding on each node) and its ring order to "
        "follow the cabling (NCCL_ALGO=Ring). Check it with 'sparksync cluster check' against the 10 GB/s "
        "ring pass mark; for 8 nodes NVIDIA advises a switch."
    )


# --- internals ---------------------------------------------------------------------------------


def _why_not(topology: FabricTopology) -> str:
    if topology.kind is FabricKind.none:
        return "nothing to plan: no two nodes are cabled together (run 'sparksync cluster detect')"
    listed = "; ".join(p.message for p in topology.errors) or f"the fabric is {topology.kind.value}"
    return f"the fabric cannot be planned as it is cabled: {listed}"


def _address_groups(segment: Segment) -> list[tuple[str, list[PortEnd]]]:
    """The ports that share subnets: a cable's two ends; on a switch, the nodes' same-numbered ports
    (with both ports of each node on one switch, port 0 and port 1 each get subnets of their own,
    so no node has two netdevs on one subnet). Ends are in node order: addresses follow it."""
    if segment.is_cable:
        return [(segment.key, list(segment.ends))]
    ports = sorted({end.port for end in segment.ends})
    if len(ports) == 1:
        return [(segment.key, list(segment.ends))]
    return [(f"{segment.key}:port{p}", [e for e in segment.ends if e.port == p]) for p in ports]


def _network(base: str) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.ip_network(base, strict=True)
    except ValueError as exc:
        raise FabricPlanError(f"the address range {base!r} is not an IPv4 network ({exc})") from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise FabricPlanError(f"the address range {base} is not IPv4")
    return network


def _next(subnets: Iterator[ipaddress.IPv4Network], network: ipaddress.IPv4Network, prefix: int) -> ipaddress.IPv4Network:
    try:
        return next(subnets)
    except StopIteration:
        raise FabricPlanError(f"{network} holds too few /{prefix} subnets for this fabric; use a larger range") from None


def _refuse_clashes(links: Sequence[PlannedLink], reports: Mapping[str, FabricReport]) -> None:
    for link in links:
        subnet = ipaddress.ip_network(link.subnet)
        for name, report in reports.items():
            for used in report.networks_in_use:
                try:
                    network = ipaddress.ip_interface(used.address).network
                except ValueError:
                    continue
                if network.version == 4 and subnet.overlaps(network):
                    raise SubnetClashError(
                        f"subnet {subnet} clashes with {used.address} on {used.interface} of node {name}: "
                        "the plan never reuses a network a node already has. Choose another range "
                        "(--base), e.g. one no node uses.",
                        subnet=str(subnet), node=name,
                    )


def _ring_warning(topology: FabricTopology) -> list[str]:
    size = len(topology.graph.nodes)
    return [ring_warning(size)] if topology.kind is FabricKind.ring and size > NVIDIA_RING_LIMIT else []
