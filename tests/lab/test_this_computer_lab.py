"""This computer beside two lab Sparks in the desktop app: plotted, but not counted in the cluster's figures.

Two lab nodes run real agents behind real sshd (``lab_agents``); the window
follows them through SSH tunnels and this computer through its local agent,
all on the app's one fleet. In a network namespace psutil still reads the
machine's memory, so every node reports the same MemTotal: the cluster's
capacity is two of them, not three, and the tray reads "2/2 online".
"""

from __future__ import annotations

import pytest

from sparksync.core.base.units import format_bytes
from sparksync.core.nodes.cluster_actions import ClusterActions
from sparksync.core.telemetry.dashboard_series import MEMORY_TOTAL, MEMORY_USED
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.test_fleet_lab import LINK, agent_python, client_key, lab_agents  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.lab, pytest.mark.gui]

WAIT_MS = 120_000
HERE = "this computer"


@pytest.fixture
def window(qtbot, lab_agents, client_key):  # noqa: F811
    from sparksync.gui.main_window import MainWindow

    ssh_lab, _agents = lab_agents(2, sample_hz=5)
    actions = ClusterActions(client_key=client_key, dialer=ssh_lab.dialer, ssh_settings=LINK, sample_hz=5)
    win = MainWindow(actions=actions)  # this computer, and the paired nodes once the registry is read
    win.show()
    win.start()
    win.ssh_lab = ssh_lab
    yield win
    if win.is_running():
        with qtbot.waitSignal(win.shut_down, timeout=60_000):
            win.quit()
    win.deleteLater()


def test_cluster_memory_and_the_tray_count_the_two_sparks_and_show_this_computer_beside_them(qtbot, window):
    sparks = [node.name for node in window.ssh_lab.nodes]
    model = window.model
    qtbot.waitUntil(lambda: set(window.last_sample_ts) == {HERE, *sparks}, timeout=WAIT_MS)
    assert sorted(window.streamed_nodes()) == sorted([HERE, *sparks])
    assert model.apart == {HERE}
    qtbot.waitUntil(lambda: all(model.latest(n, MEMORY_TOTAL) for n in [HERE, *sparks]), timeout=WAIT_MS)
    each = [model.latest(n, MEMORY_TOTAL) for n in sparks]

    def counted() -> bool:
        return model.capacity_bytes() == sum(each)

    qtbot.waitUntil(counted, timeout=WAIT_MS)  # the next cluster row, after the last node's sample
    assert model.capacity_bytes() < sum(each) + model.latest(HERE, MEMORY_TOTAL)  # this computer is not in it
    qtbot.waitUntil(lambda: window.summary().online == 2, timeout=WAIT_MS)
    summary = window.summary()
    assert (summary.online, summary.total) == (2, 2) and summary.text().startswith("2/2 online")
    window.tabs.setCurrentWidget(window.dashboard)
    qtbot.waitUntil(lambda: window.dashboard.curve(HERE, MEMORY_USED) is not None, timeout=30_000)  # beside them
    plot = window.dashboard.plots["cluster_memory"]
    capacity = format_bytes(sum(each), window.dashboard.memory_unit)
    qtbot.waitUntil(lambda: plot.title().endswith(f"used of {capacity}"), timeout=30_000)
