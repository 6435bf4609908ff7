"""The traffic-split sweep: score against aggregate throughput at each setting of the policy.

``switchyard eval --sweep large_share=1,1/2,1/4,0`` (``fixed_share``), or
``--sweep threshold=0.5,1,2`` (``rules``, and ``cascade`` with a threshold),
plays at each point, through a gateway of its own (fresh counters):

1. the suite, once, streamed, ``concurrency`` requests in flight: the score
   (and per category);
2. a throughput load (``load.play_load``): closed-loop streams of the suite's
   requests for ``load_s`` seconds at the same concurrency: aggregate output
   tokens/s, TTFT p50/p99, and the share that actually went to the large pool.

The anchor is the large pool alone (``large_share=1`` when the sweep has it,
else a run with the large pool's name as the model, through the same
gateway): each point's throughput is reported as a multiple of the anchor's,
as the published figures are (1.5x at 1/2, 3.0x at 1/4, at score parity).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from pydantic import BaseModel, Field

from sparksync.switchyard.config import VIRTUAL_MODEL, SwitchyardConfig
from sparksync.switchyard.errors import EvalError
from sparksync.switchyard.eval.cases import CaseFile
from sparksync.switchyard.eval.load import LoadResult, play_load
from sparksync.switchyard.eval.report import NO_SCORE, percentile
from sparksync.switchyard.eval.runner import DEFAULT_MAX_TOKENS, Target, TargetRun, request_body, run_target
from sparksync.switchyard.sources import PoolSource

log = logging.getLogger(__name__)

SWEEP_FORMAT = "switchyard-sweep/1"
PARAMETERS = {"large_share": ("fixed_share",), "threshold": ("rules", "cascade")}
DEFAULT_LOAD_S = 60.0
PER_REPLICA = 4  # default concurrency: requests in flight per replica, enough to keep each busy
ANCHOR = "large only"


@dataclass(frozen=True)
class SweepSpec:
    parameter: str  # large_share or threshold
    values: tuple[str, ...]  # as written: "1/2", "0.25", "1.5"

    @classmethod
    def parse(cls, text: str) -> SweepSpec:
        """``large_share=1,1/2,1/4,0`` or ``threshold=0.5,1,2``."""
        name, _, listed = text.partition("=")
        name = name.strip()
        if name not in PARAMETERS or not listed.strip():
            raise EvalError(f"--sweep takes large_share=V,V,... or threshold=V,V,...; got {text!r}")
        values = tuple(v.strip() for v in listed.split(",") if v.strip())
        for value in values:
            _number(name, value)
        return cls(name, values)

    def check(self, config: SwitchyardConfig) -> None:
        kinds = PARAMETERS[self.parameter]
        if config.policy.kind not in kinds:
            raise EvalError(
                f"--sweep {self.parameter} needs a {' or '.join(kinds)} policy; the config's is "
                f"{config.policy.kind} (sweep {'threshold' if self.parameter == 'large_share' else 'large_share'} "
                "instead, or change policy.kind)"
            )

    def config_at(self, config: SwitchyardConfig, value: str) -> SwitchyardConfig:
        policy = config.policy.model_copy(update={self.parameter: _number(self.parameter, value)})
        return config.model_copy(update={"policy": policy})

    def anchor_value(self) -> str | None:
        """The value that sends everything to the large pool, when the sweep has it."""
        if self.parameter != "large_share":
            return None
        return next((v for v in self.values if _number(self.parameter, v) == 1), None)


def _number(parameter: str, value: str) -> Fraction | float:
    try:
        number: Fraction | float = Fraction(value) if parameter == "large_share" else float(value)
    except (ValueError, ZeroDivisionError):
        raise EvalError(f"--sweep {parameter}: {value!r} is not a number") from None
    if parameter == "large_share" and not 0 <= number <= 1:
        raise EvalError(f"--sweep large_share: {value} is not between 0 and 1")
    return number


class SweepPoint(BaseModel):
    label: str  # "large only", "large_share=1/2"
    setting: str | None  # the value, as written; None for a large-only run by model name
    anchor: bool = False
    score: float  # 0-100
    categories: dict[str, float] = Field(default_factory=dict)
    cases: int
    score_errors: int
    output_tokens_per_s: float
    throughput_x: float | None = None  # over the anchor
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    requests: int = 0
    load_errors: int = 0
    large_share: float | None = None  # measured: the load's requests the large pool answered


class SweepReport(BaseModel):
    format: str = SWEEP_FORMAT
    when: str = Field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    case_file: str
    suite: str | None = None
    cases: int
    policy: str
    parameter: str
    concurrency: int
    max_tokens: int
    load_s: float
    points: list[SweepPoint]

    @property
    def anchor(self) -> SweepPoint:
        return next(p for p in self.points if p.anchor)

    def swept(self) -> list[SweepPoint]:
        """The sweep's own points (the anchor too when it is one of them)."""
        return [p for p in self.points if p.setting is not None]

    def no_score(self) -> bool:
        return self.anchor.score == 0

    def best(self) -> SweepPoint | None:
        """The highest throughput of the swept points at score parity (none without a score)."""
        if self.no_score():
            return None
        anchor = round(self.anchor.score)
        kept = [p for p in self.swept() if not p.anchor and round(p.score) >= anchor and p.throughput_x]
        return max(kept, key=lambda p: p.throughput_x or 0.0) if kept else None

    def summary(self) -> str:
        """One line: the best point at score parity, or why there is none."""
        if self.no_score():
            return f"{NO_SCORE}: throughput alone says nothing about routing"
        best = self.best()
        if best is None:
            return f"no setting kept large-only's score ({round(self.anchor.score)})"
        return (f"best at score parity: {best.label}, {best.throughput_x:.2f}x throughput "
                f"({round(best.score)} against {round(self.anchor.score)})")  # fmt: skip


