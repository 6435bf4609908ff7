import io
import math

import numpy as np
import pytest

from sparksync.core.telemetry.dashboard_export import HEADER, export_csv, visible_data, write_csv
from sparksync.core.telemetry.dashboard_model import CLUSTER_STEP_S, STALE_S, DashboardModel, NodeHistory
from sparksync.core.telemetry.dashboard_series import (
    CLUSTER,
    PLOTTED_INTERFACES,
    plot_of,
    sample_values,
    series_name,
    split_name,
    tokens_series,
)
from sparksync_agent.protocol import InterfaceKind, ReadingStatus, Sample
from tests.core.dashboard_samples import FABRIC, GB, ROCE, UNSUPPORTED, gb10, memory_sample, spark_sample

T0 = 1_761_130_000.0


def test_a_spark_sample_maps_to_named_series_in_base_units():
    values = sample_values(spark_sample(1, T0, used_gb=10))
    assert values["mem.used"] == 10 * GB and values["mem.total"] == 128 * GB
    assert values[f"net.rx.{FABRIC}"] == 8e9 and values[f"net.tx.{FABRIC}"] == 16e9  # bytes/s -> bits/s
    assert values[f"rdma.rx.{ROCE}:1"] == 24e9 and values[f"rdma.tx.{ROCE}:1"] == 32e9
    assert values["gpu.util.0"] == 80.0 and values["gpu.temp.0"] == 55.0 and values["gpu.power.0"] == 40.0
    assert values["cpu.util"] == 12.5
    assert "net.rx.lo" not in values  # loopback is not a link worth plotting
    assert "net.rx.enP7s7" in values  # the management port is


def test_the_plotted_kinds_and_the_usable_status_are_the_wire_values():
    # dashboard_series names them by value, so the window can paint before the wire models load.
    assert {InterfaceKind(kind) for kind in PLOTTED_INTERFACES} == {
        InterfaceKind.fabric, InterfaceKind.management, InterfaceKind.other
    }
    assert ReadingStatus.ok == "ok"


def test_unsupported_gpu_readings_are_left_out_never_zero():
    sample = Sample(seq=1, ts=T0, gpu=[gb10(util=5.0, temp=40.0, power=UNSUPPORTED)])
    values = sample_values(sample)
    assert "gpu.power.0" not in values and values["gpu.util.0"] == 5.0
    assert not any(name.startswith("gpu.mem") for name in values)  # GB10 memory reads from /proc/meminfo


def test_series_names_split_into_kind_and_instance():
    assert split_name("net.rx.eth0.100") == ("net.rx", "eth0.100")  # VLAN names hold dots
    assert split_name("mem.used") == ("mem.used", None)
    assert tokens_series("qwen") == "tok.workload.qwen"
    assert series_name("gpu.temp", "0") == "gpu.temp.0"
    with pytest.raises(ValueError, match="unknown"):
        series_name("disk.io")
    assert plot_of(CLUSTER, "mem.used") == "cluster_memory" and plot_of("n1", "mem.used") == "memory"


def feed(model: DashboardModel, node: str, seconds: float, hz: float = 1.0, start: float = T0, used_gb=10.0):
    n = int(seconds * hz)
    for i in range(n):
        model.add_sample(node, memory_sample(i + 1, start + i / hz, used_gb))


def test_window_returns_only_the_points_in_it():
    model = DashboardModel()
    feed(model, "n1", 120)
    x, y = model.window("n1", "mem.used", model.latest_ts - 60)
    assert x[0] >= model.latest_ts - 60 and len(x) == 61
    assert np.all(y == 10 * GB)


def test_repeats_and_older_samples_are_dropped():
    model = DashboardModel()
    assert model.add_sample("n1", memory_sample(2, T0 + 2, 1))
    assert not model.add_sample("n1", memory_sample(2, T0 + 2, 1))
    assert not model.add_sample("n1", memory_sample(1, T0 + 1, 1))
    assert len(model.window("n1", "mem.used", 0)[0]) == 1


def test_cluster_capacity_is_the_sum_of_memtotal():
    model = DashboardModel()
    for i in range(8):
        model.add_sample(f"spark-{i}", memory_sample(1, T0 + i * CLUSTER_STEP_S, used_gb=50))
    assert model.capacity_bytes() == 8 * 128 * GB  # "1 TB": computed from the nodes
    assert model.used_bytes() == 8 * 50 * GB


