"""Hand-built samples of Spark clusters cabled as direct pairs, rings and switches, for topology tests."""

from __future__ import annotations

from sparksync_agent.protocol import InterfaceKind, NetInterfaceSample, RdmaPortSample, Sample

GBIT = 1e9 / 8  # bytes/s in one Gb/s
PORTS = ("enp1s0f0np0", "enp1s0f1np1")


def port(name: str, *addresses: str, speed_mbps: int | None = 200_000, mtu: int | None = 9000,
         rx: float = 0.0, tx: float = 0.0, up: bool = True,
         kind: InterfaceKind = InterfaceKind.fabric) -> NetInterfaceSample:
    return NetInterfaceSample(
        name=name, kind=kind, is_up=up, speed_mbps=speed_mbps, mtu=mtu, addresses=list(addresses),
        rx_bytes_per_s=rx, tx_bytes_per_s=tx, rx_packets_per_s=0, tx_packets_per_s=0,
        rx_errors=0, tx_errors=0, rx_drops=0, tx_drops=0,
    )  # fmt: skip


def management(address: str) -> NetInterfaceSample:
    return port("enP7s7", address, speed_mbps=10_000, mtu=1500, kind=InterfaceKind.management)


def sample(*ports: NetInterfaceSample, ts: float = 1000.0, rdma: list[RdmaPortSample] | None = None) -> Sample:
    return Sample(seq=1, ts=ts, net=list(ports), rdma=rdma)


def roce(device: str, rx: float, tx: float) -> RdmaPortSample:
    return RdmaPortSample(device=device, port=1, state="ACTIVE", rate="200 Gb/sec (4X NDR)",
                          rx_bytes_per_s=rx, tx_bytes_per_s=tx, rx_bytes_total=0, tx_bytes_total=0)


def direct_pair(**second_port) -> dict[str, Sample]:
    """Two Sparks on one cable, 10.0.0.0/31; spark-1 sends 40 Gb/s, spark-2 sends 8 Gb/s."""
    return {
        "spark-1": sample(port(PORTS[0], "10.0.0.0/31", tx=40 * GBIT, rx=8 * GBIT), management("192.168.1.11")),
        "spark-2": sample(port(PORTS[0], "10.0.0.1/31", tx=8 * GBIT, rx=40 * GBIT, **second_port),
                          management("192.168.1.12")),
    }


def ring(n: int = 4) -> dict[str, Sample]:
    """``n`` Sparks in a ring: cable i joins spark-i's second port to spark-(i+1)'s first, in 10.0.i.0/30."""
    ports: dict[str, list[NetInterfaceSample]] = {f"spark-{i + 1}": [] for i in range(n)}
    for i in range(n):
        left, right = f"spark-{i + 1}", f"spark-{(i + 1) % n + 1}"
        ports[left].append(port(PORTS[1], f"10.0.{i}.1/30", tx=(i + 1) * GBIT))
        ports[right].append(port(PORTS[0], f"10.0.{i}.2/30", tx=0.5 * GBIT))
    return {node: sample(*p) for node, p in ports.items()}


def switched(n: int = 8, mtus: dict[int, int] | None = None) -> dict[str, Sample]:
    """``n`` Sparks on one switch subnet 10.10.0.0/24 (bare addresses: the default /24 applies)."""
    mtus = mtus or {}
    return {
        f"spark-{i}": sample(port(PORTS[0], f"10.10.0.{i}", mtu=mtus.get(i, 9000), tx=i * GBIT, rx=2 * GBIT))
        for i in range(1, n + 1)
    }
