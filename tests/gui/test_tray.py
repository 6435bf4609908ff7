"""The tray: menu actions call the core, the tooltip and icon follow the cluster, notifications."""

from __future__ import annotations

import pytest
from sparksync_agent.protocol import Sample

from sparksync.core.telemetry.cluster_summary import ClusterSummary, Health
from sparksync.core.nodes.rows import NodeRow, NodeState
from tests.core.dashboard_samples import memory
from tests.gui.fake_core import FakeActions

pytestmark = pytest.mark.gui


@pytest.fixture
def tray_for(qtbot):
    made = []

    def make(fake, summary=None, benchmarks=None, node_memory=None):
        summary = summary or ClusterSummary(6, 8, 412e9, 38.0)
        from PySide6.QtWidgets import QStatusBar

        from sparksync.gui.tray.notifier import Notifier
        from sparksync.gui.tray.tray import Tray
        from sparksync.gui.workers import Jobs

        bar = QStatusBar()
        qtbot.addWidget(bar)
        calls = {"dashboard": 0, "pair": 0, "quit": 0, "urls": []}
        jobs = Jobs()
        tray = Tray(
            fake, jobs, Notifier(bar),
            summary=lambda: summary, summary_text=lambda s: s.text(),
            open_dashboard=lambda: calls.__setitem__("dashboard", calls["dashboard"] + 1),
            pair_new_node=lambda: calls.__setitem__("pair", calls["pair"] + 1),
            quit_app=lambda: calls.__setitem__("quit", calls["quit"] + 1),
            open_url=calls["urls"].append, benchmarks=benchmarks, node_memory=node_memory,
        )  # fmt: skip
        tray.calls, tray.bar = calls, bar
        made.append(tray)
        return tray

    yield make
    for tray in made:
        tray.hide()
        assert tray.jobs.wait(30)


def test_the_tooltip_and_icon_follow_the_summary(tray_for):
    tray = tray_for(FakeActions())
    tray.refresh()
    assert tray.tooltip() == "SparkSync: 6/8 online, 412 GB used, 38 tok/s" and tray.health is Health.DEGRADED
    from sparksync.gui.tray.icons import health_icon

    assert tray.icon.icon().cacheKey() == health_icon(Health.DEGRADED).cacheKey()
    online = tray_for(FakeActions(), ClusterSummary(2, 2, 1e9, None))
    online.refresh()
    assert online.health is Health.ONLINE and online.tooltip() == "SparkSync: 2/2 online, 1 GB used"
    assert online.icon.icon().cacheKey() == health_icon(Health.ONLINE).cacheKey()
    assert health_icon(Health.ONLINE).cacheKey() != health_icon(Health.OFFLINE).cacheKey()


def test_menu_actions_call_the_core(qtbot, tray_for):
    fake = FakeActions(["n1", "n2"])
    tray = tray_for(fake)
    tray.set_nodes(["n1", "n2"])
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.load_apps()
    actions = tray.menu_actions
    assert {"node:n1:terminal", "node:n1:app:DGX Dashboard", "node:n2:app:Jupyter"} <= set(actions)

    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        actions["connect_all"].trigger()
    assert fake.called("connect_all") == [()] and tray.bar.currentMessage() == "Connected 2 of 2 nodes."
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        actions["node:n2:terminal"].trigger()
    assert fake.called("open_terminal") == [("n2",)]
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.menu_actions["node:n1:app:DGX Dashboard"].trigger()
    assert fake.called("open_app") == [("n1", "DGX Dashboard")]
    assert tray.calls["urls"] == ["http://127.0.0.1:45678/"]  # the tunnel's local end, in the browser
    assert tray.menu_actions["node:n1:app:DGX Dashboard"].text() == "Close DGX Dashboard"
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.menu_actions["node:n1:app:DGX Dashboard"].trigger()
    assert fake.called("close_app") == [("n1", "DGX Dashboard")]
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.menu_actions["disconnect_all"].trigger()
    assert fake.called("disconnect_all") == [()]

    for key in ("open_dashboard", "pair", "quit"):
        tray.menu_actions[key].trigger()
    assert (tray.calls["dashboard"], tray.calls["pair"], tray.calls["quit"]) == (1, 1, 1)
    for key in ("last_workload", "last_benchmark"):
        assert not tray.menu_actions[key].isEnabled() and "not available" in tray.menu_actions[key].toolTip()


