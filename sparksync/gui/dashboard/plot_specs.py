"""The dashboard's plots: title, axis label and how values are scaled for the axis.

Memory axes name the chosen unit (GB or GiB) and the values are divided by
it; link axes are bits/s with an automatic decimal prefix (so they read Gb/s
at fabric rates); the tokens axis says tok/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparksync.core.base import MemoryUnit
from sparksync.core.telemetry import MEMORY_TOTAL


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
    # Series the Y axis is not fitted to: a node's memory total would squash its used line flat
    # at the bottom (the title gives the totals instead; a total near the used line still shows).
    fit_ignores: tuple[str, ...] = ()


ORDER = ("memory", "cluster_memory", "network", "rdma", "utilisation", "tokens", "gpu_temp", "gpu_power")


def plot_specs(memory_unit: MemoryUnit) -> dict[str, PlotSpec]:
    mem = memory_unit.value
    specs = (
        PlotSpec("memory", "Unified memory used per node", "memory", mem, fit_ignores=(MEMORY_TOTAL,)),
        PlotSpec("cluster_memory", "Cluster memory", "memory", mem, fit_ignores=(MEMORY_TOTAL,)),
        PlotSpec("network", "Network per interface (rx solid, tx dashed)", "link rate", "b/s", si_prefix=True),
        PlotSpec("rdma", "RDMA per port (rx solid, tx dashed)", "RDMA rate", "b/s", si_prefix=True),
        PlotSpec("utilisation", "CPU and GPU utilisation", "utilisation", "%", y_range=(0, 100)),
        PlotSpec(
            "tokens", "Tokens per second", "throughput", "tok/s", always=True,
            placeholder="Tokens/s appear here while a workload runs",
        ),
        PlotSpec("gpu_temp", "GPU temperature", "temperature", "°C"),
        PlotSpec("gpu_power", "GPU power", "power", "W"),
    )  # fmt: skip
    return {s.key: s for s in specs}


def utilisation_title(has_gpu: bool) -> str:
    """The utilisation plot says when no node reports a GPU, rather than promising a GPU line."""
    return "CPU and GPU utilisation (CPU solid, GPU dotted)" if has_gpu else "CPU utilisation (no GPU)"


def memory_scale(key: str, memory_unit: MemoryUnit) -> float:
    """What stored values (bytes for memory) are divided by before they are drawn."""
    return float(memory_unit.bytes) if key in ("memory", "cluster_memory") else 1.0
