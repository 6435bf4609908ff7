"""How fast the benchmark history view opens: 1,000 stored runs in under 300 ms.

The history holds 1,000 runs, each with llama-benchy's full JSON including
per-second throughput series (about 20 KB, as a run saved with
--save-total-throughput-timeseries is), so listing them must not read those
blobs. Figures are printed beside two anchors from the same file: a plain
``SELECT count(*)`` (the floor for touching the table at all) and reading
every blob (what a listing that loaded the JSON would cost).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time

import pytest

from sparksync.core.bench.history import HistoryStore
from tests.core.bench.records import inference_run
from tests.perf.report import Report, assert_targets

pytestmark = pytest.mark.perf

RUNS = 1000
TARGET_MS = 300.0
REPEATS = 5
SERIES_POINTS = 800  # three runs of ~270 one-second windows each


def _heavy_run(i: int):
    record = inference_run(1 + i % 8, 10.0 + i % 50, 1000.0 + i, minutes=i, label=f"run {i}",
                           topology="switch", collective_backend="nccl" if i % 2 else "roceante")
    series = [[round(t * 1.0, 1), 50.0 + (t * 7 % 13)] for t in range(SERIES_POINTS)]
    record.result["benchmarks"][0]["throughput_over_time"] = [series]
    return record


@pytest.fixture(scope="module")
def full_history(tmp_path_factory):
    path = tmp_path_factory.mktemp("history") / "bench-history.sqlite3"
    history = HistoryStore(path)
    for i in range(RUNS):
        history.add(_heavy_run(i))
    return path


def _ms(action) -> tuple[float, object]:
    start = time.perf_counter()
    value = action()
    return (time.perf_counter() - start) * 1000, value


def _count(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def _read_all_blobs(path) -> int:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT result_json FROM runs")
        return sum(len(json.loads(row[0])["benchmarks"]) for row in rows)


def test_history_view_lists_a_thousand_runs_quickly(full_history, perf_out):
    report = Report("bench_history_view")
    size_mb = full_history.stat().st_size / 1e6
    cold_ms, items = _ms(lambda: HistoryStore(full_history).list_runs())
    warm = [_ms(lambda: HistoryStore(full_history).list_runs())[0] for _ in range(REPEATS)]
    count_ms = statistics.median(_ms(lambda: _count(full_history))[0] for _ in range(REPEATS))
    blobs_ms, _ = _ms(lambda: _read_all_blobs(full_history))

    report.figure("runs", len(items), "runs listed")
    report.figure("file_mb", round(size_mb, 1), "history file", "MB")
    report.figure("open_and_list_first_ms", round(cold_ms, 1), "open + list, first time", "ms")
    report.figure("open_and_list_median_ms", round(statistics.median(warm), 1), "open + list, median of 5",
                  "ms")
    report.figure("anchor_count_ms", round(count_ms, 2), "anchor: SELECT count(*) on a new connection", "ms")
    report.figure("anchor_all_blobs_ms", round(blobs_ms, 1), "anchor: read and parse every result JSON", "ms")
    report.check("all runs listed", len(items) == RUNS, f"{len(items)} of {RUNS}")
    worst = max(cold_ms, *warm)
    report.check("history view opens in time", worst < TARGET_MS,
                 f"slowest {worst:.1f} ms < {TARGET_MS:.0f} ms")
    report.publish(perf_out)
    assert_targets(report)