def test_a_failing_action_is_reported(qtbot, tray_for):
    from sparksync.core.apps.terminal import TerminalError

    fake = FakeActions(["n1"])
    fake.fail["open_terminal"] = TerminalError("No terminal program was found.")
    tray = tray_for(fake)
    tray.set_nodes(["n1"])
    with qtbot.waitSignal(tray.notifier.shown, timeout=10_000) as shown:
        tray.menu_actions["node:n1:terminal"].trigger()
    assert shown.args == ["SparkSync", "No terminal program was found.", "status bar"]
    assert "No terminal program" in tray.bar.currentMessage()


def test_a_node_going_offline_and_coming_back_is_notified_once_each(qtbot, tray_for):
    tray = tray_for(FakeActions())
    shown = []
    tray.notifier.shown.connect(lambda *args: shown.append(args))

    def rows(state):
        return [NodeRow("paired:n1", "n1", "10.0.0.1", state, "no answer to keepalives", None, True)]

    tray.on_rows_changed(rows(NodeState.OFFLINE))  # first seen offline: not news
    tray.on_rows_changed(rows(NodeState.ONLINE))
    tray.on_rows_changed(rows(NodeState.OFFLINE))
    tray.on_rows_changed(rows(NodeState.OFFLINE))
    tray.on_rows_changed(rows(NodeState.DEGRADED))  # reachable again, but not well yet
    tray.on_rows_changed(rows(NodeState.ONLINE))
    tray.on_rows_changed(rows(NodeState.ONLINE))
    tray.on_rows_changed(rows(NodeState.OFFLINE))
    tray.on_rows_changed(rows(NodeState.ONLINE))
    offline = ("n1 is offline", "no answer to keepalives", "status bar")
    online = ("n1 is online again", "It answers and streams its telemetry.", "status bar")
    assert shown == [offline, online, offline, online]


def test_the_window_computes_the_tooltip_from_what_the_dashboard_holds(qtbot, home):
    import time

    from sparksync.gui.main_window import MainWindow
    from sparksync.gui.tray.setup import install_tray

    win = MainWindow(actions=FakeActions())
    tray = install_tray(win, available=True, open_url=lambda url: None)
    now = time.time()
    for i in range(3):
        win.feeds.sample_received.emit(
            "this computer", Sample(seq=i + 1, ts=now - 2 + i, memory=memory(412e9 - i))
        )
    win.model.add_tokens("llama", now + 0.5, 38.0)
    tray.refresh()
    assert tray.tooltip() == "SparkSync: 1/1 online, 412 GB used, 38 tok/s" and tray.health is Health.ONLINE
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()


# --- the last benchmark ---------------------------------------------------------------------------------


def test_run_last_benchmark_is_enabled_once_a_run_is_stored(qtbot, tray_for, tmp_path):
    from sparksync.core.bench.history import HistoryStore
    from sparksync.core.bench.recording import store
    from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel
    from sparksync.gui.tray.tray import NO_LAST_BENCHMARK
    from tests.core.bench.records import inference_run

    path = tmp_path / "bench.sqlite3"
    panel = BenchmarksPanel(path)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.jobs.finished, timeout=10_000):
        tray = tray_for(FakeActions(), benchmarks=panel)  # asks the history whether a run exists
    entry = tray.menu_actions["last_benchmark"]
    assert not entry.isEnabled() and entry.toolTip() == NO_LAST_BENCHMARK
    assert not path.exists()  # asking does not create the history file

    store(HistoryStore(path), inference_run(1, 11.86, 1500.0))
    with qtbot.waitSignal(panel.last_run_changed, timeout=10_000):
        panel.read_last_run()
    assert tray.menu_actions["last_benchmark"].isEnabled()
    assert panel.wait(10)


