"""The main window: the live cluster dashboard over any number of nodes, this computer beside them.

The window starts with the nodes it is given (by default "this computer")
and follows the registry from then on: a node paired from the Nodes panel is
followed too, an unpaired one no longer. Every node's telemetry comes
through the core's follower (``NodeFeeds`` turns its events into signals),
over the links of one fleet.

That fleet is the app's one ``Fleet`` (``ClusterActions.fleet``; a window
with other actions makes its own): ``start`` opens it in a worker, hands its
state changes to the node list and the tray (``attach_states``), and only
then starts following, so no state change is missed. It reaches this
computer's local agent and holds one SSH transport per paired node for the
telemetry, workloads, deploys, custom apps and "connect all". Once a Spark
is paired the cluster's figures (memory, "1/2 online", the tray) count the
Sparks only; this computer is shown beside them.

The window only shows what the workers and the history recorder report:
they do all the I/O. Samples go into the Qt-free dashboard model,
one-second rows from it to the history file, and the last hour of that file
comes back when the app opens.

The window holds tabs, listed in one place (``TABS``): the dashboard, the
Nodes panel (pair, unpair, rename, deploy progress), Workloads, Models,
Chat, Benchmarks (history, scaling charts, comparisons, runs), the Planner,
Switchyard (each known gateway's traffic split and tokens/s) and Topology
(fed the same samples as the dashboard). Only the dashboard and the Nodes
panel are built with the window, so that it paints at once: every other tab
(and the dashboard's local model card) stands as a placeholder until it is
first shown or used (``win.workloads`` builds it), and ``start`` builds the
rest one per turn of the event loop, those that watch in the background
first. A part's signals are wired when it is built (``_wire``), whatever
built it. Every cluster action
goes through ``ClusterActions`` (core) in a worker (``Jobs``); errors land
in the status bar.

With a tray icon (``enable_tray``), closing the window only hides it (the
first time, a notification says so). Quitting, or closing without a tray,
hides the window at once, stops following the nodes, the history recorder (which writes what is left), a workload
launch in progress (cancelled: what it started is stopped) and the core's
tunnels, app scripts, discovery and the fleet (which stops a local agent it
started), and only then closes. Recorded
workloads are watched from the start, so a failure is told even while the
Workloads tab was never opened.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QTabWidget, QVBoxLayout, QWidget

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.apps import AppSettings, Autostart, save_settings
from sparksync.core.base import format_bytes, format_memory
from sparksync.core.nodes import ClusterActions
from sparksync.core.telemetry import (
    CLUSTER,
    COARSE_SPAN_S,
    MEMORY_TOTAL,
    MEMORY_USED,
    TOKENS_TOTAL,
    ClusterSummary,
    DashboardModel,
    summarize,
)
from sparksync.gui.dashboard.dashboard_view import DashboardView
from sparksync.gui.dashboard.history_bridge import HistoryBridge
from sparksync.gui.node_card import NodeCard
from sparksync.gui.node_feeds import NodeFeeds
from sparksync.gui.nodes.nodes_panel import NodesPanel
from sparksync.gui.theme import apply_theme
from sparksync.gui.tray.notifier import Notifier
from sparksync.gui.workers import Jobs

if TYPE_CHECKING:  # the other tabs are imported when first built: their modules cost the first paint
    from sparksync_agent.protocol import Sample, Snapshot

    from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel
    from sparksync.gui.chat.chat_panel import ChatPanel
    from sparksync.gui.dashboard.local_model_card import LocalModelCard
    from sparksync.gui.models.models_panel import ModelsPanel
    from sparksync.gui.nodes.custom_apps_dialog import CustomAppsDialog
    from sparksync.gui.planner.planner_panel import PlannerPanel
    from sparksync.gui.settings.settings_dialog import SettingsDialog
    from sparksync.gui.switchyard.switchyard_view import SwitchyardView
    from sparksync.gui.topology.cluster_assistant import ClusterAssistantView
    from sparksync.gui.topology.topology_view import TopologyView
    from sparksync.gui.workloads.workloads_panel import WorkloadsPanel

log = logging.getLogger(__name__)

TITLE = "SparkSync"
MAX_NODES = 8
WORKLOADS_STOP_WAIT_S = 60.0  # a cancelled launch stops every rank it started (a grace period each)
# The window's tabs, in order: the one place a tab is listed (title -> the window's attribute).
TABS = {
    "Dashboard": "dashboard",
    "Nodes": "nodes_panel",
    "Workloads": "workloads",
    "Models": "models",
    "Chat": "chat",
    "Benchmarks": "benchmarks",
    "Planner": "planner",
    "Switchyard": "switchyard",
    "Topology": "cluster",
}
# Built once the window has painted, one per turn of the event loop, in this order (or earlier,
# when first shown or used): the ones that watch something in the background come first.
START_ORDER = ("local_model", "workloads", "switchyard", "cluster", "chat", "models", "benchmarks", "planner")


class MainWindow(QMainWindow):
    live_data_shown = Signal()  # once, when the plots first draw a node's real samples
    cluster_event = Signal(object)  # a ClusterEvent from the core (any thread): notified
    shut_down = Signal()  # the workers (and the local agent they started) and the history have stopped

    def __init__(
        self,
        nodes: str | Sequence[str] | None = None,
        parent: QWidget | None = None,
        *,
        history_path: Path | None = None,
        actions=None,
        fleet=None,
        sample_hz: float = 1.0,
        settings: AppSettings | None = None,
        settings_path: Path | None = None,
        autostart=None,
    ):
        super().__init__(parent)
        self.nodes = _as_list(nodes)  # the nodes followed whatever is paired (this computer)
        self.node = self.nodes[0] if self.nodes else None
        self.setWindowTitle(TITLE)
        self.resize(1280, 800)
        self.settings = settings or AppSettings()
        self.settings_path = settings_path  # None: the usual place in the config dir
        self.settings_writable = True  # False when the file could not be read: it is never overwritten
        self.autostart = autostart if autostart is not None else Autostart()
        self.actions = actions if actions is not None else ClusterActions(sample_hz=sample_hz)
        self._fleet_lock = threading.Lock()
        self._the_fleet = fleet
        self._own_fleet = fleet is None and not self._has_fleet()  # then the window makes and closes it
        self._sample_hz = sample_hz
        self.jobs = Jobs(self)
        self.model = DashboardModel()
        self.dashboard = DashboardView(
            self.model, self, window_s=self.settings.window_s, memory_unit=self.settings.memory_unit, plots_later=True
        )
        self.cards = {name: NodeCard(name) for name in self.nodes}
        self.card = self.cards[self.node] if self.node is not None else None
        for i, card in enumerate(self.cards.values()):
            self.dashboard.add_side_widget(card, i)
        self.nodes_panel = NodesPanel(self.actions, self.jobs, parent=self)
        # The other tabs (and the dashboard's local model card) are built on first use, or once the
        # window has painted (``start``): name -> the part, once built.
        self._parts: dict[str, QWidget] = {}
        self._placeholders: dict[str, QWidget] = {}  # tab attribute -> the widget standing in for it
        self._to_build: deque[str] = deque()
        self._build_timer = QTimer(self, singleShot=True, interval=0)
        self._build_timer.timeout.connect(self._build_next)
        # The last rows and readings shown: a Chat tab built later starts with them.
        self._workload_rows: list | None = None
        self._gateway_readings: list | None = None
        self._tabs()
        self.history = HistoryBridge(history_path, self)
        self.model.row_listeners.append(self.history.put)
        self.feeds = NodeFeeds(self.nodes, self)
        self._status_bar()
        self.notifier = Notifier(self.statusBar(), self)
        self._menus()
        self._connect()
        self._disconnected: set[str] = set()  # nodes the user disconnected from the tray: not followed
        events = getattr(self.actions, "events", None)  # the core's news: a degraded fabric link, ...
        self._unsubscribe_events = events.add_listener(self.cluster_event.emit) if events is not None else None
        # node -> time of its latest sample (the tray counts the nodes that are live)
        self.last_sample_ts: dict[str, float] = {}
        self.tray = None
        self.discovery = None
        # Makes and starts a Discovery (blocking; run in a worker) when the Nodes tab is first shown.
        self.discovery_factory = None
        self._discovery_asked = False
        self.settings_dialog: SettingsDialog | None = None
        self.apps_dialog: CustomAppsDialog | None = None
        self.fleet = None  # the fleet, once opened (in a worker)
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
        for title, name in TABS.items():
            if name in ("dashboard", "nodes_panel"):
                self.tabs.addTab(getattr(self, name), title)
            else:
                self.tabs.addTab(self._placeholder(name), title)
        self.setCentralWidget(self.tabs)
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)

    def _placeholder(self, name: str) -> QWidget:
        holder = self._placeholders[name] = QWidget()
        label = QLabel("Loading…", holder)
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        QVBoxLayout(holder).addWidget(label)
        return holder

    # --- the parts built on first use -------------------------------------------------

    @property
    def workloads(self) -> WorkloadsPanel:
        return self._part("workloads")

    @property
    def models(self) -> ModelsPanel:
        return self._part("models")

    @property
    def chat(self) -> ChatPanel:
        return self._part("chat")

    @property
    def benchmarks(self) -> BenchmarksPanel:
        return self._part("benchmarks")

    @property
    def planner(self) -> PlannerPanel:
        return self._part("planner")

    @property
    def switchyard(self) -> SwitchyardView:
        return self._part("switchyard")

    @property
    def topology(self) -> TopologyView:
        return self._part("topology")

    @property
    def cluster(self) -> ClusterAssistantView:
        """The Topology tab: the cluster assistant; the live topology is one of its pages."""
        return self._part("cluster")

    @property
    def local_model(self) -> LocalModelCard | None:
        """First run: a model on this computer, its tokens/s live (None: this computer is not followed)."""
        if LOCAL_NODE_NAME not in self.nodes:
            return None
        return self._part("local_model")

    def built(self, name: str) -> Any:
        """The part by its attribute name if it was built, else None (never builds it)."""
        return self._parts.get(name)

    def _part(self, name: str) -> Any:
        part = self._parts.get(name)
        if part is None:
            part = getattr(self, f"_make_{name}")()
            self._parts[name] = part
            self._wire(name, part)
            self._put_in_tab(name, part)
        return part

    def _put_in_tab(self, name: str, panel: QWidget) -> None:
        """The panel takes its placeholder's place, the current tab staying current."""
        holder = self._placeholders.pop(name, None)
        if holder is None:
            return
        index = self.tabs.indexOf(holder)
        title = self.tabs.tabText(index)
        current = self.tabs.currentIndex()
        blocked = self.tabs.blockSignals(True)
        try:
            self.tabs.removeTab(index)
            self.tabs.insertTab(index, panel, title)
            self.tabs.setCurrentIndex(current)
        finally:
            self.tabs.blockSignals(blocked)
        holder.deleteLater()

    def _make_workloads(self) -> QWidget:
        from sparksync.gui.workloads.workloads_panel import WorkloadsPanel

        return WorkloadsPanel(actions=self.actions, fleet=self.the_fleet, parent=self)

    def _make_models(self) -> QWidget:
        from sparksync.gui.models.models_panel import ModelsPanel

        return ModelsPanel(fleet=self.the_fleet, parent=self)

    def _make_chat(self) -> QWidget:
        from sparksync.gui.chat.chat_panel import ChatPanel

        return ChatPanel(reach=self._tunnel_reach, parent=self)

    def _make_benchmarks(self) -> QWidget:
        from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel

        return BenchmarksPanel(parent=self)

    def _make_planner(self) -> QWidget:
        from sparksync.gui.planner.planner_panel import PlannerPanel

        return PlannerPanel(self)

    def _make_switchyard(self) -> QWidget:
        from sparksync.gui.switchyard.switchyard_view import SwitchyardView, app_watch

        return SwitchyardView(app_watch(self.actions), self, actions=self.actions)

    def _make_topology(self) -> QWidget:
        from sparksync.gui.topology.topology_view import TopologyView

        return TopologyView(self)

    def _make_cluster(self) -> QWidget:
        from sparksync.gui.topology.cluster_assistant import ClusterAssistantView

        return ClusterAssistantView(self.the_fleet, self.topology, self)

    def _make_local_model(self) -> QWidget:
        from sparksync.gui.dashboard.local_model_card import LocalModelCard

        card = LocalModelCard(self.workloads.control, self)
        self.dashboard.add_banner(card)
        return card

    def _wire(self, name: str, part) -> None:
        """Connect a part just built: what it tells the window, and what the window tells it."""
        if hasattr(part, "status_message"):
            part.status_message.connect(self._on_dashboard_status_message)
        if hasattr(part, "error_raised"):
            part.error_raised.connect(self._on_jobs_error_raised)
        if name == "workloads":
            part.rows_shown.connect(self._on_workloads_rows_shown)
            part.workload_failed.connect(self.notifier.workload_failed)
            part.workload_ended.connect(self.notifier.workload_ended)
            if self._paired_names is not None:
                part.set_nodes(self._paired_names)
        elif name == "switchyard":
            part.readings_shown.connect(self._on_switchyard_readings_shown)
        elif name == "chat":
            if self._workload_rows is not None:
                part.set_workload_rows(self._workload_rows)
            if self._gateway_readings is not None:
                part.set_gateways(self._gateway_readings)
        elif name == "cluster":
            part.fabric_health_changed.connect(self._on_fabric_health_changed)
            if self.tray is not None:
                self._tray_follows_cluster(self.tray, part)
        elif name == "topology":
            self.feeds.sample_received.connect(part.add_sample)
            self.feeds.node_ready.connect(part.add_snapshot)
        elif name == "benchmarks":
            part.tokens_measured.connect(self.model.add_tokens)
            part.run_finished.connect(self._on_benchmarks_run_finished)
        elif name == "local_model":
            part.started.connect(lambda _view: self.workloads.watch())
            part.stopped.connect(lambda _id: self.workloads.refresh())

    def _on_workloads_rows_shown(self, rows: list) -> None:
        self._workload_rows = rows
        chat = self.built("chat")
        if chat is not None:
            chat.set_workload_rows(rows)

    def _on_switchyard_readings_shown(self, readings: list) -> None:
        self._gateway_readings = readings
        chat = self.built("chat")
        if chat is not None:
            chat.set_gateways(readings)

    def _build_next(self) -> None:
        """One part per turn of the event loop, so the window keeps answering while they are built."""
        if self._closing or not self._to_build:
            return
        name = self._to_build.popleft()
        if name == "local_model":
            card = self.local_model
            if card is not None:
                card.check_engine()
        elif name == "workloads":
            # A recorded workload that fails is told from the start, not only once its tab is shown.
            self.workloads.watch_if_recorded()
        elif name == "switchyard":
            self.switchyard.start()
        elif name == "cluster":
            # The newest fabric check (a file read, in a worker): the tray says at once when it found trouble.
            self.cluster.load()
        else:
            self._part(name)
        if self._to_build:
            self._build_timer.start()

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
        self.nodes_panel.deployed.connect(self._on_nodes_panel_deployed)
        self.jobs.error_raised.connect(self._on_jobs_error_raised)
        self.jobs.finished.connect(self._on_jobs_finished)
        self.dashboard.memory_unit_changed.connect(self._on_dashboard_memory_unit_changed)
        self.nodes_panel.status_message.connect(self._on_dashboard_status_message)
        self.nodes_panel.error_raised.connect(self._on_jobs_error_raised)
        self.cluster_event.connect(self.notifier.cluster_event)

    # --- lifecycle ---------------------------------------------------------------------

    def _connect_feeds(self) -> None:
        feeds = self.feeds
        feeds.sample_received.connect(self._on_feeds_sample_received)
        feeds.node_ready.connect(self._on_feeds_node_ready)
        feeds.status_changed.connect(self._on_feeds_status_changed)
        feeds.error_raised.connect(self._on_feeds_error_raised)
        feeds.connected.connect(self._on_feeds_connected)
        feeds.gap_marked.connect(self._on_feeds_gap_marked)
        feeds.feed_ended.connect(self._on_feeds_feed_ended)

    def start(self) -> None:
        """Start the history recorder, open the fleet (this computer's telemetry then flows), read the registry.

        With nothing to follow yet (no node given, nothing paired) the fleet opens
        only once a node is paired.
        """
        self.history.start(COARSE_SPAN_S)
        if self.nodes:
            self.open_fleet()
        self.nodes_panel.reload()
        # The other tabs next, one per turn of the event loop: the workloads' and gateways' watch,
        # the newest fabric check, then the rest.
        self._to_build.extend(START_ORDER)
        self._build_timer.start()

    def _has_fleet(self) -> bool:
        return callable(getattr(self.actions, "fleet", None))

    def the_fleet(self):
        """The one fleet (made on first call; call it in a worker, it may read files)."""
        with self._fleet_lock:
            if self._the_fleet is None:
                if self._has_fleet():
                    self._the_fleet = self.actions.fleet()
                else:
                    from sparksync.core.fleet import Fleet

                    self._the_fleet = Fleet(sample_hz=self._sample_hz)
            return self._the_fleet

    def open_fleet(self) -> None:
        """Open the fleet in a worker; its states then reach the node list and the tray."""
        if self._fleet_asked or self._closing:
            return
        self._fleet_asked = True
        self.jobs.run("Connecting to the nodes", self._read_fleet, self._on_fleet_opened)

    def _read_fleet(self):
        """(fleet, each paired node's last known state): worker side, it reads files."""
        from sparksync.core.fleet import as_fleet_state

        fleet = self.the_fleet()
        return fleet, {node.name: as_fleet_state(fleet.status(node)) for node in fleet.nodes()}

    def _on_fleet_opened(self, outcome) -> None:
        fleet, states = outcome
        if self._closing:
            return
        self.fleet = fleet
        if hasattr(fleet, "add_listener"):
            self.nodes_panel.attach_states(fleet)
        for name, state in states.items():
            self.nodes_panel.rows.set_state(name, state)
        self.feeds.attach(fleet)
        self._sync_feeds()

    def _on_nodes_panel_paired_changed(self, nodes: list) -> None:
        self._paired_names = [node.name for node in nodes]
        # Once a Spark is paired, this computer is shown beside the cluster, not summed into it.
        self.model.set_apart([n for n in self.nodes if n not in self._paired_names] if self._paired_names else [])
        if self._paired_names:
            self.open_fleet()
        workloads = self.built("workloads")
        if workloads is not None:
            workloads.set_nodes(self._paired_names)
        self._sync_feeds()

    def _tunnel_reach(self):
        """How the Chat tab reaches a workload's endpoint: the fleet's SSH tunnel (this computer's: loopback)."""
        from sparksync.core.workloads import TunnelReach

        return TunnelReach(self.the_fleet())

    def _on_nodes_panel_deployed(self, names: list[str]) -> None:
        # Its agent answers now: its card fills in at once rather than after the feed's backoff.
        for name in names:
            self.feeds.retry_now(name)

    def _sync_feeds(self) -> None:
        """Follow every paired node, and stop following the ones no longer paired."""
        if self.fleet is None or self._paired_names is None or self._closing:
            return
        followed = self.feeds.names()
        for name in followed:
            if name not in self._paired_names and name not in self.nodes:
                self._remove_feed(name)
        for name in self._paired_names:
            if name not in followed and name not in self._disconnected:
                self._add_feed(name)

    def _add_feed(self, name: str) -> None:
        if name not in self.cards:
            card = self.cards[name] = NodeCard(name)
            self.dashboard.memory_unit_changed.connect(card.set_memory_unit)
            self.dashboard.add_side_widget(card, len(self.cards) - 1)
        self.feeds.add(name)

    def _remove_feed(self, name: str) -> None:
        card = self.cards.pop(name, None)
        if card is not None:
            card.hide()
            card.deleteLater()
        self.feeds.remove(name)
        self.last_sample_ts.pop(name, None)

    def streamed_nodes(self) -> list[str]:
        """The nodes whose telemetry threads run now."""
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
            cluster = self.built("cluster")  # else wired when it is built
            if cluster is not None:
                self._tray_follows_cluster(tray, cluster)
            tray.connection_changed.connect(self._on_tray_connection_changed)

    def _tray_follows_cluster(self, tray, cluster) -> None:
        cluster.fabric_health_changed.connect(tray.set_fabric_health)
        if cluster.health:
            tray.set_fabric_health(cluster.health)

    def _on_fabric_health_changed(self, health: str | None) -> None:
        """A check (run here, or the newest stored one read at start) flagged links: told through the events door."""
        events = getattr(self.actions, "events", None)
        if health and events is not None:
            from sparksync.core.fabric import tell_degraded

            tell_degraded(events, self.cluster.report)

    def _on_tray_connection_changed(self, name: str, connected: bool) -> None:
        """Disconnected from the tray: no longer followed (its card stays, its link closes); connected: again."""
        if connected:
            self._disconnected.discard(name)
            self._sync_feeds()
        elif name not in self._disconnected:
            self._disconnected.add(name)
            self.feeds.remove(name)
            self.last_sample_ts.pop(name, None)

    def node_memory_text(self, name: str) -> tuple[str, str | None] | None:
        """A node's memory in use and its total, as the dashboard names memory; None before a sample."""
        used = self.model.latest(name, MEMORY_USED)
        if used is None:
            return None
        total = self.model.latest(name, MEMORY_TOTAL)
        unit = self.dashboard.memory_unit
        return format_memory(used, unit), format_bytes(total, unit) if total is not None else None

    def _on_tabs_current_changed(self, _index: int) -> None:
        shown = self.tabs.currentWidget()
        for name, holder in list(self._placeholders.items()):
            if holder is shown:
                self._part(name)  # first shown: the real panel takes its place
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
        self.actions.discovery = discovery  # pairing a typed host cross-checks with what it saw
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
        if self._unsubscribe_events is not None:
            self._unsubscribe_events()
            self._unsubscribe_events = None
        if self.tray is not None:
            self.tray.hide()
        self.nodes_panel.detach_all()  # running deploys are cancelled
        if self.nodes_panel.pair_dialog is not None:
            self.nodes_panel.pair_dialog.reject()  # a pairing waiting for an answer gets "no"

    def _close_core_once_feeds_end(self) -> None:
        # The fleet goes last, once no telemetry thread uses its links any more.
        if self._core_pending and not self.feeds.running():
            self._core_pending = False
            self._close_core()

    def _close_core(self) -> None:
        """Stop the workloads' launch, then close tunnels, app scripts, SSH links and discovery, in a worker."""
        self._stop_asking()
        discovery, actions, feeds = self.discovery, self.actions, self.feeds
        own_fleet = self._the_fleet if self._own_fleet else None
        self._to_build.clear()  # a part never built has nothing to stop
        names = ("workloads", "switchyard", "cluster", "chat", "models", "local_model")
        workloads, switchyard, cluster, chat, models, local_model = (self.built(name) for name in names)
        if workloads is not None:
            workloads.shutdown(0)  # a launch in progress is cancelled
        if switchyard is not None:
            switchyard.shutdown(0)
        if chat is not None:
            chat.stop()  # an answer streaming in ends; its tunnel closes first
        if models is not None:
            models.shutdown()  # a copy stops; what arrived stays, partial
        if local_model is not None:
            local_model.shutdown()

        def close() -> None:
            try:
                # The cancelled launch stops its ranks over the fleet's links: they close after it.
                if workloads is not None and not workloads.jobs.wait(WORKLOADS_STOP_WAIT_S):
                    log.warning(
                        "a workload launch still runs after %g s; closing its links anyway",
                        WORKLOADS_STOP_WAIT_S,
                    )
                if switchyard is not None:
                    switchyard.jobs.wait()  # its poll may use a fleet tunnel
                for part in (cluster, chat, models, local_model):
                    # A check or mesh, a chat's tunnel, a copy, a local start: all over the fleet's links.
                    if part is not None:
                        part.jobs.wait(WORKLOADS_STOP_WAIT_S)
                if switchyard is not None:
                    switchyard.watch.close()
                feeds.join(30.0)  # their last events are out; the threads themselves end now
                actions.close()
                if own_fleet is not None:
                    own_fleet.close()
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
            from sparksync.gui.nodes.custom_apps_dialog import CustomAppsDialog

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
            from sparksync.gui.settings.settings_dialog import SettingsDialog

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
            apart=self.model.apart,
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
            from sparksync.gui.benchmarks.run_details import finished_text

            self.notifier.benchmark_finished(*finished_text(record))

    def _on_history_loaded(self, histories: dict) -> None:
        self.model.merge_history(histories)

    def _on_feeds_status_changed(self, message: str) -> None:
        if not self._closing:
            self.statusBar().showMessage(message)

    def _on_feeds_gap_marked(self, name: str, start: float, end: float, why: str) -> None:
        if name in self.cards:  # unpaired meanwhile: no longer on the timeline
            self.model.mark_gap(name, start, end, why)

    def _on_feeds_error_raised(self, message: str) -> None:
        log.warning("%s", message)
        self._show_problem(message)

    def _show_problem(self, message: str) -> None:
        if self._closing:
            return
        flat = " ".join(message.split())  # an agent's log tail must not break the bar into lines
        # The lasting mark first, so whoever hears the bar change finds the problem already shown.
        self.problem.setText(f"⚠ {_shorten(flat)}")
        self.problem.setToolTip(message)
        self.statusBar().showMessage(f"Error: {flat}")

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

    def _on_feeds_connected(self, _name: str, _run_id: str) -> None:
        self.problem.clear()
        self.problem.setToolTip("")

    def _on_dashboard_plot_drawn(self, key: str, points: int) -> None:
        if key == "memory" and points and not self._live and self._shows_live_memory():
            self._live = True
            self.live_data_shown.emit()

    def _shows_live_memory(self) -> bool:
        # History alone also draws memory; "live" means a sample of this session is on screen.
        return any(self.model.latest(name, MEMORY_USED) is not None for name in self.feeds.names())

    def _on_feeds_feed_ended(self, name: str) -> None:
        if self._closing:
            self._close_core_once_feeds_end()
            self._on_part_stopped()
        elif name in self.feeds.names() and name not in self.feeds.streamed():
            # Only a bug ends a node's thread early; its error is already on screen.
            self.statusBar().showMessage(self.statusBar().currentMessage() + " (telemetry stopped)")

    def _on_part_stopped(self) -> None:
        if self._closing and not self._shut and not self.is_running():
            self._shut = True
            self.shut_down.emit()
            self.close()


def _as_list(nodes: str | Sequence[str] | None) -> list[str]:
    """None: "this computer"; an empty list: no node yet (the paired ones join as they are paired)."""
    if nodes is None:
        return [LOCAL_NODE_NAME]
    listed = [nodes] if isinstance(nodes, str) else list(dict.fromkeys(nodes))
    if len(listed) > MAX_NODES:
        raise ValueError(f"a cluster holds at most {MAX_NODES} nodes; got {len(listed)}")
    return listed


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
