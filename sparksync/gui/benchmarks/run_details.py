"""One run's details as HTML: headline figures with % of the planner's bound, telemetry, every test."""

from __future__ import annotations

import html

from sparksync.core.bench import RunRecord, TelemetrySummary, tables_of
from sparksync.core.base import format_link_rate, format_memory
from sparksync.gui.benchmarks.cells import format_percent_of_bound
from sparksync.gui.benchmarks.tables import table_html

STATUS_NOTES = {
    "partial": "⚠ partial run: only the tests that finished have figures",
    "failed": "✕ failed run: no figures were measured",
}


def run_html(record: RunRecord) -> str:
    parts = [f"<h2>Run {record.id}: {html.escape(record.model)} on {record.context.cluster_size} node(s)</h2>"]
    if record.status in STATUS_NOTES:
        parts.append(f"<p style='color:#b7791f'><b>{STATUS_NOTES[record.status]}</b>"
                     + (f": {html.escape(record.error)}" if record.error else "") + "</p>")
    parts.append(f"<p>{headline(record)}</p>")
    parts.append(f"<p>{html.escape(telemetry_text(record.context.telemetry))}</p>")
    parts += [table_html(table) for table in tables_of(record)]
    return "".join(parts)


def headline(record: RunRecord) -> str:
    s = record.summary
    if record.kind == "training":
        return f"training {_tps(s.train_tps)}"
    model = record.bounds.bound_label if record.bounds is not None else None
    figures = [_beside_bound("decode", s.decode_tps, s.decode_percent_of_bound, s.decode_bound_tps, model),
               _beside_bound("prefill", s.prefill_tps, s.prefill_percent_of_bound, s.prefill_bound_tps, model),
               f"TTFT {'—' if s.ttft_ms is None else f'{s.ttft_ms:,.1f} ms'}"]
    return " · ".join(html.escape(f) for f in figures)


def finished_text(record: RunRecord) -> tuple[str, str]:
    """A finished run as a notification: (name, what it measured or why it stopped), plain text."""
    name = f"{record.id} ({record.model})"
    s = record.summary
    figures = (f"training {_tps(s.train_tps)}" if record.kind == "training"
               else f"decode {_tps(s.decode_tps)}, prefill {_tps(s.prefill_tps)}")
    if record.status == "complete":
        return name, figures
    note = STATUS_NOTES[record.status].split(" ", 1)[1]  # without its sign: a notification has its own icon
    return name, f"{note}" + (f" ({record.error})" if record.error else "") + (
        f"; {figures}" if record.status == "partial" else "")


def telemetry_text(telemetry: TelemetrySummary | None) -> str:
    if telemetry is None:
        return "Telemetry: none was recorded during this run (open the app while benchmarking to record it)."
    parts = []
    if telemetry.peak_memory_bytes is not None:
        parts.append(f"peak memory {format_memory(telemetry.peak_memory_bytes)}")
    if telemetry.mean_link_bytes_per_s is not None:
        parts.append(f"mean fabric traffic {format_link_rate(telemetry.mean_link_bytes_per_s)} per node")
    if telemetry.energy_joules is not None:
        parts.append(f"energy {telemetry.energy_joules / 1e3:,.2f} kJ")
    where = f"{telemetry.seconds or 0} s of {', '.join(telemetry.nodes) or 'no node'}"
    return f"Telemetry: {', '.join(parts) or 'no figure'} ({where})"


def _beside_bound(name: str, measured: float | None, percent: float | None, bound: float | None,
                  model: str | None = None) -> str:
    under = f", {model}" if model and bound is not None else ""
    return f"{name} {_tps(measured)} ({format_percent_of_bound(percent)} of the bound {_tps(bound)}{under})"


def _tps(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f} tok/s"
