"""What the cluster did while a benchmark ran, summarised for the history.

The agents' telemetry streams fill this in once the workloads supervisor
drives benchmarks across the cluster; until then a run stores none (null).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TelemetrySummary(BaseModel):
    """Per-run summary; every figure is optional because not every node reports it.

    Energy needs NVML power readings, which GB10 provides; a CPU-only node has none.
    """

    model_config = ConfigDict(frozen=True)

    peak_memory_bytes: int | None = Field(None, ge=0, description="Highest used memory on any node")
    mean_link_bytes_per_s: float | None = Field(None, ge=0, description="Fabric traffic, both directions")
    energy_joules: float | None = Field(None, ge=0, description="Summed over nodes, from NVML power")
    sample_count: int = Field(0, ge=0)
