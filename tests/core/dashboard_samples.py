"""Samples shaped like a DGX Spark's (memory, a CX-7 port, RoCE, GB10 GPU), for dashboard tests."""

from __future__ import annotations

from sparksync_agent.protocol import (
    CpuSample,
    GpuSample,
    InterfaceKind,
    MemorySample,
    NetInterfaceSample,
    RdmaPortSample,
    Reading,
    ReadingStatus,
    Sample,
)

GB = 1_000_000_000
SPARK_MEMORY = 128 * GB
FABRIC = "enp1s0f0np0"
ROCE = "rocep1s0f0"


def memory(used: float, total: float = SPARK_MEMORY) -> MemorySample:
    return MemorySample(
        total_bytes=int(total), used_bytes=int(used), available_bytes=int(total - used), free_bytes=0,
        cached_bytes=0, buffers_bytes=0, swap_total_bytes=0, swap_used_bytes=0,
    )  # fmt: skip


def nic(name: str, rx: float, tx: float, kind: InterfaceKind = InterfaceKind.fabric, up: bool = True):
    return NetInterfaceSample(
        name=name, kind=kind, is_up=up, speed_mbps=200_000, rx_bytes_per_s=rx, tx_bytes_per_s=tx,
        rx_packets_per_s=0, tx_packets_per_s=0, rx_errors=0, tx_errors=0, rx_drops=0, tx_drops=0,
    )  # fmt: skip


def rdma(device: str, rx: float, tx: float, port: int = 1) -> RdmaPortSample:
    return RdmaPortSample(
        device=device, port=port, rx_bytes_per_s=rx, tx_bytes_per_s=tx, rx_bytes_total=0, tx_bytes_total=0
    )


def ok(value: float) -> Reading:
    return Reading(value=value)


UNSUPPORTED = Reading(status=ReadingStatus.unsupported)


def gb10(util: float, temp: float, power: Reading | None = None) -> GpuSample:
    return GpuSample(
        index=0, name="NVIDIA GB10", utilization_pct=ok(util), temperature_c=ok(temp),
        power_w=power if power is not None else ok(40.0), power_limit_w=Reading(status=ReadingStatus.unsupported),
        sm_clock_mhz=ok(2000), memory_used_bytes=UNSUPPORTED, memory_total_bytes=UNSUPPORTED,
    )  # fmt: skip


def spark_sample(seq: int, ts: float, used_gb: float = 10.0, *, total: float = SPARK_MEMORY) -> Sample:
    """A full Spark sample: memory, one fabric port (rx 1 GB/s, tx 2 GB/s), RoCE, the GB10."""
    return Sample(
        seq=seq,
        ts=ts,
        memory=memory(used_gb * GB, total),
        cpu=CpuSample(percent=12.5, per_core=[12.5], load_avg=(0.1, 0.1, 0.1)),
        net=[
            nic(FABRIC, 1e9, 2e9),
            nic("lo", 5e9, 5e9, InterfaceKind.loopback),
            nic("enP7s7", 1e3, 2e3, InterfaceKind.management),
        ],
        rdma=[rdma(ROCE, 3e9, 4e9)],
        gpu=[gb10(util=80.0, temp=55.0)],
    )


def memory_sample(seq: int, ts: float, used_gb: float, total: float = SPARK_MEMORY) -> Sample:
    return Sample(seq=seq, ts=ts, memory=memory(used_gb * GB, total))