@dataclass(frozen=True)
class SweepSettings:
    concurrency: int | None = None  # None: PER_REPLICA x the replicas of both pools
    max_tokens: int = DEFAULT_MAX_TOKENS
    load_s: float = DEFAULT_LOAD_S
    settle_s: float | None = None  # None: a fifth of load_s, at most 10 s


Progress = Callable[[str], None]


def run_sweep(
    config: SwitchyardConfig,
    cases: CaseFile,
    spec: SweepSpec,
    settings: SweepSettings = SweepSettings(),
    source: PoolSource | None = None,
    case_file: str = "",
    suite: str | None = None,
    on_progress: Progress = lambda line: None,
) -> SweepReport:
    spec.check(config)
    anchor_value = spec.anchor_value()
    from sparksync.switchyard.eval.play import local_gateway  # the gateway's server stack: only to run one

    plan: list[tuple[str, str | None, SwitchyardConfig, str]] = []
    if anchor_value is None:
        plan.append((ANCHOR, None, config, config.policy.large))
    plan += [(f"{spec.parameter}={v}", v, spec.config_at(config, v), VIRTUAL_MODEL) for v in spec.values]
    concurrency = settings.concurrency
    points = []
    for label, value, point_config, model in plan:
        with local_gateway(point_config, source) as gateway:
            if concurrency is None:
                concurrency = PER_REPLICA * max(1, sum(len(p.replicas) for p in gateway.gateway.pools.pools.values()))
            on_progress(f"{label}: {len(cases.cases)} cases, then {settings.load_s:g} s of load, "
                        f"{concurrency} streams")  # fmt: skip
            scored, loaded = asyncio.run(_point(gateway.url, cases, model, concurrency, settings))
        point = _point_report(label, value, scored, loaded, point_config.policy.large)
        point.anchor = value == anchor_value if anchor_value is not None else value is None
        points.append(point)
        on_progress(f"{label}: score {point.score:.1f}, {point.output_tokens_per_s:.1f} tok/s")
    assert concurrency is not None
    _relative(points)
    return SweepReport(
        case_file=case_file, suite=suite, cases=len(cases.cases), policy=config.policy.kind,
        parameter=spec.parameter, concurrency=concurrency, max_tokens=settings.max_tokens,
        load_s=settings.load_s, points=points,
    )  # fmt: skip


async def _point(
    url: str, cases: CaseFile, model: str, concurrency: int, settings: SweepSettings
) -> tuple[TargetRun, LoadResult]:
    import httpx  # only to run a sweep: reading stored ones does without it

    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        scored = await run_target(client, url, cases, Target(model, model), concurrency, settings.max_tokens,
                                  stream=True)  # fmt: skip
    if scored.errors == len(scored.runs):
        raise EvalError(f"every request to model {model!r} failed, e.g. {scored.runs[0].error}; "
                        "check that its pool's replicas are up")  # fmt: skip
    bodies = [request_body(cases, case, model, settings.max_tokens) for case in cases.cases]
    settle = settings.settle_s if settings.settle_s is not None else min(10.0, settings.load_s / 5)
    loaded = await play_load(url, bodies, concurrency, settings.load_s, settle)
    return scored, loaded


def _point_report(label: str, value: str | None, scored: TargetRun, loaded: LoadResult, large: str) -> SweepPoint:
    ttft = loaded.ttft_s
    return SweepPoint(
        label=label, setting=value, score=round(scored.score, 2),
        categories={k: round(v, 2) for k, v in scored.categories().items()},
        cases=len(scored.runs), score_errors=scored.errors,
        output_tokens_per_s=round(loaded.tokens_per_s, 2),
        ttft_p50_ms=round(1000 * percentile(ttft, 50), 2) if ttft else None,
        ttft_p99_ms=round(1000 * percentile(ttft, 99), 2) if ttft else None,
        requests=loaded.requests, load_errors=loaded.errors,
        large_share=None if loaded.share(large) is None else round(loaded.share(large) or 0.0, 4),
    )  # fmt: skip


def _relative(points: Sequence[SweepPoint]) -> None:
    anchor = next(p for p in points if p.anchor)
    for point in points:
        point.throughput_x = (
            round(point.output_tokens_per_s / anchor.output_tokens_per_s, 3) if anchor.output_tokens_per_s else None
        )


def render(report: SweepReport) -> str:
    title = (f"{report.cases} cases from {report.suite or report.case_file}, policy {report.policy}, "
             f"{report.concurrency} streams, {report.load_s:g} s of load per point")  # fmt: skip
    lines = [title, "", f"  {'point':<22} {'score':>6} {'tok/s':>9} {'x large':>8} {'TTFT p50':>9} {'p99':>8} "
                        f"{'large':>6} {'errors':>6}"]  # fmt: skip
    for p in report.points:
        lines.append(
            f"  {p.label + (' *' if p.anchor else ''):<22} {p.score:>6.1f} {p.output_tokens_per_s:>9.1f} "
            f"{_x(p.throughput_x):>8} {_ms(p.ttft_p50_ms):>9} {_ms(p.ttft_p99_ms):>8} "
            f"{_pct(p.large_share):>6} {p.score_errors + p.load_errors:>6}"
        )
    lines += ["", "  * the anchor (large pool alone): the throughput multiples are over it", "", report.summary()]
    return "\n".join(lines)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def save_sweep(report: SweepReport, path: Path) -> Path:
    from sparksync_agent.atomic import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, report.model_dump_json(indent=2).encode())
    return path
