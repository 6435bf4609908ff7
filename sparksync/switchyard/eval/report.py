"""The eval report: score, throughput and traffic share per target, and the gain over large-only.

``save_report`` writes one report as JSON; ``history.EvalHistory`` keeps
every report in the client's SQLite history, beside the benchmark runs.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, Field
from sparksync_agent.atomic import write_atomic

from sparksync.switchyard.eval.runner import TargetRun

# 2: per-category scores, streamed runs (TTFT), the suite's name, and "no score" (parity null).
# A format-1 report reads as format 2 without them.
REPORT_FORMAT = "switchyard-eval/2"
NO_SCORE = "no score: the models answered no case correctly"


class CaseOutcome(BaseModel):
    id: str
    score: float
    pool: str | None
    output_tokens: int
    latency_s: float
    notes: list[str] = Field(default_factory=list)
    category: str | None = None
    ttft_s: float | None = None


class TargetReport(BaseModel):
    label: str
    model: str
    score: float  # 0-100
    cases: int
    errors: int
    wall_s: float
    requests_per_s: float
    output_tokens: int
    output_tokens_per_s: float
    share: dict[str, float]
    outcomes: list[CaseOutcome]
    categories: dict[str, float] = Field(default_factory=dict)  # 0-100 each
    ttft_p50_ms: float | None = None  # streamed runs
    ttft_p99_ms: float | None = None


class Gain(BaseModel):
    throughput_x: float  # output tokens/s, gateway over large-only
    requests_x: float
    score_gateway: int
    score_large: int
    parity: bool | None  # None: no score to keep (large-only answered nothing right)
    summary: str


class EvalReport(BaseModel):
    format: str = REPORT_FORMAT
    when: str = Field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    case_file: str
    cases: int
    concurrency: int
    max_tokens: int
    policy: str
    targets: list[TargetReport]
    gain: Gain
    suite: str | None = None  # e.g. "BFCL (bfcl-eval 2026.3.23)", when the cases came from one
    stream: bool = False


def target_report(run: TargetRun) -> TargetReport:
    wall = max(run.wall_s, 1e-9)
    outcomes = [
        CaseOutcome(
            id=r.score.case_id,
            score=r.score.score,
            pool=r.pool,
            output_tokens=r.output_tokens,
            latency_s=round(r.latency_s, 4),
            notes=r.score.notes,
            category=r.category,
            ttft_s=None if r.ttft_s is None else round(r.ttft_s, 4),
        )
        for r in run.runs
    ]
    ttfts = [r.ttft_s for r in run.runs if r.ttft_s is not None]
    return TargetReport(
        label=run.target.label,
        model=run.target.model,
        score=round(run.score, 2),
        cases=len(run.runs),
        errors=run.errors,
        wall_s=round(run.wall_s, 3),
        requests_per_s=round(len(run.runs) / wall, 3),
        output_tokens=run.output_tokens,
        output_tokens_per_s=round(run.output_tokens / wall, 2),
        share=run.share(),
        outcomes=outcomes,
        categories={name: round(score, 2) for name, score in run.categories().items()},
        ttft_p50_ms=_ms(percentile(ttfts, 50)) if ttfts else None,
        ttft_p99_ms=_ms(percentile(ttfts, 99)) if ttfts else None,
    )


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between the two nearest ranks (numpy's default)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 2)


def gain(gateway: TargetReport, large: TargetReport, tolerance: int = 0) -> Gain:
    """The issue's headline: e.g. "1.52x throughput at score parity (91 against 91)"."""
    # Rounded once, so the headline and the stored figure never disagree in the last digit.
    tput = round(gateway.output_tokens_per_s / large.output_tokens_per_s, 2) if large.output_tokens_per_s else 0.0
    reqs = round(gateway.requests_per_s / large.requests_per_s, 3) if large.requests_per_s else 0.0
    g, l = round(gateway.score), round(large.score)
    parity: bool | None = g >= l - tolerance
    if large.score == 0:
        # Parity with nothing means nothing: say so rather than claim it.
        parity = None
        summary = (
            f"{NO_SCORE} ({tput:.2f}x throughput)"
            if gateway.score == 0
            else f"no score: large-only answered no case correctly, so there is no score to keep "
            f"(gateway {g}; {tput:.2f}x throughput)"
        )
    elif parity:
        summary = f"{tput:.2f}x throughput at score parity ({g} against {l})"
    else:
        summary = (
            f"{tput:.2f}x throughput, but a lower score ({g} against {l}, {l - g} points below large-only)"
        )
    return Gain(
        throughput_x=tput,
        requests_x=reqs,
        score_gateway=g,
        score_large=l,
        parity=parity,
        summary=summary,
    )


def render(report: EvalReport) -> str:
    title = (
        f"{report.cases} cases from {report.suite or report.case_file}, concurrency {report.concurrency}, "
        f"{'streamed' if report.stream else 'not streamed'}, policy {report.policy}"
    )
    lines = [title, "", f"  {'target':<12} {'score':>6} {'tok/s':>9} {'req/s':>7} {'errors':>6}  share"]
    for t in report.targets:
        share = ", ".join(f"{pool} {100 * s:.0f}%" for pool, s in t.share.items()) or "-"
        lines.append(
            f"  {t.label:<12} {t.score:>6.1f} {t.output_tokens_per_s:>9.1f} {t.requests_per_s:>7.2f} "
            f"{t.errors:>6}  {share}"
        )
    lines += _category_lines(report.targets)
    lines += ["", report.gain.summary]
    return "\n".join(lines)


def _category_lines(targets: list[TargetReport]) -> list[str]:
    """Per category, each target's score (when the cases have categories)."""
    names = list(dict.fromkeys(name for t in targets for name in t.categories))
    if not names:
        return []
    width = max(12, *(len(n) for n in names))
    lines = ["", f"  {'category':<{width}} " + " ".join(f"{t.label:>11}" for t in targets)]
    for name in names:
        scores = " ".join(f"{t.categories[name]:>11.1f}" if name in t.categories else f"{'-':>11}"
                          for t in targets)  # fmt: skip
        lines.append(f"  {name:<{width}} {scores}")
    return lines


def save_report(report: EvalReport, path: Path) -> Path:
    """Write one eval's report as a JSON file (the SQLite history is ``history.EvalHistory``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, report.model_dump_json(indent=2).encode())
    return path
