"""The dashboard's plots: title, axis label and how values are scaled for the axis.

Memory axes name the chosen unit (GB or GiB) and the values are divided by
it; link axes are bits/s with an automatic decimal prefix (so they read Gb/s
at fabric rates); the tokens axis says tok/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparksync.core.base import MemoryUnit


@dataclass(frozen=True)
class PlotSpec:
    key: str
    title: str
    axis: str  # the left axis' text, without the unit
    unit: str  # shown in the axis label
    si_prefix: bool = False  # let pyqtgraph add k/M/G (decimal) to the unit
    y_range: tuple[float, float] | None = None  # fixed range; None follows the data, from 0
    always: bool = False  # shown even before any series exists (a placeholder)
    placeholder: str = ""


ORDER = ("memory", "cluster_memory", "network", "rdma", "utilisation", "tokens", "gpu_temp", "gpu_power")


def plot_specs(memory_unit: MemoryUnit) -> dict[str, PlotSpec]:
    mem = memory_unit.value
    specs = (
        PlotSpec("memory", "Unified memory per node", "memory", mem),
        PlotSpec("cluster_memory", "Cluster memory", "memory", mem),
        PlotSpec("network", "Network per interface", "link rate", "b/s", si_prefix=True),
        PlotSpec("rdma", "RDMA per port", "RDMA rate", "b/s", si_prefix=True),
        PlotSpec("utilisation", "CPU and GPU utilisation", "utilisation", "%", y_range=(0, 100)),
        PlotSpec(
            "tokens", "Tokens per second", "throughput", "tok/s", always=True,
            placeholder="Tokens/s appear here while a workload runs",
        ),
        PlotSpec("gpu_temp", "GPU temperature", "temperature", "°C"),
        PlotSpec("gpu_power", "GPU power", "power", "W"),
    )  # fmt: skip
    return {s.key: s for s in specs}


def memory_scale(key: str, memory_unit: MemoryUnit) -> float:
    """What stored values (bytes for memory) are divided by before they are drawn."""
    return float(memory_unit.bytes) if key in ("memory", "cluster_memory") else 1.0
