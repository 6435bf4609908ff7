"""The fabric endpoints: what a node reports about its ConnectX-7 ports, and how it applies a plan.

``GET /v1/fabric`` (read-only) answers a ``FabricReport``: each CX-7 netdev
with its carrier, negotiated speed, MTU, MAC, addresses and RoCE device, the
physical port it belongs to, and the neighbours that answered an IPv6
all-nodes ping on it (their MACs, which the client matches to the other
nodes' reports to draw the cabling). It also lists the IPv4 networks the
node's other interfaces use, so a plan never reuses one.

``POST /v1/fabric/apply`` and ``POST /v1/fabric/rollback`` hand a node's part
of a plan to the agent's root helper through ``sudo``. The sudo password
travels in the request body only (through the SSH tunnel to loopback), is
handed to sudo on its standard input and is never stored or logged: the
field is left out of every repr.
"""

from __future__ import annotations

from pydantic import Field

from sparksync_agent.protocol.base import WireModel

FABRIC_MTU = 9000


class FabricNeighbour(WireModel):
    """A host that answered on this interface's L2 segment."""

    mac: str = Field(description="Lower-case, colon-separated, as the neighbour table shows it.")
    ipv6: str | None = Field(None, description="Its IPv6 link-local address, without the %zone.")


class FabricInterface(WireModel):
    """One CX-7 netdev (a port has two: twin 0 on PCI domain 0, twin 1 on domain 2)."""

    name: str
    port: int = Field(description="The physical QSFP port: the N of 'npN'.")
    twin: int = Field(description="0 for enp1s0f*npN, 1 for its twin enP2p1s0f*npN.")
    carrier: bool | None = Field(None, description="None: the kernel does not say (interface down).")
    operstate: str | None = None
    speed_mbps: int | None = Field(None, description="Negotiated speed; None while there is no link.")
    mtu: int | None = None
    mac: str | None = None
    addresses: list[str] = Field(default_factory=list, description="IPv4 address/prefix pairs.")
    ipv6_link_local: str | None = None
    rdma_device: str | None = Field(None, description="From /sys/class/net/<if>/device/infiniband/.")
    neighbours: list[FabricNeighbour] = Field(default_factory=list)


class FabricPort(WireModel):
    """A physical QSFP port and its netdevs."""

    index: int
    interfaces: list[str]


class NetworkInUse(WireModel):
    """An IPv4 network a non-fabric interface of the node uses (never to be planned over)."""

    interface: str
    address: str = Field(description="address/prefix, e.g. 192.168.1.20/24")


class FabricReport(WireModel):
    node_id: str
    hostname: str
    ports: list[FabricPort] = Field(default_factory=list)
    interfaces: list[FabricInterface] = Field(default_factory=list)
    networks_in_use: list[NetworkInUse] = Field(default_factory=list)
    probed: bool = Field(False, description="Neighbours were probed (carrier-up ports only).")
    probe_s: float = Field(0.0, description="How long the neighbour probe took.")
    applier: str = Field("iproute2", description="How a plan would be applied here: 'netplan' or 'iproute2'.")
    applied_plan: str | None = Field(None, description="The id of the fabric plan this node carries, if any.")


class InterfacePlan(WireModel):
    """What one fabric netdev must carry."""

    name: str
    addresses: list[str] = Field(description="IPv4 address/prefix pairs, e.g. 10.100.0.1/24.")
    mtu: int = FABRIC_MTU


class NodeFabricPlan(WireModel):
    """A node's part of a fabric plan."""

    plan_id: str
    interfaces: list[InterfacePlan]


class FabricApply(WireModel):
    plan: NodeFabricPlan
    sudo_password: str = Field(repr=False, description="Handed to sudo on stdin; never stored.")


class FabricRollback(WireModel):
    sudo_password: str = Field(repr=False, description="Handed to sudo on stdin; never stored.")
    last: bool = Field(False, description="Undo only the last apply (an all-or-nothing apply that failed elsewhere).")


class FabricResult(WireModel):
    """What the root helper did on the node."""

    ok: bool
    action: str = Field(description="'apply' or 'rollback'.")
    applier: str = Field(description="'netplan' or 'iproute2'.")
    plan_id: str | None = None
    steps: list[str] = Field(default_factory=list, description="What was done, in order.")
    netplan_yaml: str | None = Field(None, description="The file written (netplan) or validated (iproute2).")
    netplan_validated: bool = Field(False, description="`netplan generate` accepted the YAML.")
    netplan_note: str | None = Field(None, description="Why it was not validated, when it was not.")
    error: str | None = None
    restored: bool = Field(False, description="A failed apply put the previous state back on this node.")