def test_cluster_capacity_follows_the_real_memtotal():
    model = DashboardModel()
    model.add_sample("a", memory_sample(1, T0, 10, total=64 * GB))  # a 64 GB variant
    model.add_sample("b", memory_sample(1, T0 + 1, 10, total=128 * GB))
    assert model.capacity_bytes() == 192 * GB


def test_a_silent_node_leaves_the_cluster_sums():
    model = DashboardModel()
    model.add_sample("a", memory_sample(1, T0, 10))
    model.add_sample("b", memory_sample(1, T0 + 1, 20))
    model.add_sample("b", memory_sample(2, T0 + STALE_S + 5, 20))
    assert model.used_bytes() == 20 * GB and model.capacity_bytes() == 128 * GB


def test_tokens_per_workload_and_their_total():
    model = DashboardModel()
    model.add_tokens("qwen", T0, 40.0)
    model.add_tokens("minicpm", T0 + 0.5, 12.0)
    assert model.latest(CLUSTER, "tok.total") == 52.0
    _, y = model.window(CLUSTER, tokens_series("qwen"), 0)
    assert list(y) == [40.0, 40.0]  # the latest reading of each workload counts in each row


def test_one_second_rows_average_and_reach_the_listeners():
    model = DashboardModel()
    rows = []
    model.row_listeners.append(lambda node, row: rows.append((node, row)))
    for i, used in enumerate([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 5]):  # 10 Hz, then the next second
        model.add_sample("n1", memory_sample(i + 1, T0 + i / 10, used))
    node_rows = [r for n, r in rows if n == "n1"]
    assert len(node_rows) == 1 and node_rows[0].t == int(T0)
    assert node_rows[0].values["mem.used"] == pytest.approx(55 * GB)
    model.flush()
    assert [r.values["mem.used"] for n, r in rows if n == "n1"][-1] == 5 * GB


def test_an_hour_window_reaches_back_past_the_raw_tier():
    model = DashboardModel(raw_capacity=100, coarse_capacity=4000)
    feed(model, "n1", 3600 * 2, hz=1)  # the raw tier holds only the last 100 s
    x, _ = model.window("n1", "mem.used", model.latest_ts - 3600)
    assert x[0] <= model.latest_ts - 3599 and np.all(np.diff(x) > 0)


def test_history_goes_before_this_sessions_rows():
    model = DashboardModel()
    feed(model, "n1", 5, start=T0 + 100, used_gb=30)
    past = np.arange(T0, T0 + 103, dtype=float)  # overlaps this session: the overlap is dropped
    model.merge_history({"n1": NodeHistory(past, {"mem.used": np.full(len(past), 7.0 * GB)})})
    x, y = model.window("n1", "mem.used", T0)
    assert np.all(np.diff(x) > 0) and x[0] == T0
    assert y[0] == 7 * GB and y[-1] == 30 * GB
    assert model.window("n1", "mem.used", T0)[0].size == 100 + 5


def test_history_of_a_node_not_yet_seen_is_shown():
    model = DashboardModel()
    model.merge_history({"old": NodeHistory(np.array([T0]), {"mem.used": np.array([1.0])})})
    assert model.nodes == ["old"] and model.names("old") == ["mem.used"]


def test_csv_export_of_the_visible_series(tmp_path):
    model = DashboardModel()
    for i in range(3):
        model.add_sample("n1", spark_sample(i + 1, T0 + i, used_gb=10 + i))
        model.add_sample("n2", spark_sample(i + 1, T0 + i + 0.5, used_gb=20))
    shown = lambda node, name: node == "n1" and name in ("mem.used", f"net.rx.{FABRIC}")  # noqa: E731
    data = visible_data(model, T0 + 1, T0 + 2, shown)
    path = tmp_path / "out.csv"
    assert export_csv(data, path) == 4
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(HEADER)
    assert lines[1] == f"{T0 + 1:.3f},2025-10-22T10:46:41.000Z,n1,mem.used,B,11000000000"
    assert lines[3].split(",")[3:] == [f"net.rx.{FABRIC}", "bit/s", "8000000000"]


def test_csv_export_copies_so_the_buffers_can_move_on():
    model = DashboardModel(raw_capacity=3)
    feed(model, "n1", 3)
    data = visible_data(model, 0, math.inf, lambda n, s: n == "n1" and s == "mem.used")
    feed(model, "n1", 3, start=T0 + 10, used_gb=99)
    out = io.StringIO()
    write_csv(data, out)
    assert "99000000000" not in out.getvalue() and out.getvalue().count("\n") == 4
