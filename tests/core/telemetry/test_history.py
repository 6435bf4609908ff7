import json
import sqlite3
import threading
import time

import numpy as np
import pytest

from sparksync.core.base import paths
from sparksync.core.telemetry.dashboard_model import DashboardModel
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.telemetry.history import (
    DAY_S,
    MIGRATIONS,
    SCHEMA_VERSION,
    HistoryError,
    HistoryStore,
    default_path,
)
from sparksync.core.telemetry.history_recorder import HistoryRecorder
from tests.core.at_once import errors_at_once
from tests.core.dashboard_samples import GB, spark_sample
from tests.core.node_factory import paired_node

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


# --- identity: rows are filed by node id, names are labels -----------------------------------


def _names(*nodes, local_id=None) -> NodeNames:
    return NodeNames.of(nodes, local_id)


def test_rows_are_filed_by_key_and_keep_the_latest_label(tmp_path):
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        store.write(rows("id-aaaa", NOW - 10, 5), {"id-aaaa": "spark-1"})
        store.write(rows("id-aaaa", NOW - 5, 5), {"id-aaaa": "rack-1"})  # renamed meanwhile
        assert store.labels() == {"id-aaaa": "rack-1"}
        assert list(store.load(60, now=NOW)) == ["id-aaaa"] and len(store.load(60, now=NOW)["id-aaaa"].t) == 10


def _schema_1_file(path, named_rows) -> None:
    """A history as SparkSync wrote it before ids: schema 1, rows filed by node name."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL)")
    for statement in MIGRATIONS[0][1]:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 0)")
    conn.execute("INSERT INTO layouts (id, columns) VALUES (1, ?)", (json.dumps(["mem.total", "mem.used"]),))
    for name, row in named_rows:
        conn.execute("INSERT OR IGNORE INTO nodes (name) VALUES (?)", (name,))
        node = conn.execute("SELECT id FROM nodes WHERE name = ?", (name,)).fetchone()[0]
        data = np.array([row.values["mem.total"], row.values["mem.used"]], dtype="<f8").tobytes()
        conn.execute("INSERT INTO rows VALUES (?, ?, 1, ?)", (node, row.t, data))
    conn.commit()
    conn.close()


def test_a_schema_1_file_keeps_its_rows_and_they_join_their_node_by_name(tmp_path):
    path = tmp_path / "h.sqlite3"
    _schema_1_file(path, rows("spark-1", NOW - 100, 100) + rows("gone", NOW - 50, 50, used=5))
    a = paired_node("rack-1", 1, former_names=["spark-1"])  # renamed since that history was written
    with HistoryStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 2
        assert store.labels() == {"spark-1": "spark-1", "gone": "gone"}  # each name is its own key
        named = store.load_named(3600, _names(a), now=NOW)  # joined by the former name, before adopting
        assert set(named) == {"rack-1", "gone"} and len(named["rack-1"].t) == 100
        assert store.adopt({"spark-1": a.node_id}) == 1
        store.write(rows(a.node_id, NOW - 1, 1, used=30), {a.node_id: "rack-1"})
        assert store.labels() == {a.node_id: "rack-1", "gone": "gone"}
    with HistoryStore(path) as again:
        loaded = again.load_named(3600, _names(a), now=NOW)
    assert set(loaded) == {"rack-1", "gone"} and len(loaded["rack-1"].t) == 100
    assert loaded["rack-1"].values["mem.used"][-1] == 30 * GB  # the second written by id wins


def test_adopting_a_name_whose_id_has_rows_merges_them(tmp_path):
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        store.write(rows("spark-1", NOW - 10, 10))  # written under the name before it was known
        store.write(rows("id-aaaa", NOW - 5, 10, used=20), {"id-aaaa": "spark-1"})
        assert store.adopt({"spark-1": "id-aaaa", "never-seen": "id-bbbb"}) == 1
        merged = store.load(60, now=NOW + 10)
    assert list(merged) == ["id-aaaa"] and len(merged["id-aaaa"].t) == 15
    assert (merged["id-aaaa"].values["mem.used"][5:] == 20 * GB).all()


def test_a_gone_node_whose_name_is_taken_again_is_not_shown_as_the_new_one(tmp_path):
    old, new = paired_node("spark-1", 1), paired_node("spark-1", 2)  # unpaired, then another paired as spark-1
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        store.write(rows(old.node_id, NOW - 10, 5), {old.node_id: "spark-1"})
        store.write(rows(new.node_id, NOW - 5, 5, used=20), {new.node_id: "spark-1"})
        named = store.load_named(60, _names(new), now=NOW)
    assert list(named) == ["spark-1"] and (named["spark-1"].values["mem.used"] == 20 * GB).all()


def test_the_recorder_keeps_a_nodes_history_through_a_rename(tmp_path, recorder_parts):
    make, loaded, errors, _ = recorder_parts
    path = tmp_path / "h.sqlite3"
    node = paired_node("spark-1", 1)
    names = [_names(node, local_id="local-1234")]
    rec = make(path, names=lambda: names[-1])
    t = int(time.time())
    for name, row in rows("spark-1", t - 60, 30) + rows("this computer", t - 60, 30):
        rec.put(name, row)
    assert rec.flush()
    names.append(_names(node.model_copy(update={"name": "rack-1", "former_names": ["spark-1"]}),
                        local_id="local-1234"))
    for name, row in rows("spark-1", t - 30, 10) + rows("rack-1", t - 20, 20):  # the window says the old name a while
        rec.put(name, row)
    rec.request_load(3600)
    assert rec.flush() and not errors
    assert set(loaded[-1]) == {"rack-1", "this computer"} and len(loaded[-1]["rack-1"].t) == 60
    with HistoryStore(path) as store:
        assert set(store.load(3600)) == {node.node_id, "local-1234"}
        assert store.labels()[node.node_id] == "rack-1"


def test_stores_opening_one_new_file_at_once_migrate_it_once(tmp_path):
    # The app's recorder and a reader (the GUI's history view, a CLI export) may open a
    # history that does not exist yet at the same moment; neither may fail on the other's tables.
    for attempt in range(10):
        path = tmp_path / f"h{attempt}.sqlite3"
        errors = errors_at_once(lambda p=path: HistoryStore(p).close(), threads=6)
        assert errors == []
        with HistoryStore(path) as store:
            assert store.schema_version() == SCHEMA_VERSION
