"""The Benchmarks tab flags a scaling figure that should not be believed, with the reason and what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.recording import store
from tests.core.bench.records import inference_run
from tests.gui.test_benchmarks_panel import WAIT_MS, bounded

pytestmark = pytest.mark.gui
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "scaling_flags.png"


def test_an_efficiency_above_105_percent_and_a_wide_spread_are_flagged_above_the_table(qtbot, tmp_path):
    from sparksync.gui.benchmarks.benchmarks_panel import SCALING_TAB, BenchmarksPanel

    history = HistoryStore(tmp_path / "bench.sqlite3")
    base = store(history, bounded(inference_run(1, 10.0, 1000.0, sweep_id="busy", topology="single")))
    two = bounded(inference_run(2, 23.0, 1500.0, minutes=1, sweep_id="busy", topology="direct"))
    two.result["benchmarks"][0]["tg_throughput"].update(std=5.0, values=[19.5, 26.5])
    two = store(history, two)
    panel = BenchmarksPanel(history.path)
    qtbot.addWidget(panel)
    panel.resize(1280, 800)
    with qtbot.waitSignal(panel.runs_loaded, timeout=WAIT_MS):
        panel.show()
    with qtbot.waitSignal(panel.run_shown, timeout=WAIT_MS):
        panel.runs.select_id(two.id)
    with qtbot.waitSignal(panel.scaling_shown, timeout=WAIT_MS):
        panel.views.setCurrentIndex(SCALING_TAB)  # the way to a scaling chart: its tab, over the selection

    text = panel.scaling_flags.text()
    assert panel.scaling_flags.isVisible()
    assert f"2 node(s), run {two.id}: scaling efficiency 115.0% on 2 nodes is above 105%" in text
    assert f"the one-node baseline (run {base.id})" in text and "re-measure the one-node baseline" in text
    assert "CV 22%" in text and "run more repetitions" in text
    headers = [panel.scaling_table.horizontalHeaderItem(c).text() for c in range(panel.scaling_table.columnCount())]
    assert panel.scaling_table.item(1, headers.index("bound model")).text() == "TP×2"
    assert "above 105%" in panel.scaling_table.item(1, headers.index("flags")).text()
    assert panel.scaling_table.item(0, headers.index("flags")).text() in ("", "—")
    # The chart too: each size's std as an error bar, the bound named with its model.
    bars = panel.chart.error_bars["decode"].opts
    assert list(bars["height"]) == pytest.approx([0.2, 10.0])  # ± one std: 0.1 and 5.0
    assert "bound (planner, 1 node / TP×2)" in panel.chart.curves
    if os.environ.get("SPARKSYNC_SCREENSHOTS"):
        panel.grab().save(str(SCREENSHOT))
    panel.cancel_run()
    assert panel.wait(60)
