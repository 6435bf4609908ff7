"""Switchyard eval reports and sweeps in the client's SQLite history, beside the benchmark runs.

They live in the benchmark history's file (``bench-history.sqlite3``, table
``switchyard_evals``, created by that file's schema version 2), so one
history backs the Benchmarks panel. The headline figures are plain columns,
so a listing reads no JSON; the whole ``EvalReport`` is read only when one
eval is opened.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from pydantic import BaseModel

from sparksync.core.bench.history import HistoryStore
from sparksync.switchyard.errors import EvalNotFoundError
from sparksync.switchyard.eval.report import EvalReport, TargetReport
from sparksync.switchyard.eval.sweep import SweepReport

_LIST_COLUMNS = (
    "id",
    "created_at",
    "case_file",
    "cases",
    "concurrency",
    "policy",
    "score_gateway",
    "score_large",
    "score_small",
    "gateway_tps",
    "large_tps",
    "throughput_x",
    "parity",
    "summary",
)


class EvalListItem(BaseModel):
    id: int
    created_at: datetime
    case_file: str
    cases: int
    concurrency: int
    policy: str
    score_gateway: float | None
    score_large: float | None
    score_small: float | None
    gateway_tps: float | None
    large_tps: float | None
    throughput_x: float | None
    parity: bool | None
    summary: str | None


class EvalHistory:
    """Stored evals; each call opens its own connection, so any thread may use it."""

    def __init__(self, store: HistoryStore | None = None):
        self.store = store or HistoryStore()

    def add(self, report: EvalReport) -> int:
        row = _to_row(report)
        names, marks = ", ".join(row), ", ".join("?" for _ in row)
        with self.store.connect() as conn, conn:
            cursor = conn.execute(
                f"INSERT INTO switchyard_evals ({names}) VALUES ({marks})", tuple(row.values())
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def list_evals(self, limit: int | None = None) -> list[EvalListItem]:
        """Newest first, without reading any report JSON."""
        sql = (
            f"SELECT {', '.join(_LIST_COLUMNS)} FROM switchyard_evals "
            "ORDER BY created_at DESC, id DESC LIMIT ?"
        )
        with self.store.connect() as conn:
            rows = conn.execute(sql, (-1 if limit is None else limit,)).fetchall()
        return [EvalListItem(**dict(row)) for row in rows]

    def get(self, eval_id: int) -> EvalReport:
        with self.store.connect() as conn:
            row = conn.execute("SELECT report_json FROM switchyard_evals WHERE id = ?", (eval_id,)).fetchone()
        if row is None:
            raise EvalNotFoundError(
                f"no stored Switchyard eval has id {eval_id}; `sparksync switchyard history` lists them"
            )
        return EvalReport.model_validate_json(row["report_json"])


def _to_row(report: EvalReport) -> dict:
    gateway, large, small = (_target(report, label) for label in ("gateway", "large only", "small only"))
    return {
        "created_at": datetime.now(timezone.utc).isoformat(),
        "case_file": report.case_file,
        "cases": report.cases,
        "concurrency": report.concurrency,
        "policy": report.policy,
        "score_gateway": gateway.score if gateway else None,
        "score_large": large.score if large else None,
        "score_small": small.score if small else None,
        "gateway_tps": gateway.output_tokens_per_s if gateway else None,
        "large_tps": large.output_tokens_per_s if large else None,
        "throughput_x": report.gain.throughput_x,
        "parity": None if report.gain.parity is None else int(report.gain.parity),
        "summary": report.gain.summary,
        "report_json": report.model_dump_json(),
    }


def _target(report: EvalReport, label: str) -> TargetReport | None:
    return next((t for t in report.targets if t.label == label), None)


def as_json_list(items: list[EvalListItem]) -> str:
    return json.dumps([i.model_dump(mode="json") for i in items], indent=2)


class SweepListItem(BaseModel):
    id: int
    created_at: datetime
    case_file: str
    cases: int
    policy: str
    parameter: str
    settings: str  # the swept values, e.g. "1, 1/2, 1/4, 0"
    concurrency: int
    anchor_score: float | None
    best_x: float | None  # the best throughput multiple at score parity
    summary: str | None


_SWEEP_COLUMNS = tuple(SweepListItem.model_fields)


class SweepHistory:
    """Stored sweeps (``switchyard eval --sweep``, ``switchyard calibrate``), in the same file as the evals."""

    def __init__(self, store: HistoryStore | None = None):
        self.store = store or HistoryStore()

    def add(self, report: SweepReport) -> int:
        row = _sweep_row(report)
        names, marks = ", ".join(row), ", ".join("?" for _ in row)
        with self.store.connect() as conn, conn:
            cursor = conn.execute(f"INSERT INTO switchyard_sweeps ({names}) VALUES ({marks})", tuple(row.values()))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def list_sweeps(self, limit: int | None = None) -> list[SweepListItem]:
        sql = (f"SELECT {', '.join(_SWEEP_COLUMNS)} FROM switchyard_sweeps "
               "ORDER BY created_at DESC, id DESC LIMIT ?")  # fmt: skip
        with self.store.connect() as conn:
            rows = conn.execute(sql, (-1 if limit is None else limit,)).fetchall()
        return [SweepListItem(**dict(row)) for row in rows]

    def get(self, sweep_id: int) -> SweepReport:
        with self.store.connect() as conn:
            row = conn.execute("SELECT report_json FROM switchyard_sweeps WHERE id = ?", (sweep_id,)).fetchone()
        if row is None:
            raise EvalNotFoundError(
                f"no stored Switchyard sweep has id {sweep_id}; `sparksync switchyard sweeps` lists them"
            )
        return SweepReport.model_validate_json(row["report_json"])


def _sweep_row(report: SweepReport) -> dict:
    best = report.best()
    return {
        "created_at": datetime.now(timezone.utc).isoformat(),
        "case_file": report.suite or report.case_file,
        "cases": report.cases,
        "policy": report.policy,
        "parameter": report.parameter,
        "settings": ", ".join(p.setting for p in report.swept() if p.setting is not None),
        "concurrency": report.concurrency,
        "anchor_score": report.anchor.score,
        "best_x": best.throughput_x if best else None,
        "summary": report.summary(),
        "report_json": report.model_dump_json(),
    }


def sweeps_as_json(items: list[SweepListItem]) -> str:
    return json.dumps([i.model_dump(mode="json") for i in items], indent=2)
