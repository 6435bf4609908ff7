"""GUI fixtures: a real main window fed by a real local agent, shut down at teardown; a bare dashboard."""

from __future__ import annotations

import pytest

from sparksync.core.telemetry.dashboard_model import DashboardModel


@pytest.fixture(autouse=True)
def _private_autostart(tmp_path_factory, monkeypatch):
    """The start-at-login entry goes to a private XDG config dir, never the user's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def window(qtbot, home):
    from sparksync.gui.main_window import MainWindow

    win = MainWindow(sample_hz=10)  # this computer, through the app's one fleet
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


@pytest.fixture
def model() -> DashboardModel:
    """An empty dashboard model, fed by the test."""
    return DashboardModel()


@pytest.fixture
def view(qtbot, model):
    from sparksync.gui.dashboard.dashboard_view import DashboardView

    widget = DashboardView(model)
    qtbot.addWidget(widget)
    widget.resize(1200, 760)
    widget.show()
    qtbot.waitExposed(widget)
    yield widget
    assert widget.jobs.wait(10)
