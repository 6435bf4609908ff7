"""The telemetry worker's retries: a node that keeps failing the same way is reported once per change."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from sparksync.core.fleet.problems import degraded, offline
from sparksync.core.fleet.state import Cause

pytestmark = pytest.mark.gui

WAIT_MS = 30_000


class FailingNode:
    """A paired node whose connects fail with the problems the test queues (the last one repeats)."""

    name, source = "spark-1", "ssh"

    def __init__(self, problems):
        self.problems = list(problems)
        self.attempts = 0

    @contextmanager
    def connect(self, cancel: threading.Event | None = None):
        self.attempts += 1
        problem = self.problems.pop(0) if len(self.problems) > 1 else self.problems[0]
        raise problem
        yield  # never reached: a generator for contextmanager


def not_deployed(attempt: int):
    # The message's detail may change between retries; the state and the cause do not.
    return degraded(Cause.AGENT_NOT_INSTALLED, f"No agent token on 'spark-1' (try {attempt}); deploy it.")


@pytest.fixture
def run_worker(qtbot, monkeypatch):
    from sparksync.gui import telemetry_worker

    monkeypatch.setattr(telemetry_worker, "RECONNECT_FIRST_S", 0.01)
    monkeypatch.setattr(telemetry_worker, "RECONNECT_MAX_S", 0.02)
    started = []

    def run(node):
        worker = telemetry_worker.TelemetryWorker(node)
        errors = []
        worker.error_raised.connect(errors.append)
        thread = threading.Thread(target=worker.run, name="telemetry-test")
        thread.start()
        started.append((worker, thread))
        return errors

    yield run
    for worker, thread in started:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()


def test_a_node_not_yet_deployed_is_reported_once_not_at_every_retry(qtbot, run_worker):
    node = FailingNode([not_deployed(i) for i in range(1, 6)])
    errors = run_worker(node)
    qtbot.waitUntil(lambda: node.attempts >= 8, timeout=WAIT_MS)
    assert errors == ["spark-1: No agent token on 'spark-1' (try 1); deploy it."]


def test_a_new_kind_of_failure_is_reported_again(qtbot, run_worker):
    gone = offline("no answer within 5 s")
    node = FailingNode([not_deployed(1), not_deployed(2), gone, gone, not_deployed(3)])
    errors = run_worker(node)
    qtbot.waitUntil(lambda: node.attempts >= 8, timeout=WAIT_MS)
    assert errors == ["spark-1: No agent token on 'spark-1' (try 1); deploy it.",
                      "spark-1: no answer within 5 s",
                      "spark-1: No agent token on 'spark-1' (try 3); deploy it."]  # fmt: skip


def test_the_window_shows_the_reason_once_and_keeps_it_beside_the_status_bar(qtbot, home, monkeypatch):
    from sparksync.gui import telemetry_worker
    from sparksync.gui.main_window import MainWindow
    from tests.gui.fake_core import FakeActions

    monkeypatch.setattr(telemetry_worker, "RECONNECT_FIRST_S", 0.01)
    monkeypatch.setattr(telemetry_worker, "RECONNECT_MAX_S", 0.02)
    node = FailingNode([not_deployed(i) for i in range(1, 4)])
    win = MainWindow([node], actions=FakeActions())
    errors = []
    win.statusBar().messageChanged.connect(lambda m: errors.append(m) if m.startswith("Error") else None)
    win.start()
    qtbot.waitUntil(lambda: node.attempts >= 8, timeout=WAIT_MS)
    assert errors == ["Error: spark-1: No agent token on 'spark-1' (try 1); deploy it."]
    assert "No agent token" in win.problem.text()
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()
