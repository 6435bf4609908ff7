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

from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.report import Comparison, ScalingReport
from sparksync.core.bench.results import suite_rows

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
        parts += ["| " + " | ".join(_md_cell(c, v) for c, v in zip(table.columns, row, strict=True)) + " |"
                  for row in table.rows]
        parts += [""] + [f"- {note}" for note in table.notes] + [""]
    return "\n".join(parts).rstrip() + "\n"


# --- tables ---

_SCALING_COLUMNS = ["nodes", "run", "status", "topology", "backend", "tok/s", "prefill tok/s", "TTFT ms",
                    "speed-up", "prefill speed-up", "efficiency", "prefill efficiency"]


def _scaling_table(report: ScalingReport) -> Table:
    figure = "decode tok/s" if report.kind == "inference" else "training tok/s"
    columns = [figure if c == "tok/s" else c for c in _SCALING_COLUMNS]
    rows = [[r.cluster_size, r.run_id, r.status, r.topology, r.collective_backend, r.throughput,
             r.prefill_tps, r.ttft_ms, r.speedup, r.prefill_speedup, r.efficiency, r.prefill_efficiency]
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
             r.prefill_tps, r.ttft_ms, r.peak_tps] for r in suite_rows(record.result)]
    if record.kind == "training":
        rows = []
    columns = ["pp", "tg", "depth", "concurrency", "decode tok/s", "decode std", "prefill tok/s", "TTFT ms",
               "peak tok/s"]
    notes = [f"status: {record.status}" + (f" ({record.error})" if record.error else "")]
    return Table(f"Run {record.id}: {record.model}", columns, rows, notes + record.details.warnings)


def _run_summary_table(record: RunRecord) -> Table:
    ctx = record.context
    rows = [["kind", record.kind], ["nodes", ctx.cluster_size], ["node list", ", ".join(ctx.nodes) or None],
            ["topology", ctx.topology], ["collective backend", ctx.collective_backend],
            ["recipe", ctx.recipe], ["engine", ctx.engine], ["engine version", ctx.engine_version],
            ["profile", record.profile.describe() if record.profile else None],
            ["llama-benchy", record.benchy_version], ["endpoint", record.endpoint],
            ["decode tok/s", record.summary.decode_tps], ["prefill tok/s", record.summary.prefill_tps],
            ["TTFT ms", record.summary.ttft_ms], ["training tok/s", record.summary.train_tps],
            ["label", ctx.label], ["sweep", ctx.sweep_id],
            ["created", record.created_at.isoformat(timespec="seconds")]]
    return Table("Settings", ["setting", "value"], [r for r in rows if r[1] is not None])


# --- cells ---


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    return round(value, 4) if isinstance(value, float) else value


def _md_cell(column: str, value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if "efficiency" in column:
            return f"{value:.1%}"
        if "speed-up" in column or "ratio" in column:
            return f"{value:.2f}x"
        return f"{value:,.2f}"
    return str(value).replace("|", "\\|")

