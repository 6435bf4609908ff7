"""The desktop app driven through pairing and deploying 8 lab nodes, then plotting their telemetry.

The window starts with nothing paired. The test pairs each node through the
pair dialog (host key fingerprint shown and checked against the node's,
trusted, password typed then gone from the field), deploys an older agent
to one node (whose row then offers "Upgrade agent"), deploys this client's
agent to all 8 at once from the Nodes panel (per-node bars reach "done",
the nodes read deploying, then online; the old one is upgraded), and waits for the dashboard to hold samples from
every node, streamed through SSH tunnels over the fleet's one transport per
node. Everything runs through the real core (ClusterActions, Fleet,
deploy_many) against real sshd nodes; only the dialer (into the lab's
network namespaces) and quick SSH timings are the lab's.

Set SPARKSYNC_SCREENSHOTS_DIR to also save the Nodes panel there (nodes.png),
as docs/screenshots/nodes.png is made.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sparksync_agent.protocol import AGENT_VERSION

from sparksync.core.nodes.cluster_actions import ClusterActions
from sparksync.core.telemetry.dashboard_series import MEMORY_USED
from sparksync.core.deploy.model import DeployOptions
from sparksync.core.nodes.registry import Registry
from tests.core.deploy.lab_helpers import FAST, versioned_bundle
from tests.lab.sshd import PASSWORD
from tests.lab.test_deploy_lab import agents, bundle, client_key  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.lab, pytest.mark.gui]

NODES = 8
PAIR_S = 60_000  # ms, one node's pairing on a loaded machine
DEPLOY_S = 420_000  # ms, eight parallel installs on two cores
ONLINE_S = 120_000  # ms, the telemetry workers retry with a back-off of up to 10 s
OLD_VERSION = "0.0.9"
OPTIONS = DeployOptions(health_timeout_s=90.0, advertise=False)


@pytest.fixture
def window(qtbot, agents, client_key, bundle):  # noqa: F811
    from sparksync.gui.main_window import MainWindow

    ssh_lab = agents(NODES)
    actions = ClusterActions(
        client_key=client_key,
        dialer=ssh_lab.dialer,
        ssh_settings=FAST,
        deploy_options=OPTIONS,
    )
    win = MainWindow([], actions=actions)
    win.resize(1280, 800)
    win.show()
    win.start()
    win.ssh_lab = ssh_lab
    yield win
    if win.is_running():
        with qtbot.waitSignal(win.shut_down, timeout=60_000):
            win.quit()
    win.deleteLater()


def pair_through_the_dialog(qtbot, panel, ssh_lab, node) -> None:
    dialog = panel.open_pair_dialog()
    dialog.host.setText(node.ip)
    dialog.user.setText(ssh_lab.user(node))
    dialog.name.setText(node.name)
    dialog.check_button.click()
    expected = ssh_lab.fingerprint(node)
    qtbot.waitUntil(lambda: dialog.trust_button.isVisible(), timeout=PAIR_S)
    assert expected in dialog.fingerprint.text(), (expected, dialog.fingerprint.text())
    qtbot.keyClicks(dialog.password, PASSWORD)  # typed once the key is confirmed on screen
    with qtbot.waitSignal(dialog.paired, timeout=PAIR_S) as paired:
        dialog.trust_button.click()
        assert dialog.password.text() == ""  # cleared the moment it was handed over
    assert paired.args[0].node.name == node.name and not paired.args[0].already_paired
    # The dialog offers the deploy as its next step; the test deploys all eight at once afterwards.
    assert dialog.deploy_button.isVisible() and dialog.close_button.text() == "Later"
    dialog.close_button.click()
    qtbot.waitUntil(
        lambda: panel.pair_dialog is None and panel.rows.row(f"paired:{node.name}") is not None,
        timeout=PAIR_S,
    )


def states(panel) -> dict[str, str]:
    return {r.name: r.state.value for r in panel.rows.rows() if r.paired}


def test_pair_and_deploy_eight_nodes_from_the_gui_then_plot_their_telemetry(
    qtbot,
    window,
    bundle,  # noqa: F811
    tmp_path,
):
    panel, ssh_lab = window.nodes_panel, window.ssh_lab
    names = [node.name for node in ssh_lab.nodes]
    window.tabs.setCurrentWidget(panel)
    for node in ssh_lab.nodes:
        pair_through_the_dialog(qtbot, panel, ssh_lab, node)
    assert panel.slots_label.text() == f"{NODES} of 8 slots used"
    assert [n.name for n in Registry().list()] == names
    # The fleet opened with the first pairing; every paired node has a telemetry worker on it.
    qtbot.waitUntil(
        lambda: window.fleet is not None and sorted(window.streamed_nodes()) == sorted(names), timeout=30_000
    )

    # n1 first gets an older agent: its row then offers "Upgrade agent".
    old = versioned_bundle(bundle, OLD_VERSION, tmp_path)
    window.actions.deploy_options = replace(OPTIONS, bundle=old)
    assert panel.select("paired:n1") and panel.deploy_button.text() == "Deploy agent"
    panel.deploy_button.click()
    assert states(panel)["n1"] == "deploying"
    qtbot.waitUntil(lambda: not panel.deploying(), timeout=DEPLOY_S)
    assert panel.deploys.summary.text() == f"1 of 1 node(s) run the agent {OLD_VERSION}.", (
        panel.deploys.summary.text()
    )
    qtbot.waitUntil(lambda: panel.rows.row("paired:n1").upgrade_available, timeout=ONLINE_S)
    assert panel.row_texts()[0][5] == f"{OLD_VERSION} (upgrade to {AGENT_VERSION})"
    assert panel.select("paired:n1") and panel.deploy_button.text() == "Upgrade agent"

    # Then every node gets this client's agent at once: n1 upgraded, the others installed.
    window.actions.deploy_options = OPTIONS
    seen_states: dict[str, set[str]] = {name: set() for name in names}
    panel.rows.add_listener(lambda rows: [seen_states[r.name].add(r.state.value) for r in rows if r.paired])
    assert panel.deploy_all_button.isEnabled()
    panel.deploy_all_button.click()
    assert set(states(panel).values()) == {"deploying"} and panel.deploys.cancel_button.isVisible()
    qtbot.waitUntil(lambda: not panel.deploying(), timeout=DEPLOY_S)
    bars = panel.deploys.bars
    assert sorted(bars) == sorted(names)
    assert all(bar.format() == "done" and bar.value() == 1000 for bar in bars.values()), {
        name: bar.format() for name, bar in bars.items()
    }
    assert panel.deploys.summary.text() == f"{NODES} of {NODES} node(s) run the agent {AGENT_VERSION}."
    qtbot.waitUntil(lambda: set(states(panel).values()) == {"online"}, timeout=ONLINE_S)
    assert all("online" in seen for seen in seen_states.values()), seen_states
    qtbot.waitUntil(  # the registry's record of the deploy, read again, and the new agents' hellos
        lambda: all(r.agent_version == AGENT_VERSION and not r.upgrade_available for r in panel.rows.rows()),
        timeout=ONLINE_S,
    )
    assert Registry().get("n1").agent_version == AGENT_VERSION
    assert panel.select("paired:n1") and panel.deploy_button.text() == "Deploy agent"

    # Telemetry from all eight, through tunnels on the fleet's transports, into the dashboard's plots.
    qtbot.waitUntil(lambda: set(window.last_sample_ts) == set(names), timeout=ONLINE_S)
    assert all(window.model.latest(name, MEMORY_USED) is not None for name in names)
    # Each node's dashboard card fills in from its new agent (the feed tried it again once deployed).
    qtbot.waitUntil(lambda: all(window.cards[n].text("hostname") not in ("…", "") for n in names),
                    timeout=ONLINE_S)  # fmt: skip
    assert all(window.cards[n].text("agent").startswith(AGENT_VERSION) for n in names)
    transports = window.actions.transports()
    assert transports is window.fleet.transports  # one transport per node, shared by actions and telemetry
    connected: list[dict] = []  # the tray's "Connect all", through the same fleet
    window.jobs.run("Connecting all nodes", window.actions.connect_all, connected.append)
    qtbot.waitUntil(lambda: bool(connected), timeout=ONLINE_S)
    assert connected == [{name: None for name in names}]
    assert set(states(panel).values()) == {"online"}
    window.tabs.setCurrentWidget(window.dashboard)
    qtbot.waitUntil(
        lambda: all(window.dashboard.curve(name, MEMORY_USED) is not None for name in names), timeout=30_000
    )
    window.tabs.setCurrentWidget(panel)
    shot_of_the_nodes_panel(qtbot, window, tmp_path / "nodes.png")


def shot_of_the_nodes_panel(qtbot, window, path: Path) -> None:
    """The Nodes panel with eight online nodes: not blank; copied for the docs when asked."""
    from PySide6.QtGui import QImage

    qtbot.waitExposed(window)
    image = window.grab().toImage()
    assert image.save(str(path), "PNG")
    grey = QImage(str(path)).convertToFormat(QImage.Format.Format_Grayscale8)
    pixels = np.frombuffer(grey.constBits(), dtype=np.uint8, count=grey.sizeInBytes())
    assert pixels.std() > 10  # text and rows, not a flat fill
    target = os.environ.get("SPARKSYNC_SCREENSHOTS_DIR")
    if target:
        shutil.copyfile(path, Path(target) / "nodes.png")
