"""The dashboard's series: their names, what they measure, and how a Sample maps onto them.

A series name is ``<kind>`` or ``<kind>.<instance>``, where the kind is
always two dotted words and the instance names the interface, RDMA port,
GPU or workload it belongs to (it may itself hold dots, as VLAN interfaces
do)::

    mem.used                memory used, bytes (MemTotal - MemAvailable)
    mem.total               memory total, bytes
    cpu.util                CPU utilisation, %
    net.rx.<iface>          link receive rate, bits/s
    net.tx.<iface>          link transmit rate, bits/s
    rdma.rx.<dev>:<port>    RDMA receive rate, bits/s
    rdma.tx.<dev>:<port>    RDMA transmit rate, bits/s
    gpu.util.<index>        GPU utilisation, %
    gpu.temp.<index>        GPU temperature, °C
    gpu.power.<index>       GPU power draw, W
    tok.workload.<name>     tokens/s of one workload (fed by the workloads code)
    tok.total               tokens/s of all workloads together

Values are stored in these base units; only the view scales them (GB or
GiB, Gb/s). A reading the node cannot give (NVML's NOT_SUPPORTED) is left
out, never stored as 0, so the plot shows nothing rather than a false zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparksync.core.base.units import bits_per_s

if TYPE_CHECKING:
    # Only the types: the wire models load with the first sample, after the window's first
    # paint, so the kinds and statuses below are their wire values (str enums compare equal).
    from sparksync_agent.protocol import GpuSample, Reading, Sample

# The pseudo-node that holds cluster-wide series (totals, workloads' tokens/s).
# Parentheses cannot appear in a hostname, so it never clashes with a node.
CLUSTER = "(cluster)"
CLUSTER_LABEL = "Cluster"

# Interfaces worth a curve (InterfaceKind values): the fabric and the management links, not lo or bridges.
PLOTTED_INTERFACES = ("fabric", "management", "other")


@dataclass(frozen=True)
class Kind:
    """What one kind of series measures and where it is drawn."""

    key: str
    label: str
    plot: str  # the plot it is drawn in (see PLOTS)
    unit: str  # base unit of the stored values
    style: str = "solid"  # line style, so rx/tx and used/total differ within a node's colour


KINDS: dict[str, Kind] = {
    k.key: k
    for k in (
        Kind("mem.used", "memory used", "memory", "B"),
        Kind("mem.total", "memory total", "memory", "B", "dash"),
        Kind("cpu.util", "CPU utilisation", "utilisation", "%"),
        Kind("gpu.util", "GPU utilisation", "utilisation", "%", "dot"),
        Kind("net.rx", "network rx", "network", "bit/s"),
        Kind("net.tx", "network tx", "network", "bit/s", "dash"),
        Kind("rdma.rx", "RDMA rx", "rdma", "bit/s"),
        Kind("rdma.tx", "RDMA tx", "rdma", "bit/s", "dash"),
        Kind("gpu.temp", "GPU temperature", "gpu_temp", "°C"),
        Kind("gpu.power", "GPU power", "gpu_power", "W"),
        Kind("tok.workload", "tokens/s per workload", "tokens", "tok/s"),
        Kind("tok.total", "tokens/s, all workloads", "tokens", "tok/s", "dash"),
    )
}

MEMORY_USED = "mem.used"
MEMORY_TOTAL = "mem.total"
TOKENS_TOTAL = "tok.total"


def series_name(kind: str, instance: str | None = None) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown series kind {kind!r}; known kinds: {', '.join(KINDS)}")
    return kind if instance is None else f"{kind}.{instance}"


def split_name(name: str) -> tuple[str, str | None]:
    """``"net.rx.eth0.100"`` -> ``("net.rx", "eth0.100")``; ``"mem.used"`` -> ``("mem.used", None)``."""
    parts = name.split(".", 2)
    kind = ".".join(parts[:2])
    if kind not in KINDS:
        raise ValueError(f"{name!r} is not a dashboard series name (unknown kind {kind!r})")
    return kind, parts[2] if len(parts) == 3 else None


def kind_of(name: str) -> Kind:
    return KINDS[split_name(name)[0]]


def tokens_series(workload: str) -> str:
    """The series a workload's tokens/s goes to (the workloads code feeds it)."""
    return series_name("tok.workload", workload)


def plot_of(node: str, name: str) -> str:
    """The plot a series is drawn in; the cluster's memory has a plot of its own."""
    plot = kind_of(name).plot
    return "cluster_memory" if node == CLUSTER and plot == "memory" else plot


def sample_values(sample: Sample) -> dict[str, float]:
    """The series values one Sample carries, in base units."""
    values: dict[str, float] = {}
    if sample.memory is not None:
        values[MEMORY_USED] = float(sample.memory.used_bytes)
        values[MEMORY_TOTAL] = float(sample.memory.total_bytes)
    if sample.cpu is not None:
        values["cpu.util"] = sample.cpu.percent
    for nic in sample.net or ():
        if nic.kind in PLOTTED_INTERFACES and nic.is_up:
            values[f"net.rx.{nic.name}"] = bits_per_s(nic.rx_bytes_per_s)
            values[f"net.tx.{nic.name}"] = bits_per_s(nic.tx_bytes_per_s)
    for port in sample.rdma or ():
        values[f"rdma.rx.{port.device}:{port.port}"] = bits_per_s(port.rx_bytes_per_s)
        values[f"rdma.tx.{port.device}:{port.port}"] = bits_per_s(port.tx_bytes_per_s)
    for gpu in sample.gpu or ():
        values.update(_gpu_values(gpu))
    return values


def _gpu_values(gpu: GpuSample) -> dict[str, float]:
    readings = {"gpu.util": gpu.utilization_pct, "gpu.temp": gpu.temperature_c, "gpu.power": gpu.power_w}
    return {f"{kind}.{gpu.index}": value for kind, r in readings.items() if (value := _usable(r)) is not None}


def _usable(reading: Reading) -> float | None:
    return reading.value if reading.status == "ok" else None  # ReadingStatus.ok
