"""The cluster's fabric and the environment it gives each rank of a multi-node group.

Per cluster: a topology (direct, ring or switch), a default collective
backend (NCCL, or RoCEnante where it is installed) and, per node, the fabric
interfaces its agent reported (ConnectX-7 ports such as ``enp1s0f1np1``,
with their IPv4 addresses) and the RoCE devices behind them
(``rocep1s0f1``, ``roceP2p1s0f1``).

Each rank of a multi-node group gets (``fabric_env``):

- ``NCCL_SOCKET_IFNAME``, ``UCX_NET_DEVICES``, ``OMPI_MCA_btl_tcp_if_include``:
  every usable fabric interface of that node, comma-separated;
- ``GLOO_SOCKET_IFNAME``, ``TP_SOCKET_IFNAME``: its primary fabric interface
  (the one that carries its fabric IP), a single name;
- ``NCCL_IB_HCA``: the RoCE devices of those interfaces;
- with RoCEnante: its library and environment from the cluster's settings.

These are the variables NVIDIA's DGX Spark playbooks set for multi-node vLLM
and TRT-LLM (github.com/NVIDIA/dgx-spark-playbooks, nvidia/vllm and
nvidia/trt-llm READMEs, "Run on two Sparks"). NCCL's meaning of each is in
its environment-variable reference (docs.nvidia.com/deeplearning/nccl/
user-guide/docs/env.html); GLOO_SOCKET_IFNAME in PyTorch's distributed docs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, model_validator
from sparksync_agent.protocol import InterfaceKind, NetInterfaceSample, RdmaPortSample

from sparksync.core.nodes.registry import PairedNode
from sparksync.core.workloads.errors import FabricError, RocenanteUnavailableError

FABRIC_VERSION = 2  # 2: primary_interface is filed by node id in fabric.json (see fabric_settings)
LOOPBACK = "127.0.0.1"

# A CX-7 netdev is "en" + its PCI path + "np" + port: enp1s0f1np1, enP2p1s0f1np1.
# Its RoCE device is "roce" + the same PCI path: rocep1s0f1, roceP2p1s0f1.
_NETDEV_RE = re.compile(r"^en(?P<pci>\w+?)np\d+$")


class Topology(str, Enum):
    direct = "direct"
    ring = "ring"
    switch = "switch"


class Backend(str, Enum):
    nccl = "nccl"
    rocenante = "rocenante"


class RocenanteSettings(BaseModel):
    """Where RoCEnante lives on the nodes and how the engines are pointed at it.

    Nothing here is assumed: the library path and its variables come from
    the user's fabric settings. ``library_env`` names the variable that
    carries the library path (an NCCL network plugin by default).
    """

    model_config = ConfigDict(extra="forbid")

    library: str = Field(min_length=1, description="Absolute path of the library on every node.")
    library_env: str = Field("NCCL_NET_PLUGIN", min_length=1)
    env: dict[str, str] = Field(default_factory=dict)


class FabricSettings(BaseModel):
    """The cluster-wide part, as the user sets it."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(FABRIC_VERSION, ge=1)
    topology: Topology = Topology.switch
    backend: Backend = Backend.nccl
    rocenante: RocenanteSettings | None = None
    primary_interface: dict[str, str] = Field(
        default_factory=dict,
        description="Per node (its name in memory, its id on disk): the interface whose IP is its fabric address.",
    )


class FabricPort(BaseModel):
    """One usable fabric interface of a node."""

    model_config = ConfigDict(frozen=True)

    name: str
    ipv4: str
    rdma_device: str | None = None


class NodeFabric(BaseModel):
    """What one node's agent reported about its fabric, or what the applied fabric plan gave it."""

    node: str
    ports: list[FabricPort] = Field(default_factory=list)
    rocenante_installed: bool = Field(False, description="The agent found the RoCEnante library.")
    env: dict[str, str] | None = Field(
        None, description="The environment the applied fabric plan gives this node (sparksync cluster apply)."
    )

    @classmethod
    def from_samples(
        cls,
        node: str,
        net: Sequence[NetInterfaceSample],
        rdma: Sequence[RdmaPortSample] | None = None,
        rocenante_installed: bool = False,
    ) -> NodeFabric:
        """Fabric interfaces that are up and have an IPv4 address, with their active RoCE device."""
        devices = _active_devices(rdma or [])
        ports = [
            FabricPort(name=i.name, ipv4=ip, rdma_device=_device_for(i.name, devices))
            for i in net
            if i.kind is InterfaceKind.fabric and i.is_up and (ip := _first_ipv4(i.addresses))
        ]
        return cls(node=node, ports=ports, rocenante_installed=rocenante_installed)

    @classmethod
    def from_registry(cls, node: PairedNode, rocenante_installed: bool = False) -> NodeFabric:
        """The fabric interfaces recorded for a paired node."""
        ports = [
            FabricPort(name=f.name, ipv4=ip, rdma_device=f.rdma_device)
            for f in node.fabric
            if (ip := _first_ipv4(f.addresses))
        ]
        return cls(node=node.name, ports=ports, rocenante_installed=rocenante_installed)


