"""The dashboard spends nothing on plots nobody can see, and each plot it redraws is painted once."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QLabel, QTabWidget

from sparksync.gui.dashboard.dashboard_view import REDRAW_HZ
from tests.gui.dashboard_fixtures import NOW, drawn, feed, original

pytestmark = pytest.mark.gui

NODE = "spark-1"


class PaintCounter(QObject):
    """Counts the paint events a widget receives."""

    def __init__(self, widget):
        super().__init__(widget)
        self.paints = 0
        widget.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.paints += 1
        return False


def drawn_plots(view) -> list[str]:
    seen: list[str] = []
    view.plot_drawn.connect(lambda key, _points: seen.append(key))
    return seen


def idle_ticks(qtbot, view, ticks: int = REDRAW_HZ) -> None:
    """Let the redraw timer run ``ticks`` more times (about a second)."""
    start = view.ticks
    qtbot.waitUntil(lambda: view.ticks >= start + ticks, timeout=10_000)


def test_another_tab_stops_the_redraws_and_coming_back_catches_up_at_once(qtbot, model):
    from sparksync.gui.dashboard.dashboard_view import DashboardView

    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    view = DashboardView(model)
    tabs.addTab(view, "Dashboard")
    tabs.addTab(QLabel("nodes"), "Nodes")
    tabs.resize(1200, 760)
    tabs.show()
    qtbot.waitExposed(tabs)
    drawn(qtbot, view, lambda: feed(model, [NODE], 10))
    seen = drawn_plots(view)

    tabs.setCurrentIndex(1)
    assert not view.on_screen()
    feed(model, [NODE], 5, end=NOW + 5)
    idle_ticks(qtbot, view)
    assert seen == []  # data came, the timer ran, and nothing was drawn
    assert len(original(view.curve(NODE, "mem.used"))[0]) == 10
    assert len(model.window(NODE, "mem.used", 0)[0]) == 15  # the buffers filled meanwhile

    with qtbot.waitSignal(view.frame_drawn, timeout=1_000):  # drawn while the tab shows, not ticks later
        tabs.setCurrentIndex(0)
    assert len(original(view.curve(NODE, "mem.used"))[0]) == 15
    assert set(seen) == {key for key, plot in view.plots.items() if plot.isVisible()}
    assert view.jobs.wait(10)


def test_a_minimised_or_hidden_window_draws_nothing(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, [NODE], 10))
    seen = drawn_plots(view)
    for hide, show in ((view.showMinimized, view.showNormal), (view.hide, view.show)):
        hide()
        assert not view.on_screen()
        before = len(model.window(NODE, "mem.used", 0)[0])
        feed(model, [NODE], 2, end=NOW + before)
        idle_ticks(qtbot, view)
        assert seen == []
        drawn(qtbot, view, show)
        assert view.on_screen() and len(original(view.curve(NODE, "mem.used"))[0]) == before + 2
        seen.clear()


def test_each_redrawn_plot_is_painted_once(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, [NODE], 10))
    memory = view.plots["memory"]
    counter = PaintCounter(memory.viewport())
    seen = drawn_plots(view)
    for i in range(5):
        drawn(qtbot, view, lambda i=i: feed(model, [NODE], 1, end=NOW + 1 + i))
        qtbot.waitUntil(lambda: counter.paints >= seen.count("memory"), timeout=5_000)
    idle_ticks(qtbot, view, 3)  # a second paint per draw would come in the next turns of the loop
    assert seen.count("memory") == 5
    assert counter.paints == 5