@pytest.mark.slow
def test_the_trays_run_last_benchmark_runs_it_again_and_each_end_is_notified(
    qtbot, home, fake_server, tokenizer_json
):
    from sparksync.core.bench.endpoint import Endpoint
    from sparksync.core.bench.profile import BenchProfile
    from sparksync.core.bench.runner import BenchRequest
    from sparksync.gui.main_window import MainWindow
    from sparksync.gui.tray.setup import install_tray

    win = MainWindow([], actions=FakeActions())
    tray = install_tray(win, available=True, open_url=lambda url: None)
    finished = []
    win.notifier.shown.connect(lambda title, message, _where: finished.append((title, message))
                               if title.startswith("Benchmark") else None)  # fmt: skip
    assert not tray.menu_actions["last_benchmark"].isEnabled()  # nothing stored in this SPARKSYNC_HOME

    request = BenchRequest(
        Endpoint.parse(fake_server.base_url),
        fake_server.settings.model,
        tokenizer_json,
        BenchProfile.build(pp=(64,), tg=(16,), runs=2),
    )
    with qtbot.waitSignal(win.benchmarks.run_finished, timeout=180_000) as first:
        win.benchmarks.start_run(request)
    qtbot.waitUntil(lambda: tray.menu_actions["last_benchmark"].isEnabled(), timeout=10_000)
    with qtbot.waitSignal(win.benchmarks.run_finished, timeout=180_000) as again:
        tray.menu_actions["last_benchmark"].trigger()
    a, b = first.args[0], again.args[0]
    assert b.id != a.id and b.status == "complete" and (b.endpoint, b.profile) == (a.endpoint, a.profile)
    model = fake_server.settings.model
    assert [title for title, _ in finished] == [
        f"Benchmark {a.id} ({model}) finished",
        f"Benchmark {b.id} ({model}) finished",
    ]
    assert finished[1][1].startswith("decode ") and "tok/s, prefill " in finished[1][1]
    assert win.benchmarks.wait(30)
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()


def test_a_failed_run_last_from_the_tray_is_notified(qtbot, tray_for, tmp_path):
    from sparksync.core.bench.history import HistoryStore
    from sparksync.core.bench.recording import store
    from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel
    from tests.core.bench.records import inference_run

    path = tmp_path / "bench.sqlite3"
    store(HistoryStore(path), inference_run(1, 11.86, 1500.0))  # no tokenizer recorded: cannot be repeated
    panel = BenchmarksPanel(path)
    qtbot.addWidget(panel)
    tray = tray_for(FakeActions(), benchmarks=panel)
    qtbot.waitUntil(lambda: tray.menu_actions["last_benchmark"].isEnabled(), timeout=10_000)
    with qtbot.waitSignal(tray.notifier.shown, timeout=10_000) as shown:
        tray.menu_actions["last_benchmark"].trigger()
    assert shown.args[0] == "SparkSync" and "run it from the dialog" in shown.args[1]
    assert panel.wait(10)


def test_a_degraded_fabric_shows_in_the_icon_the_tooltip_and_the_menu(tray_for):
    tray = tray_for(FakeActions(), ClusterSummary(2, 2, 1e9, None))
    shown = []
    tray.notifier.shown.connect(lambda *args: shown.append(args))
    tray.refresh()
    assert tray.health is Health.ONLINE and "fabric" not in tray.menu_actions
    problem = "Fabric degraded: 2 of 8 links flagged (iperf3 n3 -> n4 0.09 Gb/s, 9 % of line rate)"
    tray.set_fabric_health(problem)
    assert tray.health is Health.DEGRADED
    assert tray.tooltip() == f"SparkSync: 2/2 online, 1 GB used\n{problem}"
    assert tray.menu_actions["fabric"].text() == f"⚠ {problem}"
    assert shown == []  # the notification is the window's, through the core's events door
    tray.set_fabric_health(None)
    assert tray.health is Health.ONLINE and "fabric" not in tray.menu_actions


