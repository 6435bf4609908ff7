"""Agent-shaped fabric reports for tests: what a DGX Spark's agent would send.

Each fake Spark has the management port enP7s7, CX-7 port 1 cabled through
both of its netdevs (enp1s0f1np1 on 192.168.100.1N, enP2p1s0f1np1 on
192.168.101.1N) with their RoCE devices ACTIVE, and port 0 down.
"""

from __future__ import annotations

from sparksync_agent.protocol import InterfaceKind, NetInterfaceSample, RdmaPortSample

from sparksync.core.workloads.fabric import Fabric, FabricSettings, NodeFabric
from sparksync.core.workloads.launch_spec import RankLaunch

# What every fake Spark's ranks get from the fabric, written out by hand from
# the playbooks' variables (see fabric.py's docstring).
FABRIC_ENV = {
    "NCCL_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1",
    "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
    "TP_SOCKET_IFNAME": "enp1s0f1np1",
    "UCX_NET_DEVICES": "enp1s0f1np1,enP2p1s0f1np1",
    "OMPI_MCA_btl_tcp_if_include": "enp1s0f1np1,enP2p1s0f1np1",
    "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
}


def net(
    name: str, *addresses: str, kind: InterfaceKind = InterfaceKind.fabric, up: bool = True
) -> NetInterfaceSample:
    return NetInterfaceSample(
        name=name, kind=kind, is_up=up, speed_mbps=200_000 if kind is InterfaceKind.fabric else 10_000,
        mtu=9000, addresses=list(addresses), rx_bytes_per_s=0.0, tx_bytes_per_s=0.0,
        rx_packets_per_s=0.0, tx_packets_per_s=0.0, rx_errors=0, tx_errors=0, rx_drops=0, tx_drops=0,
    )  # fmt: skip


def rdma(device: str, state: str | None = "ACTIVE") -> RdmaPortSample:
    return RdmaPortSample(
        device=device, port=1, state=state, rate="200 Gb/sec (4X HDR)",
        rx_bytes_per_s=0.0, tx_bytes_per_s=0.0, rx_bytes_total=0, tx_bytes_total=0,
    )  # fmt: skip


def spark_samples(i: int) -> tuple[list[NetInterfaceSample], list[RdmaPortSample]]:
    nets = [
        net("lo", "127.0.0.1", kind=InterfaceKind.loopback),
        net("enP7s7", f"10.0.0.{10 + i}", kind=InterfaceKind.management),
        net("enp1s0f1np1", f"fe80::{i}%enp1s0f1np1", f"192.168.100.{10 + i}"),
        net("enP2p1s0f1np1", f"192.168.101.{10 + i}"),
        net("enp1s0f0np0", f"192.168.102.{10 + i}", up=False),
    ]
    devices = [
        rdma("rocep1s0f1"),
        rdma("roceP2p1s0f1"),
        rdma("rocep1s0f0", "DOWN"),
        rdma("roceP2p1s0f0", "DOWN"),
    ]
    return nets, devices


def spark(i: int, rocenante_installed: bool = False) -> NodeFabric:
    nets, devices = spark_samples(i)
    return NodeFabric.from_samples(f"spark-{i}", nets, devices, rocenante_installed=rocenante_installed)


def sparks(count: int, settings: FabricSettings | None = None, rocenante: bool = False) -> Fabric:
    """A fabric of spark-1 ... spark-<count>."""
    return Fabric.of([spark(i, rocenante) for i in range(1, count + 1)], settings)


def nodes(count: int) -> list[str]:
    return [f"spark-{i}" for i in range(1, count + 1)]


def summary(launch: RankLaunch) -> dict:
    """The parts of a launch the goldens pin down exactly."""
    return {
        "node": launch.node, "rank": launch.rank, "role": launch.role, "stage": launch.stage,
        "argv": launch.argv, "env": launch.env,
    }  # fmt: skip
