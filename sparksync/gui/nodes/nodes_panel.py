"""The Nodes panel: every node with its state, reason and last-seen time, and what to do with it.

A view over ``NodeRows`` (core): the registry is read in a worker, discovery
events and live states arrive as signals from other threads, and every
action (pair, unpair, rename, deploy) runs through ``ClusterActions`` in a
worker. Errors go to ``error_raised`` (the window's status bar) in plain words.

A node whose agent is older than this client's reads "upgrade to X" in the
Agent column, and its deploy button and context menu say "Upgrade agent":
the same deploy path installs the new version. While a deploy runs its
nodes read "deploying"; the fleet's next check (run by the deploy) moves
them on to online.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.deploy import summary_text
from sparksync.core.nodes import (
    FleetState,
    NodeRow,
    NodeRows,
    NodeState,
    NodeStateSource,
    client_agent_version,
    preload,
)
from sparksync.gui.nodes.deploy_progress import DeployProgressPanel
from sparksync.gui.nodes.pair_dialog import PairDialog
from sparksync.gui.workers import Jobs

log = logging.getLogger(__name__)

COLUMNS = ("Name", "Address", "State", "Reason", "Last seen", "Agent")
DEPLOY_TEXT, UPGRADE_TEXT = "Deploy agent", "Upgrade agent"
LAST_SEEN_REFRESH_MS = 5000
EMPTY_HINT = (
    "<h3>No nodes yet</h3>"
    "<p>While this tab is open, SparkSync looks for DGX Sparks on your network (mDNS): "
    "each one it finds is listed here. Select it and click <b>Pair…</b>.</p>"
    "<p>Not listed (mDNS blocked on your network)? Click <b>Pair…</b> and type its hostname or IP "
    "address, e.g. <code>spark-1a2b.local</code>; or scan a subnet with "
    "<code>sparksync node discover --scan 192.168.1.0/24</code>.</p>"
    "<p>Once paired, <b>Deploy agent</b> installs SparkSync's agent on it.</p>"
)
STATE_COLOURS = {
    NodeState.ONLINE: "#2e7d32",
    NodeState.DEGRADED: "#b26a00",
    NodeState.OFFLINE: "#c0392b",
    NodeState.PAIRING: "#1565c0",
    NodeState.DEPLOYING: "#1565c0",
}


class NodesPanel(QWidget):
    status_message = Signal(str)
    error_raised = Signal(str)
    paired_changed = Signal(list)  # the paired nodes, after each registry read
    deployed = Signal(list)  # names of the nodes a deploy just put an agent on
    discovery_event = Signal(str, object)  # (event, DiscoveredNode), from any thread
    fleet_state = Signal(str, object)  # (node name, FleetState), from any thread

    def __init__(
        self, actions, jobs: Jobs | None = None, rows: NodeRows | None = None, parent: QWidget | None = None
    ):
        super().__init__(parent)
        self.setObjectName("nodesPanel")
        self.actions = actions
        self.jobs = jobs or Jobs(self)
        self.rows = rows or NodeRows()
        self.pair_dialog: PairDialog | None = None
        # Asking the user; tests replace these two with answers of their own.
        self.ask_yes_no: Callable[[str, str], bool] = self._ask_yes_no
        self.ask_text: Callable[[str, str, str], str | None] = self._ask_text
        self._unsubscribe: list[Callable[[], None]] = []
        self._reads = 0  # registry reads asked for
        self._deploy_cancel: threading.Event | None = None  # the running deploy's; set by Cancel or on quit
        self._build()
        feed = getattr(actions, "deploy_feed", None)
        if feed is not None:
            self.deploys.attach(feed)
        self.deploys.cancel_requested.connect(self.cancel_deploy)
        self.rows.add_listener(self._on_rows_changed)
        self.discovery_event.connect(self._on_discovery_event)
        self.fleet_state.connect(self._on_fleet_state)
        self._ticker = QTimer(self)  # "12 s ago" moves on without any new event
        self._ticker.timeout.connect(self._refresh_last_seen)
        self._ticker.start(LAST_SEEN_REFRESH_MS)
        self._on_rows_changed(self.rows.rows())

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.slots_label = QLabel(self.rows.slots_text())
        self.slots_label.setObjectName("slotsLabel")
        top.addWidget(self.slots_label)
        top.addStretch(1)
        self.pair_button = self._button(top, "Pair…", "pairButton", self._on_pair_button_clicked)
        self.unpair_button = self._button(top, "Unpair", "unpairButton", self._on_unpair_button_clicked)
        self.rename_button = self._button(top, "Rename…", "renameButton", self._on_rename_button_clicked)
        self.deploy_button = self._button(top, DEPLOY_TEXT, "deployButton", self._on_deploy_button_clicked)
        self.deploy_button.setToolTip("Install or upgrade the SparkSync agent on the selected node")
        self.deploy_all_button = self._button(top, "Deploy to all", "deployAllButton", self.deploy_all)
        self.deploy_all_button.setToolTip("Install or upgrade the agent on every paired node at once")
        self.refresh_button = self._button(top, "Refresh", "refreshButton", self.reload)
        layout.addLayout(top)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("nodeTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)  # the reason takes what is left
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.itemDoubleClicked.connect(lambda _item: self._on_pair_button_clicked())
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_table_context_menu)
        layout.addWidget(self.table, 1)
        self.empty_hint = QLabel(EMPTY_HINT, self)
        self.empty_hint.setObjectName("nodesEmptyHint")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_hint.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.empty_hint, 1)
        self.deploys = DeployProgressPanel(self)
        layout.addWidget(self.deploys)
        self._update_buttons()

    def _button(self, layout: QHBoxLayout, text: str, name: str, slot) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName(name)
        button.clicked.connect(slot)
        layout.addWidget(button)
        return button

    # --- feeding ------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the registry again (in a worker)."""
        # Reads run in parallel workers and may answer out of order; only the latest one counts.
        self._reads += 1
        number = self._reads

        def read() -> list:
            preload()  # the modules the list's merge needs, imported here rather than in the GUI thread
            return self.actions.paired()

        self.jobs.run(
            "Reading the node registry",
            read,
            lambda nodes: self._on_paired_read(number, nodes),
            self._on_job_error,
        )

    def attach_discovery(self, discovery) -> None:
        """Follow a ``Discovery`` (or anything with ``add_listener`` and ``nodes``)."""
        self._unsubscribe.append(discovery.add_listener(self.discovery_event.emit))
        self.rows.set_discovered(discovery.nodes())

    def attach_states(self, source: NodeStateSource) -> None:
        """Follow live node states (the fleet code)."""
        self._unsubscribe.append(source.add_listener(self.fleet_state.emit))

    def detach_all(self) -> None:
        self.cancel_deploy()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        self.deploys.detach_all()

    def _on_paired_read(self, number: int, nodes: list) -> None:
        if number != self._reads:
            return  # a later read is on its way
        self.rows.set_paired(nodes)
        self.paired_changed.emit(nodes)

    @Slot(str, object)
    def _on_discovery_event(self, event: str, node) -> None:
        self.rows.on_discovery(event, node)

    @Slot(str, object)
    def _on_fleet_state(self, name: str, state: FleetState) -> None:
        self.rows.set_state(name, state)

    # --- showing ------------------------------------------------------------------------

    def _on_rows_changed(self, rows: list[NodeRow]) -> None:
        selected = self.selected_row()
        self.slots_label.setText(self.rows.slots_text())
        self.slots_label.setToolTip(
            f"SparkSync manages at most {self.rows.max_nodes} nodes; unpair one to free a slot."
        )
        self.table.setRowCount(len(rows))
        self.table.setVisible(bool(rows))
        self.empty_hint.setVisible(not rows)
        for i, row in enumerate(rows):
            self._fill(i, row)
        if selected is not None:
            self.select(selected.key)
        self._update_buttons()

    def _fill(self, i: int, row: NodeRow) -> None:
        cells = (
            row.name,
            row.host,
            row.state.value,
            row.reason or "",
            _last_seen(row.last_seen),
            _agent(row),
        )
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, row.key)
            if column == 3:
                item.setToolTip(row.reason or "")
            self.table.setItem(i, column, item)
        if row.upgrade_available:
            agent = self.table.item(i, 5)
            agent.setForeground(_brush(STATE_COLOURS[NodeState.DEGRADED]))
            agent.setToolTip(
                f"Select the node and click {UPGRADE_TEXT!r} to install {client_agent_version()}"
            )
        colour = STATE_COLOURS.get(row.state)
        if colour:
            self.table.item(i, 2).setForeground(_brush(colour))

    def _refresh_last_seen(self) -> None:
        for i, row in enumerate(self.rows.rows()):
            item = self.table.item(i, 4)
            if item is not None:
                item.setText(_last_seen(row.last_seen))

    def row_texts(self) -> list[tuple[str, ...]]:
        """What the table shows, row by row (for tests and screen readers)."""
        return [
            tuple(self.table.item(i, c).text() for c in range(len(COLUMNS)))
            for i in range(self.table.rowCount())
        ]

    def selected_row(self) -> NodeRow | None:
        items = self.table.selectedItems()
        return self.rows.row(items[0].data(Qt.ItemDataRole.UserRole)) if items else None

    def select(self, key: str) -> bool:
        for i in range(self.table.rowCount()):
            if self.table.item(i, 0).data(Qt.ItemDataRole.UserRole) == key:
                self.table.selectRow(i)
                return True
        return False

    def _update_buttons(self) -> None:
        row = self.selected_row()
        paired = row is not None and row.paired
        self.unpair_button.setEnabled(paired)
        self.rename_button.setEnabled(paired)
        self.deploy_button.setEnabled(paired and self._deploy_cancel is None)
        self.deploy_all_button.setEnabled(self.rows.slots_used > 0 and self._deploy_cancel is None)
        self.deploy_button.setText(UPGRADE_TEXT if row is not None and row.upgrade_available else DEPLOY_TEXT)
        full = self.rows.is_full()
        self.pair_button.setEnabled(not full or (row is not None and not row.paired))
        self.pair_button.setToolTip(
            f"All {self.rows.max_nodes} slots are used: unpair a node first." if full else "Pair a node"
        )

    # --- actions ------------------------------------------------------------------------

    def open_pair_dialog(self, row: NodeRow | None = None) -> PairDialog:
        if self.pair_dialog is not None:
            self.pair_dialog.raise_()
            return self.pair_dialog
        discovered = row.discovered if row is not None and not row.paired else None
        dialog = PairDialog(self.actions.pair, discovered, self, self.jobs)
        dialog.pairing_started.connect(lambda key: self.rows.set_pairing(key, True))
        dialog.pairing_ended.connect(lambda key: self.rows.set_pairing(key, False))
        dialog.paired.connect(self._on_pair_dialog_paired)
        dialog.deploy_requested.connect(lambda name: self.deploy([name]))
        dialog.finished.connect(self._on_pair_dialog_finished)
        self.pair_dialog = dialog
        dialog.show()
        return dialog

    def _on_pair_button_clicked(self) -> None:
        row = self.selected_row()
        self.open_pair_dialog(row if row is not None and not row.paired else None)

    def _on_pair_dialog_paired(self, result) -> None:
        node = result.node
        if result.already_paired:
            self.status_message.emit(f"{node.host} is already paired as {node.name!r}.")
        else:
            self.status_message.emit(f"Paired {node.name!r} ({node.user}@{node.host}).")
        self.reload()

    def _on_pair_dialog_finished(self, _code: int) -> None:
        dialog, self.pair_dialog = self.pair_dialog, None
        if dialog is None:
            return
        if dialog.session is not None:  # its worker still ends with a call to it: delete it after that
            dialog.pairing_ended.connect(dialog.deleteLater)
        else:
            dialog.deleteLater()

    def _on_unpair_button_clicked(self) -> None:
        row = self.selected_row()
        if row is not None and row.paired:
            self.unpair(row.name)

    def unpair(self, name: str) -> bool:
        question = (
            f"Unpair {name!r}? SparkSync removes its key from the node and forgets the node here. "
            "The node itself keeps running."
        )
        if not self.ask_yes_no("Unpair node", question):
            return False
        self.status_message.emit(f"Unpairing {name!r}…")
        self.jobs.run(
            f"Unpairing {name}", lambda: self.actions.unpair(name), self._on_unpaired, self._on_job_error
        )
        return True

    def _on_unpaired(self, result) -> None:
        for warning in result.warnings:
            self.error_raised.emit(warning)
        self.status_message.emit(f"Unpaired {result.node.name!r}.")
        self.reload()

    def _on_rename_button_clicked(self) -> None:
        row = self.selected_row()
        if row is None or not row.paired:
            return
        new = self.ask_text(
            "Rename node", f"New name for {row.name!r} (letters, digits, '.', '_', '-'):", row.name
        )
        if new and new.strip() and new.strip() != row.name:
            self.rename(row.name, new.strip())

    def rename(self, old: str, new: str) -> None:
        self.jobs.run(
            f"Renaming {old}", lambda: self.actions.rename(old, new), self._on_renamed, self._on_job_error
        )

    def _on_renamed(self, result) -> None:
        for warning in result.warnings:
            self.error_raised.emit(warning)
        self.status_message.emit(f"Renamed {result.old_name!r} to {result.node.name!r}.")
        self.reload()

    def _on_deploy_button_clicked(self) -> None:
        row = self.selected_row()
        if row is not None and row.paired:
            self.deploy([row.name])

    def _on_table_context_menu(self, pos) -> None:
        item = self.table.itemAt(pos)
        row = self.rows.row(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None
        if row is None or not row.paired:
            return
        self.select(row.key)
        menu = self.row_menu(row)
        menu.exec(self.table.viewport().mapToGlobal(pos))
        menu.deleteLater()

    def row_menu(self, row: NodeRow) -> QMenu:
        """The actions a paired node's row offers (its context menu)."""
        menu = QMenu(self)
        deploy = menu.addAction(UPGRADE_TEXT if row.upgrade_available else DEPLOY_TEXT)
        deploy.setEnabled(self._deploy_cancel is None)
        deploy.triggered.connect(lambda _checked=False, name=row.name: self.deploy([name]))
        menu.addAction("Rename…").triggered.connect(lambda _checked=False: self._on_rename_button_clicked())
        menu.addAction("Unpair").triggered.connect(lambda _checked=False, name=row.name: self.unpair(name))
        return menu

    def deploy_all(self) -> bool:
        """Deploy (or upgrade) the agent on every paired node."""
        names = [r.name for r in self.rows.rows() if r.paired]
        return bool(names) and self.deploy(names)

    def deploy(self, names: list[str]) -> bool:
        """Install or upgrade the agent on ``names``; the bars below the list follow it. One deploy at a time."""
        if self._deploy_cancel is not None:
            self.error_raised.emit("A deploy is already running; wait for it to end or cancel it.")
            return False
        cancel = self._deploy_cancel = threading.Event()
        self.status_message.emit(f"Deploying the agent to {', '.join(names)}…")
        for name in names:
            self.rows.set_deploying(name, "deploying the agent")
        self.deploys.started(names)
        self._update_buttons()
        self.jobs.run(
            f"Deploying to {', '.join(names)}",
            lambda: self.actions.deploy(names, cancel),
            lambda results: self._on_deployed(names, results),
            lambda message: self._on_deploy_failed(names, message),
        )
        return True

    def cancel_deploy(self) -> None:
        if self._deploy_cancel is not None:
            self._deploy_cancel.set()

    def deploying(self) -> bool:
        return self._deploy_cancel is not None

    def _deploy_ended(self, names: list[str], summary: str) -> None:
        self._deploy_cancel = None
        for name in names:
            self.rows.set_deploying(name, None)
        self.deploys.ended(summary)
        self._update_buttons()
        self.reload()  # the registry now records the deployed versions

    def _on_deployed(self, names: list[str], results: list) -> None:
        ok = [result.node for result in results if result.ok]
        if ok:
            self.deployed.emit(ok)
        for result in results:
            if result.ok:
                self.status_message.emit(
                    f"{result.node}: agent {result.version or ''} {result.outcome.value}."
                )
            else:
                self.error_raised.emit(f"Deploying to {result.node} {result.outcome.value}: {result.reason}")
        self._deploy_ended(names, summary_text(results))

    def _on_deploy_failed(self, names: list[str], message: str) -> None:
        self._deploy_ended(names, f"The deploy did not run: {message}")
        self.error_raised.emit(message)

    def _on_job_error(self, message: str) -> None:
        self.error_raised.emit(message)

    # --- asking -------------------------------------------------------------------------

    def _ask_yes_no(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text)
        return answer == QMessageBox.StandardButton.Yes

    def _ask_text(self, title: str, label: str, value: str) -> str | None:
        text, ok = QInputDialog.getText(self, title, label, QLineEdit.EchoMode.Normal, value)
        return text if ok else None


def _brush(colour: str) -> QBrush:
    return QBrush(QColor(colour))


def _agent(row: NodeRow) -> str:
    if not row.paired:
        return ""
    if row.agent_version is None:
        return "—"
    if row.upgrade_available:
        return f"{row.agent_version} (upgrade to {client_agent_version()})"
    return row.agent_version


def _last_seen(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return "—"
    age = (time.time() if now is None else now) - ts
    if age < 5:
        return "just now"
    if age < 90:
        return f"{age:.0f} s ago"
    if age < 90 * 60:
        return f"{age / 60:.0f} min ago"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
