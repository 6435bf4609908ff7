"""A scale sweep: the same model and profile on 1, 2, 4 and 8 nodes, then one report.

Bringing a model up on N nodes belongs to the workloads supervisor, so the
sweep takes it as a callable: ``bring_up(n)`` returns a context manager that
starts the model on ``n`` nodes, yields a :class:`SweepTarget` (its endpoint
and where it runs), and takes the model down when the block ends. A sweep
across topologies or backends is one sweep per variant, each with its own
``bring_up``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from sparksync.core.bench.context import MAX_CLUSTER_SIZE, RunContext
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.errors import BenchError, BenchInputError
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.progress import BenchProgress
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.recording import inference_record, store
from sparksync.core.bench.report import ScalingReport, scaling_report
from sparksync.core.bench.run_telemetry import with_run_telemetry
from sparksync.core.bench.runner import BenchRequest, BenchRunner
from sparksync.core.planner.bounds import Hardware

log = logging.getLogger(__name__)

DEFAULT_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class SweepTarget:
    """The model as ``bring_up(n)`` started it."""

    endpoint: Endpoint
    model: str
    tokenizer: Path
    context: RunContext  # cluster_size must be n; nodes, topology, backend as placed
    model_file: Path | None = None  # the model's GGUF or safetensors folder, for the bounds (bounds.py)


BringUp = Callable[[int], AbstractContextManager[SweepTarget]]
SweepProgress = Callable[[int, BenchProgress], None]


@dataclass
class SweepResult:
    sweep_id: str
    records: list[RunRecord]
    skipped: dict[int, str] = field(default_factory=dict)
    cancelled: bool = False
    report: ScalingReport | None = None


class ScaleSweep:
    """Runs the profile at each size the cluster allows, storing every run under one sweep id."""

    def __init__(self, bring_up: BringUp, history: HistoryStore, *, available_nodes: int,
                 profile: BenchProfile | None = None, sizes: Sequence[int] = DEFAULT_SIZES,
                 prompt_file: Path = DEFAULT_PROMPT_FILE, on_progress: SweepProgress | None = None,
                 hardware: Hardware | None = None):
        self.sizes = plan_sizes(sizes, available_nodes)
        self._bring_up, self._history = bring_up, history
        self._profile = profile or BenchProfile.published()
        self._prompt_file, self._on_progress, self._hardware = prompt_file, on_progress, hardware
        self._runner: BenchRunner | None = None
        self._cancelled = False
        self.sweep_id = uuid.uuid4().hex[:12]

    def cancel(self) -> None:
        self._cancelled = True
        if self._runner is not None:
            self._runner.cancel()

    def run(self) -> SweepResult:
        result = SweepResult(self.sweep_id, [])
        for size in self.sizes:
            if self._cancelled:
                result.cancelled = True
                break
            self._run_size(size, result)
        result.cancelled = result.cancelled or self._cancelled
        usable = [r for r in result.records if r.status != "failed"]
        result.report = scaling_report(result.records) if usable else None
        return result

    def _run_size(self, size: int, result: SweepResult) -> None:
        try:
            with self._bring_up(size) as target:
                record = self._measure(size, target)
        except BenchError as exc:
            log.warning("scale sweep: %d node(s) skipped: %s", size, exc)
            result.skipped[size] = str(exc)
            return
        result.records.append(record)

    def _measure(self, size: int, target: SweepTarget) -> RunRecord:
        if target.context.cluster_size != size:
            raise BenchInputError(f"bring_up({size}) placed the model on {target.context.cluster_size} nodes")
        request = BenchRequest(target.endpoint, target.model, target.tokenizer, self._profile,
                               prompt_file=self._prompt_file,
                               context=target.context.model_copy(update={"sweep_id": self.sweep_id}),
                               model_file=target.model_file, hardware=self._hardware)
        on_progress = self._on_progress
        progress = (lambda p: on_progress(size, p)) if on_progress else None
        self._runner = BenchRunner(request, on_progress=progress)
        if self._cancelled:
            self._runner.cancel()
        outcome = self._runner.run()
        return store(self._history, with_run_telemetry(inference_record(request, outcome)))


def plan_sizes(sizes: Sequence[int], available_nodes: int) -> list[int]:
    """The requested sizes the cluster can hold, smallest first."""
    if not 1 <= available_nodes <= MAX_CLUSTER_SIZE:
        raise BenchInputError(f"a cluster has 1 to {MAX_CLUSTER_SIZE} nodes, not {available_nodes}")
    chosen = sorted({s for s in sizes if 1 <= s <= available_nodes})
    if not chosen:
        raise BenchInputError(f"none of the sizes {list(sizes)} fits a cluster of {available_nodes} node(s)")
    return chosen
