"""use_wal: a switch to WAL that another connection holds up is tried again, anything else is not."""

from __future__ import annotations

import sqlite3

import pytest

from sparksync.core.base import sqlite_wal
from sparksync.core.base.sqlite_wal import use_wal


class Answers:
    """A connection whose pragma fails with the given errors first."""

    def __init__(self, *errors: str):
        self.errors = list(errors)
        self.calls = 0

    def execute(self, sql: str):
        assert sql == "PRAGMA journal_mode=WAL"
        self.calls += 1
        if self.errors:
            raise sqlite3.OperationalError(self.errors.pop(0))


def test_a_locked_switch_is_tried_again_until_it_goes_through():
    conn = Answers("database is locked", "database is locked")
    use_wal(conn)  # type: ignore[arg-type]
    assert conn.calls == 3


def test_other_errors_are_raised_at_once():
    conn = Answers("disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        use_wal(conn)  # type: ignore[arg-type]
    assert conn.calls == 1


def test_a_lock_that_stays_is_raised_after_the_wait(monkeypatch):
    monkeypatch.setattr(sqlite_wal.time, "sleep", lambda s: None)
    clock = iter(range(100))
    monkeypatch.setattr(sqlite_wal.time, "monotonic", lambda: next(clock))
    conn = Answers(*["database is locked"] * 50)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(conn, wait_s=3)  # type: ignore[arg-type]
    assert conn.calls == 4  # tried at 1, 2, 3 s, and the try at 4 s is past the wait


def test_a_real_file_ends_in_wal(tmp_path):
    with sqlite3.connect(tmp_path / "h.sqlite3") as conn:
        use_wal(conn)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
