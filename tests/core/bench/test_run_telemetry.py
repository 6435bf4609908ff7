"""The telemetry summary of a run, read from the client's telemetry history for the run's window.

The rows go through the real history file (sparksync.core.telemetry.history), as the
app's recorder writes them: one row per node per second, values in base
units (bytes, bits/s, W). Expected figures are worked out by hand below.
"""

from __future__ import annotations

import threading

import pytest

from sparksync.core.bench.run_telemetry import summarize, summary_from_store
from sparksync.core.telemetry.dashboard_series import CLUSTER
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.telemetry.history import HistoryStore, default_path

T0 = 1_790_000_000  # whole seconds, as the recorder's rows are
GB = 1e9


def node_row(t: int, i: int, node: int) -> SecondRow:
    """Second ``i`` of a node: memory climbs 1 GB a second; the fabric carries 8 + 2 Gb/s; 100 W."""
    return SecondRow(t, {
        "mem.used": (40 + i + 10 * node) * GB,
        "mem.total": 128 * GB,
        "rdma.rx.rocep1s0f0:1": 8e9,         # 8 Gb/s = 1 GB/s
        "rdma.tx.rocep1s0f0:1": 8e9,         # 1 GB/s
        "net.rx.enp1s0f0np0": 8e8,           # CX-7 IP traffic: 0.1 GB/s
        "net.tx.enp1s0f0np0": 8e8,           # 0.1 GB/s
        "net.rx.enP7s7": 8e9,                # management link: not fabric
        "gpu.power.0": 100.0,
    })


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "history.sqlite3"
    with HistoryStore(path, retention_s=10 * 365 * 86400) as store:
        rows = [(f"spark-{n}", node_row(T0 + i, i, n)) for n in (0, 1) for i in range(60)]
        rows += [(CLUSTER, SecondRow(T0 + i, {"mem.used": 500 * GB})) for i in range(60)]
        store.write(rows)
    return path


def test_the_window_is_summarised_by_hand(store_path):
    # Seconds 10..20 inclusive: 11 rows per node.
    summary = summary_from_store(T0 + 10, T0 + 20, path=store_path, settle_s=0)
    # Peak: spark-1 at second 20 uses 40 + 20 + 10 = 70 GB; the cluster's sum is no node.
    assert summary.peak_memory_bytes == 70 * GB
    # Fabric per node: 1 + 1 + 0.1 + 0.1 = 2.2 GB/s both ways; the management link is left out.
    assert summary.mean_link_bytes_per_s == pytest.approx(2.2 * GB)
    # Energy: 2 nodes x 11 seconds x 100 W = 2,200 J.
    assert summary.energy_joules == pytest.approx(2200.0)
    assert summary.nodes == ("spark-0", "spark-1") and summary.seconds == 11 and summary.sample_count == 22


def test_only_the_runs_nodes_count_when_they_are_named(store_path):
    summary = summary_from_store(T0 + 10, T0 + 20, nodes=("spark-0",), path=store_path, settle_s=0)
    assert summary.peak_memory_bytes == 60 * GB and summary.energy_joules == pytest.approx(1100.0)
    assert summary.nodes == ("spark-0",)


def test_no_rows_in_the_window_is_no_summary(store_path):
    assert summary_from_store(T0 + 1000, T0 + 1010, path=store_path, settle_s=0) is None
    assert summary_from_store(T0 + 10, T0 + 20, nodes=("spark-9",), path=store_path, settle_s=0) is None


def test_without_a_telemetry_history_there_is_none_and_none_is_made():
    assert summary_from_store(T0, T0 + 10, settle_s=0) is None
    assert not default_path().exists()


def test_a_node_without_power_or_fabric_readings_leaves_those_figures_empty():
    import numpy as np

    from sparksync.core.telemetry.dashboard_model import NodeHistory

    cpu_only = NodeHistory(np.array([T0, T0 + 1.0]), {"mem.used": np.array([1e9, 2e9]),
                                                        "net.rx.eth0": np.array([1e6, 1e6])})
    summary = summarize({"laptop": cpu_only}, T0, T0 + 1)
    assert summary.peak_memory_bytes == 2e9
    assert summary.mean_link_bytes_per_s is None and summary.energy_joules is None


def test_the_last_seconds_written_late_are_waited_for(tmp_path):
    path = tmp_path / "history.sqlite3"
    with HistoryStore(path) as store:
        store.write([("spark-0", node_row(T0 + i, i, 0)) for i in range(5)])
    now = float(T0 + 9)
    written = threading.Event()

    def recorder_writes_the_rest():
        with HistoryStore(path) as late:
            late.write([("spark-0", node_row(T0 + i, i, 0)) for i in range(5, 10)])
        written.set()

    writer = threading.Timer(0.3, recorder_writes_the_rest)
    writer.start()
    try:
        summary = summary_from_store(T0, now, path=path, settle_s=60)
    finally:
        writer.join()
    assert written.is_set() and summary.seconds == 10
    assert summary.peak_memory_bytes == 49 * GB
