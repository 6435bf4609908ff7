"""Figures that should not be believed as they stand, and what to do about each.

A scaling figure is only as good as its one-node baseline and its spread:

- an efficiency above ``EFFICIENCY_CEILING`` (105 %) is almost never real
  super-linear scaling: the baseline was too slow (measured on a busy
  machine, another setup): re-measure it;
- a baseline older than the software or hardware it is compared with (another
  engine, recipe or llama-benchy version, or other nodes) measures something
  else: re-measure it with what the larger run used;
- a figure whose repetitions spread widely (a coefficient of variation, std /
  mean, above ``CV_LIMIT``, 10 %) is not one number: run more repetitions, on
  a quiet machine.

The flags travel with the figures: the scaling report's rows and notes, the
run tables and every export, the CLI and the app.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel

from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.results import SuiteRow, suite_rows

EFFICIENCY_CEILING = 1.05
CV_LIMIT = 0.10

FlagKind = Literal["efficiency_above_100", "stale_baseline", "large_spread"]


class FigureFlag(BaseModel):
    kind: FlagKind
    reason: str
    action: str

    def text(self) -> str:
        return f"flagged: {self.reason}; {self.action}"


def efficiency_flag(efficiency: float | None, nodes: int, baseline: str = "the one-node baseline") -> FigureFlag | None:
    """An efficiency above 105 %: the baseline, not the cluster, is the likely cause."""
    if efficiency is None or nodes < 2 or efficiency <= EFFICIENCY_CEILING:
        return None
    return FigureFlag(
        kind="efficiency_above_100",
        reason=f"scaling efficiency {efficiency:.1%} on {nodes} nodes is above {EFFICIENCY_CEILING:.0%}, "
               f"so {baseline} was probably measured too slow (a busy machine, another setup)",
        action="re-measure the one-node baseline on a quiet node with the same setup",
    )  # fmt: skip


def spread_flag(mean: float | None, std: float | None, what: str) -> FigureFlag | None:
    """Repetitions whose coefficient of variation is above 10 %."""
    if mean is None or std is None or mean <= 0:
        return None
    cv = std / mean
    if cv <= CV_LIMIT:
        return None
    return FigureFlag(
        kind="large_spread",
        reason=f"{what} spreads widely over its repetitions (std {std:,.2f} on a mean of {mean:,.2f}: "
               f"CV {cv:.0%}, above {CV_LIMIT:.0%})",
        action="run more repetitions on a quiet machine before trusting it",
    )  # fmt: skip


def version_differences(pairs: Iterable[tuple[str, str | None, str | None]]) -> list[str]:
    """'engine version 1 then, 2 now' for each (what, then, now) whose both sides are known and differ."""
    return [f"{what} {old} then, {new} now" for what, old, new in pairs if old and new and old != new]


def stale_flag(baseline: str, differences: Sequence[str]) -> FigureFlag | None:
    """The stale-baseline flag of ``baseline`` (its label, for people) given what differs now."""
    if not differences:
        return None
    return FigureFlag(
        kind="stale_baseline",
        reason=f"{baseline} is older than what it is compared with: " + "; ".join(differences),
        action="re-measure the one-node baseline with the software and nodes of this run",
    )


def stale_baseline_flag(baseline: RunRecord, run: RunRecord) -> FigureFlag | None:
    """A baseline whose software or hardware differs from the run compared with it."""
    if baseline is run or baseline.id is not None and baseline.id == run.id:
        return None
    differences = version_differences((
        ("engine version", baseline.context.engine_version, run.context.engine_version),
        ("recipe version", baseline.context.recipe_version, run.context.recipe_version),
        ("engine", baseline.context.engine, run.context.engine),
        ("llama-benchy", baseline.benchy_version, run.benchy_version),
    ))  # fmt: skip
    if baseline.context.nodes and run.context.nodes and not set(baseline.context.nodes) & set(run.context.nodes):
        differences.append(f"it ran on {', '.join(baseline.context.nodes)}, none of this run's nodes")
    when = baseline.created_at.strftime("%Y-%m-%d")
    return stale_flag(f"the baseline (run {baseline.id}, {when})", differences)


def row_spread_flags(row: SuiteRow) -> list[FigureFlag]:
    flag = spread_flag(row.decode_tps, row.decode_std, f"decode tok/s [{row.label}]")
    return [flag] if flag else []


def run_flags(record: RunRecord) -> list[FigureFlag]:
    """The flags of one stored run: each test whose decode figure spreads widely."""
    return [flag for row in suite_rows(record.result) for flag in row_spread_flags(row)]
