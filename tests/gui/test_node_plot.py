from __future__ import annotations

import pytest

from sparksync.gui.node_plot import REDRAW_HZ, NodePlot
from tests.core.fake_agent import make_sample

pytestmark = pytest.mark.gui


@pytest.fixture
def plot(qtbot):
    widget = NodePlot(window_s=5.0)
    qtbot.addWidget(widget)
    return widget


def test_redraws_what_arrived_in_gb(qtbot, plot):
    with qtbot.waitSignal(plot.drawn, timeout=2_000) as blocker:
        for seq in (1, 2, 3):
            plot.add_sample(make_sample(seq))
    assert blocker.args == [3]
    x, used = plot.used_curve.getData()
    assert list(x) == [1001.0, 1002.0, 1003.0] and list(used) == [1.0, 2.0, 3.0]
    assert list(plot.total_curve.getData()[1]) == [128.0] * 3


def test_shows_only_the_time_window(qtbot, plot):
    with qtbot.waitSignal(plot.drawn, timeout=2_000) as blocker:
        for seq in range(1, 21):
            plot.add_sample(make_sample(seq))
    assert blocker.args == [6]  # t = 1015 .. 1020 with a 5 s window
    assert plot.used_curve.getData()[0][0] == 1015.0


def test_repeated_samples_are_dropped(plot):
    plot.add_sample(make_sample(2))
    plot.add_sample(make_sample(2))
    plot.add_sample(make_sample(1))
    assert len(plot.series) == 1


def test_redraw_rate_is_capped():
    assert REDRAW_HZ <= 30
