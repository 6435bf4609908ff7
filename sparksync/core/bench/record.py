"""A stored run as the history holds it, and the light listing item the history view shows.

Inference runs carry llama-benchy's full JSON in ``result``; training runs
(nanochat and the like, recorded by the workloads supervisor) carry their
own small result with ``tokens_per_second``. Both are summarised into the
same columns, so one report shows either.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sparksync.core.bench.bounds import RunBounds
from sparksync.core.bench.context import RunContext
from sparksync.core.bench.preflight import ServerFacts
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.results import RunSummary, percent_of_bound
from sparksync.core.planner.bounds import SPLITS, Split, split_label

Kind = Literal["inference", "training"]
Status = Literal["complete", "partial", "failed"]
STATUSES: tuple[Status, ...] = ("complete", "partial", "failed")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class RunDetails(BaseModel):
    """The smaller facts about a run, kept together in one JSON column."""

    warnings: list[str] = Field(default_factory=list)
    server: ServerFacts | None = None
    requests_done: int | None = None
    requests_total: int | None = None
    duration_s: float | None = None
    tokenizer: str | None = None
    prompt_file: str | None = Field(None, description="None: SparkSync's own text")
    log_tail: str | None = None


class RunRecord(BaseModel):
    """Everything stored about one run (``id`` is None until it is stored)."""

    model_config = ConfigDict(extra="forbid")

    id: int | None = None
    created_at: datetime = Field(default_factory=utc_now)
    kind: Kind = "inference"
    status: Status
    model: str
    endpoint: str | None = None
    profile: BenchProfile | None = None
    context: RunContext = Field(default_factory=RunContext)
    benchy_version: str | None = None
    summary: RunSummary = Field(default_factory=RunSummary)
    error: str | None = None
    details: RunDetails = Field(default_factory=RunDetails)
    bounds: RunBounds | None = Field(None, description="The planner's limits for each test")
    result: dict[str, Any] | None = None


class RunListItem(BaseModel):
    """One row of the history view: no JSON blob is read to build it."""

    id: int
    created_at: datetime
    kind: Kind
    status: Status
    model: str
    profile_name: str | None
    cluster_size: int
    topology: str | None
    collective_backend: str | None
    label: str | None
    sweep_id: str | None
    decode_tps: float | None
    prefill_tps: float | None
    ttft_ms: float | None
    train_tps: float | None
    decode_bound_tps: float | None = None
    prefill_bound_tps: float | None = None
    bound_split: str | None = Field(None, description="The bound's split; None with a bound: tensor (older runs)")

    @property
    def bound_label(self) -> str | None:
        """The model the bound assumes, short ("TP×8", "layers×2"); None without a bound."""
        if self.decode_bound_tps is None and self.prefill_bound_tps is None:
            return None
        split: Split = "tensor"
        for known in SPLITS:
            if known == self.bound_split:
                split = known
        return split_label(split, self.cluster_size)

    @property
    def decode_percent_of_bound(self) -> float | None:
        return percent_of_bound(self.decode_tps, self.decode_bound_tps)
