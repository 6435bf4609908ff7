"""The dashboard view, fed Spark-shaped samples directly (offscreen Qt, no agents)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PySide6.QtGui import QImage

from sparksync.core.telemetry.dashboard_series import CLUSTER
from sparksync.core.base.units import MemoryUnit
from sparksync.gui.dashboard.dashboard_view import REDRAW_HZ
from tests.core.dashboard_samples import FABRIC, GB, ROCE, spark_sample
from tests.gui.dashboard_fixtures import NOW, drawn, feed, original

pytestmark = pytest.mark.gui

NODES = ["spark-1", "spark-2", "spark-3"]


def test_plots_receive_every_nodes_series(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 30))
    for node in NODES:
        x, y = original(view.curve(node, "mem.used"))
        assert len(x) == 30 and np.all(np.diff(x) > 0)
        assert np.all(y == 10.0)  # GB on the axis
        for name in (f"net.rx.{FABRIC}", f"rdma.tx.{ROCE}:1", "gpu.util.0", "gpu.temp.0", "gpu.power.0"):
            assert len(original(view.curve(node, name))[0]) == 30, name
    shown = {key for key, plot in view.plots.items() if plot.isVisible()}
    assert shown == {
        "memory",
        "cluster_memory",
        "network",
        "rdma",
        "utilisation",
        "tokens",
        "gpu_temp",
        "gpu_power",
    }


def test_plots_without_data_stay_hidden_but_tokens_has_a_placeholder(qtbot, model, view):
    from tests.core.dashboard_samples import memory_sample

    drawn(qtbot, view, lambda: model.add_sample("laptop", memory_sample(1, NOW, 8)))
    assert not view.plots["rdma"].isVisible() and not view.plots["gpu_power"].isVisible()
    tokens = view.plots["tokens"]
    assert tokens.isVisible() and tokens.placeholder.isVisible()
    assert "workload" in tokens.placeholder.textItem.toPlainText()


def test_the_window_setting_is_honoured(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, ["spark-1"], 15 * 60))
    assert view.window_s == 600
    x, _ = original(view.curve("spark-1", "mem.used"))
    assert x[0] >= NOW - 600 and len(x) == 601
    drawn(qtbot, view, lambda: view.set_window(60))
    x, _ = original(view.curve("spark-1", "mem.used"))
    assert x.min() >= NOW - 60 and len(x) == 61  # 1 min shows only the last minute's points
    assert view.plots["memory"].view_box.viewRange()[0] == pytest.approx([NOW - 60, NOW])
    drawn(qtbot, view, lambda: view.set_window(3600))
    assert len(original(view.curve("spark-1", "mem.used"))[0]) == 15 * 60  # all there is


def test_plots_share_one_time_axis(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 20))
    ranges = {key: tuple(p.view_box.viewRange()[0]) for key, p in view.plots.items() if p.isVisible()}
    assert len(set(ranges.values())) == 1


def test_toggles_hide_and_show_nodes_and_series(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 10))
    drawn(
        qtbot,
        view,
        lambda: (view.toggles.set_node_shown("spark-2", False), feed(model, NODES, 1, end=NOW + 1)),
    )
    assert not view.curve("spark-2", "mem.used").isVisible() and view.curve("spark-1", "mem.used").isVisible()
    drawn(
        qtbot,
        view,
        lambda: (view.toggles.set_kind_shown("net.tx", False), feed(model, NODES, 1, end=NOW + 2)),
    )
    assert not view.curve("spark-1", f"net.tx.{FABRIC}").isVisible()
    assert view.curve("spark-1", f"net.rx.{FABRIC}").isVisible()
    drawn(
        qtbot,
        view,
        lambda: (view.toggles.set_node_shown("spark-2", True), feed(model, NODES, 1, end=NOW + 3)),
    )
    assert view.curve("spark-2", "mem.used").isVisible()


def test_pause_freezes_the_view_while_the_buffers_fill(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, ["spark-1"], 10))
    view.set_paused(True)
    assert view.pause_button.text() == "Resume"
    feed(model, ["spark-1"], 5, end=NOW + 5)
    ticks = view.ticks
    qtbot.waitUntil(lambda: view.ticks >= ticks + REDRAW_HZ // 2, timeout=5_000)  # the timer ran on
    assert len(original(view.curve("spark-1", "mem.used"))[0]) == 10  # the view did not move
    assert len(model.window("spark-1", "mem.used", 0)[0]) == 15  # the buffers did
    drawn(qtbot, view, lambda: view.set_paused(False))
    assert len(original(view.curve("spark-1", "mem.used"))[0]) == 15


def test_zooming_one_plot_zooms_all_and_pauses(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 120))
    memory = view.plots["memory"].view_box
    memory.setXRange(NOW - 30, NOW - 10, padding=0)
    memory.sigRangeChangedManually.emit([True, False])  # what a mouse wheel or drag emits
    assert view.paused
    assert view.plots["network"].view_box.viewRange()[0] == pytest.approx([NOW - 30, NOW - 10])


def test_memory_axes_name_the_unit_and_scale_to_it(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 5, used_gb=64))
    assert view.plots["memory"].axis_label() == "memory (GB)"
    assert view.plots["cluster_memory"].axis_label() == "memory (GB)"
    assert view.plots["cluster_memory"].title() == "Cluster memory: 192 GB used of 384 GB"
    with qtbot.waitSignal(view.frame_drawn, timeout=5_000):
        view.set_memory_unit(MemoryUnit.GIB)
    assert view.plots["memory"].axis_label() == "memory (GiB)"
    assert original(view.curve("spark-1", "mem.used"))[1][-1] == pytest.approx(64 * GB / 2**30)
    assert view.plots["cluster_memory"].title() == "Cluster memory: 179 GiB used of 358 GiB"


def test_links_are_drawn_in_bits_per_second(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 5))  # the port moves 1 GB/s in, 2 GB/s out
    network = view.plots["network"]
    assert original(view.curve("spark-1", f"net.rx.{FABRIC}"))[1][-1] == 8e9
    qtbot.waitUntil(lambda: network.axis_label() == "link rate (Gb/s)", timeout=2_000)
    assert view.plots["rdma"].axis_label() == "RDMA rate (Gb/s)"


def test_the_tokens_axis_is_labelled_and_workloads_get_curves(qtbot, model, view):
    assert view.plots["tokens"].axis_label() == "throughput (tok/s)"
    feed(model, NODES, 3)
    drawn(
        qtbot,
        view,
        lambda: (model.add_tokens("qwen", NOW, 40.0), model.add_tokens("minicpm", NOW + 0.5, 12.0)),
    )
    assert original(view.curve(CLUSTER, "tok.total"))[1][-1] == 52.0
    assert view.curve(CLUSTER, "tok.workload.qwen") is not None
    assert not view.plots["tokens"].placeholder.isVisible()


def test_eight_nodes_of_128_gb_make_a_computed_1_tb(qtbot, model, view):
    nodes = [f"spark-{i}" for i in range(8)]
    drawn(qtbot, view, lambda: feed(model, nodes, 3, used_gb=50))
    assert view.plots["cluster_memory"].title() == "Cluster memory: 400 GB used of 1.02 TB"
    assert len(view.toggles.node_boxes) == 9  # eight nodes and the cluster


def test_hover_shows_values_under_the_mouse(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, NODES, 30, used_gb=42))
    view.readout.show_at(view.plots["memory"], NOW - 5.2)
    text = view.readout.text()
    assert "spark-1 memory used: 42 GB" in text and "spark-3 memory total: 128 GB" in text
    assert all(p.crosshair.isVisible() for p in view.plots.values())
    view.readout.show_at(view.plots["network"], NOW - 1)
    assert f"spark-2 network rx {FABRIC}: 8 Gb/s" in view.readout.text()
    view.readout.clear_readout()
    assert not view.plots["memory"].crosshair.isVisible()


def test_csv_export_holds_the_visible_data(qtbot, model, view, tmp_path):
    drawn(qtbot, view, lambda: feed(model, NODES, 90))
    drawn(qtbot, view, lambda: (view.set_window(60), view.toggles.set_node_shown("spark-3", False)))
    path = tmp_path / "visible.csv"
    with qtbot.waitSignal(view.status_message, timeout=10_000) as done:
        assert view.export_csv_to(path)
    assert done.args[0].startswith("Exported") and str(path) in done.args[0]
    rows = list(csv.DictReader(path.open()))
    assert {r["node"] for r in rows} == {"spark-1", "spark-2", CLUSTER}
    used = [r for r in rows if r["node"] == "spark-1" and r["series"] == "mem.used"]
    t0, t1 = view.visible_range()
    assert t1 - t0 == 60 and len(used) == 60  # spark-1's samples in the last minute on screen
    assert all(t0 <= float(r["unix_time"]) <= t1 for r in rows)
    assert {r["unit"] for r in used} == {"B"} and used[0]["value"] == str(10 * GB)


def test_png_export_is_a_picture_of_the_plots(qtbot, model, view, tmp_path):
    drawn(qtbot, view, lambda: feed(model, NODES, 60))
    path = tmp_path / "plots.png"
    with qtbot.waitSignal(view.status_message, timeout=10_000):
        view.export_png_to(path)
    image = QImage(str(path)).convertToFormat(QImage.Format.Format_Grayscale8)
    assert image.width() > 500 and image.height() > 300
    pixels = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes())
    assert pixels.std() > 10  # curves, text and grid: far from a blank image


def test_export_errors_reach_the_error_signal(qtbot, model, view, tmp_path):
    drawn(qtbot, view, lambda: feed(model, NODES, 5))
    with qtbot.waitSignal(view.error_raised, timeout=10_000) as failed:
        view.export_csv_to(tmp_path / "no-such-dir" / "x.csv")
    assert failed.args[0].startswith("CSV export failed:") and "Pick another place" in failed.args[0]


def test_nothing_to_export_before_data(qtbot, view, tmp_path):
    with qtbot.waitSignal(view.error_raised, timeout=2_000) as failed:
        assert not view.export_csv_to(tmp_path / "x.csv")
    assert "wait for the first data" in failed.args[0]


def test_redraw_rate_is_capped():
    assert REDRAW_HZ <= 30


def test_long_windows_are_downsampled_before_drawing_and_keep_their_spikes(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, ["spark-1"], 600, hz=10))  # a full 10-minute window at 10 Hz
    drawn(qtbot, view, lambda: model.add_sample("spark-1", spark_sample(7000, NOW + 0.05, used_gb=90.0)))
    curve = view.curve("spark-1", "mem.used")
    handed, y = original(curve)
    raw_x, _raw_y = model.window("spark-1", "mem.used", view.visible_range()[0])
    assert len(raw_x) == 6001
    assert len(handed) <= 2 * view.plots["memory"].view_box.width() + 4 < len(raw_x)  # ~2 points per pixel
    assert y.max() == 90.0 and y.min() == 10.0  # the spike survives the decimation


def test_young_data_is_stretched_across_the_plots_until_it_fills_the_window(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, ["spark-1"], 3))
    assert view.visible_range() == pytest.approx((NOW - 10, NOW))  # never narrower than 10 s
    drawn(qtbot, view, lambda: feed(model, ["spark-1"], 40, end=NOW + 40))
    assert view.visible_range() == pytest.approx((NOW - 2, NOW + 40))  # from the first sample on
    assert view.window_s == 600


def test_every_node_gets_its_own_colour(qtbot, model, view):
    nodes = [f"spark-{i}" for i in range(8)]
    drawn(qtbot, view, lambda: feed(model, nodes[:3], 2))
    drawn(qtbot, view, lambda: feed(model, nodes, 2, end=NOW + 2))  # five more join after the cluster exists
    colours = {view.curve(n, "mem.used").opts["pen"].color().name() for n in nodes}
    assert len(colours) == 8
