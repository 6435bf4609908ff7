"""Scaling reports and side-by-side comparisons, built from stored runs.

Scaling is measured against the 1-node run of the same model and profile:

    speed-up(N)   = tokens/s(N) / tokens/s(1)
    efficiency(N) = tokens/s(N) / (N x tokens/s(1))

For inference the tokens/s is llama-benchy's decode figure (with prefill
alongside, as the published comparison 4.43x against 1.94x does); for
training it is the workload's tokens/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from sparksync.core.bench import published
from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.flags import FigureFlag, efficiency_flag, row_spread_flags, stale_baseline_flag
from sparksync.core.bench.record import Kind, RunRecord
from sparksync.core.bench.results import SuiteRow, measured_rows, suite_rows

_STATUS_RANK = {"complete": 0, "partial": 1}


class ScalingRow(BaseModel):
    cluster_size: int
    run_id: int | None
    status: str
    topology: str | None = None
    collective_backend: str | None = None
    throughput: float | None = Field(None, description="decode tok/s (inference) or tok/s (training)")
    throughput_std: float | None = Field(None, description="std of the decode figure over its repetitions")
    prefill_tps: float | None = None
    prefill_std: float | None = None
    ttft_ms: float | None = None
    speedup: float | None = None
    prefill_speedup: float | None = None
    efficiency: float | None = None
    prefill_efficiency: float | None = None
    decode_bound_tps: float | None = Field(None, description="The planner's bound at this size (bounds.py)")
    decode_percent_of_bound: float | None = None
    prefill_bound_tps: float | None = None
    prefill_percent_of_bound: float | None = None
    bound_model: str | None = Field(None, description="The split the bound assumes (TP×8, layers×2 ...)")
    flags: list[FigureFlag] = Field(default_factory=list, description="Why a figure should not be trusted")


class ScalingReport(BaseModel):
    kind: Kind
    model: str
    profile: str | None = None
    baseline_size: int | None = None
    rows: list[ScalingRow]
    notes: list[str] = Field(default_factory=list)
    reference: str | None = None


def scaling_report(records: Sequence[RunRecord]) -> ScalingReport:
    """One row per cluster size, from runs of one model (and, for inference, one profile)."""
    usable, notes = _usable(records)
    kind, model, profile = _same_subject(usable)
    chosen = _one_per_size(usable, notes)
    base = chosen.get(1)
    if base is None:
        notes.append("no 1-node run: speed-up and efficiency need one; run the same profile on 1 node")
    rows = [_scaling_row(size, chosen[size], base) for size in sorted(chosen)]
    notes += [f"{row.cluster_size} node(s), run {row.run_id}: {flag.text()}" for row in rows for flag in row.flags]
    return ScalingReport(kind=kind, model=model, profile=profile.describe() if profile else None,
                         baseline_size=1 if base else None, rows=rows, notes=notes,
                         reference=_reference(kind, profile))


def speedup(tps: float | None, base_tps: float | None) -> float | None:
    return tps / base_tps if tps is not None and base_tps else None


def efficiency(tps: float | None, base_tps: float | None, nodes: int) -> float | None:
    ratio = speedup(tps, base_tps)
    return ratio / nodes if ratio is not None else None


def _usable(records: Sequence[RunRecord]) -> tuple[list[RunRecord], list[str]]:
    if not records:
        raise BenchInputError("a scaling report needs at least one stored run; give run ids or a sweep")
    usable = [r for r in records if r.status != "failed" and _throughput(r) is not None]
    notes = [f"run {r.id} left out: it has no figures ({r.status})" for r in records if r not in usable]
    if not usable:
        raise BenchInputError("none of the runs has figures to report; run the benchmark again")
    return usable, notes


def _same_subject(records: list[RunRecord]):
    first = records[0]
    for record in records[1:]:
        if record.kind != first.kind or record.model != first.model:
            raise BenchInputError(f"run {record.id} is a {record.kind} run of {record.model!r}, "
                                  f"run {first.id} a {first.kind} run of {first.model!r}; "
                                  "a report covers one model and kind")
        if record.profile != first.profile:
            raise BenchInputError(f"runs {first.id} and {record.id} used different profiles; scaling is "
                                  "measured with one profile at every size")
    return first.kind, first.model, first.profile


def _one_per_size(records: list[RunRecord], notes: list[str]) -> dict[int, RunRecord]:
    """Per size the best run: complete before partial, then the newest."""
    chosen: dict[int, RunRecord] = {}
    for record in sorted(records, key=lambda r: (_STATUS_RANK.get(r.status, 2), -r.created_at.timestamp())):
        size = record.context.cluster_size
        if size in chosen:
            notes.append(f"run {record.id} left out: run {chosen[size].id} is used for {size} node(s)")
            continue
        chosen[size] = record
        if record.status == "partial":
            why = record.error or "not every test ran"
            notes.append(f"run {record.id} ({size} node(s)) is partial: {why}")
    return chosen


def _scaling_row(size: int, record: RunRecord, base: RunRecord | None) -> ScalingRow:
    tps, base_tps = _throughput(record), _throughput(base) if base else None
    prefill = record.summary.prefill_tps
    base_prefill = base.summary.prefill_tps if base else None
    headline = next(iter(measured_rows(record.result)), None)
    eff = efficiency(tps, base_tps, size)
    flags = [f for f in (efficiency_flag(eff, size, f"the one-node baseline (run {base.id})" if base else ""),
                         stale_baseline_flag(base, record) if base is not None and size > 1 else None) if f]
    flags += row_spread_flags(headline) if headline is not None else []
    return ScalingRow(
        throughput_std=headline.decode_std if headline and record.kind == "inference" else None,
        prefill_std=headline.prefill_std if headline else None,
        bound_model=record.bounds.bound_label if record.bounds else None, flags=flags,
        cluster_size=size, run_id=record.id, status=record.status,
        topology=record.context.topology, collective_backend=record.context.collective_backend,
        throughput=tps, prefill_tps=prefill, ttft_ms=record.summary.ttft_ms,
        speedup=speedup(tps, base_tps), prefill_speedup=speedup(prefill, base_prefill),
        efficiency=eff,
        prefill_efficiency=efficiency(prefill, base_prefill, size),
        decode_bound_tps=record.summary.decode_bound_tps,
        decode_percent_of_bound=record.summary.decode_percent_of_bound,
        prefill_bound_tps=record.summary.prefill_bound_tps,
        prefill_percent_of_bound=record.summary.prefill_percent_of_bound,
    )


def _throughput(record: RunRecord) -> float | None:
    return record.summary.train_tps if record.kind == "training" else record.summary.decode_tps


def _reference(kind: Kind, profile) -> str | None:
    if kind == "training":
        return published.training_reference()
    if profile is not None and profile.has_published_values():
        return published.inference_reference()
    return None


# --- comparing two runs ---


class CompareLine(BaseModel):
    metric: str
    a: Any = None
    b: Any = None
    ratio: float | None = Field(None, description="b / a, for figures")


class Comparison(BaseModel):
    a_id: int | None
    b_id: int | None
    lines: list[CompareLine]
    notes: list[str] = Field(default_factory=list)


def compare_runs(a: RunRecord, b: RunRecord) -> Comparison:
    """Run ``a`` beside run ``b``: settings first, then headline and per-test figures (ratio b / a)."""
    lines = [CompareLine(metric=name, a=_setting(a, attr), b=_setting(b, attr)) for name, attr in _SETTINGS]
    headline = [(name, getattr(a.summary, attr), getattr(b.summary, attr)) for name, attr in _HEADLINE]
    headline.insert(2, ("decode % of bound", a.summary.decode_percent_of_bound,
                        b.summary.decode_percent_of_bound))
    headline.insert(3, ("prefill % of bound", a.summary.prefill_percent_of_bound,
                        b.summary.prefill_percent_of_bound))
    headline += [(name, _telemetry(a, attr), _telemetry(b, attr)) for name, attr in _TELEMETRY]
    lines += [_figure_line(name, va, vb) for name, va, vb in headline if va is not None or vb is not None]
    lines += _test_lines(suite_rows(a.result), suite_rows(b.result))
    notes = []
    if a.model != b.model:
        notes.append("the runs are of different models")
    if a.profile != b.profile:
        notes.append("the runs used different profiles; only the tests both ran are compared")
    return Comparison(a_id=a.id, b_id=b.id, lines=lines, notes=notes)


_SETTINGS = (("status", "status"), ("model", "model"), ("kind", "kind"), ("created", "created_at"),
             ("nodes", "context.cluster_size"), ("topology", "context.topology"),
             ("collective backend", "context.collective_backend"), ("engine", "context.engine"),
             ("engine version", "context.engine_version"), ("recipe", "context.recipe"),
             ("profile", "profile"), ("label", "context.label"))
_HEADLINE = (("decode tok/s", "decode_tps"), ("prefill tok/s", "prefill_tps"), ("TTFT ms", "ttft_ms"),
             ("training tok/s", "train_tps"))


_TELEMETRY = (("peak memory bytes", "peak_memory_bytes"), ("mean fabric bytes/s", "mean_link_bytes_per_s"),
              ("energy J", "energy_joules"))


def _telemetry(record: RunRecord, attr: str) -> float | None:
    telemetry = record.context.telemetry
    return None if telemetry is None else getattr(telemetry, attr)


def _setting(record: RunRecord, path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        value = getattr(value, part)
    if path == "created_at":
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    if path == "profile":
        return value.describe() if value is not None else None
    return value


def _figure_line(metric: str, a: float | None, b: float | None) -> CompareLine:
    return CompareLine(metric=metric, a=a, b=b, ratio=b / a if a and b is not None else None)


def _test_lines(rows_a: list[SuiteRow], rows_b: list[SuiteRow]) -> list[CompareLine]:
    by_key = {row.key: row for row in rows_b}
    lines = []
    for row in rows_a:
        other = by_key.get(row.key)
        if other is None:
            continue
        lines.append(_figure_line(f"decode tok/s [{row.label}]", row.decode_tps, other.decode_tps))
        lines.append(_figure_line(f"prefill tok/s [{row.label}]", row.prefill_tps, other.prefill_tps))
    return lines
