import sqlite3
import threading
import time

import numpy as np
import pytest

from sparksync.core.base import paths
from sparksync.core.telemetry.dashboard_model import DashboardModel
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.telemetry.history import DAY_S, SCHEMA_VERSION, HistoryError, HistoryStore, default_path
from sparksync.core.telemetry.history_recorder import HistoryRecorder
from tests.core.dashboard_samples import GB, spark_sample

NOW = 1_761_130_000


def rows(node: str, start: int, n: int, used: float = 10.0, extra: dict | None = None):
    return [
        (node, SecondRow(start + i, {"mem.used": used * GB, "mem.total": 128 * GB, **(extra or {})}))
        for i in range(n)
    ]


def test_lives_in_the_data_dir_with_a_versioned_schema():
    with HistoryStore() as store:
        assert store.path == default_path() and store.path.parent == paths.data_dir()
        assert store.schema_version() == SCHEMA_VERSION
    conn = sqlite3.connect(default_path())
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == list(
        range(1, SCHEMA_VERSION + 1)
    )
    conn.close()


def test_written_rows_come_back_after_reopening(tmp_path):
    path = tmp_path / "h.sqlite3"
    with HistoryStore(path) as store:
        store.write(rows("spark-1", NOW - 7200, 7200) + rows("spark-2", NOW - 100, 100, used=20))
    with HistoryStore(path) as reopened:  # a new instance on the same file: the app reopened
        loaded = reopened.load(3600, now=NOW)
    assert set(loaded) == {"spark-1", "spark-2"}
    one = loaded["spark-1"]
    assert one.t[0] == NOW - 3600 and one.t[-1] == NOW - 1 and len(one.t) == 3600
    assert np.all(one.values["mem.used"] == 10 * GB) and np.all(
        loaded["spark-2"].values["mem.used"] == 20 * GB
    )


def test_a_node_that_gains_a_series_keeps_both_layouts(tmp_path):
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        store.write(rows("n", NOW - 10, 5))
        store.write(rows("n", NOW - 5, 5, extra={"net.rx.eth1": 8e9}))
        loaded = store.load(60, now=NOW)["n"]
    rx = loaded.values["net.rx.eth1"]
    assert np.isnan(rx[:5]).all() and (rx[5:] == 8e9).all()
    assert (loaded.values["mem.used"] == 10 * GB).all()


def test_pruning_thins_old_rows_and_drops_the_expired(tmp_path):
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        store.write(rows("n", NOW - 8 * DAY_S, 60))  # past retention: gone
        store.write(rows("n", NOW - 2 * DAY_S, 60))  # older than a day: one in 10 s
        store.write(rows("n", NOW - 3600, 60))  # recent: all kept
        store.prune(now=NOW)
        assert store.count() == 6 + 60


def test_a_newer_schema_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "h.sqlite3"
    HistoryStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(HistoryError, match="newer SparkSync.*Upgrade SparkSync, or move the file aside"):
        HistoryStore(path)


def test_a_corrupt_file_says_what_to_do(tmp_path):
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryError, match="Move the file aside"):
        HistoryStore(path)


@pytest.fixture
def recorder_parts():
    loaded, errors, stopped = [], [], threading.Event()
    made = []

    def make(path=None, **kwargs) -> HistoryRecorder:
        rec = HistoryRecorder(
            path, on_loaded=loaded.append, on_error=errors.append, on_stopped=stopped.set, **kwargs
        ).start()
        made.append(rec)
        return rec

    yield make, loaded, errors, stopped
    for rec in made:
        rec.stop()
        assert rec.join(10)


def test_the_recorder_writes_in_batches_off_the_callers_thread(tmp_path, recorder_parts):
    make, loaded, errors, stopped = recorder_parts
    rec = make(tmp_path / "h.sqlite3", flush_every_s=60)
    t = int(time.time())
    for node, row in rows("n", t - 30, 30):
        rec.put(node, row)
    assert rec.rows_written == 0  # nothing written yet: put() only queues
    rec.request_load(3600)  # a load first writes what is queued, so it sees it
    rec.stop()
    assert rec.join(10) and stopped.is_set()
    assert rec.rows_written == 30 and not errors
    assert len(loaded) == 1 and len(loaded[0]["n"].t) == 30


def test_model_rows_survive_a_restart_of_the_app(tmp_path, recorder_parts):
    make, loaded, errors, _ = recorder_parts
    path = tmp_path / "h.sqlite3"
    first = make(path)
    model = DashboardModel()
    model.row_listeners.append(first.put)
    start = time.time() - 600
    for i in range(300):  # 5 minutes at 1 Hz, ten minutes ago
        model.add_sample("spark-1", spark_sample(i + 1, start + i, used_gb=42))
    model.flush()
    assert first.flush()
    first.stop()
    assert first.join(10)

    second = make(path)  # the reopened app
    second.request_load(3600)
    assert second.flush() and loaded
    reopened = DashboardModel()
    reopened.merge_history(loaded[-1])
    x, y = reopened.window("spark-1", "mem.used", time.time() - 3600)
    assert len(x) == 300 and np.all(y == 42 * GB) and not errors
    assert reopened.capacity_bytes() is None  # no live sample yet; history shows the plots only
    cx, cy = reopened.window("(cluster)", "mem.total", time.time() - 3600)
    assert len(cx) > 0 and np.all(cy == 128 * GB)


def test_an_unusable_file_reaches_on_error_and_loads_answer_empty(tmp_path, recorder_parts):
    make, loaded, errors, _ = recorder_parts
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"garbage" * 1000)
    rec = make(path)
    rec.put("n", SecondRow(1, {"mem.used": 1.0}))
    rec.request_load(60)
    assert rec.flush()
    assert loaded == [{}]
    assert len(errors) == 1 and errors[0].startswith("History is off:") and "Move the file aside" in errors[0]
