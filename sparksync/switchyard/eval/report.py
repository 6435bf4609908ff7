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

REPORT_FORMAT = "switchyard-eval/1"


class CaseOutcome(BaseModel):
    id: str
    score: float
    pool: str | None
    output_tokens: int
    latency_s: float
    notes: list[str] = Field(default_factory=list)


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


class Gain(BaseModel):
    throughput_x: float  # output tokens/s, gateway over large-only
    requests_x: float
    score_gateway: int
    score_large: int
    parity: bool
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
        )
        for r in run.runs
    ]
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
    )


def gain(gateway: TargetReport, large: TargetReport, tolerance: int = 0) -> Gain:
    """The issue's headline: e.g. "1.52x throughput at score parity (91 against 91)"."""
    # Rounded once, so the headline and the stored figure never disagree in the last digit.
    tput = round(gateway.output_tokens_per_s / large.output_tokens_per_s, 2) if large.output_tokens_per_s else 0.0
    reqs = round(gateway.requests_per_s / large.requests_per_s, 3) if large.requests_per_s else 0.0
    g, l = round(gateway.score), round(large.score)
    parity = g >= l - tolerance
    if parity:
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
        f"{report.cases} cases from {report.case_file}, concurrency {report.concurrency}, "
        f"policy {report.policy}"
    )
    lines = [title, "", f"  {'target':<12} {'score':>6} {'tok/s':>9} {'req/s':>7} {'errors':>6}  share"]
    for t in report.targets:
        share = ", ".join(f"{pool} {100 * s:.0f}%" for pool, s in t.share.items()) or "-"
        lines.append(
            f"  {t.label:<12} {t.score:>6.1f} {t.output_tokens_per_s:>9.1f} {t.requests_per_s:>7.2f} "
            f"{t.errors:>6}  {share}"
        )
    lines += ["", report.gain.summary]
    return "\n".join(lines)


def save_report(report: EvalReport, path: Path) -> Path:
    """Write one eval's report as a JSON file (the SQLite history is ``history.EvalHistory``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, report.model_dump_json(indent=2).encode())
    return path
