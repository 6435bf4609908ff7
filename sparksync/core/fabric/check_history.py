"""Fabric acceptance checks in the history database (table ``fabric_checks``, schema version 5).

One row per ``sparksync cluster check``: the verdict and the figures a
listing shows as columns, every measurement in the report's JSON. Nodes are
named in the report as they were called then; ``node_ids_json`` keeps each
name's stable id beside, so a renamed node's checks are still its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from sparksync.core.bench.errors import HistoryError
from sparksync.core.bench.history import HistoryStore
from sparksync.core.fabric.check_results import FabricCheckReport

_COLUMNS = ("id", "created_at", "verdict", "topology", "cluster_size", "links", "flagged", "not_run",
            "min_tcp_gbps", "min_rdma_gbps", "busbw_gbps", "duration_s")


@dataclass(frozen=True)
class FabricCheckRow:
    id: int
    created_at: datetime
    verdict: str
    topology: str | None
    cluster_size: int
    links: int
    flagged: int
    not_run: int
    min_tcp_gbps: float | None
    min_rdma_gbps: float | None
    busbw_gbps: float | None
    duration_s: float


def _min(report: FabricCheckReport, test: str) -> float | None:
    values = [m.value for m in report.measurements if m.test == test and m.value is not None]
    return min(values) if values else None


class FabricCheckHistory:
    """The checks stored in the history file (any thread: each call opens its own connection)."""

    def __init__(self, store: HistoryStore | None = None):
        self.store = store or HistoryStore()

    def add(self, report: FabricCheckReport) -> int:
        ids = self.store.names().ids_for(report.nodes)
        row = {
            "created_at": report.created_at.astimezone(timezone.utc).isoformat(),
            "verdict": report.verdict.value,
            "topology": report.topology,
            "cluster_size": max(1, min(8, len(report.nodes))),
            "links": len(report.links),
            "flagged": len(report.problems),
            "not_run": len(report.not_run),
            "min_tcp_gbps": _min(report, "iperf3"),
            "min_rdma_gbps": _min(report, "ib_write_bw"),
            "busbw_gbps": _min(report, "all_gather"),
            "duration_s": report.duration_s,
            "node_ids_json": json.dumps(ids),
            "report_json": report.model_dump_json(),
        }
        names, marks = ", ".join(row), ", ".join("?" for _ in row)
        with self.store.connect() as conn, conn:
            cursor = conn.execute(f"INSERT INTO fabric_checks ({names}) VALUES ({marks})", tuple(row.values()))
        if cursor.lastrowid is None:
            raise HistoryError(f"the history {self.store.path} gave the new fabric check no id")
        return cursor.lastrowid

    def list(self, limit: int = 50) -> list[FabricCheckRow]:
        sql = f"SELECT {', '.join(_COLUMNS)} FROM fabric_checks ORDER BY created_at DESC, id DESC LIMIT ?"
        with self.store.connect() as conn:
            rows = conn.execute(sql, (limit,)).fetchall()
        return [FabricCheckRow(**{**dict(r), "created_at": datetime.fromisoformat(r["created_at"])}) for r in rows]

    def get(self, check_id: int) -> FabricCheckReport:
        with self.store.connect() as conn:
            row = conn.execute("SELECT report_json FROM fabric_checks WHERE id = ?", (check_id,)).fetchone()
        if row is None:
            raise HistoryError(f"no stored fabric check has id {check_id}; `sparksync cluster check --list` shows them")
        return FabricCheckReport.model_validate_json(row["report_json"])

    def latest(self) -> FabricCheckReport | None:
        with self.store.connect() as conn:
            row = conn.execute(
                "SELECT report_json FROM fabric_checks ORDER BY created_at DESC, id DESC LIMIT 1").fetchone()
        return None if row is None else FabricCheckReport.model_validate_json(row["report_json"])