def test_a_degraded_check_is_one_notification_through_the_events_door(qtbot, home):
    from sparksync.core.fabric.check_history import FabricCheckHistory
    from sparksync.gui.main_window import MainWindow
    from sparksync.gui.tray.setup import install_tray
    from tests.gui.test_cluster_assistant import check_report

    FabricCheckHistory().add(check_report("n3"))  # the newest stored check, read at start: n2-n3 and n3-n4 flagged
    fake = FakeActions()
    told = []
    fake.events.add_listener(told.append)
    win = MainWindow(actions=fake)
    shown = []
    win.notifier.shown.connect(lambda *args: shown.append(args))
    tray = install_tray(win, available=True, open_url=lambda url: None)
    win.start()
    qtbot.waitUntil(lambda: tray.fabric_health is not None, timeout=10_000)
    qtbot.wait(200)
    assert len(shown) == 1 and len(told) == 1, shown
    title, message, _where = shown[0]
    assert title == "Fabric link degraded: n2:enp1s0f1np1 ↔ n3:enp1s0f0np0, n3:enp1s0f1np1 ↔ n4:enp1s0f0np0"
    assert message == "iperf3 n2 -> n3 40 Gb/s, 20 % of line rate"
    assert tray.menu_actions["fabric"].text().startswith("⚠ Fabric degraded: 2 of 4")  # the tray shows it
    assert "Fabric degraded: 2 of 4" in tray.tooltip()
    win.cluster._on_checked(check_report("n3"))  # a check run from the tab with the same news: not told again
    assert len(shown) == 1
    win.cluster._on_checked(check_report(None))  # healthy
    assert tray.fabric_health is None and len(shown) == 1
    win.cluster._on_checked(check_report("n1"))  # degraded again, a check run from the tab: told once
    assert len(shown) == 2 and shown[1][0].startswith("Fabric link degraded: n1:enp1s0f1np1 ↔ n2:enp1s0f0np0")
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()


# --- nodes in the tray, as NVIDIA Sync lists its devices --------------------------------------------------


def paired_rows(*states):
    """Rows of paired nodes n1, n2 ... in ``states`` (state, reason)."""
    return [NodeRow(f"paired:n{i + 1}", f"n{i + 1}", f"10.0.0.{i + 1}", state, reason, None, True)
            for i, (state, reason) in enumerate(states)]  # fmt: skip


def test_each_paired_node_shows_its_state_why_and_memory_in_use(tray_for):
    memory_of = {"n1": ("41.2 GB", "121.7 GB"), "n2": None}
    fake = FakeActions(["n1", "n2", "n3"])
    tray = tray_for(fake, node_memory=memory_of.get)
    tray.set_nodes(["n1", "n2", "n3"])
    tray.on_rows_changed(paired_rows((NodeState.ONLINE, None), (NodeState.OFFLINE, "no answer on port 22"),
                                     (NodeState.DEGRADED, "the agent does not answer")))  # fmt: skip
    titles = [a.text() for a in tray.menu.actions() if a.menu() is not None]
    assert titles == ["● n1 — online · 41.2 GB used", "○ n2 — offline", "◐ n3 — degraded"]
    actions = tray.menu_actions
    assert actions["node:n1:memory"].text() == "Memory in use: 41.2 GB of 121.7 GB"
    assert "node:n1:why" not in actions
    assert actions["node:n2:why"].text() == "Offline: no answer on port 22"
    assert actions["node:n3:why"].text() == "Degraded: the agent does not answer"
    assert actions["node:n2:memory"].text() == "Memory in use: not known yet"
    for node in ("n1", "n2", "n3"):
        assert actions[f"node:{node}:connect"].text() == "Disconnect"
        assert f"node:{node}:terminal" in actions
    # Memory moves with every sample: the title follows at the next refresh, without a rebuild.
    memory_of["n1"] = ("50 GB", "121.7 GB")
    menu = tray._node_menus["n1"]
    tray.refresh()
    assert tray._node_menus["n1"] is menu and menu.menuAction().text() == "● n1 — online · 50 GB used"


