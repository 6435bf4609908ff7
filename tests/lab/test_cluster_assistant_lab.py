"""The Topology tab's cluster assistant on 4 real lab nodes, from its buttons: detect, plan and Apply (the sudo
password asked in the real dialog, answered here), then mesh, mesh check and the acceptance check.

The real core (ClusterAssistant over a Fleet, SSH to real sshd nodes, real
iperf3 and ping on the CX-7-like ports) behind the real widget; only the
dialer into the lab and the lab's line rate (1 Gb/s: every port shaped to
950 Mbit/s, n3's to 100 Mbit/s) are the lab's. With SPARKSYNC_SCREENSHOTS_DIR set it saves the
tab there (cluster-assistant.png), as docs/screenshots/cluster-assistant.png
is made (under xvfb-run, QT_QPA_PLATFORM=xcb), and the Apply's per-node progress (cluster-assistant-apply.png).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QInputDialog

from sparksync.core.fabric.assistant import ClusterAssistant
from sparksync.core.fabric.check import CheckOptions
from sparksync.core.fabric.check_history import FabricCheckHistory
from sparksync.core.fabric.operations import FabricOperations
from sparksync.core.fabric.topology import FabricKind
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.ssh.secrets import SecretStore
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.fabric_cluster import fabric_cluster  # noqa: F401  (a fixture)
from tests.lab.fabric_lab import VETH_SPEED_MBPS
from tests.lab.mesh_lab import FabricNodes
from tests.lab.test_fleet_lab import agent_python, open_fleet  # noqa: F401  (a fixture)
from tests.lab.test_pairing_lab import FAST, pair

pytestmark = [pytest.mark.lab, pytest.mark.gui]


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


def answer_the_password_dialog(password: str, asked: list[str]) -> QTimer:
    """Answer the sudo password dialog once it is up (Apply's QInputDialog, modal), as a user types it."""
    timer = QTimer()

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        if isinstance(dialog, QInputDialog):
            asked.append(dialog.labelText())
            dialog.setTextValue(password)
            dialog.accept()

    timer.timeout.connect(look)
    timer.start(50)
    return timer


def test_the_assistant_detects_plans_and_applies_on_real_nodes_with_progress_per_node(
        qtbot, fabric_cluster, client_key):  # noqa: F811
    from sparksync.gui.topology.cluster_assistant import ClusterAssistantView

    cluster = fabric_cluster(4, "switch")  # port 0 of every node on one switch; real agents, real sudo
    fleet = open_fleet(cluster.ssh_lab, client_key)
    core = ClusterAssistant(lambda: fleet, line_rate_mbps=VETH_SPEED_MBPS)
    view = ClusterAssistantView(lambda: fleet, core=core)
    qtbot.addWidget(view)
    view.resize(1280, 800)
    asked: list[str] = []
    applied = False
    try:
        view.show()
        qtbot.waitUntil(lambda: view._loaded and not view.jobs.busy(), timeout=20_000)
        assert not view.buttons["plan"].isEnabled() and not view.apply_button.isEnabled()
        qtbot.mouseClick(view.buttons["detect"], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: view.detection is not None and not view.jobs.busy(), timeout=60_000)
        assert view.detection.topology.kind is FabricKind.switch, view.detection.topology.problems
        for name in cluster.names:
            assert ("detect", "done") in view.progress_of(name)
        qtbot.mouseClick(view.buttons["plan"], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: view.plan is not None and not view.jobs.busy(), timeout=20_000)
        plan = view.plan
        assert view.pending and view.apply_button.isEnabled()
        assert f"Plan {plan.plan_id}: switch, MTU 9000" in view.plan_text.toPlainText()
        timer = answer_the_password_dialog(cluster.password, asked)
        qtbot.mouseClick(view.apply_button, Qt.MouseButton.LeftButton)  # returns once the dialog is answered
        timer.stop()
        assert len(asked) == 1 and "sudo password" in asked[0]  # asked once, for every node
        qtbot.waitUntil(lambda: not view.jobs.busy(), timeout=120_000)
        applied = view.applied
        assert applied and not view.pending, [view.problems.item(i).text() for i in range(view.problems.count())]
        assert view.side_tabs.currentWidget() is view.progress
        for node in cluster.nodes:  # the progress per node, then each node as the plan says, read in its namespace
            assert ("apply", "done") in view.progress_of(node.name), view.progress_of(node.name)
            for iface in plan.node(node.name).interfaces:
                assert cluster.fabric.addresses(node, iface.name) == [iface.address]
                assert cluster.fabric.mtu(node, iface.name) == 9000
                conf = f"/proc/sys/net/ipv4/conf/{iface.name}"
                done = cluster.ssh_lab.lab.exec(node, ["cat", f"{conf}/arp_ignore", f"{conf}/arp_announce"], check=True)
                assert done.stdout.split() == ["1", "2"]
        shots = os.environ.get("SPARKSYNC_SCREENSHOTS_DIR")
        if shots:
            view.progress.expandAll()
            view.progress.resizeColumnToContents(0)
            qtbot.wait(300)
            assert view.grab().save(str(Path(shots) / "cluster-assistant-apply.png"))
    finally:
        view.jobs.wait(60)
        if applied:
            assert FabricOperations(fleet).rollback(cluster.names, cluster.password).ok
        fleet.close()


def test_the_assistant_sets_up_the_mesh_and_shows_the_figures_of_a_real_check(qtbot, ssh_lab_factory, client_key):
    from sparksync.gui.topology.cluster_assistant import ClusterAssistantView

    lab = FabricNodes.make(ssh_lab_factory, 4, client_key, pair)
    for node in lab.nodes:  # every port at about the line rate the check is told; n3's at a tenth of it
        lab.fabric.shape(node, 0, "100mbit" if node.name == "n3" else "950mbit")
    fleet = Fleet(client_key, dialer=lab.ssh_lab.dialer, settings=FAST)
    core = ClusterAssistant(lambda: fleet, line_rate_mbps=1000, check_options=CheckOptions(seconds=2, streams=2))
    view = ClusterAssistantView(lambda: fleet, core=core)
    qtbot.addWidget(view)
    view.resize(1280, 800)
    told = []
    view.fabric_health_changed.connect(told.append)
    try:
        view.show()
        qtbot.waitUntil(lambda: view.applied and view.canvas.drawing is not None, timeout=20_000)
        assert len(view.canvas.drawing.edges) == 4 and view.canvas.drawing.switches == ["switch 1"]  # both twins
        qtbot.mouseClick(view.buttons["mesh"], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not view.jobs.busy(), timeout=120_000)
        assert ("config", "done") in view.progress_of("n4")
        qtbot.mouseClick(view.buttons["mesh_check"], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not view.jobs.busy(), timeout=120_000)
        assert [state for step, state in view.progress_of("n1") if step == "check"][-1] == "done"
        qtbot.mouseClick(view.buttons["check"], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: view.report is not None and not view.jobs.busy(), timeout=180_000)
        report = view.report
        flagged = [link for link in report.links if "n3" in link.nodes]
        assert flagged and all(m.verdict.value == "degraded" for link in flagged for m in link.figure("iperf3"))
        assert told and told[-1].startswith("Fabric degraded:") and "n3" in told[-1], [m.text() for m in report.problems]
        marked = [e for e in view.canvas.drawing.edges if view.canvas.is_marked(e.key)]
        assert {e.a for e in marked} == {"n3", "n4"}  # n3 is shaped; n4 is paired with it in the test
        assert any("⚠" in view.canvas.label_of(e.key) for e in marked)
        assert FabricCheckHistory().latest().links[0].key == report.links[0].key  # stored in the history
        rows = view.figure_rows()
        assert any(r[1] == "iperf3" and r[5].startswith("degraded") for r in rows)
        shots = os.environ.get("SPARKSYNC_SCREENSHOTS_DIR")
        if shots:
            view.side_tabs.setCurrentWidget(view.figures)
            qtbot.wait(300)
            assert view.grab().save(str(Path(shots) / "cluster-assistant.png"))
    finally:
        view.jobs.wait(60)
        fleet.close()
