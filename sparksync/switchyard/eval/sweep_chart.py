"""A sweep as a chart (score against throughput, with the published points) and as CSV.

``chart_data`` is what both the PNG (matplotlib, here) and the app's chart
(pyqtgraph, ``gui.benchmarks.sweep_chart``) draw: each point at (throughput
over large-only, score), labelled with its setting and the share that went
large; a dashed line at large-only's score (score parity); and the published
prototype's points (1.5x at 1/2 large, 3.0x at 1/4) on that line, as
reference marks. Throughput on a shared scale: the published figures are
multiples of the large model's own throughput, and so are ours.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from sparksync_agent.atomic import write_atomic

from sparksync.switchyard.errors import EvalError
from sparksync.switchyard.eval import published
from sparksync.switchyard.eval.sweep import SweepReport

SIZE_IN = (11.0, 4.6)
DPI = 110
MEASURED_COLOR, ANCHOR_COLOR, PUBLISHED_COLOR, PARITY_COLOR = "#2b6cb0", "#2f855a", "#dd6b20", "#718096"


@dataclass(frozen=True)
class Mark:
    x: float  # throughput, x large-only
    y: float  # score, 0-100
    label: str


@dataclass(frozen=True)
class ChartData:
    measured: list[Mark]
    anchor: Mark
    parity_score: float  # large-only's: the line a routed point must reach
    published: list[Mark]  # on the parity line
    title: str


def chart_data(report: SweepReport) -> ChartData:
    anchor = report.anchor
    measured = [
        Mark(p.throughput_x or 0.0, p.score,
             f"{p.label}" + ("" if p.large_share is None else f" ({100 * p.large_share:.0f}% large)"))
        for p in report.points if not p.anchor and p.throughput_x is not None
    ]  # fmt: skip
    marks = [Mark(p.throughput_x, anchor.score, p.label) for p in published.POINTS]
    title = f"{report.suite or report.case_file}: {report.summary()}"
    return ChartData(measured, Mark(1.0, anchor.score, f"{anchor.label} (anchor)"), anchor.score, marks, title)


def write_png(report: SweepReport, path: Path) -> Path:
    figure = _figure()
    data = chart_data(report)
    grid = figure.add_gridspec(1, 2, width_ratios=(3, 2))
    axes = figure.add_subplot(grid[0, 0])
    axes.axhline(data.parity_score, linestyle="--", color=PARITY_COLOR, label="score parity (large only)")
    axes.scatter([m.x for m in data.published], [m.y for m in data.published], marker="*", s=160,
                 color=PUBLISHED_COLOR, label=f"published ({published.SCORE}/100 at parity)", zorder=3)  # fmt: skip
    for mark in data.published:
        axes.annotate(mark.label, (mark.x, mark.y), textcoords="offset points", xytext=(4, 8), fontsize=7,
                      color=PUBLISHED_COLOR)  # fmt: skip
    axes.scatter([data.anchor.x], [data.anchor.y], marker="s", s=60, color=ANCHOR_COLOR, label=data.anchor.label,
                 zorder=4)  # fmt: skip
    axes.scatter([m.x for m in data.measured], [m.y for m in data.measured], marker="o", s=50,
                 color=MEASURED_COLOR, label="measured", zorder=4)  # fmt: skip
    for mark in data.measured:
        axes.annotate(mark.label, (mark.x, mark.y), textcoords="offset points", xytext=(4, -12), fontsize=7)
    axes.set(xlabel="aggregate output tokens/s, x large only", ylabel="score (0-100)", ylim=(-5, 105),
             title="score against throughput")  # fmt: skip
    axes.legend(fontsize=7, loc="lower left")
    latency = figure.add_subplot(grid[0, 1])
    labels = [p.label for p in report.points]
    p50 = [p.ttft_p50_ms or 0.0 for p in report.points]
    p99 = [p.ttft_p99_ms or 0.0 for p in report.points]
    xs = range(len(labels))
    latency.bar([x - 0.2 for x in xs], p50, 0.4, label="TTFT p50", color=MEASURED_COLOR)
    latency.bar([x + 0.2 for x in xs], p99, 0.4, label="TTFT p99", color=PUBLISHED_COLOR)
    latency.set_xticks(list(xs), labels, fontsize=7, rotation=20)
    latency.set(ylabel="ms", title=f"time to first token under load ({report.concurrency} streams)")
    latency.legend(fontsize=7)
    figure.suptitle(data.title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=DPI)
    return path


def _figure():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise EvalError("PNG charts need matplotlib, which is not installed; install the benchmark extra "
                        "(pip install 'sparksync[bench]') or export CSV") from None  # fmt: skip
    figure = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


CSV_COLUMNS = ("source", "point", "setting", "anchor", "score", "throughput_x", "output_tokens_per_s",
               "ttft_p50_ms", "ttft_p99_ms", "large_share", "requests", "errors")  # fmt: skip


def csv_text(report: SweepReport) -> str:
    """One row per point, then the published points (their score is large-only's: parity)."""
    categories = list(dict.fromkeys(c for p in report.points for c in p.categories))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, *(f"score_{c}" for c in categories)])
    for p in report.points:
        writer.writerow(["measured", p.label, p.setting or "", int(p.anchor), p.score, _blank(p.throughput_x),
                         p.output_tokens_per_s, _blank(p.ttft_p50_ms), _blank(p.ttft_p99_ms), _blank(p.large_share),
                         p.requests, p.score_errors + p.load_errors,
                         *(_blank(p.categories.get(c)) for c in categories)])  # fmt: skip
    for mark in published.POINTS:
        writer.writerow(["published", mark.label, str(mark.large_share), 0, published.SCORE, mark.throughput_x,
                         "", "", "", float(mark.large_share), "", "", *("" for _ in categories)])  # fmt: skip
    return out.getvalue()


def write_csv(report: SweepReport, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, csv_text(report), mode=0o644)
    return path


def _blank(value: float | None) -> str | float:
    return "" if value is None else value
