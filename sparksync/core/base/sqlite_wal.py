"""Switching an SQLite file to WAL, so that readers never wait for the writer.

Every history file the client keeps (telemetry, benchmarks) is opened by
several threads and processes at once: the recorder, the GUI's views, a CLI
export. On a file that is still in the rollback journal, ``PRAGMA
journal_mode=WAL`` answers "database is locked" at once, without sqlite's
busy wait, while another connection is switching the same file; so
``use_wal`` waits a little and tries again. Once a file is in WAL (it stays so)
the pragma changes nothing.
"""

from __future__ import annotations

import sqlite3
import time

from sparksync.core.base.backoff import Backoff

WAL_WAIT_S = 5.0  # the busy timeout the stores give every other statement
WAL_RETRY = Backoff(first_s=0.01, factor=2.0, max_s=0.2, jitter=0.5)


def use_wal(conn: sqlite3.Connection, wait_s: float = WAL_WAIT_S) -> None:
    """Put ``conn``'s file in WAL mode; raises the last ``OperationalError`` after ``wait_s``."""
    delays = WAL_RETRY.delays()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(next(delays))
