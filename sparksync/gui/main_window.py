"""The main window: the live cluster dashboard over any number of nodes.

The window starts with the nodes it is given (``known_nodes()``: the paired
nodes, or "this computer" when none is paired) and follows the registry
from then on: a node paired from the Nodes panel gets its own telemetry
worker (an ``SshNode`` on the actions' shared fleet), an unpaired one loses
it. Each node is kept streaming by its own worker thread.

When the actions have a fleet (``ClusterActions.fleet``), ``start`` opens it
in a worker, hands its state changes to the node list and the tray
(``attach_states``), and only then starts the paired nodes' workers, so no
state change is missed. That one fleet holds one SSH transport per node for
the telemetry, deploys, custom apps and "connect all".

The window only shows what the workers and the history recorder report:
they do all the I/O. Samples go into the Qt-free dashboard model,
one-second rows from it to the history file, and the last hour of that file
comes back when the app opens.

The window holds tabs: the dashboard, the Nodes panel (pair, unpair,
rename, deploy progress), the Workloads tab, the Benchmarks tab
(history, scaling charts, runs) and the Topology tab (fed the same samples
as the dashboard). Below the dashboard's plots, the Switchyard section
shows each known gateway's traffic split and tokens/s. Every cluster action
goes through ``ClusterActions`` (core) in a worker (``Jobs``); errors land
in the status bar.

With a tray icon (``enable_tray``), closing the window only hides it (the
first time, a notification says so). Quitting, or closing without a tray,
hides the window at once, stops the workers (which stop a local agent they
started), the history recorder (which writes what is left), a workload
launch in progress (cancelled: what it started is stopped) and the core's
tunnels, app scripts and discovery, and only then closes. Recorded
workloads are watched from the start, so a failure is told even while the
Workloads tab was never opened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QTabWidget, QWidget
from sparksync_agent.protocol import Sample, Snapshot

from sparksync.core.apps.autostart import Autostart
from sparksync.core.nodes.cluster_actions import ClusterActions
from sparksync.core.telemetry.cluster_summary import ClusterSummary, summarize
from sparksync.core.telemetry.dashboard_model import COARSE_SPAN_S, DashboardModel
from sparksync.core.telemetry.dashboard_series import CLUSTER, MEMORY_USED, TOKENS_TOTAL
from sparksync.core.agents.handles import LocalNode, NodeHandle
from sparksync.core.apps.settings import AppSettings, save_settings
from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel
from sparksync.gui.benchmarks.run_details import finished_text
from sparksync.gui.dashboard.dashboard_view import DashboardView
from sparksync.gui.dashboard.history_bridge import HistoryBridge
from sparksync.gui.node_card import NodeCard
from sparksync.gui.node_feeds import NodeFeed, NodeFeeds
from sparksync.gui.nodes.custom_apps_dialog import CustomAppsDialog
from sparksync.gui.nodes.nodes_panel import NodesPanel
from sparksync.gui.placeholders import PLACEHOLDERS, PlaceholderTab
from sparksync.gui.settings.settings_dialog import SettingsDialog
from sparksync.gui.switchyard.switchyard_view import SwitchyardView, app_watch
from sparksync.gui.telemetry_worker import TelemetryWorker
from sparksync.gui.theme import apply_theme
from sparksync.gui.topology.topology_view import TopologyView
from sparksync.gui.tray.notifier import Notifier
from sparksync.gui.workers import Jobs
from sparksync.gui.workloads.workloads_panel import WorkloadsPanel

log = logging.getLogger(__name__)

TITLE = "SparkSync"
MAX_NODES = 8
WORKLOADS_STOP_WAIT_S = 60.0  # a cancelled launch stops every rank it started (a grace period each)


class MainWindow(QMainWindow):
    live_data_shown = Signal()  # once, when the plots first draw a node's real samples
    shut_down = Signal()  # the workers (and the local agent they started) and the history have stopped

    def __init__(
        self,
        nodes: NodeHandle | Sequence[NodeHandle] | None = None,
        parent: QWidget | None = None,
        *,
        history_path: Path | None = None,
        actions=None,
        settings: AppSettings | None = None,
        settings_path: Path | None = None,
        autostart=None,
    ):
        super().__init__(parent)
        self.nodes = _as_list(nodes)
        self.node = self.nodes[0] if self.nodes else None
        self.setWindowTitle(TITLE)
        self.resize(1280, 800)
        self.settings = settings or AppSettings()
        self.settings_path = settings_path  # None: the usual place in the config dir
        self.settings_writable = True  # False when the file could not be read: it is never overwritten
        self.autostart = autostart if autostart is not None else Autostart()
        self.actions = actions if actions is not None else ClusterActions()
        self.jobs = Jobs(self)
        self.model = DashboardModel()
        self.dashboard = DashboardView(
            self.model, self, window_s=self.settings.window_s, memory_unit=self.settings.memory_unit
        )
        self.cards = {n.name: NodeCard(n.name) for n in self.nodes}
        self.card = self.cards[self.node.name] if self.node is not None else None
        for i, card in enumerate(self.cards.values()):
            self.dashboard.add_side_widget(card, i)
        self.nodes_panel = NodesPanel(self.actions, self.jobs, parent=self)
        self.switchyard = SwitchyardView(app_watch(self.actions), self, actions=self.actions)
        self.dashboard.add_section(self.switchyard)
        self._tabs()
        self.history = HistoryBridge(history_path, self)
        self.model.row_listeners.append(self.history.put)
        self.feeds = NodeFeeds(self.nodes, self)
        self._status_bar()
        self.notifier = Notifier(self.statusBar(), self)
        self._menus()
        self._connect()
        # node -> time of its latest sample (the tray counts the nodes that are live)
        self.last_sample_ts: dict[str, float] = {}
        self.tray = None
        self.discovery = None
        # Makes and starts a Discovery (blocking; run in a worker) when the Nodes tab is first shown.
        self.discovery_factory = None
        self._discovery_asked = False
        self.settings_dialog: SettingsDialog | None = None
        self.apps_dialog: CustomAppsDialog | None = None
        self.fleet = None  # the actions' fleet, once opened
        self._fleet_asked = False
        self._paired_names: list[str] | None = None  # the last registry read
        self._live = False
        self._closing = False
        self._quitting = False
        self._core_closing = False
        self._core_pending = False  # closing: the core closes once the telemetry threads have ended
        self._shut = False

    def _tabs(self) -> None:
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("tabs")
        self.tabs.addTab(self.dashboard, "Dashboard")
        self.tabs.addTab(self.nodes_panel, "Nodes")
        self.benchmarks = BenchmarksPanel(parent=self)
        self.topology = TopologyView(self)
        self.workloads = WorkloadsPanel(actions=self.actions, parent=self)
        panels = {"Benchmarks": self.benchmarks, "Topology": self.topology, "Workloads": self.workloads}
        self.placeholders = {
            title: PlaceholderTab(title, self) for title in PLACEHOLDERS if title not in panels
        }
        for title in PLACEHOLDERS:
            self.tabs.addTab(panels.get(title) or self.placeholders[title], title)
        self.setCentralWidget(self.tabs)
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)

    def _menus(self) -> None:
        menu = self.menuBar().addMenu("&SparkSync")
        self.menu_actions: dict[str, QAction] = {}
        for key, text, slot in (
            ("pair", "Pair a node…", self.pair_new_node),
            ("apps", "Custom apps…", self.open_custom_apps),
            ("settings", "Settings…", self.open_settings),
            ("quit", "Quit", self.quit),
        ):
            action = menu.addAction(text)
            action.triggered.connect(lambda _checked=False, slot=slot: slot())
            self.menu_actions[key] = action

    def _status_bar(self) -> None:
        self.statusBar().showMessage("Starting…")
        # The last error stays here until the node is live again, while the
        # transient message area goes on with "reconnecting…" news.
        self.problem = QLabel("")
        self.problem.setObjectName("problem")
        self.problem.setStyleSheet("color: #c0392b")
        self.statusBar().addPermanentWidget(self.problem)
        # History trouble is not a node's: it stays when a node comes back.
        self.history_problem = QLabel("")
        self.history_problem.setObjectName("historyProblem")
        self.history_problem.setStyleSheet("color: #c0392b")
        self.statusBar().addPermanentWidget(self.history_problem)

    def _connect(self) -> None:
        self.dashboard.plot_drawn.connect(self._on_dashboard_plot_drawn)
        self.dashboard.status_message.connect(self._on_dashboard_status_message)
        self.dashboard.error_raised.connect(self._show_problem)
        for card in self.cards.values():
            self.dashboard.memory_unit_changed.connect(card.set_memory_unit)
        self.history.loaded.connect(self._on_history_loaded)
        self.history.error_raised.connect(self._on_history_error_raised)
        self.history.stopped.connect(self._on_part_stopped)
        self._connect_feeds()
        self.nodes_panel.paired_changed.connect(self._on_nodes_panel_paired_changed)
        self.jobs.error_raised.connect(self._on_jobs_error_raised)
        self.jobs.finished.connect(self._on_jobs_finished)
        self.dashboard.memory_unit_changed.connect(self._on_dashboard_memory_unit_changed)
        self.nodes_panel.status_message.connect(self._on_dashboard_status_message)
        self.nodes_panel.error_raised.connect(self._on_jobs_error_raised)
        self.benchmarks.status_message.connect(self._on_dashboard_status_message)
        self.benchmarks.error_raised.connect(self._on_jobs_error_raised)
        self.workloads.status_message.connect(self._on_dashboard_status_message)
        self.workloads.error_raised.connect(self._on_jobs_error_raised)
        self.switchyard.status_message.connect(self._on_dashboard_status_message)
        self.switchyard.error_raised.connect(self._on_jobs_error_raised)
        self.workloads.workload_failed.connect(self.notifier.workload_failed)
        self.nodes_panel.paired_changed.connect(
            lambda nodes: self.workloads.set_nodes([n.name for n in nodes])
        )
        self.benchmarks.tokens_measured.connect(self.model.add_tokens)
        self.benchmarks.run_finished.connect(self._on_benchmarks_run_finished)

    # --- lifecycle ---------------------------------------------------------------------

    def _connect_feeds(self) -> None:
        feeds = self.feeds
        feeds.sample_received.connect(self._on_feeds_sample_received)
        feeds.node_ready.connect(self._on_feeds_node_ready)
        feeds.sample_received.connect(self.topology.add_sample)
        feeds.node_ready.connect(self.topology.add_snapshot)
        feeds.status_changed.connect(self._on_worker_status_changed)
        feeds.error_raised.connect(self._on_worker_error_raised)
        feeds.connected.connect(self._on_worker_connected)
        feeds.feed_ended.connect(self._on_feeds_feed_ended)

    def start(self) -> None:
        """Start the history recorder and the node workers, and read the registry.

        The fleet opens once the registry read finds a paired node (with nothing
        paired, the keyring is not even asked for this computer's key).
        """
        self.history.start(COARSE_SPAN_S)
        for feed in self.feeds.idle():
            if not (self._has_fleet() and feed.node.source == "ssh"):
                self.feeds.start(feed)
        self.nodes_panel.reload()
        # A recorded workload that fails is told from the start, not only once its tab is shown.
        self.workloads.watch_if_recorded()
        self.switchyard.start()

    def _has_fleet(self) -> bool:
        return callable(getattr(self.actions, "fleet", None))

    def open_fleet(self) -> None:
        """Open the actions' fleet in a worker; its states then reach the node list and the tray."""
        if self._fleet_asked or self._closing or not self._has_fleet():
            return
        self._fleet_asked = True
        self.jobs.run("Connecting to the paired nodes", self._read_fleet, self._on_fleet_opened)

    def _read_fleet(self):
        """(fleet, each paired node's last known state): worker side, it reads the keyring and files."""
        from sparksync.core.fleet.fleet import as_fleet_state

        fleet = self.actions.fleet()
        return fleet, {node.name: as_fleet_state(fleet.status(node)) for node in fleet.nodes()}

    def _on_fleet_opened(self, outcome) -> None:
        fleet, states = outcome
        if self._closing:
            return
        self.fleet = fleet
        self.nodes_panel.attach_states(fleet)
        for name, state in states.items():
            self.nodes_panel.rows.set_state(name, state)
        for feed in self.feeds.idle():
            self.feeds.start(feed)
        self._sync_feeds()

    def _on_nodes_panel_paired_changed(self, nodes: list) -> None:
        self._paired_names = [node.name for node in nodes]
        if self._paired_names:
            self.open_fleet()
        self._sync_feeds()

    def _sync_feeds(self) -> None:
        """Stream every paired node, and stop streaming the ones no longer paired."""
        if self.fleet is None or self._paired_names is None or self._closing:
            return
        streamed = {f.node.name: f for f in self.feeds.feeds if f.node.source == "ssh" and not f.removed}
        for name, feed in streamed.items():
            if name not in self._paired_names:
                self._remove_feed(feed)
        for name in self._paired_names:
            if name not in streamed:
                self._add_feed(self.remote_node(name))

    def remote_node(self, name: str) -> NodeHandle:
        """A paired node's handle, on the actions' fleet (tests hand other handles)."""
        from sparksync.core.fleet.remote_node import SshNode

        return SshNode(name, self.actions.shared_fleet)

    def _add_feed(self, node: NodeHandle) -> None:
        if node.name not in self.cards:
            card = self.cards[node.name] = NodeCard(node.name)
            self.dashboard.memory_unit_changed.connect(card.set_memory_unit)
            self.dashboard.add_side_widget(card, len(self.cards) - 1)
        self.nodes.append(node)
        self.feeds.add(node)

    def _remove_feed(self, feed: NodeFeed) -> None:
        if feed.node in self.nodes:
            self.nodes.remove(feed.node)
        card = self.cards.pop(feed.node.name, None)
        if card is not None:
            card.hide()
            card.deleteLater()
        self.feeds.remove(feed)

    @property
    def worker(self) -> TelemetryWorker | None:
        """The first node's worker (None once stopped)."""
        return self.feeds.feeds[0].worker if self.feeds.feeds else None

    def streamed_nodes(self) -> list[str]:
        """The nodes whose telemetry workers run now."""
        return self.feeds.streamed()

    def is_running(self) -> bool:
        return (
            self.feeds.running()
            or self.history.is_running()
            or self._core_closing
            or self._core_pending
            or self.jobs.busy()  # a worker's answer must not arrive at a deleted window
        )

    def enable_tray(self, tray) -> None:
        """With a tray icon, closing the window hides it; Quit (menu or tray) ends the app."""
        self.tray = tray
        self.notifier.set_tray(tray.icon if tray is not None else None)
        if tray is not None:
            self.nodes_panel.rows.add_listener(tray.on_rows_changed)
            self.nodes_panel.paired_changed.connect(lambda nodes: tray.set_nodes([n.name for n in nodes]))

    def _on_tabs_current_changed(self, _index: int) -> None:
        if self.tabs.currentWidget() is self.nodes_panel:
            self.start_discovery()

    def start_discovery(self) -> None:
        """Browse the network for nodes (once, in a worker); mDNS starts only once nodes are looked at."""
        if self._discovery_asked or self.discovery_factory is None or self._closing:
            return
        self._discovery_asked = True
        self.jobs.run("Starting discovery", self.discovery_factory, self._on_discovery_started)

    def _on_discovery_started(self, discovery) -> None:
        if self._closing:  # the app quit meanwhile
            self.jobs.run("Stopping discovery", discovery.stop)
            return
        self.attach_discovery(discovery)

    def attach_discovery(self, discovery) -> None:
        """Show what ``discovery`` finds in the node list; it is stopped when the app quits."""
        self.discovery = discovery
        self.nodes_panel.attach_discovery(discovery)

    def quit(self) -> None:
        self._quitting = True
        self.close()

    def show_dashboard(self) -> None:
        self.tabs.setCurrentWidget(self.dashboard)
        self.show()
        self.raise_()
        self.activateWindow()

    def pair_new_node(self) -> None:
        self.tabs.setCurrentWidget(self.nodes_panel)
        self.show()
        self.raise_()
        self.nodes_panel.open_pair_dialog()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        if self.tray is not None and not self._quitting and not self._closing:
            event.ignore()
            self.hide()
            self._hint_tray()
            return
        if not self.is_running() and not self._closing:
            self._closing = True  # nothing was started; only the core may hold something
            self._close_core()
        if not self.is_running():
            event.accept()
            return
        # Stopping agents and writing the history take a moment; never block the GUI thread on them.
        event.ignore()
        self.hide()
        if not self._closing:
            self._closing = True
            self.statusBar().showMessage("Stopping…")
            self.feeds.stop_all()
            self.model.flush()  # the second in progress goes to the history too
            self._stop_asking()
            self._core_pending = True
            self._close_core_once_feeds_end()
            if not self.history.stop():
                self._on_part_stopped()

    def _stop_asking(self) -> None:
        if self.tray is not None:
            self.tray.hide()
        self.nodes_panel.detach_all()  # running deploys are cancelled
        if self.nodes_panel.pair_dialog is not None:
            self.nodes_panel.pair_dialog.reject()  # a pairing waiting for an answer gets "no"

    def _close_core_once_feeds_end(self) -> None:
        # The app's hold on the fleet goes last: the fleet then closes in a worker of ours,
        # never in a telemetry thread that happened to be its last user.
        if self._core_pending and not self.feeds.has_threads():
            self._core_pending = False
            self._close_core()

    def _close_core(self) -> None:
        """Stop the workloads' launch, then close tunnels, app scripts, SSH links and discovery, in a worker."""
        self._stop_asking()
        discovery, actions = self.discovery, self.actions
        workloads = self.workloads.jobs
        self.workloads.shutdown(0)  # a launch in progress is cancelled: it stops what it had started
        switchyard = self.switchyard
        switchyard.shutdown(0)

        def close() -> None:
            try:
                # The cancelled launch stops its ranks over the fleet's links: they close after it.
                if not workloads.wait(WORKLOADS_STOP_WAIT_S):
                    log.warning(
                        "a workload launch still runs after %g s; closing its links anyway",
                        WORKLOADS_STOP_WAIT_S,
                    )
                switchyard.jobs.wait()  # its poll may use a tunnel on the fleet: closed before it
                switchyard.watch.close()
                actions.close()
            finally:
                if discovery is not None:
                    discovery.stop()

        self._core_closing = True
        self.jobs.run("Closing tunnels and links", close, self._on_core_closed, self._on_core_closed)

    def _on_core_closed(self, _outcome=None) -> None:
        self._core_closing = False
        self._on_part_stopped()

    def _on_jobs_finished(self, _name: str) -> None:
        if self._closing:
            self._on_part_stopped()  # the last worker's answer may be what the shutdown waited for

    def _hint_tray(self) -> None:
        if self.settings.tray_hint_shown:
            return
        self.notifier.notify(
            "SparkSync is still running",
            "It keeps watching your nodes from the tray. Use Quit in the tray's menu to end it.",
        )
        self.apply_settings(self.settings.model_copy(update={"tray_hint_shown": True}))

    def open_custom_apps(self) -> CustomAppsDialog:
        if self.apps_dialog is None:  # kept, like the settings: a worker may still answer it
            self.apps_dialog = CustomAppsDialog(self.actions, self.jobs, self)
            self.apps_dialog.apps_changed.connect(self._on_apps_dialog_apps_changed)
        else:
            self.apps_dialog.reload()
        self.apps_dialog.show()
        return self.apps_dialog

    def _on_dashboard_memory_unit_changed(self, unit) -> None:
        if unit != self.settings.memory_unit:
            self.apply_settings(self.settings.model_copy(update={"memory_unit": unit}))

    def _on_apps_dialog_apps_changed(self) -> None:
        if self.tray is not None:
            self.tray.load_apps()

    # --- settings -----------------------------------------------------------------------

    def open_settings(self) -> SettingsDialog:
        if self.settings_dialog is None:  # kept: its keyring check may still answer after it closes
            self.settings_dialog = SettingsDialog(self.settings, self.actions, self.jobs, self)
            self.settings_dialog.settings_accepted.connect(self.apply_settings)
        else:
            self.settings_dialog.settings = self.settings
            self.settings_dialog.check_keyring()
        self.settings_dialog.show()
        return self.settings_dialog

    def apply_settings(self, settings: AppSettings) -> None:
        """Use ``settings`` now, and save them (and the autostart entry) in a worker."""
        before, self.settings = self.settings, settings
        if settings.window_s != self.dashboard.window_s:
            self.dashboard.set_window(settings.window_s)
        if settings.theme != before.theme:
            apply_theme(settings.theme)
        if settings.sample_hz != before.sample_hz:
            self.statusBar().showMessage(f"Sampling at {settings.sample_hz:g} Hz from the next start.")
        if not self.settings_writable:
            self._on_jobs_error_raised("The settings were not saved: the settings file could not be read.")
            return
        autostart = self.autostart if settings.start_at_login != before.start_at_login else None
        path = self.settings_path

        def save() -> None:
            save_settings(settings, path)
            if autostart is not None:
                autostart.set(settings.start_at_login)

        self.jobs.run("Saving the settings", save)

    # --- the tray's figures -------------------------------------------------------------

    def summary(self) -> ClusterSummary:
        return summarize(
            self.nodes_panel.rows.rows(),
            self.last_sample_ts,
            self.model.used_bytes(),
            self.model.latest(CLUSTER, TOKENS_TOTAL),
            time.time(),
        )

    # --- slots --------------------------------------------------------------------------

    def _on_feeds_node_ready(self, name: str, snapshot: Snapshot) -> None:
        if name not in self.cards:  # unpaired meanwhile
            return
        self.nodes_panel.rows.set_agent_version(name, snapshot.info.agent_version)
        self.cards[name].show_snapshot(snapshot)
        if snapshot.latest is not None:
            self.model.add_sample(name, snapshot.latest)

    def _on_feeds_sample_received(self, name: str, sample: Sample) -> None:
        if name not in self.cards:  # unpaired meanwhile
            return
        self.last_sample_ts[name] = sample.ts
        self.nodes_panel.rows.note_sample(name, sample.ts)
        self.model.add_sample(name, sample)
        self.cards[name].show_sample(sample)

    def _on_benchmarks_run_finished(self, record) -> None:
        if not self._closing:  # a run cancelled by quitting is no news
            self.notifier.benchmark_finished(*finished_text(record))

    def _on_history_loaded(self, histories: dict) -> None:
        self.model.merge_history(histories)

    def _on_worker_status_changed(self, message: str) -> None:
        if not self._closing:
            self.statusBar().showMessage(message)

    def _on_worker_error_raised(self, message: str) -> None:
        log.warning("%s", message)
        self._show_problem(message)

    def _show_problem(self, message: str) -> None:
        if self._closing:
            return
        flat = " ".join(message.split())  # an agent's log tail must not break the bar into lines
        self.statusBar().showMessage(f"Error: {flat}")
        self.problem.setText(f"⚠ {_shorten(flat)}")
        self.problem.setToolTip(message)

    def _on_history_error_raised(self, message: str) -> None:
        log.warning("%s", message)
        if not self._closing:
            self.statusBar().showMessage(f"Error: {message}")
            self.history_problem.setText(f"⚠ {_shorten(message, 80)}")
            self.history_problem.setToolTip(message)

    def _on_jobs_error_raised(self, message: str) -> None:
        log.warning("%s", message)
        if not self._closing:
            self.statusBar().showMessage(f"Error: {' '.join(message.split())}")

    def _on_dashboard_status_message(self, message: str) -> None:
        if not self._closing:
            self.statusBar().showMessage(message)

    def _on_worker_connected(self, run_id: str) -> None:
        self.problem.clear()
        self.problem.setToolTip("")

    def _on_dashboard_plot_drawn(self, key: str, points: int) -> None:
        if key == "memory" and points and not self._live and self._shows_live_memory():
            self._live = True
            self.live_data_shown.emit()

    def _shows_live_memory(self) -> bool:
        # History alone also draws memory; "live" means a sample of this session is on screen.
        return any(self.model.latest(f.node.name, MEMORY_USED) is not None for f in self.feeds.feeds)

    def _on_feeds_feed_ended(self, feed: NodeFeed) -> None:
        if feed.removed:
            self.last_sample_ts.pop(feed.node.name, None)
        if self._closing:
            self._close_core_once_feeds_end()
            self._on_part_stopped()
        elif not feed.removed:  # only a bug ends a worker early; its error is already on screen
            self.statusBar().showMessage(self.statusBar().currentMessage() + " (telemetry stopped)")

    def _on_part_stopped(self) -> None:
        if self._closing and not self._shut and not self.is_running():
            self._shut = True
            self.shut_down.emit()
            self.close()


def _as_list(nodes: NodeHandle | Sequence[NodeHandle] | None) -> list[NodeHandle]:
    """None: "this computer"; an empty list: no node yet (the paired ones join as they are paired)."""
    if nodes is None:
        return [LocalNode()]
    listed = list(nodes) if isinstance(nodes, Sequence) else [nodes]
    if len(listed) > MAX_NODES:
        raise ValueError(f"a cluster holds at most {MAX_NODES} nodes; got {len(listed)}")
    return listed


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
