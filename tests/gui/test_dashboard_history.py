"""History across app restarts, through the real window, local agent and SQLite file (offscreen Qt)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.telemetry.history import HistoryStore, default_path
from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.nodes.identity import NodeNames, local_node_id

pytestmark = pytest.mark.gui

GB = 1e9


class Windows:
    """Opens main windows and closes (at teardown) those the test left open."""

    def __init__(self, qtbot):
        self.qtbot = qtbot
        self.open: list = []

    def new(self):
        from sparksync.gui.main_window import MainWindow

        win = MainWindow(sample_hz=10)
        win.show()
        self.open.append(win)
        return win

    def close(self, win) -> None:
        self.open.remove(win)
        if win.is_running():
            with self.qtbot.waitSignal(win.shut_down, timeout=15_000):
                win.close()
        win.deleteLater()


@pytest.fixture
def windows(qtbot):
    made = Windows(qtbot)
    yield made
    for win in list(made.open):
        made.close(win)


def memory_points(win, t0: float) -> np.ndarray:
    return (
        win.model.window(LOCAL_NODE_NAME, "mem.used", t0)[0]
        if win.model.has(LOCAL_NODE_NAME)
        else np.array([])
    )


def test_a_reopened_app_shows_the_last_hour(qtbot, windows):
    now = time.time()
    # A session from most of an hour ago, already in the file.
    earlier = [
        (LOCAL_NODE_NAME, SecondRow(int(now) - s, {"mem.used": 3 * GB, "mem.total": 8 * GB}))
        for s in range(3500, 3000, -1)
    ]
    with HistoryStore() as store:
        store.write(earlier)

    first = windows.new()
    with qtbot.waitSignal(first.live_data_shown, timeout=30_000):
        first.start()
    session_start = time.time()
    qtbot.waitUntil(lambda: len(memory_points(first, session_start)) >= 25, timeout=20_000)  # ~3 s at 10 Hz
    windows.close(first)
    with HistoryStore() as store:  # a new store instance on the same file
        saved = store.load_named(3600, NodeNames.current())[LOCAL_NODE_NAME].t
        assert set(store.load(3600)) == {local_node_id(), "(cluster)"}  # filed under this computer's id
    assert saved.max() >= int(session_start) and saved.min() <= now - 3499

    second = windows.new()  # the app, reopened
    with qtbot.waitSignal(second.history.loaded, timeout=10_000):
        second.start()
    second.dashboard.set_window(3600)
    reopened = time.time()
    points = memory_points(second, reopened - 3600)
    assert points.min() <= now - 3499  # from most of an hour ago
    assert ((points >= session_start - 1) & (points < reopened)).sum() >= 2  # and the first window's seconds
    with qtbot.waitSignal(second.dashboard.frame_drawn, timeout=10_000):
        pass
    x, _ = second.dashboard.curve(LOCAL_NODE_NAME, "mem.used").getOriginalDataset()
    assert x.min() <= now - 3499  # on screen, not only in the model


def test_history_trouble_reaches_the_status_bar(qtbot, windows):
    default_path().parent.mkdir(parents=True, exist_ok=True)
    default_path().write_bytes(b"not a database" * 1000)
    win = windows.new()
    win.start()
    qtbot.waitUntil(lambda: win.history_problem.text().startswith("⚠ History is off"), timeout=10_000)
    assert "Move the file aside" in win.history_problem.toolTip()
    with qtbot.waitSignal(win.live_data_shown, timeout=30_000):
        pass
    assert win.history_problem.text().startswith("⚠ History is off")  # a live node does not hide it
