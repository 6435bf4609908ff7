"""The main window against a real local agent (offscreen Qt)."""

from __future__ import annotations

import os
import signal
import socket

import numpy as np
import psutil

from sparksync.core.fleet.follower import RESTART_NOTICE
import pytest

from sparksync.core.base.paths import local_agent_state_dir
from sparksync.core.base.units import MemoryUnit, format_memory
from sparksync_agent.state import read_endpoint
from tests.machine import mem_total_bytes

pytestmark = pytest.mark.gui


def test_shows_this_computer_and_live_plots(qtbot, live_window):
    win = live_window
    assert win.windowTitle() == "SparkSync"
    assert win.card.title() == "this computer"
    assert win.card.text("hostname") == socket.gethostname()
    assert win.card.text("arch") == os.uname().machine
    assert win.card.text("memory_total") == format_memory(mem_total_bytes())  # decimal GB, as the plots
    win.dashboard.set_memory_unit(MemoryUnit.GIB)
    assert win.card.text("memory_total") == format_memory(mem_total_bytes(), MemoryUnit.GIB)
    win.dashboard.set_memory_unit(MemoryUnit.GB)
    dashboard = win.dashboard
    qtbot.waitUntil(lambda: len(curve_data(dashboard, "mem.used")[0]) >= 3, timeout=10_000)
    x, used = curve_data(dashboard, "mem.used")
    _, total = curve_data(dashboard, "mem.total")
    assert np.all(np.diff(x) > 0)  # a time axis that grows
    n = min(len(used), len(total))
    assert np.all((used[:n] > 0) & (used[:n] <= total[:n])) and total[-1] == pytest.approx(mem_total_bytes() / 1e9)
    _, cpu = curve_data(dashboard, "cpu.util")
    assert np.all((cpu >= 0) & (cpu <= 100))


def curve_data(dashboard, name: str):
    curve = dashboard.curve("this computer", name)
    if curve is None:
        return np.array([]), np.array([])
    x, y = curve.getOriginalDataset()
    return (np.array([]), np.array([])) if x is None else (x, y)


def test_a_killed_agent_reaches_the_status_bar_and_is_replaced(qtbot, live_window):
    win = live_window
    # Every message the bar shows, with the problem mark at that moment: under load the error can
    # be replaced by "live" again before a poll would see it.
    bar: list[tuple[str, str, str]] = []
    win.statusBar().messageChanged.connect(lambda m: bar.append((m, win.problem.text(), win.problem.toolTip())))
    first = read_endpoint(local_agent_state_dir())
    os.kill(first.pid, signal.SIGKILL)
    # Told either way: a read that failed on the dead agent, or (killed and started again between two
    # reads) the new run the stream finds.
    told = ("did not answer", RESTART_NOTICE)
    qtbot.waitUntil(lambda: any(t in m for m, _, _ in bar for t in told), timeout=10_000)
    message, mark, tip = next(s for s in bar if any(t in s[0] for t in told))
    assert message.startswith("Error: this computer:")
    assert any(t in tip for t in told) and mark.startswith("⚠ this computer:")
    # The worker replaces the dead local agent and the plots go on.
    qtbot.waitUntil(lambda: (read_endpoint(local_agent_state_dir()) or first).pid != first.pid, timeout=20_000)
    shown = win.model.version
    qtbot.waitUntil(lambda: win.model.version > shown + 2, timeout=20_000)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage() == "this computer: live", timeout=10_000)
    assert win.problem.text() == ""  # the error is over once the node is live again


def test_closing_stops_the_worker_and_the_agent(qtbot, live_window):
    win = live_window
    agent_pid = read_endpoint(local_agent_state_dir()).pid
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.close()
        assert not win.isVisible()  # hidden at once, the GUI thread never waits on the agent
    assert not win.is_running() and not win.feeds.running()
    assert not psutil.pid_exists(agent_pid)
    assert not [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert read_endpoint(local_agent_state_dir()) is None


def test_closing_while_the_agent_starts(qtbot, window):
    window.start()
    with qtbot.waitSignal(window.shut_down, timeout=15_000):
        window.close()
    assert not psutil.Process().children(recursive=True)
