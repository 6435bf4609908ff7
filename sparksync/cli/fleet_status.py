"""How `sparksync node status` and `sparksync node list` show paired nodes: JSON and tables.

A paired node's JSON entry in ``node status --json``::

    {"name": "spark-1a2b", "id": "3fa2...", "source": "ssh", "state": "online", "cause": null,
     "reason": null, "since": "...", "last_seen": "...", "error": null, "snapshot": {...}}

``id`` is the node's stable id (``PairedNode.node_id``); the name is a label that can change.

``error`` is null whenever ``snapshot`` holds the node's telemetry; when the
node could not be read it repeats ``reason``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sparksync_agent.protocol import Snapshot

from sparksync.core.fleet import NodeState, NodeStatus, last_seen_text

if TYPE_CHECKING:  # the fleet itself (SSH, HTTP) loads only for the commands that reach nodes
    from sparksync.core.fleet import NodeReport


def status_json(status: NodeStatus) -> dict[str, Any]:
    return {
        "state": status.state.value,
        "cause": status.cause.value if status.cause is not None else None,
        "reason": status.reason,
        "since": _iso(status.since),
        "last_seen": _iso(status.last_seen),
    }


def report_json(report: NodeReport) -> dict[str, Any]:
    snapshot = report.snapshot
    return {
        "name": report.node.name,
        "id": report.node.node_id,
        "source": "ssh",
        **status_json(report.status),
        "error": report.status.reason if snapshot is None else None,
        "snapshot": snapshot.model_dump(mode="json") if snapshot is not None else None,
    }


def reports_table(reports: list[NodeReport]) -> str:
    """One line per node: state, memory, CPU, GPU and the latest sample; reasons below."""
    rows = [("NAME", "STATE", "MEMORY", "CPU", "GPU", "SAMPLE", "LAST SEEN")]
    rows += [_row(report) for report in reports]
    lines = _columns(rows)
    notes = [f"  {r.node.name}: {r.status.reason}" for r in reports if r.status.reason]
    return "\n".join(lines + (["", "Why:", *notes] if notes else []))


def list_table(rows: list[tuple[str, ...]]) -> str:
    return "\n".join(_columns(rows))


def _row(report: NodeReport) -> tuple[str, ...]:
    snapshot: Snapshot | None = report.snapshot
    sample = snapshot.latest if snapshot is not None else None
    memory = cpu = gpu = seq = "-"
    if sample is not None:
        if sample.memory is not None and sample.memory.total_bytes:
            mem = sample.memory
            memory = f"{mem.used_bytes / 1e9:.1f}/{mem.total_bytes / 1e9:.0f} GB"
        if sample.cpu is not None:
            cpu = f"{sample.cpu.percent:.0f} %"
        gpus = sample.gpu or []
        gpu = ", ".join(_gpu_util(g) for g in gpus) if gpus else "none"
        seq = f"#{sample.seq}"
    state = report.status.state.value
    if report.status.cause is not None and report.status.state is not NodeState.ONLINE:
        state = f"{state} ({report.status.cause.value})"
    return (report.node.name, state, memory, cpu, gpu, seq, last_seen_text(report.status.last_seen))


def _gpu_util(gpu) -> str:
    value = gpu.utilization_pct.value
    return f"{value:.0f} %" if value is not None else "n/a"


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None
