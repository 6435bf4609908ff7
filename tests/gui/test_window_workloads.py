"""The Workloads panel inside the main window: watched from the start, cancelled on quit.

The panel runs on agent-shaped fakes (tests/core/workloads/fake_agents.py)
through the real ``WorkloadControl``, orchestrator and store; the window is
never shown, so its Workloads tab is never opened.
"""

from __future__ import annotations

import pytest

from sparksync.core.workloads.launch_choice import LaunchChoice
from sparksync.core.workloads.workload_control import WorkloadControl
from tests.core.workloads.fake_agents import FakeCluster
from tests.gui.fake_core import FakeActions
from tests.gui.test_workloads_panel import TalkingCluster

pytestmark = pytest.mark.gui

NODES = ["spark-1", "spark-2"]
WAIT_MS = 30_000
SINGLE = LaunchChoice(recipe="llamacpp-single", nodes=["spark-1"], model="/models/m.gguf")


class ClosingActions(FakeActions):
    """Notes which ranks had been told to stop when the window closed the core."""

    def __init__(self, cluster: FakeCluster):
        super().__init__()
        self.cluster = cluster
        self.stopped_before_close: list | None = None

    def close(self):
        self.stopped_before_close = self.cluster.what("stop")
        super().close()


@pytest.fixture
def window_for(qtbot, home):
    made = []

    def make(control: WorkloadControl, actions=None):
        from sparksync.gui.main_window import MainWindow

        win = MainWindow([], actions=actions or FakeActions())
        win.workloads.control = control  # the fakes' agents in place of the fleet's
        made.append(win)
        return win

    yield make
    for win in made:
        if win.is_running():
            with qtbot.waitSignal(win.shut_down, timeout=WAIT_MS):
                win.quit()
        assert win.workloads.jobs.wait(30)
        win.deleteLater()


def control_of(cluster: FakeCluster, made: list | None = None) -> WorkloadControl:
    def agents():
        if made is not None:
            made.append("agents")
        return cluster

    return WorkloadControl(agents, poll_s=0.01, stop_grace_s=0.1)


def wait_reading(qtbot, win):
    return qtbot.waitSignal(win.workloads.jobs.finished, timeout=WAIT_MS,
                            check_params_cb=lambda name: name == "Reading the recorded workloads")  # fmt: skip


def test_quitting_during_a_launch_cancels_it_and_stops_what_had_started(qtbot, window_for):
    cluster = FakeCluster(NODES, ready_after=10**9)  # never ready: the launch waits until cancelled
    actions = ClosingActions(cluster)
    win = window_for(control_of(cluster), actions)
    win.start()
    assert win.workloads.start(SINGLE)
    qtbot.waitUntil(lambda: bool(cluster.what("start")), timeout=WAIT_MS)
    [(node, _name)] = cluster.what("start")
    with qtbot.waitSignal(win.shut_down, timeout=WAIT_MS):
        win.quit()
    stopped = cluster.what("stop")
    assert [n for n, _ in stopped] == [node]  # what had started was stopped...
    assert actions.stopped_before_close == stopped  # ...before the links it went over were closed
    assert actions.called("close") == [()]
    assert not win.workloads._timer.isActive()


def test_recorded_workloads_are_watched_from_the_start_and_a_failure_is_notified(qtbot, window_for):
    cluster = TalkingCluster(NODES)
    control = control_of(cluster)
    view = control.start(SINGLE)  # recorded by an earlier run of the app
    assert view.state == "ready"
    win = window_for(control)
    with qtbot.waitSignal(win.workloads.rows_shown, timeout=WAIT_MS):
        win.start()  # the Workloads tab is never shown
    assert win.workloads._timer.isActive()
    cluster.clients["spark-1"].fail(view.workload_id, "llama-server")
    with qtbot.waitSignal(win.notifier.shown, timeout=WAIT_MS,
                          check_params_cb=lambda title, *_: "failed" in title) as shown:  # fmt: skip
        pass
    title, message, where = shown.args
    assert title == f"Workload {view.workload_id} failed" and where == "status bar"
    assert message == "rank 0 (llama-server) on spark-1: exited with status 1"


def test_a_fresh_app_makes_no_agents_at_start(qtbot, window_for):
    made = []
    win = window_for(control_of(FakeCluster(NODES), made))
    with wait_reading(qtbot, win):
        win.start()
    assert not win.workloads._timer.isActive() and made == []  # no SSH link, no keyring