class Fabric(BaseModel):
    """The settings plus every node's report: all that the launch needs."""

    settings: FabricSettings = Field(default_factory=FabricSettings)
    nodes: dict[str, NodeFabric] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _keys_match(self) -> Fabric:
        for name, report in self.nodes.items():
            if report.node != name:
                raise ValueError(f"the fabric report filed under {name!r} is for {report.node!r}")
        return self

    @classmethod
    def of(cls, reports: Sequence[NodeFabric], settings: FabricSettings | None = None) -> Fabric:
        return cls(settings=settings or FabricSettings(), nodes={r.node: r for r in reports})

    def ports(self, node: str) -> list[FabricPort]:
        """The node's usable fabric ports, its primary one first."""
        report = self.nodes.get(node)
        if report is None or not report.ports:
            raise FabricError(
                f"node {node} reported no fabric interface with an IPv4 address, so it cannot join a "
                "multi-node group. Connect its ConnectX-7 port and give it an address (NVIDIA's "
                "'Connect two Sparks' playbook), then refresh the node; or run the group on one node."
            )
        preferred = self.settings.primary_interface.get(node)
        return sorted(report.ports, key=lambda p: p.name != preferred)

    def ip(self, node: str) -> str:
        """The node's fabric address: its primary interface's IPv4."""
        return self.ports(node)[0].ipv4


def backend_for(fabric: Fabric, choice: str | None) -> Backend:
    """The workload's own choice, else the cluster's default."""
    return Backend(choice) if choice else fabric.settings.backend


def check_backend(fabric: Fabric, nodes: Sequence[str], backend: Backend) -> None:
    """Before launch: RoCEnante must be configured for the cluster and installed on every node."""
    if backend is not Backend.rocenante:
        return
    if fabric.settings.rocenante is None:
        raise RocenanteUnavailableError(
            "RoCEnante is chosen but the cluster's fabric settings do not say where its library is: "
            "set the RoCEnante library (and its environment) in the fabric settings, or choose NCCL."
        )
    missing = [n for n in nodes if not (fabric.nodes.get(n) and fabric.nodes[n].rocenante_installed)]
    if missing:
        raise RocenanteUnavailableError(
            f"RoCEnante is chosen but it is not installed on {', '.join(missing)} "
            f"(expected at {fabric.settings.rocenante.library}). Install it there, or choose NCCL "
            "for this workload."
        )
    no_roce = [n for n in nodes if not any(p.rdma_device for p in fabric.ports(n))]
    if no_roce:
        raise RocenanteUnavailableError(
            f"RoCEnante runs over RoCE but {', '.join(no_roce)} reported no active RoCE device on its "
            "fabric interfaces. Check the ConnectX-7 link (ibdev2netdev), or choose NCCL."
        )


def fabric_env(fabric: Fabric, node: str, backend: Backend = Backend.nccl) -> dict[str, str]:
    """The environment one rank on ``node`` needs to talk over the fabric.

    A node the applied fabric plan covers gets the plan's environment as it
    was stored (``sparksync cluster plan``); others get it from their ports.
    """
    ports = fabric.ports(node)
    planned = fabric.nodes[node].env
    if planned:
        env = {**planned, "TP_SOCKET_IFNAME": planned.get("GLOO_SOCKET_IFNAME", ports[0].name)}
        if backend is Backend.rocenante and fabric.settings.rocenante is not None:
            env.update(_rocenante_env(fabric.settings.rocenante))
        return env
    names = ",".join(p.name for p in ports)
    env = {
        "NCCL_SOCKET_IFNAME": names,
        "GLOO_SOCKET_IFNAME": ports[0].name,
        "TP_SOCKET_IFNAME": ports[0].name,
        "UCX_NET_DEVICES": names,
        "OMPI_MCA_btl_tcp_if_include": names,
    }
    hcas = [p.rdma_device for p in ports if p.rdma_device]
    if hcas:
        env["NCCL_IB_HCA"] = ",".join(dict.fromkeys(hcas))
    if backend is Backend.rocenante and fabric.settings.rocenante is not None:
        env.update(_rocenante_env(fabric.settings.rocenante))
    return env


def fabric_warnings(fabric: Fabric, group_size: int, backend: Backend) -> list[str]:
    """Advice from NVIDIA's published results; never a refusal."""
    notes = []
    topology = fabric.settings.topology
    if backend is Backend.rocenante and topology is not Topology.switch:
        notes.append(
            f"RoCEnante suits switched fabrics; on a {topology.value} topology NCCL is the better choice."
        )
    if topology is Topology.ring and group_size > 4:
        notes.append(
            f"a {group_size}-node group on a switchless ring: NVIDIA advises a switch beyond 4 nodes."
        )
    return notes


def rdma_device_for(netdev: str) -> str | None:
    """The RoCE device a CX-7 netdev sits on, by the kernel's naming: enP2p1s0f1np1 -> roceP2p1s0f1."""
    match = _NETDEV_RE.match(netdev)
    return f"roce{match['pci']}" if match else None


def _rocenante_env(settings: RocenanteSettings) -> dict[str, str]:
    return {settings.library_env: settings.library, **settings.env}


def _active_devices(rdma: Sequence[RdmaPortSample]) -> set[str]:
    # A port whose state is unknown is kept: only a reported non-ACTIVE state rules it out.
    return {p.device for p in rdma if p.state is None or p.state.upper() == "ACTIVE"}


def _device_for(netdev: str, devices: set[str]) -> str | None:
    device = rdma_device_for(netdev)
    return device if device in devices else None


def _first_ipv4(addresses: Sequence[str]) -> str | None:
    for text in addresses:
        try:
            address = ipaddress.ip_interface(text.split("%", 1)[0]).ip
        except ValueError:
            continue
        if address.version == 4:
            return str(address)
    return None


def node_ips(fabric: Fabric, nodes: Sequence[str]) -> Mapping[str, str]:
    """Each node's fabric IP; a one-node group talks to nobody and uses loopback."""
    if len(nodes) == 1:
        return {nodes[0]: LOOPBACK}
    return {n: fabric.ip(n) for n in nodes}
