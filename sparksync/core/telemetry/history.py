"""Long-term telemetry: one row per node per second, in SQLite in the client's data dir.

The dashboard's one-second rows (see :mod:`sparksync.core.telemetry.downsample`) go
here, so a reopened app shows the last hour, older than any agent's ring
buffer. A row stores its values as one float64 blob in the order of a
*layout* (the list of series names it carries), so a node that gains an
interface just starts using a new layout.

Retention thins as data ages, to keep a week of 8 nodes within a few hundred
MB: every second for a day, one row in 10 s for three days, one in 60 s up to
``retention_s`` (7 days), then nothing.

``HistoryStore`` is one connection, used from one thread (sqlite3's rule);
:class:`~sparksync.core.telemetry.history_recorder.HistoryRecorder` runs it in a worker
thread so the GUI thread never touches the file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from sparksync.core.base import paths
from sparksync.core.telemetry.dashboard_model import NodeHistory
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.base.errors import SparkSyncError

log = logging.getLogger(__name__)

FILE_NAME = "history.sqlite3"
DAY_S = 86_400
RETENTION_S = 7 * DAY_S
# (age in seconds, keep one row in this many seconds) for rows older than age
THINNING = ((DAY_S, 10), (3 * DAY_S, 60))

# Each migration moves the schema from version - 1 to version. Never edit a
# released one: add the next.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            "CREATE TABLE nodes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
            "CREATE TABLE layouts (id INTEGER PRIMARY KEY, columns TEXT NOT NULL UNIQUE)",
            (
                "CREATE TABLE rows (node_id INTEGER NOT NULL REFERENCES nodes(id), t INTEGER NOT NULL, "
                "layout_id INTEGER NOT NULL REFERENCES layouts(id), data BLOB NOT NULL, "
                "PRIMARY KEY (node_id, t)) WITHOUT ROWID"
            ),
            "CREATE INDEX rows_by_t ON rows (t)",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


class HistoryError(SparkSyncError):
    """The telemetry history file cannot be used."""


def default_path() -> Path:
    return paths.data_dir() / FILE_NAME


class HistoryStore:
    """The history file; open it in the thread that will use it."""

    def __init__(self, path: Path | None = None, retention_s: float = RETENTION_S):
        self.path = Path(path) if path is not None else default_path()
        self.retention_s = retention_s
        self._node_ids: dict[str, int] = {}
        self._layout_ids: dict[tuple[str, ...], int] = {}
        self._layouts: dict[int, tuple[str, ...]] = {}
        self._conn = self._open()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- schema ---------------------------------------------------------------

    def schema_version(self) -> int:
        row = self._conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return row[0] or 0

    def _open(self) -> sqlite3.Connection:
        paths.ensure_dir(self.path.parent)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)  # we issue BEGIN ourselves
            conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
            conn.execute("PRAGMA synchronous=NORMAL")  # a power cut may lose the last second, never corrupt
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL)"
        )
        current = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0
        if current > SCHEMA_VERSION:
            raise HistoryError(
                f"the telemetry history {self.path} was written by a newer SparkSync (schema {current}; "
                f"this one knows up to {SCHEMA_VERSION}). Upgrade SparkSync, or move the file aside "
                "to start a new history."
            )
        for version, statements in MIGRATIONS:
            if version > current:
                self._apply(conn, version, statements)

    @staticmethod
    def _apply(conn: sqlite3.Connection, version: int, statements: Sequence[str]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("telemetry history schema migrated to version %d", version)

    def _unusable(self, exc: Exception) -> HistoryError:
        return HistoryError(
            f"the telemetry history {self.path} cannot be used ({exc}). Move the file aside "
            "(SparkSync then starts a new history) or free some disk space, and restart SparkSync."
        )

    # --- rows -----------------------------------------------------------------

    def write(self, rows: Iterable[tuple[str, SecondRow]]) -> int:
        """Store ``(node, row)`` pairs in one transaction; a second stored twice keeps the last."""
        try:
            with self._transaction():
                return self._conn.executemany(
                    "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?)", (self._encode(n, r) for n, r in rows)
                ).rowcount
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def load(self, window_s: float, now: float | None = None) -> dict[str, NodeHistory]:
        """Each node's rows of the last ``window_s`` seconds, oldest first."""
        t0 = math.floor((time.time() if now is None else now) - window_s)
        try:
            cursor = self._conn.execute(
                "SELECT nodes.name, rows.t, rows.layout_id, rows.data FROM rows JOIN nodes ON nodes.id = rows.node_id "
                "WHERE rows.t >= ? ORDER BY rows.node_id, rows.t",
                (t0,),
            )
            grouped: dict[str, list[tuple[int, int, bytes]]] = {}
            for name, t, layout_id, data in cursor:
                grouped.setdefault(name, []).append((t, layout_id, data))
            return {name: self._columns(rows) for name, rows in grouped.items()}
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def prune(self, now: float | None = None) -> int:
        """Thin and drop aged rows (see the module doc); returns the rows removed."""
        now = time.time() if now is None else now
        steps: list[tuple[str, tuple[int, ...]]] = [
            ("DELETE FROM rows WHERE t < ? AND t % ? != 0", (math.floor(now - age), every))
            for age, every in THINNING
        ]
        steps.append(("DELETE FROM rows WHERE t < ?", (math.floor(now - self.retention_s),)))
        try:
            with self._transaction():
                return sum(self._conn.execute(sql, args).rowcount for sql, args in steps)
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            # ids cached inside the failed transaction are gone with it
            self._node_ids.clear()
            self._layout_ids.clear()
            raise

    def count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM rows").fetchone()[0]

    # --- encoding ---------------------------------------------------------------

    def _encode(self, node: str, row: SecondRow) -> tuple[int, int, int, bytes]:
        names = tuple(sorted(row.values))
        data = np.array([row.values[n] for n in names], dtype="<f8").tobytes()
        return self._node_id(node), int(row.t), self._layout_id(names), data

    def _columns(self, rows: list[tuple[int, int, bytes]]) -> NodeHistory:
        t = np.array([r[0] for r in rows], dtype=float)
        layout_of = np.array([r[1] for r in rows])
        values: dict[str, np.ndarray] = {}
        for layout_id in np.unique(layout_of).tolist():
            where = np.flatnonzero(layout_of == layout_id)
            names = self._layout(layout_id)
            block = np.frombuffer(b"".join(rows[i][2] for i in where), dtype="<f8").reshape(
                len(where), len(names)
            )
            for j, name in enumerate(names):
                values.setdefault(name, np.full(len(rows), np.nan))[where] = block[:, j]
        return NodeHistory(t, values)

    def _node_id(self, name: str) -> int:
        if name not in self._node_ids:
            self._conn.execute("INSERT OR IGNORE INTO nodes (name) VALUES (?)", (name,))
            row = self._conn.execute("SELECT id FROM nodes WHERE name = ?", (name,)).fetchone()
            self._node_ids[name] = row[0]
        return self._node_ids[name]

    def _layout_id(self, names: tuple[str, ...]) -> int:
        if names not in self._layout_ids:
            text = json.dumps(names)
            self._conn.execute("INSERT OR IGNORE INTO layouts (columns) VALUES (?)", (text,))
            layout_id = self._conn.execute("SELECT id FROM layouts WHERE columns = ?", (text,)).fetchone()[0]
            self._layout_ids[names], self._layouts[layout_id] = layout_id, names
        return self._layout_ids[names]

    def _layout(self, layout_id: int) -> tuple[str, ...]:
        if layout_id not in self._layouts:
            text = self._conn.execute("SELECT columns FROM layouts WHERE id = ?", (layout_id,)).fetchone()[0]
            self._layouts[layout_id] = tuple(json.loads(text))
        return self._layouts[layout_id]
