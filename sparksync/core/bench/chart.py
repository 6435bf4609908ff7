"""PNG charts of a scaling report, a comparison or one run, drawn with matplotlib.

matplotlib's Agg canvas renders straight to a PNG without any display or
GUI toolkit, so the same chart comes out of the headless CLI, a CI job and
the desktop app; it is imported only when a chart is asked for. The Figure
is made directly (not through pyplot) so no global state or backend switch
leaks into the process.
"""

from __future__ import annotations

from pathlib import Path

from sparksync.core.bench.errors import BenchToolError
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.report import Comparison, ScalingReport
from sparksync.core.bench.results import suite_rows

SIZE_IN = (10.0, 4.2)
DPI = 110
DECODE_COLOR, PREFILL_COLOR, IDEAL_COLOR = "#2b6cb0", "#dd6b20", "#718096"


def write_png(subject: RunRecord | ScalingReport | Comparison, path: Path) -> Path:
    figure = draw(subject)
    figure.savefig(path, format="png", dpi=DPI)
    return path


def draw(subject: RunRecord | ScalingReport | Comparison):
    """The chart as a matplotlib Figure: bars with their std as error bars, the planner's bound as a line."""
    figure = _figure()
    if isinstance(subject, ScalingReport):
        _draw_scaling(figure, subject)
    elif isinstance(subject, Comparison):
        _draw_comparison(figure, subject)
    else:
        _draw_run(figure, subject)
    figure.tight_layout()
    return figure


def _figure():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise BenchToolError("PNG charts need matplotlib, which is not installed; install the benchmark "
                             "extra (pip install 'sparksync[bench]') or export csv, json or md") from None
    figure = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _draw_scaling(figure, report: ScalingReport) -> None:
    sizes = [r.cluster_size for r in report.rows]
    labels = [str(s) for s in sizes]
    inference = report.kind == "inference"
    panels = 3 if inference else 2
    rates = figure.add_subplot(1, panels, 1)
    _bars(rates, labels, {"decode" if inference else "training": [r.throughput for r in report.rows]},
          errors=[[r.throughput_std for r in report.rows]])
    rates.set(title=f"{report.model}: {'decode ' if inference else ''}tokens/s", xlabel="nodes",
              ylabel="tokens/s")
    models = sorted({r.bound_model for r in report.rows if r.bound_model})
    _bound_line(rates, [r.decode_bound_tps for r in report.rows], models)
    if inference:
        prefill = figure.add_subplot(1, panels, 2)
        _bars(prefill, labels, {"prefill": [r.prefill_tps for r in report.rows]}, color_offset=1,
              errors=[[r.prefill_std for r in report.rows]])
        prefill.set(title="prefill tokens/s", xlabel="nodes")
        _bound_line(prefill, [r.prefill_bound_tps for r in report.rows], models)
    speedups = figure.add_subplot(1, panels, panels)
    speedups.plot(sizes, sizes, linestyle="--", color=IDEAL_COLOR, label="ideal (N x)")
    speedups.plot(sizes, [_zero(r.speedup) for r in report.rows], marker="o", color=DECODE_COLOR,
                  label="decode" if inference else "training")
    if inference:
        speedups.plot(sizes, [_zero(r.prefill_speedup) for r in report.rows], marker="s", color=PREFILL_COLOR,
                      label="prefill")
    speedups.set(title="speed-up against 1 node", xlabel="nodes", ylabel="x one node", xticks=sizes)
    speedups.legend(fontsize=8)


def _draw_comparison(figure, comparison: Comparison) -> None:
    names = (f"run {comparison.a_id}", f"run {comparison.b_id}")
    for i, kind in enumerate(("decode", "prefill")):
        figures = [ln for ln in comparison.lines if ln.a is not None]
        lines = [ln for ln in figures if ln.metric.startswith(f"{kind} tok/s [")]
        lines = lines or [ln for ln in figures if ln.metric == f"{kind} tok/s"]
        axes = figure.add_subplot(1, 2, i + 1)
        series = {names[0]: [ln.a for ln in lines], names[1]: [ln.b for ln in lines]}
        _bars(axes, [_test_of(ln.metric) for ln in lines], series)
        axes.set(title=f"{kind} tokens/s: {names[0]} against {names[1]}", ylabel="tokens/s")


def _draw_run(figure, record: RunRecord) -> None:
    rows = suite_rows(record.result)
    title = f"run {record.id}: {record.model} on {record.context.cluster_size} node(s) [{record.status}]"
    if record.kind == "training" or not rows:
        axes = figure.add_subplot(1, 1, 1)
        _bars(axes, [record.model], {"tokens/s": [record.summary.train_tps or record.summary.decode_tps]})
        axes.set(title=title, ylabel="tokens/s")
        return
    bounds = [record.bounds.for_test(r.key) if record.bounds else None for r in rows]
    models = [record.bounds.bound_label] if record.bounds else []
    for i, (kind, values, stds, limits) in enumerate((
        ("decode", [r.decode_tps for r in rows], [r.decode_std for r in rows],
         [b.decode_tps if b else None for b in bounds]),
        ("prefill", [r.prefill_tps for r in rows], [r.prefill_std for r in rows],
         [b.prefill_tps if b else None for b in bounds]),
    )):  # fmt: skip
        axes = figure.add_subplot(1, 2, i + 1)
        _bars(axes, [r.label for r in rows], {kind: values}, color_offset=i, errors=[stds])
        axes.set(title=f"{title}: {kind}" if i == 0 else kind, ylabel="tokens/s")
        _bound_line(axes, limits, models)


BOUND_LABEL = "bound (planner)"


def _bound_line(axes, bounds: list[float | None], models: list[str]) -> None:
    """The planner's bound over the bars as one line, named with the model it assumes."""
    points = [(x, b) for x, b in enumerate(bounds) if b is not None]
    if not points:
        return
    label = BOUND_LABEL + (f", {' / '.join(models)}" if models else "")
    axes.plot([x for x, _ in points], [b for _, b in points], marker="_", markersize=18, linestyle="--",
              color=IDEAL_COLOR, label=label, zorder=3)
    axes.legend(fontsize=8)


def _test_of(metric: str) -> str:
    return metric[metric.index("[") + 1: -1] if "[" in metric else metric


def _bars(axes, labels: list[str], series: dict[str, list[float | None]], color_offset: int = 0,
          errors: list[list[float | None]] | None = None) -> None:
    """Grouped bars, each with its value written above it and its std (over runs) as an error bar."""
    width = 0.8 / max(1, len(series))
    colors = [DECODE_COLOR, PREFILL_COLOR, IDEAL_COLOR]
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        color = colors[(i + color_offset) % len(colors)]
        stds = errors[i] if errors and i < len(errors) else None
        yerr = [_zero(e) for e in stds] if stds and any(e is not None for e in stds) else None
        bars = axes.bar(xs, [_zero(v) for v in values], width, label=name, color=color, yerr=yerr,
                        capsize=4 if yerr else 0, ecolor="#1a202c")
        axes.bar_label(bars, labels=[f"{v:,.1f}" if v is not None else "—" for v in values], fontsize=8)
    axes.set_xticks(range(len(labels)), labels, fontsize=8)
    if len(series) > 1:
        axes.legend()


def _zero(value: float | None) -> float:
    return value if value is not None else 0.0
