"""The SQLite history: round trips, a listing that reads no JSON, migrations, damaged files."""

from __future__ import annotations

import json
import sqlite3

import pytest

from sparksync.core.bench import history as history_module
from sparksync.core.bench.context import RunContext
from sparksync.core.bench.errors import HistoryError, RunNotFoundError
from sparksync.core.bench.history import MIGRATIONS, HistoryStore, default_history_path
from sparksync.core.bench.recording import store, training_record
from sparksync.core.bench.telemetry import TelemetrySummary
from sparksync.core.base.paths import data_dir
from sparksync.core.nodes.registry import Registry
from tests.core.at_once import errors_at_once
from tests.core.bench.records import inference_run
from tests.core.node_factory import paired_node


@pytest.fixture
def history(tmp_path):
    return HistoryStore(tmp_path / "history.sqlite3")


def user_version(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def test_the_history_lives_in_the_clients_data_dir():
    store_ = HistoryStore()
    assert store_.path == default_history_path() == data_dir() / "bench-history.sqlite3"
    assert store_.path.exists() and user_version(store_.path) == len(MIGRATIONS)


def test_a_run_comes_back_exactly_as_stored(history):
    record = inference_run(8, 52.58, 3000.0, topology="switch", collective_backend="roceante",
                           recipe="qwen-tp8", recipe_version="3", engine="vllm", engine_version="0.11",
                           nodes=tuple(f"spark-{i}" for i in range(8)), label="first light",
                           telemetry=TelemetrySummary(peak_memory_bytes=120 * 2**30, energy_joules=5e4))
    stored = store(history, record)
    assert stored.id == 1
    assert history.get(1) == stored  # llama-benchy's JSON, context, telemetry and all


def test_telemetry_is_optional_for_now(history):
    run_id = history.add(inference_run(1, 11.86, 1500.0))
    assert history.get(run_id).context.telemetry is None


def test_listing_is_newest_first_and_filters(history):
    for minutes, nodes in ((0, 1), (10, 8), (5, 2)):
        sweep = "s1" if nodes > 1 else None
        history.add(inference_run(nodes, 10.0 * nodes, 100.0, minutes=minutes, sweep_id=sweep))
    history.add(training_record("nanochat", 68079.0, RunContext(cluster_size=8)))
    items = history.list_runs()
    assert [i.cluster_size for i in items] == [8, 8, 2, 1]  # the training run was stored "now"
    assert items[0].kind == "training" and items[0].train_tps == 68079.0
    assert [i.id for i in history.list_runs(kind="inference", limit=2)] == [2, 3]
    assert {i.id for i in history.list_runs(sweep_id="s1")} == {2, 3}
    assert history.count() == 4


def test_listing_never_parses_the_json_columns(history):
    """The history view must stay fast with big results: prove it reads no blob by breaking them all."""
    run_id = history.add(inference_run(1, 11.86, 1500.0))
    with sqlite3.connect(history.path) as conn:
        conn.execute("UPDATE runs SET result_json = '{broken', details_json = '{broken', "
                     "profile_json = '{broken', telemetry_json = '{broken' WHERE id = ?", (run_id,))
    (item,) = history.list_runs()
    assert item.decode_tps == 11.86 and item.profile_name == "published"
    with pytest.raises(ValueError):
        history.get(run_id)  # opening the run does read them


def test_a_missing_run_says_how_to_find_one(history):
    with pytest.raises(RunNotFoundError, match="no stored benchmark run has id 7; `sparksync bench list`"):
        history.get(7)
    with pytest.raises(RunNotFoundError):
        history.delete(7)


def test_delete_removes_the_run(history):
    run_id = history.add(inference_run(1, 11.86, 1500.0))
    history.delete(run_id)
    assert history.count() == 0


def test_the_schema_refuses_impossible_rows(history):
    with sqlite3.connect(history.path) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO runs (created_at, kind, status, model, cluster_size) "
                     "VALUES ('2026-01-01', 'inference', 'finished', 'm', 1)")


