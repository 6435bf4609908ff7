"""The benchmark history: one SQLite file in the client's data directory.

Each run is one row. The figures the history view lists are plain columns,
so listing a thousand runs reads no JSON; the JSON columns (llama-benchy's
full result last of all) are read only when one run is opened. SQLite keeps
a row's tail in overflow pages, so a listing never even touches the blobs.

The same file holds the Switchyard eval reports and sweeps
(``switchyard_evals``, ``switchyard_sweeps``, see
``sparksync.switchyard.eval.history``), so one history backs the Benchmarks
panel, and the fabric acceptance checks (``fabric_checks``, schema version 5,
see ``sparksync.core.fabric.check_history``).

A run names the nodes it ran on, and keeps each one's stable id beside
(``node_ids_json``, schema version 3), so a renamed node's runs show its
name now. Runs stored before version 3 are given the ids of the nodes their
names stand for (now, or before a rename) when the file is next opened.

The schema is versioned with ``PRAGMA user_version``; ``MIGRATIONS[i]``
takes a file from version i to i + 1, each in one transaction. A file from
a newer SparkSync is refused rather than guessed at.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparksync.core.bench.bounds import RunBounds
from sparksync.core.bench.context import RunContext
from sparksync.core.bench.errors import HistoryError, RunNotFoundError
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.record import RunDetails, RunListItem, RunRecord
from sparksync.core.bench.results import RunSummary
from sparksync.core.bench.telemetry import TelemetrySummary
from sparksync.core.base.paths import data_dir, ensure_dir
from sparksync.core.base.sqlite_wal import use_wal
from sparksync.core.nodes.identity import NodeNames

log = logging.getLogger(__name__)

HISTORY_FILE = "bench-history.sqlite3"
BUSY_TIMEOUT_MS = 5000

_V1 = (
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('inference', 'training')),
        status TEXT NOT NULL CHECK (status IN ('complete', 'partial', 'failed')),
        model TEXT NOT NULL,
        endpoint TEXT,
        profile_name TEXT,
        label TEXT,
        sweep_id TEXT,
        cluster_size INTEGER NOT NULL CHECK (cluster_size BETWEEN 1 AND 8),
        topology TEXT,
        collective_backend TEXT,
        recipe TEXT,
        recipe_version TEXT,
        engine TEXT,
        engine_version TEXT,
        benchy_version TEXT,
        decode_tps REAL,
        prefill_tps REAL,
        ttft_ms REAL,
        train_tps REAL,
        error TEXT,
        nodes_json TEXT NOT NULL DEFAULT '[]',
        profile_json TEXT,
        details_json TEXT,
        telemetry_json TEXT,
        result_json TEXT
    )""",
    "CREATE INDEX runs_by_time ON runs (created_at DESC, id DESC)",
    "CREATE INDEX runs_by_sweep ON runs (sweep_id) WHERE sweep_id IS NOT NULL",
)
# Version 2: the planner's bounds beside each run (columns for the listing,
# the per-test bounds as JSON), and the Switchyard eval reports. The runs
# table is rebuilt rather than altered so the listed columns stay ahead of
# the JSON blobs (ALTER TABLE would add them after result_json, and every
# listing would then walk each blob's overflow pages to reach them).
_RUN_COLUMNS_V1 = (
    "id, created_at, kind, status, model, endpoint, profile_name, label, sweep_id, cluster_size, topology, "
    "collective_backend, recipe, recipe_version, engine, engine_version, benchy_version, decode_tps, "
    "prefill_tps, ttft_ms, train_tps, error, nodes_json, profile_json, details_json, telemetry_json, "
    "result_json"
)
_V2 = (
    # Keep AUTOINCREMENT's high-water mark: an id once used is never given to another run.
    "CREATE TEMP TABLE runs_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'runs'",
    """CREATE TABLE runs_v2 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('inference', 'training')),
        status TEXT NOT NULL CHECK (status IN ('complete', 'partial', 'failed')),
        model TEXT NOT NULL,
        endpoint TEXT,
        profile_name TEXT,
        label TEXT,
        sweep_id TEXT,
        cluster_size INTEGER NOT NULL CHECK (cluster_size BETWEEN 1 AND 8),
        topology TEXT,
        collective_backend TEXT,
        recipe TEXT,
        recipe_version TEXT,
        engine TEXT,
        engine_version TEXT,
        benchy_version TEXT,
        decode_tps REAL,
        prefill_tps REAL,
        ttft_ms REAL,
        train_tps REAL,
        decode_bound_tps REAL,
        prefill_bound_tps REAL,
        error TEXT,
        nodes_json TEXT NOT NULL DEFAULT '[]',
        profile_json TEXT,
        details_json TEXT,
        telemetry_json TEXT,
        bounds_json TEXT,
        result_json TEXT
    )""",
    f"INSERT INTO runs_v2 ({_RUN_COLUMNS_V1}) SELECT {_RUN_COLUMNS_V1} FROM runs",
    "DROP TABLE runs",
    "ALTER TABLE runs_v2 RENAME TO runs",
    "DELETE FROM sqlite_sequence WHERE name = 'runs'",
    ("INSERT INTO sqlite_sequence (name, seq) SELECT 'runs', max(coalesce((SELECT max(id) FROM runs), 0), "
     "coalesce((SELECT seq FROM runs_seq), 0))"),
    "DROP TABLE runs_seq",
    "CREATE INDEX runs_by_time ON runs (created_at DESC, id DESC)",
    "CREATE INDEX runs_by_sweep ON runs (sweep_id) WHERE sweep_id IS NOT NULL",
    """CREATE TABLE switchyard_evals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        case_file TEXT NOT NULL,
        cases INTEGER NOT NULL,
        concurrency INTEGER NOT NULL,
        policy TEXT NOT NULL,
        score_gateway REAL,
        score_large REAL,
        score_small REAL,
        gateway_tps REAL,
        large_tps REAL,
        throughput_x REAL,
        parity INTEGER,
        summary TEXT,
        report_json TEXT NOT NULL
    )""",
    "CREATE INDEX switchyard_evals_by_time ON switchyard_evals (created_at DESC, id DESC)",
)
# Version 3: each run's {node name: node id}, so its nodes stay its own through a rename. Listings
# never read it, so it may come after the blobs. NULL: not looked up yet (runs stored before).
_V3 = ("ALTER TABLE runs ADD COLUMN node_ids_json TEXT",)
# Version 4: Switchyard's traffic-split sweeps (``sparksync.switchyard.eval.history``).
_V4 = (
    """CREATE TABLE switchyard_sweeps (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        case_file TEXT NOT NULL,
        cases INTEGER NOT NULL,
        policy TEXT NOT NULL,
        parameter TEXT NOT NULL,
        settings TEXT NOT NULL,
        concurrency INTEGER NOT NULL,
        anchor_score REAL,
        best_x REAL,
        summary TEXT,
        report_json TEXT NOT NULL
    )""",
    "CREATE INDEX switchyard_sweeps_by_time ON switchyard_sweeps (created_at DESC, id DESC)",
)
# Version 5: the fabric acceptance checks (``sparksync.core.fabric.check_history``): one row per check,
# the figures the listing needs as columns, the whole report as JSON.
_V5 = (
    """CREATE TABLE fabric_checks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'degraded', 'fail', 'not run')),
        topology TEXT,
        cluster_size INTEGER NOT NULL CHECK (cluster_size BETWEEN 1 AND 8),
        links INTEGER NOT NULL,
        flagged INTEGER NOT NULL,
        not_run INTEGER NOT NULL,
        min_tcp_gbps REAL,
        min_rdma_gbps REAL,
        busbw_gbps REAL,
        duration_s REAL NOT NULL,
        node_ids_json TEXT NOT NULL DEFAULT '{}',
        report_json TEXT NOT NULL
    )""",
    "CREATE INDEX fabric_checks_by_time ON fabric_checks (created_at DESC, id DESC)",
)
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5)

