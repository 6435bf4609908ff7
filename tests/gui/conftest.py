"""GUI fixtures: a real main window fed by a real local agent, shut down at teardown."""

from __future__ import annotations

import pytest

from sparksync.core.nodes import LocalNode


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def window(qtbot, home):
    from sparksync.gui.main_window import MainWindow

    win = MainWindow(LocalNode(sample_hz=10))
    win.show()
    yield win
    if win.is_running():
        with qtbot.waitSignal(win.shut_down, timeout=15_000):
            win.close()
    win.deleteLater()


@pytest.fixture
def live_window(qtbot, window):
    with qtbot.waitSignal(window.live_data_shown, timeout=30_000):
        window.start()
    return window
