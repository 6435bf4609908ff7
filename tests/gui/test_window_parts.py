"""The window around the dashboard: tabs, close to tray, settings, errors in the status bar."""

from __future__ import annotations

import pytest

from sparksync.core.apps.autostart import autostart_dir
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.apps.settings import AppSettings, Theme, load_settings, settings_path
from tests.gui.fake_core import FakeActions

pytestmark = pytest.mark.gui


@pytest.fixture
def window_for(qtbot, home):
    made = []

    def make(actions=None, settings=None, tray=False):
        from sparksync.gui.main_window import MainWindow
        from sparksync.gui.tray.setup import install_tray

        win = MainWindow(actions=actions or FakeActions(["n1"]), settings=settings)
        if tray:
            install_tray(win, available=True, open_url=lambda url: None)
        win.show()
        made.append(win)
        return win

    yield make
    for win in made:
        if win.is_running() or win.isVisible():
            win.quit()
        qtbot.waitUntil(lambda win=win: not win.is_running(), timeout=15_000)
        assert win.jobs.wait(30)
        win.deleteLater()


def test_every_tool_is_a_tab_of_its_own(window_for):
    win = window_for()
    titles = [win.tabs.tabText(i) for i in range(win.tabs.count())]
    assert titles == ["Dashboard", "Nodes", "Workloads", "Models", "Chat", "Benchmarks", "Planner", "Switchyard", "Topology"]
    panels = [
        win.dashboard, win.nodes_panel, win.workloads, win.models, win.chat, win.benchmarks, win.planner, win.switchyard,
        win.cluster,
    ]  # fmt: skip  (each built here, on first use, in its tab's place)
    assert [win.tabs.widget(i) for i in range(win.tabs.count())] == panels
    # Not also tucked inside another tab.
    assert not win.dashboard.isAncestorOf(win.switchyard) and not win.benchmarks.isAncestorOf(win.planner)
    assert win.cluster.pages.widget(1) is win.topology  # the live topology, a page of the cluster assistant


def test_only_the_dashboard_and_the_nodes_are_built_before_the_first_paint(qtbot, window_for):
    from sparksync.gui.main_window import TABS

    win = window_for()
    lazy = ["workloads", "models", "chat", "benchmarks", "planner", "switchyard", "cluster", "topology", "local_model"]
    assert [name for name in lazy if win.built(name) is not None] == []
    assert win.tabs.currentWidget() is win.dashboard
    # A tab shown first builds its panel in its place, and stays the current tab.
    index = [win.tabs.tabText(i) for i in range(win.tabs.count())].index("Planner")
    win.tabs.setCurrentIndex(index)
    assert win.built("planner") is not None and win.tabs.currentWidget() is win.planner
    assert win.tabs.currentIndex() == index and win.tabs.tabText(index) == "Planner"
    # Once started, the rest are built a turn of the event loop each, the window answering between them.
    win.start()
    assert win.built("workloads") is None
    qtbot.waitUntil(lambda: all(win.built(name) is not None for name in lazy), timeout=20_000)
    assert win.tabs.currentWidget() is win.planner
    assert [win.tabs.widget(i) for i in range(win.tabs.count())] == [getattr(win, name) for name in TABS.values()]


def test_the_dashboard_builds_its_plots_once_it_has_painted(qtbot, window_for):
    win = window_for()
    assert not win.dashboard.plots_ready  # shown, not yet painted
    with qtbot.waitSignal(win.dashboard.plots_shown, timeout=20_000):
        pass  # the first paint, the plots built, each shown plot painted
    assert [key for key, plot in win.dashboard.plots.items() if not plot.isHidden()]  # the placeholders at least


def test_closing_with_a_tray_hides_says_so_once_and_quit_ends(qtbot, window_for):
    win = window_for(tray=True)
    shown = []
    win.notifier.shown.connect(lambda *args: shown.append(args))
    win.close()
    assert not win.isVisible() and not win._closing
    assert [s[0] for s in shown] == ["SparkSync is still running"]
    qtbot.waitUntil(lambda: settings_path().exists() and load_settings().tray_hint_shown, timeout=10_000)
    win.show_dashboard()
    assert win.isVisible()
    win.close()
    assert len(shown) == 1 and not win.isVisible()  # said once only
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.quit()
    assert win.actions.called("close") == [()]  # tunnels, scripts and links closed on the way out


def test_the_hint_is_not_repeated_in_a_later_session(qtbot, window_for):
    win = window_for(settings=AppSettings(tray_hint_shown=True), tray=True)
    shown = []
    win.notifier.shown.connect(lambda *args: shown.append(args))
    win.close()
    assert not win.isVisible() and shown == []


def test_without_a_tray_closing_quits(qtbot, window_for):
    win = window_for(tray=False)
    with qtbot.waitSignal(win.shut_down, timeout=15_000):
        win.close()
    assert win.actions.called("close") == [()]


def test_settings_apply_persist_and_write_the_autostart_entry(qtbot, window_for):
    win = window_for()
    dialog = win.open_settings()
    qtbot.waitUntil(lambda: dialog.keyring.text() != "checking…", timeout=10_000)
    assert "not usable" in dialog.keyring.text() and "no Secret Service" in dialog.keyring.text()
    dialog.window.setCurrentIndex(dialog.window.findData(3600.0))
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    dialog.sample_hz.setValue(5.0)
    dialog.start_at_login.setChecked(True)
    dialog.accept()
    assert win.dashboard.window_s == 3600.0
    entry = autostart_dir() / "sparksync.desktop"
    qtbot.waitUntil(lambda: entry.exists() and settings_path().exists(), timeout=10_000)
    saved = load_settings()
    assert (saved.window_s, saved.theme, saved.sample_hz, saved.start_at_login) == (
        3600.0,
        Theme.DARK,
        5.0,
        True,
    )
    again = win.open_settings()
    again.start_at_login.setChecked(False)
    again.accept()
    qtbot.waitUntil(lambda: not entry.exists(), timeout=10_000)
    assert load_settings().start_at_login is False


