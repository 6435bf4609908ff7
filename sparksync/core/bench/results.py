"""Reading llama-benchy's JSON: per-test rows and a run's headline figures.

llama-benchy 0.4.0 writes ``benchmarks[]``, one entry per test (pp x tg x
depth x concurrency), each metric as ``{mean, std, values}``. The headline
of a run is its first test, which for the published profile is the only one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


class RunSummary(BaseModel):
    """The figures the history lists and the reports compare (tokens/s, milliseconds).

    The bounds are the planner's limits for the headline test on the run's
    nodes (see bounds.py); None when the model's numbers were not known.
    """

    decode_tps: float | None = None
    prefill_tps: float | None = None
    ttft_ms: float | None = None
    train_tps: float | None = None
    decode_bound_tps: float | None = None
    prefill_bound_tps: float | None = None

    @property
    def decode_percent_of_bound(self) -> float | None:
        return percent_of_bound(self.decode_tps, self.decode_bound_tps)

    @property
    def prefill_percent_of_bound(self) -> float | None:
        return percent_of_bound(self.prefill_tps, self.prefill_bound_tps)


def percent_of_bound(measured: float | None, bound: float | None) -> float | None:
    """``measured`` as a percentage of ``bound`` (100 = at the physical limit); None when either is missing."""
    if measured is None or bound is None or bound <= 0 or measured < 0:
        return None
    return 100.0 * measured / bound


@dataclass(frozen=True)
class SuiteRow:
    prompt_size: int
    response_size: int
    context_size: int
    concurrency: int
    decode_tps: float | None
    decode_std: float | None
    prefill_tps: float | None
    ttft_ms: float | None
    peak_tps: float | None
    prefill_std: float | None = None

    @property
    def key(self) -> tuple[int, int, int, int]:
        return (self.prompt_size, self.response_size, self.context_size, self.concurrency)

    @property
    def label(self) -> str:
        depth = f" @ d{self.context_size}" if self.context_size else ""
        return f"pp{self.prompt_size} tg{self.response_size}{depth} c{self.concurrency}"


def suite_rows(result: dict[str, Any] | None) -> list[SuiteRow]:
    """One row per measured test; a context-prefill phase entry is not a test of its own."""
    entries = (result or {}).get("benchmarks") or []
    return [_row(e) for e in entries if isinstance(e, dict) and not e.get("is_context_prefill_phase")]


def measured_rows(result: dict[str, Any] | None) -> list[SuiteRow]:
    """Rows that hold figures (a test whose every request failed has none)."""
    return [r for r in suite_rows(result) if r.decode_tps is not None or r.prefill_tps is not None]


def summarize(result: dict[str, Any] | None) -> RunSummary:
    rows = measured_rows(result)
    if not rows:
        return RunSummary()
    first = rows[0]
    return RunSummary(decode_tps=first.decode_tps, prefill_tps=first.prefill_tps, ttft_ms=first.ttft_ms)


def _row(entry: dict[str, Any]) -> SuiteRow:
    return SuiteRow(
        prompt_size=int(entry.get("prompt_size", 0)),
        response_size=int(entry.get("response_size", 0)),
        context_size=int(entry.get("context_size", 0)),
        concurrency=int(entry.get("concurrency", 1)),
        decode_tps=_mean(entry, "tg_throughput"),
        decode_std=_stat(entry, "tg_throughput", "std"),
        prefill_tps=_mean(entry, "pp_throughput"),
        ttft_ms=_mean(entry, "e2e_ttft"),
        peak_tps=_mean(entry, "peak_throughput"),
        prefill_std=_stat(entry, "pp_throughput", "std"),
    )


def _mean(entry: dict[str, Any], name: str) -> float | None:
    return _stat(entry, name, "mean")


def _stat(entry: dict[str, Any], name: str, stat: str) -> float | None:
    metric = entry.get(name)
    value = metric.get(stat) if isinstance(metric, dict) else None
    return float(value) if isinstance(value, (int, float)) else None