_LIST_COLUMNS = ("id", "created_at", "kind", "status", "model", "profile_name", "cluster_size", "topology",
                 "collective_backend", "label", "sweep_id", "decode_tps", "prefill_tps", "ttft_ms",
                 "train_tps", "decode_bound_tps", "prefill_bound_tps")
_CONTEXT_COLUMNS = ("topology", "collective_backend", "recipe", "recipe_version", "engine", "engine_version",
                    "label", "sweep_id")


def default_history_path() -> Path:
    return data_dir() / HISTORY_FILE


class HistoryStore:
    """Benchmark runs on disk. Each call opens its own connection, so any thread may use it."""

    def __init__(self, path: Path | None = None, names: Callable[[], NodeNames] = NodeNames.current):
        self.path = path or default_history_path()
        self.names = names
        ensure_dir(self.path.parent)
        with self._connect() as conn:
            migrate(conn, self.path)
            self._adopt(conn)

    def add(self, record: RunRecord) -> int:
        row = _to_row(record, self.names())
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._connect() as conn, conn:
            cursor = conn.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", tuple(row.values()))
        if cursor.lastrowid is None:  # never after an INSERT; says so to the type checker
            raise HistoryError(f"the benchmark history {self.path} gave the new run no id")
        return cursor.lastrowid

    def get(self, run_id: int) -> RunRecord:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(f"no stored benchmark run has id {run_id}; "
                                   "`sparksync bench list` shows them")
        return _from_row(row, self.names())

    def get_many(self, run_ids: Sequence[int]) -> list[RunRecord]:
        return [self.get(run_id) for run_id in run_ids]

    def list_runs(self, limit: int | None = None, offset: int = 0, *, kind: str | None = None,
                  sweep_id: str | None = None) -> list[RunListItem]:
        """Newest first, without reading any JSON column."""
        where, params = _filters(kind=kind, sweep_id=sweep_id)
        # The bound's split is one small field of the (small) bounds JSON, read by SQLite itself.
        sql = (f"SELECT {', '.join(_LIST_COLUMNS)}, json_extract(bounds_json, '$.split') AS bound_split "
               f"FROM runs{where} "
               "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
        with self._connect() as conn:
            rows = conn.execute(sql, (*params, -1 if limit is None else limit, offset)).fetchall()
        return [RunListItem(**dict(row)) for row in rows]

    def count(self) -> int:
        with self._connect() as conn:
            return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])

    def delete(self, run_id: int) -> None:
        with self._connect() as conn, conn:
            if conn.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount == 0:
                raise RunNotFoundError(f"no stored benchmark run has id {run_id}")

    def _adopt(self, conn: sqlite3.Connection) -> None:
        """Give runs stored before node ids the ids of the nodes they name (once; {} when none is known)."""
        old = conn.execute("SELECT id, nodes_json FROM runs WHERE node_ids_json IS NULL").fetchall()
        if not old:
            return
        names = self.names()
        with conn:
            conn.executemany(
                "UPDATE runs SET node_ids_json = ? WHERE id = ? AND node_ids_json IS NULL",
                ((json.dumps(names.ids_for(json.loads(row["nodes_json"] or "[]"))), row["id"]) for row in old),
            )
        log.info("benchmark history %s: %d run(s) given their nodes' ids", self.path, len(old))

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection to the file at the newest schema, for the other tables it holds."""
        with self._connect() as conn:
            yield conn

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot open the benchmark history {self.path}: {exc}; "
                               "check the directory's permissions and free space") from None
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"the benchmark history {self.path} cannot be used ({exc}); if the file is "
                               "damaged, move it away and SparkSync starts a new one") from None
        finally:
            conn.close()


def migrate(conn: sqlite3.Connection, path: Path, migrations: Sequence[Sequence[str]] | None = None) -> None:
    """Bring the file to the newest schema this SparkSync knows (``MIGRATIONS`` unless given)."""
    migrations = MIGRATIONS if migrations is None else migrations
    use_wal(conn)  # the history view reads while a benchmark writes
    version = _user_version(conn)
    if version > len(migrations):
        raise HistoryError(f"the benchmark history {path} has schema version {version}, newer than this "
                           f"SparkSync knows ({len(migrations)}); upgrade SparkSync to read it")
    for target in range(version + 1, len(migrations) + 1):
        if _apply(conn, migrations[target - 1], target):
            log.info("benchmark history %s migrated to schema version %d", path, target)


def _apply(conn: sqlite3.Connection, statements: Sequence[str], target: int) -> bool:
    """One migration step in one transaction; False when another process already made it.

    The sqlite3 module would commit each DDL statement on its own, so the
    transaction is explicit; IMMEDIATE takes the write lock first, so two
    SparkSyncs opening an old file migrate it once.
    """
    previous, conn.isolation_level = conn.isolation_level, None
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _user_version(conn) >= target:
                conn.execute("COMMIT")
                return False
            for statement in statements:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(target)}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return True
    finally:
        conn.isolation_level = previous


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _filters(**values: str | None) -> tuple[str, tuple[Any, ...]]:
    used = {k: v for k, v in values.items() if v is not None}
    if not used:
        return "", ()
    return " WHERE " + " AND ".join(f"{k} = ?" for k in used), tuple(used.values())


def _to_row(record: RunRecord, names: NodeNames) -> dict[str, Any]:
    ctx, summary = record.context, record.summary
    named = [*ctx.nodes, *(ctx.telemetry.nodes if ctx.telemetry else ())]
    return {
        "created_at": record.created_at.astimezone(timezone.utc).isoformat(),
        "kind": record.kind,
        "status": record.status,
        "model": record.model,
        "endpoint": record.endpoint,
        "profile_name": record.profile.name if record.profile else None,
        "cluster_size": ctx.cluster_size,
        **{name: getattr(ctx, name) for name in _CONTEXT_COLUMNS},
        "benchy_version": record.benchy_version,
        **summary.model_dump(),
        "error": record.error,
        "nodes_json": json.dumps(list(ctx.nodes)),
        "profile_json": record.profile.model_dump_json() if record.profile else None,
        "details_json": record.details.model_dump_json(),
        "telemetry_json": ctx.telemetry.model_dump_json() if ctx.telemetry else None,
        "bounds_json": record.bounds.model_dump_json() if record.bounds else None,
        "result_json": json.dumps(record.result) if record.result is not None else None,
        "node_ids_json": json.dumps(names.ids_for(named)),
    }


def _from_row(row: sqlite3.Row, names: NodeNames) -> RunRecord:
    nodes = tuple(json.loads(row["nodes_json"] or "[]"))
    telemetry = _model(TelemetrySummary, row["telemetry_json"])
    ids = names.ids_for([*nodes, *(telemetry.nodes if telemetry else ())], json.loads(row["node_ids_json"] or "{}"))
    now = names.relabel(ids)  # each node under its name now

    def named(old: Sequence[str]) -> tuple[str, ...]:
        return tuple(now.get(n, n) for n in old)

    if telemetry is not None and telemetry.nodes:
        telemetry = telemetry.model_copy(update={"nodes": named(telemetry.nodes)})
    context = RunContext(
        cluster_size=row["cluster_size"],
        nodes=named(nodes),
        telemetry=telemetry,
        **{name: row[name] for name in _CONTEXT_COLUMNS},
    )
    return RunRecord(
        id=row["id"],
        created_at=datetime.fromisoformat(row["created_at"]),
        kind=row["kind"],
        status=row["status"],
        model=row["model"],
        endpoint=row["endpoint"],
        profile=_model(BenchProfile, row["profile_json"]),
        context=context,
        benchy_version=row["benchy_version"],
        summary=RunSummary(**{name: row[name] for name in RunSummary.model_fields}),
        error=row["error"],
        details=_model(RunDetails, row["details_json"]) or RunDetails(),
        bounds=_model(RunBounds, row["bounds_json"]),
        result=json.loads(row["result_json"]) if row["result_json"] else None,
    )


def _model(cls, text: str | None):
    return cls.model_validate_json(text) if text else None