def test_a_new_window_starts_with_the_saved_settings(window_for):
    win = window_for(settings=AppSettings(window_s=60.0))
    assert win.dashboard.window_s == 60.0


def test_unreadable_settings_are_never_overwritten(qtbot, window_for):
    win = window_for()
    win.settings_writable = False
    win.apply_settings(AppSettings(window_s=60.0))
    assert "not saved" in win.statusBar().currentMessage() and not settings_path().exists()


def test_errors_from_the_core_appear_in_the_status_bar(qtbot, window_for):
    fake = FakeActions(["n1"])
    fake.fail["rename"] = SparkSyncError("A node named 'n2' is already paired; choose another name.")
    win = window_for(fake)
    with qtbot.waitSignal(win.jobs.finished, timeout=10_000):
        win.nodes_panel.rename("n1", "n2")
    assert (
        win.statusBar().currentMessage() == "Error: A node named 'n2' is already paired; choose another name."
    )


def test_pair_from_the_menu_opens_the_dialog_on_the_nodes_tab(qtbot, window_for):
    win = window_for()
    win.menu_actions["pair"].trigger()
    assert win.tabs.currentWidget() is win.nodes_panel and win.nodes_panel.pair_dialog.isVisible()
    win.nodes_panel.pair_dialog.reject()


def test_custom_apps_are_added_and_removed_through_the_core_and_reach_the_tray(qtbot, window_for):
    fake = FakeActions(["n1"])
    win = window_for(fake, tray=True)
    win.tray.set_nodes(["n1"])
    dialog = win.open_custom_apps()
    qtbot.waitUntil(lambda: dialog.list.count() == 2, timeout=10_000)
    dialog.name.setText("Grafana")
    dialog.port.setValue(3000)
    dialog.path.setText("no-slash")
    assert not dialog.add() and "browser_path" in dialog.error.text()
    dialog.path.setText("/d")
    assert dialog.add()
    qtbot.waitUntil(lambda: "node:n1:app:Grafana" in win.tray.menu_actions, timeout=10_000)
    assert fake.called("add_app") == [("Grafana",)]
    qtbot.waitUntil(lambda: dialog.list.count() == 3, timeout=10_000)
    dialog.list.setCurrentRow(0)  # the DGX Dashboard: built in
    assert not dialog.remove_selected()
    dialog.list.setCurrentRow(2)
    assert dialog.remove_selected()
    qtbot.waitUntil(lambda: "node:n1:app:Grafana" not in win.tray.menu_actions, timeout=10_000)
    assert fake.called("remove_app") == [("Grafana",)]


def test_the_memory_unit_picked_on_the_dashboard_is_remembered(qtbot, window_for):
    from sparksync.core.base.units import MemoryUnit

    win = window_for()
    win.dashboard.set_memory_unit(MemoryUnit.GIB)
    qtbot.waitUntil(
        lambda: settings_path().exists() and load_settings().memory_unit is MemoryUnit.GIB, timeout=10_000
    )
    assert window_for(settings=load_settings()).dashboard.memory_unit is MemoryUnit.GIB


def test_a_finished_deploy_has_the_nodes_feed_try_its_agent_at_once(window_for):
    win = window_for()
    asked = []
    win.feeds.retry_now = asked.append
    win.nodes_panel.deployed.emit(["spark-1", "spark-2"])
    assert asked == ["spark-1", "spark-2"]


def test_the_chat_tab_lists_what_the_workloads_and_switchyard_tabs_read(window_for):
    from types import SimpleNamespace as NS

    from sparksync.core.workloads.workload_store import Endpoint

    win = window_for()
    endpoint = Endpoint(group="llamacpp-single", node="spark-2", host="127.0.0.1", port=8080)
    win.workloads.rows_shown.emit([NS(view=NS(state="ready", workload_id="w-1", record=NS(endpoints=[endpoint])))])
    win.switchyard.readings_shown.emit([NS(key="g", label="at http://127.0.0.1:9000", origin="url",
                                           url="http://127.0.0.1:9000", problem=None)])  # fmt: skip
    assert [t.label for t in win.chat.targets] == ["w-1 · llamacpp-single on spark-2",
                                                   "Switchyard gateway at http://127.0.0.1:9000"]  # fmt: skip


def test_the_tray_says_at_once_when_the_newest_fabric_check_found_it_degraded(qtbot, window_for):
    from sparksync.core.fabric.check_history import FabricCheckHistory
    from tests.gui.test_cluster_assistant import check_report

    FabricCheckHistory().add(check_report(slow="n3"))  # stored by an earlier `sparksync cluster check`
    win = window_for(tray=True)
    win.cluster.load()  # what start() does, without the rest of start()
    qtbot.waitUntil(lambda: win.tray.fabric_health is not None, timeout=15_000)
    assert win.tray.fabric_health.startswith("Fabric degraded: 2 of 4 links flagged")
    assert "fabric" in win.tray.menu_actions and win.tray.fabric_health in win.tray.tooltip()
    assert win.cluster.figure_rows()  # the Topology tab holds the figures already
