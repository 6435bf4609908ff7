"""The window over a fleet: paired nodes stream and show live states; unpaired ones stop; upgrades offered."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from sparksync.core.agents.link import AgentLink
from sparksync.core.fleet.problems import degraded
from sparksync.core.fleet.state import Cause, NodeState, NodeStatus
from sparksync.core.nodes.rows import FleetState, client_agent_version
from sparksync.core.nodes.rows import NodeState as RowState
from tests.core.node_factory import paired_node
from tests.gui.fake_core import FakeActions

pytestmark = pytest.mark.gui


class FakeFleet:
    def __init__(self, nodes):
        self._nodes = nodes
        self.listeners = []
        self.transports = object()

    def agent(self, name):
        return UnreachableLink(name)

    def apply(self, node, problem, *, save=None):
        pass

    def seen(self, node):
        pass

    def save(self, nodes):
        pass

    def nodes(self):
        return list(self._nodes)

    def status(self, node):
        state = NodeState.OFFLINE if node.name == "n2" else NodeState.PAIRED
        reason = "no route to host" if node.name == "n2" else None
        return NodeStatus(name=node.name, state=state, reason=reason, since=datetime.now(timezone.utc))

    def add_listener(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def emit(self, name, state):  # from another thread, as the fleet's checks do
        thread = threading.Thread(target=lambda: [f(name, state) for f in list(self.listeners)])
        thread.start()
        thread.join()


class FleetActions(FakeActions):
    def __init__(self, names):
        super().__init__(names)
        self.the_fleet = FakeFleet(self.nodes)

    def fleet(self):
        self._record("fleet")
        return self.the_fleet


class UnreachableLink(AgentLink):
    """A paired node whose agent never answers: its telemetry thread keeps retrying until stopped."""

    kind = "ssh"

    def __init__(self, name: str):
        self.name = name

    def open(self, cancel=None, *, reread=False):
        raise degraded(Cause.AGENT_NOT_INSTALLED, f"{self.name}: the agent is not installed")

    def explain(self, exc):
        return exc

    def reachable(self):
        return True

    def close(self):
        pass


@pytest.fixture
def fleet_window(qtbot, home):
    made = []

    def make(actions):
        from sparksync.gui.main_window import MainWindow

        win = MainWindow([], actions=actions)
        win.show()
        win.start()
        made.append(win)
        return win

    yield make
    for win in made:
        if win.is_running():
            with qtbot.waitSignal(win.shut_down, timeout=15_000):
                win.quit()
        assert win.jobs.wait(30)
        win.deleteLater()


def test_paired_nodes_get_workers_and_live_states_and_an_unpaired_one_stops(qtbot, fleet_window):
    actions = FleetActions(["n1", "n2"])
    win = fleet_window(actions)
    panel = win.nodes_panel
    qtbot.waitUntil(lambda: sorted(win.streamed_nodes()) == ["n1", "n2"], timeout=15_000)
    assert win.fleet is actions.the_fleet and set(win.cards) == {"n1", "n2"}
    # The last known states came with the fleet; news arrives through its listener.
    assert (panel.rows.row("paired:n2").state, panel.rows.row("paired:n2").reason) == (
        RowState.OFFLINE,
        "no route to host",
    )
    actions.the_fleet.emit("n1", FleetState(RowState.ONLINE, None, 1.0))
    qtbot.waitUntil(lambda: panel.rows.row("paired:n1").state is RowState.ONLINE)
    actions.nodes = actions.nodes[:1]  # n2 unpaired elsewhere (the CLI)
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        panel.reload()
    qtbot.waitUntil(lambda: win.streamed_nodes() == ["n1"] and win.feeds.names() == ["n1"], timeout=15_000)
    assert set(win.cards) == {"n1"} and actions.called("fleet") == [()]


def test_with_nothing_paired_the_fleet_is_not_opened(qtbot, fleet_window):
    actions = FleetActions([])
    win = fleet_window(actions)
    with qtbot.waitSignal(win.nodes_panel.paired_changed, timeout=10_000):
        win.nodes_panel.reload()
    assert win.fleet is None and actions.called("fleet") == [] and win.streamed_nodes() == []


def test_a_node_with_an_older_agent_offers_upgrade_agent(qtbot, home):
    from sparksync.gui.nodes.nodes_panel import NodesPanel

    actions = FakeActions([])
    actions.nodes = [paired_node("old", 1, agent_version="0.0.1"), paired_node("new", 2)]
    panel = NodesPanel(actions)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        panel.reload()
    texts = {row[0]: row for row in panel.row_texts()}
    assert texts["old"][5] == f"0.0.1 (upgrade to {client_agent_version()})" and texts["new"][5] == "—"
    assert panel.select("paired:old") and panel.deploy_button.text() == "Upgrade agent"
    assert panel.row_menu(panel.selected_row()).actions()[0].text() == "Upgrade agent"
    assert panel.select("paired:new") and panel.deploy_button.text() == "Deploy agent"
    panel.rows.set_agent_version("new", "0.0.2")  # its agent's hello says what really runs
    assert panel.select("paired:new") and panel.deploy_button.text() == "Upgrade agent"


def test_cancel_stops_the_running_deploy_and_its_outcome_is_summed_up_in_plain_words(qtbot, home):
    from sparksync.core.deploy.model import DeployResult, Outcome
    from sparksync.gui.nodes.nodes_panel import NodesPanel
    from tests.gui.fake_core import FakeDeployActions

    class CancellableDeploy(FakeDeployActions):
        def deploy(self, names, cancel=None):
            self.cancel = cancel
            assert cancel.wait(30)
            return [
                DeployResult(n, Outcome.CANCELLED, None, None, 1.0, "cancelled; nothing was changed")
                for n in names
            ]

    actions = CancellableDeploy(["n1", "n2"])
    panel = NodesPanel(actions)
    qtbot.addWidget(panel)
    panel.show()
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        panel.reload()
    assert panel.deploy_all() and not panel.deploy_all_button.isEnabled()
    assert not panel.deploy(["n1"])  # one deploy at a time
    panel.deploys.cancel_button.click()
    qtbot.waitUntil(lambda: not panel.deploying(), timeout=10_000)
    assert panel.deploys.summary.text() == (
        "0 of 2 node(s) run the agent.\n"
        "n1: cancelled — cancelled; nothing was changed\n"
        "n2: cancelled — cancelled; nothing was changed"
    )
    assert {r.state.value for r in panel.rows.rows()} == {"paired"} and panel.deploy_all_button.isEnabled()
