"""The window's telemetry adapter: the core follower's events as signals; a repeating failure told once."""

from __future__ import annotations

import threading

import pytest

from sparksync.core.agents.link import AgentLink
from sparksync.core.base.backoff import Backoff
from sparksync.core.fleet.problems import NodeProblem, degraded, offline
from sparksync.core.fleet.state import Cause

pytestmark = pytest.mark.gui

WAIT_MS = 30_000
QUICK = Backoff(first_s=0.01, factor=2.0, max_s=0.02)


class FailingLink(AgentLink):
    """A paired node whose agent cannot be reached, failing with the problems queued (the last repeats)."""

    kind = "ssh"

    def __init__(self, name: str, problems: list[NodeProblem]):
        self.name = name
        self.problems = list(problems)
        self.attempts = 0
        self._lock = threading.Lock()

    def open(self, cancel=None, *, reread=False):
        with self._lock:
            self.attempts += 1
            problem = self.problems.pop(0) if len(self.problems) > 1 else self.problems[0]
        raise problem

    def explain(self, exc):
        return exc if isinstance(exc, NodeProblem) else degraded(Cause.AGENT_NOT_ANSWERING, str(exc))

    def reachable(self):
        return True

    def close(self):
        pass


class LinkFleet:
    """What the follower needs from a fleet, over the test's links; the states it is told, kept."""

    def __init__(self, *links: FailingLink):
        self.links = {link.name: link for link in links}
        self.states: list[tuple[str, object]] = []

    def agent(self, name):
        return self.links[name]

    def apply(self, node, problem, *, save=None):
        self.states.append((node, None if problem is None else problem.state))

    def seen(self, node):
        pass

    def save(self, nodes):
        pass

    def nodes(self):
        return []

    def status(self, node):
        raise AssertionError("no paired node to ask about")


def not_deployed(attempt: int):
    # The message's detail may change between retries; the state and the cause do not.
    return degraded(Cause.AGENT_NOT_INSTALLED, f"No agent token on 'spark-1' (try {attempt}); deploy it.")


@pytest.fixture
def feeds_of(qtbot):
    from PySide6.QtCore import QObject

    from sparksync.gui.node_feeds import NodeFeeds

    owner = QObject()
    made = []

    def make(fleet, names):
        feeds = NodeFeeds(names, owner, retry=QUICK)
        errors, ended = [], []
        feeds.error_raised.connect(errors.append)
        feeds.feed_ended.connect(ended.append)
        feeds.attach(fleet)
        made.append(feeds)
        return feeds, errors, ended

    yield make
    for feeds in made:
        feeds.stop_all()
        assert feeds.join(30)
        qtbot.waitUntil(lambda feeds=feeds: not feeds.running(), timeout=WAIT_MS)


def test_a_node_not_yet_deployed_is_reported_once_not_at_every_retry(qtbot, feeds_of):
    link = FailingLink("spark-1", [not_deployed(i) for i in range(1, 6)])
    fleet = LinkFleet(link)
    feeds, errors, _ = feeds_of(fleet, ["spark-1"])
    qtbot.waitUntil(lambda: link.attempts >= 8, timeout=WAIT_MS)
    assert errors == ["spark-1: No agent token on 'spark-1' (try 1); deploy it."]
    assert feeds.streamed() == ["spark-1"] and {state for _, state in fleet.states} == {not_deployed(1).state}


def test_a_new_kind_of_failure_is_reported_again(qtbot, feeds_of):
    gone = offline("no answer within 5 s")
    link = FailingLink("spark-1", [not_deployed(1), not_deployed(2), gone, gone, not_deployed(3)])
    _, errors, _ = feeds_of(LinkFleet(link), ["spark-1"])
    qtbot.waitUntil(lambda: link.attempts >= 8, timeout=WAIT_MS)
    assert errors == ["spark-1: No agent token on 'spark-1' (try 1); deploy it.",
                      "spark-1: no answer within 5 s",
                      "spark-1: No agent token on 'spark-1' (try 3); deploy it."]  # fmt: skip


def test_removing_a_node_ends_its_thread_and_says_so(qtbot, feeds_of):
    links = [FailingLink(name, [not_deployed(1)]) for name in ("spark-1", "spark-2")]
    feeds, _, ended = feeds_of(LinkFleet(*links), ["spark-1", "spark-2"])
    qtbot.waitUntil(lambda: all(link.attempts >= 2 for link in links), timeout=WAIT_MS)
    feeds.remove("spark-2")
    qtbot.waitUntil(lambda: ended == ["spark-2"], timeout=WAIT_MS)
    assert feeds.names() == ["spark-1"] and feeds.streamed() == ["spark-1"] and feeds.running()


def test_the_window_shows_the_reason_once_and_keeps_it_beside_the_status_bar(qtbot, home):
    from sparksync.gui.main_window import MainWindow
    from tests.gui.fake_core import FakeActions

    link = FailingLink("spark-1", [not_deployed(i) for i in range(1, 4)])
    win = MainWindow(["spark-1"], actions=FakeActions(), fleet=LinkFleet(link))
    win.feeds.retry = QUICK
    errors = []
    win.statusBar().messageChanged.connect(lambda m: errors.append(m) if m.startswith("Error") else None)
    win.start()
    qtbot.waitUntil(lambda: link.attempts >= 8, timeout=WAIT_MS)
    assert errors == ["Error: spark-1: No agent token on 'spark-1' (try 1); deploy it."]
    assert "No agent token" in win.problem.text()
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()
