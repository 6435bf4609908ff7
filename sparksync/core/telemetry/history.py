"""Long-term telemetry: one row per node per second, in SQLite in the client's data dir.

The dashboard's one-second rows (see :mod:`sparksync.core.telemetry.downsample`) go
here, so a reopened app shows the last hour, older than any agent's ring
buffer. A row stores its values as one float64 blob in the order of a
*layout* (the list of series names it carries), so a node that gains an
interface just starts using a new layout.

Retention thins as data ages, to keep a week of 8 nodes within a few hundred
MB: every second for a day, one row in 10 s for three days, one in 60 s up to
``retention_s`` (7 days), then nothing.

Rows are filed by a node's *key*: its stable id (``PairedNode.node_id``,
this computer's local agent id), so a rename keeps its history; the
cluster's own rows use ``CLUSTER``. Each key keeps the name it was last
written under, as a label. Schema 1 filed rows by name: migrating keeps
each name as its key, and ``adopt`` files those under their node's id once
a caller knows which node a name stands for (the recorder does on opening).

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sparksync.core.base import paths
from sparksync.core.telemetry.dashboard_model import NodeHistory
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.lazy import lazy_module
from sparksync.core.base.sqlite_wal import use_wal

if TYPE_CHECKING:
    import numpy as np

    from sparksync.core.nodes.identity import NodeNames
else:
    np = lazy_module("numpy")  # the window paints before there is a sample to store

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
    (
        # Nodes are filed by a stable key (the node's id); the name becomes a label that may change,
        # so it is no longer unique. The integer ids stay, so every row keeps its node.
        2,
        (
            "CREATE TABLE nodes_v2 (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, name TEXT NOT NULL)",
            "INSERT INTO nodes_v2 (id, key, name) SELECT id, name, name FROM nodes",
            "DROP TABLE nodes",
            "ALTER TABLE nodes_v2 RENAME TO nodes",
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
        self._node_ids: dict[str, int] = {}  # key -> nodes.id
        self._labels: dict[str, str] = {}  # key -> the name stored with it
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
            use_wal(conn)  # readers never wait for the writer
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
            # Another store (the app's writer and a reader, two processes) may have opened the
            # same new file at once and migrated it since we looked: under the write lock, look again.
            done = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0
            if done >= version:
                conn.execute("COMMIT")
                return
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

    def write(self, rows: Iterable[tuple[str, SecondRow]], labels: Mapping[str, str] | None = None) -> int:
        """Store ``(key, row)`` pairs in one transaction; a second stored twice keeps the last.

        ``labels`` gives a key's name now (default: the key itself for a new one).
        """
        labels = labels or {}
        try:
            with self._transaction():
                return self._conn.executemany(
                    "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?)",
                    (self._encode(k, labels.get(k, k), r) for k, r in rows),
                ).rowcount
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def load(self, window_s: float, now: float | None = None) -> dict[str, NodeHistory]:
        """Each key's rows of the last ``window_s`` seconds, oldest first."""
        t0 = math.floor((time.time() if now is None else now) - window_s)
        try:
            cursor = self._conn.execute(
                "SELECT nodes.key, rows.t, rows.layout_id, rows.data FROM rows JOIN nodes ON nodes.id = rows.node_id "
                "WHERE rows.t >= ? ORDER BY rows.node_id, rows.t",
                (t0,),
            )
            grouped: dict[str, list[tuple[int, int, bytes]]] = {}
            for key, t, layout_id, data in cursor:
                grouped.setdefault(key, []).append((t, layout_id, data))
            return {key: self._columns(rows) for key, rows in grouped.items()}
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def load_named(self, window_s: float, names: NodeNames, now: float | None = None) -> dict[str, NodeHistory]:
        """``load`` by the nodes' current names.

        Rows still filed under a name (not adopted yet) join the node that name
        stands for. A gone node's rows keep the name they were written with,
        unless a paired node has that name now: they are not that node's.
        """
        loaded, labels = self.load(window_s, now), self.labels()
        named: dict[str, NodeHistory] = {}
        orphans: dict[str, NodeHistory] = {}
        for key, history in loaded.items():
            node_id = key if key in names.names else names.id_of(key)
            current = names.name_of(node_id) if node_id is not None else None
            if current is not None:
                named[current] = _merged(named[current], history) if current in named else history
            elif names.id_of(label := labels.get(key, key)) is None:
                orphans[label] = _merged(orphans[label], history) if label in orphans else history
        return {**orphans, **named}

    def labels(self) -> dict[str, str]:
        """Every key and the name it was last written under."""
        try:
            return dict(self._conn.execute("SELECT key, name FROM nodes").fetchall())
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def adopt(self, ids: Mapping[str, str]) -> int:
        """File the rows kept under a name (schema 1, or written before the name was known) under its id.

        ``ids`` maps names to node ids; returns how many names moved.
        """
        moved = 0
        try:
            with self._transaction():
                for name, node_id in ids.items():
                    if name != node_id and self._adopt_one(name, node_id):
                        moved += 1
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc
        if moved:
            self._node_ids.clear()
            self._labels.clear()
            log.info("telemetry history: %d node name(s) filed under their node's id", moved)
        return moved

    def set_labels(self, labels: Mapping[str, str]) -> None:
        """Give the keys in ``labels`` (node id -> name now) their current names (after a rename)."""
        try:
            with self._transaction():
                self._conn.executemany(
                    "UPDATE nodes SET name = ? WHERE key = ? AND name != ?",
                    ((name, key, name) for key, name in labels.items()),
                )
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc
        self._labels.clear()
        self._node_ids.clear()

    def _adopt_one(self, name: str, node_id: str) -> bool:
        old = self._conn.execute("SELECT id FROM nodes WHERE key = ?", (name,)).fetchone()
        if old is None:
            return False
        new = self._conn.execute("SELECT id FROM nodes WHERE key = ?", (node_id,)).fetchone()
        if new is None:
            self._conn.execute("UPDATE nodes SET key = ? WHERE id = ?", (node_id, old[0]))
            return True
        # Both exist (rows written under the id since): merge; a second in both keeps the id's row.
        self._conn.execute("UPDATE OR IGNORE rows SET node_id = ? WHERE node_id = ?", (new[0], old[0]))
        self._conn.execute("DELETE FROM rows WHERE node_id = ?", (old[0],))
        self._conn.execute("DELETE FROM nodes WHERE id = ?", (old[0],))
        return True

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
            self._labels.clear()
            self._layout_ids.clear()
            raise

    def count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM rows").fetchone()[0]

    # --- encoding ---------------------------------------------------------------

    def _encode(self, key: str, label: str, row: SecondRow) -> tuple[int, int, int, bytes]:
        names = tuple(sorted(row.values))
        data = np.array([row.values[n] for n in names], dtype="<f8").tobytes()
        return self._node_id(key, label), int(row.t), self._layout_id(names), data

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

    def _node_id(self, key: str, label: str) -> int:
        if key not in self._node_ids:
            self._conn.execute("INSERT OR IGNORE INTO nodes (key, name) VALUES (?, ?)", (key, label))
            row = self._conn.execute("SELECT id, name FROM nodes WHERE key = ?", (key,)).fetchone()
            self._node_ids[key], self._labels[key] = row
        if self._labels[key] != label:  # renamed: the label follows
            self._conn.execute("UPDATE nodes SET name = ? WHERE id = ?", (label, self._node_ids[key]))
            self._labels[key] = label
        return self._node_ids[key]

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


def _merged(a: NodeHistory, b: NodeHistory) -> NodeHistory:
    """Two histories of one node as one, by time; a second in both keeps ``b``'s row."""
    t = np.concatenate([a.t, b.t])
    names = list(dict.fromkeys([*a.values, *b.values]))
    values = {
        n: np.concatenate([a.values.get(n, np.full(len(a.t), np.nan)), b.values.get(n, np.full(len(b.t), np.nan))])
        for n in names
    }
    order = np.argsort(t, kind="stable")
    t = t[order]
    keep = np.append(t[1:] != t[:-1], True)  # the last of equal times: b's
    return NodeHistory(t[keep], {n: v[order][keep] for n, v in values.items()})
