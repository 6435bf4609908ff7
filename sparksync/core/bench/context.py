"""Where a run happened: what the history records beside llama-benchy's figures.

Filled by the caller (the CLI from its options today; the workloads
supervisor from the placement and recipe later).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sparksync.core.bench.telemetry import TelemetrySummary

MAX_CLUSTER_SIZE = 8


class RunContext(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_size: int = Field(1, ge=1, le=MAX_CLUSTER_SIZE)
    topology: str | None = Field(None, description="single, direct, ring or switch")
    collective_backend: str | None = Field(None, description="nccl, roceante, gloo, rpc ...")
    recipe: str | None = None
    recipe_version: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    nodes: tuple[str, ...] = ()
    label: str | None = None
    sweep_id: str | None = None
    telemetry: TelemetrySummary | None = None
