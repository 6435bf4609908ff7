"""The tray icon: the cluster's health at a glance, and quick actions in its menu.

The icon's colour says whether every node is online, some are (degraded),
or none; its tooltip reads like "6/8 online, 412 GB used, 38 tok/s",
computed from what the window already holds. The menu:

- Open dashboard; Connect all / Disconnect all;
- every paired node, as NVIDIA Sync lists its devices: a submenu titled with
  its state and memory in use ("spark-1 — online · 41.2 GB used"), holding
  why it is offline or degraded, a Connect/Disconnect toggle (a disconnected
  node is no longer followed, its SSH link and apps are closed), then its
  launchers: Open terminal (``ssh <alias>`` in the system terminal), Open DGX
  Dashboard (a tunnel to port 11000, then the browser) and each custom app;
  an open app's entry closes it again;
- Start/stop last workload and Run last benchmark (disabled until those exist;
  the benchmark's end is notified by the window, like a workload's failure);
- Pair a new node…; Quit.

Every action runs through ``ClusterActions`` in a worker; errors reach the
status bar and, when the window is hidden, a notification.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from sparksync.core.telemetry import ClusterSummary, Health
from sparksync.core.nodes import NodeRow, NodeState
from sparksync.gui.tray.icons import health_icon
from sparksync.gui.tray.notifier import Notifier
from sparksync.gui.workers import Jobs

if TYPE_CHECKING:
    from sparksync.core.apps import CustomApp

log = logging.getLogger(__name__)

REFRESH_MS = 2000
APP_READY_TIMEOUT_S = 60.0  # a start script may take a while to bring its server up
NOT_YET_WORKLOAD = "Workloads are not available in this version yet; they will appear in the Workloads tab."
NO_LAST_WORKLOAD = "Start a workload in the Workloads tab first; this entry then starts or stops it."
NOT_YET_BENCHMARK = "Benchmarks from the app are not available in this version yet; use `sparksync bench`."
NO_LAST_BENCHMARK = "Run a benchmark in the Benchmarks tab first; this entry then runs it again."
LAST_BENCHMARK_TIP = "Runs the newest stored benchmark again: same endpoint, model, tokenizer and profile."


STATE_MARKS = {NodeState.ONLINE: "●", NodeState.DEGRADED: "◐", NodeState.OFFLINE: "○"}


class Tray(QObject):
    connection_changed = Signal(str, bool)  # node, connected: the window follows it again, or stops

    def __init__(
        self,
        actions,
        jobs: Jobs,
        notifier: Notifier,
        *,
        summary: Callable[[], ClusterSummary],
        summary_text: Callable[[ClusterSummary], str],
        open_dashboard: Callable[[], None],
        pair_new_node: Callable[[], None],
        quit_app: Callable[[], None],
        open_url: Callable[[str], object] | None = None,
        workloads=None,
        benchmarks=None,
        node_memory: Callable[[str], tuple[str, str | None] | None] | None = None,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.actions = actions
        self.jobs = jobs
        self.notifier = notifier
        self._summary = summary
        self._summary_text = summary_text
        self._open_dashboard = open_dashboard
        self._pair_new_node = pair_new_node
        self._quit = quit_app
        self.workloads = workloads  # the Workloads panel: last_label(), toggle_last(), last_changed
        self.benchmarks = benchmarks  # the Benchmarks panel: has_last_run, run_last(), last_run_changed
        self.open_url = open_url or (lambda url: QDesktopServices.openUrl(QUrl(url)))
        self.icon = QSystemTrayIcon(health_icon(Health.OFFLINE), self)
        self.menu = QMenu()
        self.menu.setToolTipsVisible(True)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._on_icon_activated)
        self.menu_actions: dict[str, QAction] = {}
        self.health = Health.OFFLINE
        self._nodes: list[str] = []
        self._apps: list[CustomApp] = []
        self._open: set[tuple[str, str]] = set()  # (node, app name) open now
        self._states: dict[str, NodeState] = {}
        self._rows: dict[str, NodeRow] = {}  # paired node -> its row (state, reason)
        # node -> (used, total) as texts ("41.2 GB", "121.7 GB"), or None before its first sample
        self._node_memory = node_memory or (lambda _name: None)
        self.disconnected: set[str] = set()  # nodes the user disconnected here
        self._node_menus: dict[str, QMenu] = {}
        self._went_offline: set[str] = set()  # told "offline", not yet told "online again"
        self.fabric_health: str | None = None  # the newest fabric check's problem, None: healthy or unchecked
        self._build_menu()
        if workloads is not None:
            workloads.last_changed.connect(self._build_menu)
            workloads.read_last()
        if benchmarks is not None:
            benchmarks.last_run_changed.connect(self._build_menu)
            benchmarks.error_raised.connect(self._on_benchmarks_error_raised)
            benchmarks.run_finished.connect(self._on_benchmarks_run_finished)
            benchmarks.read_last_run()
        self._benchmark_asked = False  # "Run last benchmark" was chosen and has not started or failed yet
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.refresh)

    def show(self) -> None:
        self.icon.show()
        self.refresh()
        self._timer.start(REFRESH_MS)
        self.load_apps()

    def hide(self) -> None:
        self._timer.stop()
        self.icon.hide()

    # --- the icon -------------------------------------------------------------------------

    def refresh(self) -> None:
        summary = self._summary()
        health = Health.DEGRADED if self.fabric_health and summary.health is Health.ONLINE else summary.health
        self.health = health
        self.icon.setIcon(health_icon(health))
        fabric = f"\n{self.fabric_health}" if self.fabric_health else ""
        self.icon.setToolTip(f"SparkSync: {self._summary_text(summary)}{fabric}")
        self._refresh_node_titles()

    def set_fabric_health(self, problem: str | None) -> None:
        """The fabric's newest acceptance check: ``problem`` says how it is degraded (None: healthy).

        Shown only (icon, tooltip, menu line): the notification goes through the core's events door
        (``tell_degraded``), which the window calls when a check flags links, tray or not.
        """
        if problem == self.fabric_health:
            return
        self.fabric_health = problem
        self._build_menu()
        self.refresh()

    def _refresh_node_titles(self) -> None:
        # Memory moves every sample: the titles change in place, the menu is not rebuilt.
        for node, sub in self._node_menus.items():
            sub.menuAction().setText(self.node_title(node))
            memory = self.menu_actions.get(f"node:{node}:memory")
            if memory is not None:
                memory.setText(self._memory_line(node))

    def node_state(self, node: str) -> tuple[str, str | None]:
        """What the tray says of a node: its state word and why (offline or degraded), or None."""
        if node in self.disconnected:
            return "disconnected", "Disconnected from the tray: not followed, no SSH link."
        row = self._rows.get(node)
        if row is None:
            return NodeState.PAIRED.value, None
        why = row.reason if row.state in (NodeState.OFFLINE, NodeState.DEGRADED) else None
        return row.state.value, why

    def node_title(self, node: str) -> str:
        state, _why = self.node_state(node)
        row = self._rows.get(node)
        mark = STATE_MARKS.get(row.state, "○") if row is not None and node not in self.disconnected else "○"
        memory = self._node_memory(node) if node not in self.disconnected else None
        return f"{mark} {node} — {state}" + (f" · {memory[0]} used" if memory else "")

    def _memory_line(self, node: str) -> str:
        memory = self._node_memory(node) if node not in self.disconnected else None
        if memory is None:
            return "Memory in use: not known yet"
        used, total = memory
        return f"Memory in use: {used}" + (f" of {total}" if total else "")

    def tooltip(self) -> str:
        return self.icon.toolTip()

    def _on_icon_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self._open_dashboard()

    # --- the menu -------------------------------------------------------------------------

    def _build_menu(self) -> None:
        self.menu.clear()
        self.menu_actions.clear()
        self._node_menus.clear()
        self._add("open_dashboard", "Open dashboard", self._open_dashboard)
        if self.fabric_health:
            self._add("fabric", f"⚠ {self.fabric_health}", None,
                      "From the newest `sparksync cluster check`; its figures are in the Topology tab.").setEnabled(False)
        self.menu.addSeparator()
        self._add("connect_all", "Connect all", self.connect_all)
        self._add("disconnect_all", "Disconnect all", self.disconnect_all)
        self.menu.addSeparator()
        for node in self._nodes:
            self._node_menu(node)
        if not self._nodes:
            self._add("no_nodes", "No paired nodes yet", None).setEnabled(False)
        self.menu.addSeparator()
        self._last_workload_entry()
        self._last_benchmark_entry()
        self.menu.addSeparator()
        self._add("pair", "Pair a new node…", self._pair_new_node)
        self.menu.addSeparator()
        self._add("quit", "Quit SparkSync", self._quit)

    def _last_workload_entry(self) -> None:
        label = self.workloads.last_label() if self.workloads is not None else None
        if label is not None:
            self._add("last_workload", label, self.workloads.toggle_last)
            return
        tip = NOT_YET_WORKLOAD if self.workloads is None else NO_LAST_WORKLOAD
        self._add("last_workload", "Start/stop last workload", None, tip).setEnabled(False)

    def _last_benchmark_entry(self) -> None:
        if self.benchmarks is not None and self.benchmarks.has_last_run:
            self._add("last_benchmark", "Run last benchmark", self.run_last_benchmark, LAST_BENCHMARK_TIP)
            return
        tip = NOT_YET_BENCHMARK if self.benchmarks is None else NO_LAST_BENCHMARK
        self._add("last_benchmark", "Run last benchmark", None, tip).setEnabled(False)

    def run_last_benchmark(self) -> None:
        self._benchmark_asked = True
        self.notifier.status_bar.showMessage("Running the last benchmark again…")
        self.benchmarks.run_last()  # its progress shows in the Benchmarks tab; the end is notified

    def _on_benchmarks_error_raised(self, message: str) -> None:
        # Asked from the tray, the window may be hidden: why it could not run needs a notification.
        if self._benchmark_asked:
            self._benchmark_asked = False
            self._report(message)

    def _on_benchmarks_run_finished(self, _record) -> None:
        self._benchmark_asked = False

    def _add(
        self, key: str, text: str, slot, tooltip: str | None = None, menu: QMenu | None = None
    ) -> QAction:
        action = (menu or self.menu).addAction(text)
        if slot is not None:
            action.triggered.connect(lambda _checked=False: slot())
        if tooltip:
            action.setToolTip(tooltip)
        self.menu_actions[key] = action
        return action

    def _node_menu(self, node: str) -> None:
        sub = self.menu.addMenu(self.node_title(node))
        sub.setToolTipsVisible(True)
        self._node_menus[node] = sub
        state, why = self.node_state(node)
        if why:
            self._add(f"node:{node}:why", f"{state.capitalize()}: {why}", None, why, sub).setEnabled(False)
        self._add(f"node:{node}:memory", self._memory_line(node), None, None, sub).setEnabled(False)
        if node in self.disconnected:
            self._add(f"node:{node}:connect", "Connect", lambda: self.connect_node(node),
                      f"Follow {node} again and open its SSH link", sub)  # fmt: skip
        else:
            self._add(f"node:{node}:connect", "Disconnect", lambda: self.disconnect_node(node),
                      f"Stop following {node}; close its SSH link and apps", sub)  # fmt: skip
        sub.addSeparator()
        self._add(
            f"node:{node}:terminal", "Open terminal", lambda: self.open_terminal(node), f"ssh {node}", sub
        )
        for app in self._apps:
            is_open = (node, app.name) in self._open
            text = f"Close {app.name}" if is_open else f"Open {app.name}"
            slot = (
                (lambda a=app: self.close_app(node, a)) if is_open else (lambda a=app: self.open_app(node, a))
            )
            tip = f"port {app.remote_port} on {node}, through an SSH tunnel"
            self._add(f"node:{node}:app:{app.name}", text, slot, tip, sub)

    def set_nodes(self, names: list[str]) -> None:
        self._nodes = list(names)
        self.disconnected &= set(names)
        self._build_menu()

    def load_apps(self) -> None:
        self.jobs.run("Reading the custom apps", self.actions.custom_apps, self._on_apps_read, self._report)

    def _on_apps_read(self, apps: list[CustomApp]) -> None:
        self._apps = list(apps)
        self._build_menu()

    # --- actions --------------------------------------------------------------------------

    def connect_all(self) -> None:
        self.jobs.run("Connecting all nodes", self.actions.connect_all, self._on_connected, self._report)

    def _on_connected(self, outcome: dict) -> None:
        down = {name: why for name, why in outcome.items() if why}
        up = len(outcome) - len(down)
        self.notifier.status_bar.showMessage(f"Connected {up} of {len(outcome)} nodes.")
        for name, why in down.items():
            self.notifier.notify(f"{name} did not connect", why, "warning")

    def connect_node(self, node: str) -> None:
        self.disconnected.discard(node)
        self._build_menu()
        self.connection_changed.emit(node, True)
        self.jobs.run(f"Connecting {node}", lambda: self.actions.connect(node),
                      lambda why: self._on_node_connected(node, why), self._report)  # fmt: skip

    def _on_node_connected(self, node: str, why: str | None) -> None:
        if why:
            self.notifier.notify(f"{node} did not connect", why, "warning")
        else:
            self.notifier.status_bar.showMessage(f"Connected {node}.")

    def disconnect_node(self, node: str) -> None:
        self.disconnected.add(node)
        self._open = {(n, a) for n, a in self._open if n != node}
        self._build_menu()
        self.connection_changed.emit(node, False)
        self.jobs.run(f"Disconnecting {node}", lambda: self.actions.disconnect(node),
                      lambda _r: self.notifier.status_bar.showMessage(f"Disconnected {node}; its apps were closed."),
                      self._report)  # fmt: skip

    def disconnect_all(self) -> None:
        self._open.clear()
        self._build_menu()
        self.jobs.run(
            "Disconnecting all nodes",
            self.actions.disconnect_all,
            lambda _r: self.notifier.status_bar.showMessage(
                "Disconnected every node; open apps were closed."
            ),
            self._report,
        )

    def open_terminal(self, node: str) -> None:
        self.jobs.run(
            f"Opening a terminal on {node}", lambda: self.actions.open_terminal(node), None, self._report
        )

    def open_app(self, node: str, app: CustomApp) -> None:
        def work():
            session = self.actions.open_app(node, app)
            ready = session.wait_ready(APP_READY_TIMEOUT_S) if session.url else True
            return session, ready

        self.notifier.status_bar.showMessage(f"Opening {app.name} on {node}…")
        self.jobs.run(f"Opening {app.name} on {node}", work, self._on_app_opened, self._report)

    def _on_app_opened(self, outcome) -> None:
        session, ready = outcome
        self._open.add((session.node, session.app.name))
        self._build_menu()
        if session.url is None:
            self.notifier.status_bar.showMessage(f"{session.app.name} on {session.node} is open.")
            return
        if not ready:
            self.notifier.notify(
                f"{session.app.name} on {session.node} does not answer",
                f"Nothing answered on port {session.app.remote_port} of {session.node} yet; the browser may "
                "show an error until it starts.",
                "warning",
            )
        self.open_url(session.url)
        self.notifier.status_bar.showMessage(f"{session.app.name} on {session.node}: {session.url}")

    def close_app(self, node: str, app: CustomApp) -> None:
        self._open.discard((node, app.name))
        self._build_menu()
        self.jobs.run(
            f"Closing {app.name} on {node}",
            lambda: self.actions.close_app(node, app.name),
            None,
            self._report,
        )

    def _report(self, message: str) -> None:
        # The status bar already has it (Jobs.error_raised); a hidden window needs a notification too.
        self.notifier.notify("SparkSync", message, "error")

    # --- notifications ---------------------------------------------------------------------

    def on_rows_changed(self, rows: list[NodeRow]) -> None:
        """Tell when a paired node goes offline or degraded (not its first state), and when it is back online.

        The menu is rebuilt only when a node's state or reason changed (rows also change on every sample).
        """
        states = {r.name: r.state for r in rows if r.paired}
        for row in rows:
            before = self._states.get(row.name)
            if not row.paired or before is None or before is row.state or row.name in self.disconnected:
                continue
            if row.state is NodeState.OFFLINE:
                self.notifier.node_offline(row.name, row.reason)
                self._went_offline.add(row.name)
            elif row.state is NodeState.DEGRADED and before is NodeState.ONLINE:  # after offline: no news
                self.notifier.node_degraded(row.name, row.reason)
                self._went_offline.add(row.name)
            elif row.state is NodeState.ONLINE and row.name in self._went_offline:
                self._went_offline.discard(row.name)
                self.notifier.node_online(row.name)
        self._states = states
        shown = {n: (r.state, r.reason) for n, r in self._rows.items()}
        self._rows = {r.name: r for r in rows if r.paired}
        if {n: (r.state, r.reason) for n, r in self._rows.items()} != shown:
            self._build_menu()