def test_the_node_submenu_holds_its_launchers_after_its_state(qtbot, tray_for):
    tray = tray_for(FakeActions(["n1"]))
    tray.set_nodes(["n1"])
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.load_apps()
    texts = [a.text() for a in tray._node_menus["n1"].actions() if not a.isSeparator()]
    assert texts == ["Memory in use: not known yet", "Disconnect", "Open terminal", "Open DGX Dashboard",
                     "Open Jupyter"]  # fmt: skip


def test_disconnect_and_connect_one_node_from_the_tray(qtbot, tray_for):
    fake = FakeActions(["n1", "n2"])
    tray = tray_for(fake, node_memory=lambda name: ("10 GB", "128 GB"))
    tray.set_nodes(["n1", "n2"])
    changes = []
    tray.connection_changed.connect(lambda node, up: changes.append((node, up)))
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.menu_actions["node:n1:connect"].trigger()
    assert fake.called("disconnect") == [("n1",)] and changes == [("n1", False)]
    assert tray.menu_actions["node:n1:connect"].text() == "Connect"
    assert tray._node_menus["n1"].menuAction().text() == "○ n1 — disconnected"
    assert tray.menu_actions["node:n2:connect"].text() == "Disconnect"
    with qtbot.waitSignal(tray.jobs.finished, timeout=10_000):
        tray.menu_actions["node:n1:connect"].trigger()
    assert fake.called("connect") == [("n1",)] and changes == [("n1", False), ("n1", True)]
    assert tray.menu_actions["node:n1:connect"].text() == "Disconnect"
    assert tray.bar.currentMessage() == "Connected n1."


def test_a_node_turning_degraded_is_notified(tray_for):
    tray = tray_for(FakeActions(["n1"]))
    shown = []
    tray.notifier.shown.connect(lambda *args: shown.append(args))
    tray.on_rows_changed(paired_rows((NodeState.ONLINE, None)))
    tray.on_rows_changed(paired_rows((NodeState.DEGRADED, "the agent does not answer")))
    assert shown == [("n1 is degraded", "the agent does not answer", "status bar")]


def test_the_window_notifies_a_degraded_fabric_link_told_by_the_core_from_any_thread(qtbot, home):
    import threading

    from sparksync.gui.main_window import MainWindow

    fake = FakeActions()
    win = MainWindow(actions=fake)
    link = "spark-1 enp1s0f0np0 ↔ spark-2 enp1s0f0np0"
    with qtbot.waitSignal(win.notifier.shown, timeout=10_000) as shown:
        threading.Thread(target=fake.events.fabric_link_degraded, args=(link, "negotiated 100 Gb/s")).start()
    assert shown.args == [f"Fabric link degraded: {link}", "negotiated 100 Gb/s", "status bar"]
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()


def test_the_window_without_a_tray_gets_none_and_with_one_a_menu_of_its_nodes(qtbot, home):
    from sparksync.gui.main_window import MainWindow
    from sparksync.gui.tray.setup import install_tray

    win = MainWindow(actions=FakeActions())
    assert install_tray(win, available=False) is None and win.tray is None
    tray = install_tray(win, available=True, open_url=lambda url: None)
    assert win.tray is tray and "no_nodes" in tray.menu_actions
    tray.set_nodes(["n1"])
    assert "node:n1:connect" in tray.menu_actions and tray.node_title("n1") == "○ n1 — paired"
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    win.deleteLater()
