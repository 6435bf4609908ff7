"""Exports of a run, a scaling report or a comparison: CSV, JSON, Markdown and a PNG chart.

CSV holds the one main table, with plain numbers for tools; Markdown holds
every table, rounded for people, with the notes and the published reference;
JSON is the whole object (a run's includes llama-benchy's full JSON).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sparksync.core.bench.bounds import RunBounds, percent
from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.flags import run_flags
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.report import Comparison, ScalingReport
from sparksync.core.bench.results import suite_rows
from sparksync.core.bench.telemetry import TelemetrySummary

Format = Literal["csv", "json", "md", "png"]
FORMATS: tuple[Format, ...] = ("csv", "json", "md", "png")
Exportable = RunRecord | ScalingReport | Comparison


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)


def export_text(subject: Exportable, fmt: Format) -> str:
    if fmt == "json":
        return subject.model_dump_json(indent=2) + "\n"
    tables = tables_of(subject)
    if fmt == "csv":
        return to_csv(tables[0])
    if fmt == "md":
        return to_markdown(tables)
    raise BenchInputError(f"{fmt!r} is not a text format; choose csv, json or md (png writes a file)")


def export_file(subject: Exportable, fmt: Format, path: Path) -> Path:
    if fmt == "png":
        from sparksync.core.bench.chart import write_png  # matplotlib: loaded only for charts

        write_png(subject, path)
    else:
        path.write_text(export_text(subject, fmt), encoding="utf-8")
    return path


def tables_of(subject: Exportable) -> list[Table]:
    if isinstance(subject, ScalingReport):
        return [_scaling_table(subject)]
    if isinstance(subject, Comparison):
        return [_comparison_table(subject)]
    return [_run_tests_table(subject), _run_summary_table(subject)]


def to_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows([[_csv_cell(v) for v in row] for row in table.rows])
    return out.getvalue()


def to_markdown(tables: list[Table]) -> str:
    parts = []
    for table in tables:
        parts.append(f"## {table.title}\n")
        parts.append("| " + " | ".join(table.columns) + " |")
        parts.append("|" + "|".join("---" for _ in table.columns) + "|")
        parts += ["| " + " | ".join(_md_cell(c, v, str(row[0])) for c, v in zip(table.columns, row, strict=True))
                  + " |" for row in table.rows]
        parts += [""] + [f"- {note}" for note in table.notes] + [""]
    return "\n".join(parts).rstrip() + "\n"


# --- tables ---

_SCALING_COLUMNS = ["nodes", "run", "status", "topology", "backend", "tok/s", "tok/s std", "prefill tok/s",
                    "prefill std", "TTFT ms", "speed-up", "prefill speed-up", "efficiency", "prefill efficiency",
                    "decode bound", "decode % of bound", "prefill bound", "prefill % of bound", "bound model",
                    "flags"]


def _scaling_table(report: ScalingReport) -> Table:
    figure = "decode tok/s" if report.kind == "inference" else "training tok/s"
    columns = [figure if c == "tok/s" else c for c in _SCALING_COLUMNS]
    rows = [[r.cluster_size, r.run_id, r.status, r.topology, r.collective_backend, r.throughput,
             r.throughput_std, r.prefill_tps, r.prefill_std, r.ttft_ms, r.speedup, r.prefill_speedup, r.efficiency,
             r.prefill_efficiency, r.decode_bound_tps, r.decode_percent_of_bound, r.prefill_bound_tps,
             r.prefill_percent_of_bound, r.bound_model, "; ".join(f"{f.reason} ({f.action})" for f in r.flags) or None]
            for r in report.rows]
    notes = [f"profile: {report.profile}"] if report.profile else []
    notes += ["efficiency = tok/s(N) / (N x tok/s(1))", *report.notes]
    notes += [report.reference] if report.reference else []
    return Table(f"Scaling of {report.model} ({report.kind})", columns, rows, notes)


def _comparison_table(comparison: Comparison) -> Table:
    rows = [[line.metric, line.a, line.b, line.ratio] for line in comparison.lines]
    columns = ["metric", f"run {comparison.a_id}", f"run {comparison.b_id}", "ratio b/a"]
    return Table(f"Run {comparison.a_id} against run {comparison.b_id}", columns, rows, comparison.notes)


def _run_tests_table(record: RunRecord) -> Table:
    rows = [[r.prompt_size, r.response_size, r.context_size, r.concurrency, r.decode_tps, r.decode_std,
             *_beside_bound(r.decode_tps, bound.decode_tps if bound else None),
             r.prefill_tps, r.prefill_std, *_beside_bound(r.prefill_tps, bound.prefill_tps if bound else None),
             r.ttft_ms, r.peak_tps]
            for r, bound in ((r, record.bounds.for_test(r.key) if record.bounds else None)
                             for r in suite_rows(record.result))]
    if record.kind == "training":
        rows = []
    columns = ["pp", "tg", "depth", "concurrency", "decode tok/s", "decode std", "decode bound",
               "decode % of bound", "prefill tok/s", "prefill std", "prefill bound", "prefill % of bound",
               "TTFT ms", "peak tok/s"]
    notes = [f"status: {record.status}" + (f" ({record.error})" if record.error else "")]
    notes += [flag.text() for flag in run_flags(record)]
    notes += [bounds_basis(record.bounds)] if record.bounds else []
    return Table(f"Run {record.id}: {record.model}", columns, rows, notes + record.details.warnings)


def _beside_bound(measured: float | None, bound: float | None) -> list[float | None]:
    return [bound, percent(measured, bound)]


def bounds_basis(bounds: RunBounds) -> str:
    """One line saying what the bounds assume, so a reader can judge the percentages."""
    model, hw = bounds.model, bounds.hardware
    where = f" (read from {model.source})" if model.source else ""
    return (f"bounds (planner, docs/planner.md): {model.name or 'model'}{where}, {model.params / 1e9:,.3g} B "
            f"params, {model.quant}, {bounds.bound_model}, at {hw.memory_bandwidth_gbs:g} GB/s per node, "
            f"{hw.link_gbps:g} Gb/s link, {hw.allreduce_latency_us:g} us per all-reduce"
            + "".join(f"; {note}" for note in bounds.notes))


def _run_summary_table(record: RunRecord) -> Table:
    ctx = record.context
    rows: list[list[Any]] = [["kind", record.kind], ["nodes", ctx.cluster_size], ["node list", ", ".join(ctx.nodes) or None],
            ["topology", ctx.topology], ["collective backend", ctx.collective_backend],
            ["recipe", ctx.recipe], ["engine", ctx.engine], ["engine version", ctx.engine_version],
            ["profile", record.profile.describe() if record.profile else None],
            ["llama-benchy", record.benchy_version], ["endpoint", record.endpoint],
            ["decode tok/s", record.summary.decode_tps], ["prefill tok/s", record.summary.prefill_tps],
            ["decode bound tok/s", record.summary.decode_bound_tps],
            ["decode % of bound", record.summary.decode_percent_of_bound],
            ["prefill bound tok/s", record.summary.prefill_bound_tps],
            ["prefill % of bound", record.summary.prefill_percent_of_bound],
            ["bound model", record.bounds.bound_model if record.bounds else None],
            ["TTFT ms", record.summary.ttft_ms], ["training tok/s", record.summary.train_tps],
            *_telemetry_rows(ctx.telemetry),
            ["label", ctx.label], ["sweep", ctx.sweep_id],
            ["created", record.created_at.isoformat(timespec="seconds")]]
    return Table("Settings", ["setting", "value"], [r for r in rows if r[1] is not None])


def _telemetry_rows(telemetry: TelemetrySummary | None) -> list[list[Any]]:
    if telemetry is None:
        return []
    memory, link = telemetry.peak_memory_bytes, telemetry.mean_link_bytes_per_s
    return [["peak memory GB", memory / 1e9 if memory is not None else None],
            ["mean fabric traffic GB/s (per node, both ways)", link / 1e9 if link is not None else None],
            ["energy kJ", telemetry.energy_joules / 1e3 if telemetry.energy_joules is not None else None],
            ["telemetry", f"{telemetry.seconds or 0} s of {', '.join(telemetry.nodes) or 'no node'}"]]


# --- cells ---


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    return round(value, 4) if isinstance(value, float) else value


def _md_cell(column: str, value: Any, label: str = "") -> str:
    """``label`` is the row's first cell: in a settings or comparison table it names the figure."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if "efficiency" in column:
            return f"{value:.1%}"
        if "speed-up" in column or "ratio" in column:
            return f"{value:.2f}x"
        if "% of bound" in column or "% of bound" in label:
            return f"{value:.1f} %"
        return f"{value:,.2f}"
    return str(value).replace("|", "\\|")