def test_a_newer_migration_is_applied_once_and_keeps_the_runs(tmp_path, monkeypatch):
    path = tmp_path / "history.sqlite3"
    HistoryStore(path).add(inference_run(1, 11.86, 1500.0))
    v2 = ("ALTER TABLE runs ADD COLUMN note TEXT", "UPDATE runs SET note = 'migrated ' || model")
    monkeypatch.setattr(history_module, "MIGRATIONS", (*MIGRATIONS, v2))
    history = HistoryStore(path)
    HistoryStore(path)  # a second open changes nothing
    assert user_version(path) == len(MIGRATIONS) + 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT note FROM runs").fetchall() == [("migrated qwen",)]
    assert history.get(1).summary.decode_tps == 11.86


def test_a_failed_migration_leaves_the_file_at_the_step_before(tmp_path):
    path = tmp_path / "history.sqlite3"
    HistoryStore(path).add(inference_run(1, 11.86, 1500.0))
    broken = ("ALTER TABLE runs ADD COLUMN note TEXT", "THIS IS NOT SQL")
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.OperationalError):
        history_module.migrate(conn, path, (*MIGRATIONS, broken))
    assert user_version(path) == len(MIGRATIONS)
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    assert "note" not in columns


def test_readers_opening_one_new_file_at_once_all_get_it(tmp_path):
    # The Benchmarks panel lists runs, evals and sweeps in three workers as it first shows; on a
    # new file their switches to WAL met, and one answered "database is locked" without waiting.
    for attempt in range(60):
        path = tmp_path / f"h{attempt}.sqlite3"
        errors = errors_at_once(lambda p=path: HistoryStore(p).list_runs(), threads=4)
        assert errors == []
        assert user_version(path) == len(MIGRATIONS)


def test_a_history_from_a_newer_sparksync_is_refused(tmp_path):
    path = tmp_path / "history.sqlite3"
    HistoryStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(HistoryError, match="schema version 99, newer than this SparkSync knows"):
        HistoryStore(path)


def test_a_damaged_file_says_to_move_it_away(tmp_path):
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryError, match="move it away"):
        HistoryStore(path)


# --- identity: a run's nodes follow renames ---------------------------------------------------


def _paired(*names: str) -> list:
    registry = Registry()
    nodes = [paired_node(name, i) for i, name in enumerate(names, 1)]
    for node in nodes:
        registry.add(node)
    return nodes


def test_a_runs_nodes_keep_their_ids_and_show_their_names_now(history):
    a, b = _paired("spark-1", "spark-2")
    telemetry = TelemetrySummary(peak_memory_bytes=2**30, nodes=("spark-1", "spark-2"))
    run_id = history.add(inference_run(2, 20.0, 500.0, nodes=("spark-1", "spark-2"), telemetry=telemetry))
    with sqlite3.connect(history.path) as conn:
        (ids,) = conn.execute("SELECT node_ids_json FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert json.loads(ids) == {"spark-1": a.node_id, "spark-2": b.node_id}
    Registry().rename("spark-1", "rack-1")
    got = HistoryStore(history.path).get(run_id)
    assert got.context.nodes == ("rack-1", "spark-2") and got.context.telemetry.nodes == ("rack-1", "spark-2")


def test_a_version_2_history_is_migrated_and_its_runs_find_their_nodes(tmp_path):
    path = tmp_path / "history.sqlite3"
    with sqlite3.connect(path) as conn:
        history_module.migrate(conn, path, MIGRATIONS[:2])  # the file as the previous SparkSync left it
        conn.execute("INSERT INTO runs (created_at, kind, status, model, cluster_size, nodes_json) "
                     "VALUES ('2026-10-22T12:00:00+00:00', 'inference', 'complete', 'qwen', 2, ?)",
                     (json.dumps(["spark-1", "gone"]),))
    assert user_version(path) == 2
    (a,) = _paired("spark-1")
    Registry().rename("spark-1", "rack-1")  # renamed before this SparkSync first opened the file
    history = HistoryStore(path)
    assert user_version(path) == len(MIGRATIONS) == 5
    with sqlite3.connect(path) as conn:
        (ids,) = conn.execute("SELECT node_ids_json FROM runs").fetchone()
    assert json.loads(ids) == {"spark-1": a.node_id}  # the former name found the node; "gone" has none
    Registry().rename("rack-1", "rack-9")
    assert history.get(1).context.nodes == ("rack-9", "gone")
