"""What the cluster did while a benchmark ran, summarised for the history.

The figures come from the client's telemetry history (``sparksync.core.telemetry.history``,
one row per node per second, filled while the app shows the nodes' live
telemetry), read for the run's time window; see run_telemetry.py.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TelemetrySummary(BaseModel):
    """Per-run summary; every figure is optional because not every node reports it.

    Energy needs NVML power readings, which GB10 provides; a CPU-only node has none.
    """

    model_config = ConfigDict(frozen=True)

    peak_memory_bytes: int | None = Field(None, ge=0, description="Highest used memory on any node")
    mean_link_bytes_per_s: float | None = Field(
        None, ge=0, description="Fabric traffic of one node (received + sent), averaged over nodes and time")
    energy_joules: float | None = Field(None, ge=0, description="Summed over nodes, from NVML power")
    sample_count: int = Field(0, ge=0, description="One-second rows summarised (all nodes together)")
    nodes: tuple[str, ...] = Field((), description="The nodes whose telemetry was summarised")
    seconds: int | None = Field(None, ge=0, description="Seconds of the run's window that had telemetry")
