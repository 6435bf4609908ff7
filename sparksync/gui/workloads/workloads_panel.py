"""The Workloads tab: launch a recipe on node groups, watch every workload's ranks, read logs, stop, restart.

All work runs through ``WorkloadControl`` in workers (``Jobs``): the GUI
thread never talks to a node. About once a second a worker reads every
recorded workload's ranks (and the selected process's new log lines, by
sequence number); a workload that turns failed is told through
``workload_failed`` (the window hands it to the notifier), and its other
ranks are stopped so it is whole or not at all. Launch progress arrives
from the orchestrator's callback, in the worker, as a queued signal.

The nodes to choose from are this computer and the paired nodes. The
head node's llama.cpp is checked through its agent; where it is missing,
"Install llama.cpp" builds it there (this computer too) with a progress bar.

The tray's "Start/stop last workload" calls ``toggle_last``: it stops the
last launched workload while it runs, else starts the same choice again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)
from sparksync_agent.protocol import LogPage

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.base import SparkSyncError
from sparksync.core.models import ModelMissingError
from sparksync.core.workloads import (
    LaunchChoice,
    Launched,
    MemoryFitError,
    Prepared,
    WorkloadControl,
    WorkloadRow,
    WorkloadStartError,
    WorkloadView,
    fit_lines,
)
from sparksync.gui.workers import Jobs
from sparksync.gui.workloads.launch_form import LaunchForm
from sparksync.gui.workloads.workload_table import WorkloadTable

log = logging.getLogger(__name__)

REFRESH_MS = 1000
LOG_LIMIT = 5000  # lines kept in the log view


class _ProgressBridge(QObject):
    """The orchestrator calls back in its worker; a queued signal brings each step to the GUI thread."""

    progressed = Signal(object)
    installing = Signal(object)  # an engine install's InstallProgress
    copying = Signal(object)  # a model copy's CopyEvent, before a start with "Copy the model"


LIVE = ("starting", "ready", "partly running")  # a workload seen in one of these, then in ENDED, has ended
ENDED = ("exited", "stopped")


class WorkloadsPanel(QWidget):
    status_message = Signal(str)
    error_raised = Signal(str)
    workload_failed = Signal(str, str)  # workload id, why (which rank, on which node, its message)
    workload_ended = Signal(str, str)  # workload id, how ("exited", "stopped"): it ran and is over
    last_changed = Signal()  # the tray's "last workload" entry reads again
    recipes_loaded = Signal(list)  # recipe names
    fit_shown = Signal(bool)  # True: it fits (or could not be checked); False: refused
    launch_finished = Signal(object)  # WorkloadView, or the error's message
    rows_shown = Signal(list)  # WorkloadRow, after each reading
    log_shown = Signal(int)  # the last sequence number shown
    engine_shown = Signal(str, bool)  # node, whether it has llama.cpp
    engine_installed = Signal(str, str)  # node, where it went ("" when it failed)

    def __init__(
        self,
        control: WorkloadControl | None = None,
        actions=None,
        parent: QWidget | None = None,
        *,
        fleet: Callable[[], object] | None = None,
        refresh_ms: int = REFRESH_MS,
    ):
        super().__init__(parent)
        self.setObjectName("workloadsPanel")
        self.actions = actions
        self.control = control if control is not None else _fleet_control(actions, fleet)
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self._on_jobs_error_raised)
        self.form = LaunchForm(self)
        self.table = WorkloadTable(self)
        self.log_view = QPlainTextEdit(self, objectName="log", readOnly=True)
        self.log_view.setFont(QFont("monospace"))
        self.log_view.setMaximumBlockCount(LOG_LIMIT)
        self.log_title = QLabel("Select a process to follow its log.", self, objectName="logTitle")
        self.follow = QCheckBox("Follow", self, objectName="follow", checked=True)
        self.stop_button = QPushButton("Stop", self, objectName="stop", enabled=False)
        self.restart_button = QPushButton("Restart", self, objectName="restart", enabled=False)
        self.remove_button = QPushButton("Remove", self, objectName="remove", enabled=False)
        self.remove_button.setToolTip("Stop it and drop it, with its logs, from the nodes and this list.")
        self.open_button = QPushButton("Open API", self, objectName="openApi", enabled=False)
        self.open_button.setToolTip("A tunnel from here to its engine's HTTP port; the local URL shows below.")
        self.prune_button = QPushButton("Prune", self, objectName="prune")
        self.prune_button.setToolTip("Drop the failed and gone workloads from this list and their nodes.")
        self.api_label = QLabel("", self, objectName="apiUrl", wordWrap=True)
        self.api_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.api_label.setOpenExternalLinks(True)
        # Shown when a start was refused because a node lacks the model: copies it, then starts.
        self.copy_model_button = QPushButton("Copy the model to those nodes, then start", self,
                                             objectName="copyModel", visible=False)  # fmt: skip
        self.copy_model_button.clicked.connect(self._on_copy_model_button_clicked)
        self._missing_choice: LaunchChoice | None = None
        self._launching_choice: LaunchChoice | None = None
        self._bridge = _ProgressBridge(self)
        self._bridge.progressed.connect(self.form.show_progress)
        self._bridge.installing.connect(self.form.show_install)
        self._bridge.copying.connect(self._on_bridge_copying)
        self._cancel: threading.Event | None = None
        self._install_cancel: threading.Event | None = None
        self._engine_node: str | None = None  # the head whose engines were last asked for
        self._timer = QTimer(self, interval=refresh_ms)
        self._timer.timeout.connect(self.refresh)
        self._reading = False
        self._loaded = False
        self._states: dict[str, str] = {}  # workload id -> its state at the last reading
        self._stopped_here: set[str] = set()  # workloads stopped from this panel (their end is no news)
        self._log_key: tuple[str, str] | None = None
        self._log_seq = 0
        self.rows: list[WorkloadRow] = []
        self.last: Launched | None = None
        self._last_label: str | None = None
        self._read_problem: str | None = None  # the last reading's error, told once
        self._shut = False  # the app is quitting: nothing new starts
        self._api_open: dict[str, list[str]] = {}  # workload id -> the local URLs of its open tunnels
        self._layout()
        self._connect()

    def _layout(self) -> None:
        buttons = QHBoxLayout()
        for button in (self.stop_button, self.restart_button, self.remove_button, self.open_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.prune_button)
        running = QWidget(self)
        column = QVBoxLayout(running)
        column.addWidget(QLabel("<b>Workloads</b>", running))
        column.addWidget(self.table, 2)
        self.detail = QLabel("Select a workload or one of its processes to see all about it here.", running)
        self.detail.setObjectName("workloadDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        column.addWidget(self.detail)
        column.addLayout(buttons)
        column.addWidget(self.api_label)
        logs_head = QHBoxLayout()
        logs_head.addWidget(self.log_title, 1)
        logs_head.addWidget(self.follow)
        column.addLayout(logs_head)
        column.addWidget(self.log_view, 3)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        left = QWidget(self)
        left_column = QVBoxLayout(left)
        left_column.setContentsMargins(0, 0, 0, 0)
        left_column.addWidget(self.form, 1)
        left_column.addWidget(self.copy_model_button)
        splitter.addWidget(left)
        splitter.addWidget(running)
        splitter.setStretchFactor(1, 2)
        QVBoxLayout(self).addWidget(splitter)

    def _connect(self) -> None:
        self.form.head_changed.connect(self.check_engine)
        self.form.install_clicked.connect(lambda: self.install_engine(self._engine_node))
        self.form.check_clicked.connect(self.check_fit)
        self.form.start_clicked.connect(self.start)
        self.form.cancel_clicked.connect(self.cancel)
        self.table.selection_moved.connect(self._on_table_selection_moved)
        self.stop_button.clicked.connect(lambda: self.stop(self._selected_id()))
        self.restart_button.clicked.connect(lambda: self.restart(self._selected_id()))
        self.remove_button.clicked.connect(lambda: self.remove(self._selected_id()))
        self.open_button.clicked.connect(lambda: self.toggle_api(self._selected_id()))
        self.prune_button.clicked.connect(self.prune)

    # --- loading ---------------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.load()

    def load(self) -> None:
        """Read the recipes, the paired nodes and the last launch (once), and start watching."""
        if self._loaded:
            return
        self._loaded = True
        self.reload_recipes()
        self.set_nodes([])  # this computer, at once; the paired nodes once read
        if self.actions is not None and hasattr(self.actions, "paired"):
            self.jobs.run("Reading the paired nodes", self.actions.paired,
                          lambda nodes: self.set_nodes([n.name for n in nodes]))  # fmt: skip
        self.read_last()
        self.watch()

    def reload_recipes(self) -> None:
        self.jobs.run("Reading the recipes", self.control.recipes, self._on_recipes_read)

    def _on_recipes_read(self, outcome) -> None:
        recipes, problems = outcome
        self.form.set_recipes(recipes)
        for problem in problems:
            self.status_message.emit(problem)
        self.recipes_loaded.emit(sorted(recipes))

    def set_nodes(self, names: list[str]) -> None:
        """The paired nodes; this computer is always there to choose too."""
        self.form.set_nodes([LOCAL_NODE_NAME, *(n for n in names if n != LOCAL_NODE_NAME)])

    # --- the head node's engine -------------------------------------------------------------------

    def check_engine(self, node: str | None) -> None:
        """Ask ``node``'s agent whether it has llama.cpp (in a worker); the form shows the answer."""
        self._engine_node = node
        if node is None or self._shut:
            self.form.show_engine(None, "")
            return
        self.form.show_engine(None, f"{node}: checking llama.cpp…")

        def work():
            answer = self.control.engines([node])[node]
            if isinstance(answer, SparkSyncError):
                raise answer
            return answer

        self.jobs.run(f"Checking the engines of {node}", work,
                      lambda report: self._on_engines_read(node, report),
                      lambda message: self._on_engines_failed(node, message))  # fmt: skip

    def _on_engines_read(self, node: str, report) -> None:
        if node != self._engine_node:
            return  # another head was chosen meanwhile
        present = bool(report.engines.get("llama.cpp"))
        found = next((c for c in report.checks if c.name == "llama-server" and c.available), None)
        where = f" ({found.path})" if found is not None and found.path else ""
        self.form.show_engine(present, f"{node}: llama.cpp " + (f"present{where}" if present else "missing"))
        self.engine_shown.emit(node, present)

    def _on_engines_failed(self, node: str, message: str) -> None:
        if node == self._engine_node:
            self.form.show_engine(None, f"{node}: cannot ask its agent: {_first_line(message)}")

    def install_engine(self, node: str | None) -> bool:
        """Build llama.cpp on ``node`` (this computer too) in a worker, with progress; False if one runs."""
        if node is None or self._shut or self._install_cancel is not None:
            return False
        cancel = self._install_cancel = threading.Event()
        self.form.set_installing(True)
        self.status_message.emit(f"Installing llama.cpp on {node}…")

        def work():
            return self.control.install_engine(node, self._bridge.installing.emit, cancel=cancel)

        self.jobs.run(f"Installing llama.cpp on {node}", work,
                      lambda where: self._on_installed(node, where),
                      lambda message: self._on_install_failed(node, message))  # fmt: skip
        return True

    def _on_installed(self, node: str, where: str) -> None:
        self._install_cancel = None
        self.form.set_installing(False)
        self.status_message.emit(f"llama.cpp installed on {node} in {where}.")
        self.engine_installed.emit(node, where)
        self.check_engine(node)

    def _on_install_failed(self, node: str, message: str) -> None:
        self._install_cancel = None
        self.form.set_installing(False)
        self.form.show_engine(False, f"{node}: the install failed: {_first_line(message)}")
        self.engine_installed.emit(node, "")

    def watch(self) -> None:
        """Read the workloads now and then every second."""
        if self._shut:
            return
        if not self._timer.isActive():
            self._timer.start()
        self.refresh()

    def watch_if_recorded(self) -> None:
        """Watch from now on when some workload is recorded (its failure is then told even with the tab unseen).

        The store is one small file, read in a worker; with nothing recorded the
        agents are never made, so a fresh app opens no SSH link and no keyring.
        """
        store = self.control.store
        self.jobs.run("Reading the recorded workloads", lambda: bool(store.list()), self._on_recorded_read)

    def _on_recorded_read(self, recorded: bool) -> None:
        if recorded:
            self.watch()

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop watching and cancel a launch in progress (what it started is stopped); wait for workers.

        From then on nothing new starts. ``timeout=0`` only asks (the GUI thread
        never waits); ``jobs.wait`` in a worker then waits for the launch to end.
        """
        self._shut = True
        self._timer.stop()
        if self._api_open:
            self.jobs.run("Closing the tunnels", self.control.close_all_api)
        for cancel in (self._cancel, self._install_cancel):
            if cancel is not None:
                cancel.set()
        return self.jobs.wait(timeout)

    # --- the memory check and starting ------------------------------------------------------------

    def _choice(self) -> LaunchChoice | None:
        try:
            return self.form.choice()
        except SparkSyncError as exc:
            self.form.show_fit([str(exc)], ok=False)
            self.error_raised.emit(str(exc))
            return None

    def check_fit(self) -> None:
        choice = self._choice()
        if choice is None:
            return
        self.form.show_fit(["Reading the nodes' free memory…"], ok=True)
        self.jobs.run("Checking memory", lambda: self.control.check(choice), self._on_checked,
                      self._on_check_failed)  # fmt: skip

    def _on_checked(self, prepared: Prepared) -> None:
        lines = fit_lines(prepared.fits) + [f"warning: {w}" for w in prepared.warnings]
        self.form.show_fit(lines or ["Nothing to check."], ok=True)
        self.fit_shown.emit(True)

    def _on_check_failed(self, message: str) -> None:
        self.form.show_fit([message], ok=False)
        self.fit_shown.emit(False)

    def start(self, choice: LaunchChoice | None = None, copy_model: bool = False) -> bool:
        """Start the form's choice (or ``choice``) in a worker; False when one is already starting.

        ``copy_model``: a node of the placement that lacks the (store-named) model gets a
        verified copy first; without it such a start is refused and the copy offered.
        """
        if self._shut:
            return False
        if self._cancel is not None:
            self.error_raised.emit("a workload is already starting; wait for it or cancel it.")
            return False
        choice = choice or self._choice()
        if choice is None:
            return False
        self._missing_choice = None
        self.copy_model_button.setVisible(False)
        self._launching_choice = choice
        self._launch(f"Starting {choice.describe()}",
                     lambda cancel: self.control.start(choice, self._bridge.progressed.emit, cancel,
                                                       copy_model=copy_model,
                                                       on_copy=self._bridge.copying.emit))  # fmt: skip
        return True

    def _on_copy_model_button_clicked(self) -> None:
        if self._missing_choice is not None:
            self.start(self._missing_choice, copy_model=True)

    def _on_bridge_copying(self, event) -> None:
        total = f" {event.bytes_done / 1e6:.1f} / {event.bytes_total / 1e6:.1f} MB" if event.bytes_total else ""
        rate = f", {event.rate_bps / 1e9:.3f} GB/s" if event.rate_bps else ""
        self.form.show_fit([f"Copying the model to {event.node}: {event.phase}{total}{rate}"], ok=True)

    def restart(self, workload_id: str | None) -> None:
        if workload_id is None or self._cancel is not None or self._shut:
            return
        self._launch(f"Restarting {workload_id}",
                     lambda cancel: self.control.restart(workload_id, self._bridge.progressed.emit, cancel))  # fmt: skip

    def _launch(self, what: str, call: Callable[[threading.Event], WorkloadView]) -> None:
        cancel = self._cancel = threading.Event()
        self.form.set_busy(True)
        self.form.clear_progress()
        self.form.show_fit([f"{what}…"], ok=True)
        self.status_message.emit(f"{what}…")

        def work():
            try:
                return call(cancel)
            except (MemoryFitError, WorkloadStartError, ModelMissingError) as exc:
                return exc  # shown with its numbers, its rank or the nodes without the model

        self.jobs.run(what, work, self._on_launched, self._on_launch_failed)
        self.watch()

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            self.status_message.emit("Cancelling: what was started is being stopped…")

    def _on_launched(self, outcome) -> None:
        self._launch_done()
        if isinstance(outcome, MemoryFitError):
            self._on_launch_failed(str(outcome))
            return
        if isinstance(outcome, ModelMissingError):
            # One button copies it there (verified), then starts the same choice.
            self._missing_choice = self._launching_choice
            self.copy_model_button.setVisible(self._missing_choice is not None)
            self._on_launch_failed(str(outcome))
            return
        if isinstance(outcome, WorkloadStartError):
            # A reading during the launch may have told it already; tell it once.
            if self._states.get(outcome.workload_id) != "failed":
                self._states[outcome.workload_id] = "failed"
                self.workload_failed.emit(outcome.workload_id, _first_line(str(outcome)))
            self._on_launch_failed(str(outcome))
            return
        where = ", ".join(outcome.record.nodes())
        self.form.show_fit([f"workload {outcome.workload_id} is {outcome.state} on {where}."], ok=True)
        self.status_message.emit(f"Workload {outcome.workload_id} is {outcome.state}.")
        self.launch_finished.emit(outcome)

    def _on_launch_failed(self, message: str) -> None:
        self._launch_done()
        self.form.show_fit([message], ok=False)
        self.error_raised.emit(_first_line(message))
        self.launch_finished.emit(message)

    def _launch_done(self) -> None:
        self._cancel = None
        self.form.set_busy(False)
        self.read_last()
        self.refresh()

    # --- stopping --------------------------------------------------------------------------------

    def stop(self, workload_id: str | None) -> None:
        if workload_id is None:
            return
        self.status_message.emit(f"Stopping {workload_id}…")
        self._stopped_here.add(workload_id)  # its end is the user's doing: no notification
        self.jobs.run(f"Stopping {workload_id}", lambda: self.control.stop(workload_id),
                      lambda _r: self._on_stopped(workload_id, "stopped"))  # fmt: skip

    def remove(self, workload_id: str | None) -> None:
        if workload_id is None:
            return
        self.jobs.run(f"Removing {workload_id}", lambda: self.control.remove(workload_id),
                      lambda _r: self._on_stopped(workload_id, "removed"))  # fmt: skip

    def prune(self) -> None:
        self.jobs.run("Pruning failed and gone workloads", self.control.prune, self._on_pruned)

    def _on_pruned(self, dropped: list[str]) -> None:
        self.status_message.emit(f"Dropped {', '.join(dropped)}." if dropped else "No failed or gone workloads.")
        self.refresh()

    # --- reaching an engine ------------------------------------------------------------------------

    def toggle_api(self, workload_id: str | None) -> None:
        """Open a tunnel to the workload's HTTP API (its local URL shows below), or close it."""
        if workload_id is None:
            return
        if workload_id in self._api_open:
            self.jobs.run(f"Closing the tunnel to {workload_id}", lambda: self.control.close_api(workload_id),
                          lambda _r: self._on_api_closed(workload_id))  # fmt: skip
            return
        self.jobs.run(f"Opening a tunnel to {workload_id}", lambda: self.control.open_api(workload_id),
                      lambda opened: self._on_api_opened(workload_id, opened))  # fmt: skip

    def _on_api_opened(self, workload_id: str, opened) -> None:
        self._api_open[workload_id] = [f"{url}/v1" for _endpoint, url in opened]
        self._show_api()
        self.status_message.emit(f"{workload_id}: {', '.join(self._api_open[workload_id])}")

    def _on_api_closed(self, workload_id: str) -> None:
        self._api_open.pop(workload_id, None)
        self._show_api()

    def _show_api(self) -> None:
        lines = [f"{wid}: " + ", ".join(f'<a href="{u}/models">{u}</a>' for u in urls)
                 for wid, urls in self._api_open.items()]  # fmt: skip
        self.api_label.setText("<br>".join(lines))
        self._update_buttons()

    def _on_stopped(self, workload_id: str, what: str) -> None:
        self.status_message.emit(f"Workload {workload_id} {what}.")
        self.refresh()

    # --- the tray's last workload ----------------------------------------------------------------

    def read_last(self) -> None:
        """Read which workload was launched last (a file), for the tray."""
        if self._shut:
            return
        self.jobs.run("Reading the last workload", self.control.last, self._on_last_read)

    def _on_last_read(self, last: Launched | None) -> None:
        self.last = last
        self._tell_last()

    def _tell_last(self) -> None:
        label = self.last_label()
        if label != self._last_label:
            self._last_label = label
            self.last_changed.emit()

    def last_running(self) -> bool:
        if self.last is None:
            return False
        if self._cancel is not None:
            return True  # starting: stopping it is what the user can ask
        row = next((r for r in self.rows if r.view.workload_id == self.last.workload_id), None)
        return row is not None and bool(row.view.live())

    def last_label(self) -> str | None:
        """The tray entry's text, or None while nothing was launched from the app."""
        if self.last is None:
            return None
        if self.last_running():
            return f"Stop last workload ({self.last.workload_id})"
        return f"Start last workload ({self.last.choice.describe()})"

    def toggle_last(self) -> None:
        if self.last is None:
            return
        if self._cancel is not None:
            self.cancel()
        elif self.last_running():
            self.stop(self.last.workload_id)
        else:
            self.start(self.last.choice)

    # --- watching --------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read every workload (and the followed log) in a worker; skipped while a reading runs."""
        if self._reading or self._shut:
            return
        self._reading = True
        key, since = self._log_key, self._log_seq

        def work():
            try:
                rows = self.control.watch_once()
            except SparkSyncError as exc:
                return exc  # told once below, not every second
            page = None
            if key is not None and _known(rows, key):
                try:
                    page = self.control.logs(key[0], key[1], since)
                except SparkSyncError as exc:  # the states still show; the log says why it stalls
                    log.info("log of %s: %s", key[1], exc)
            return rows, key, page

        self.jobs.run("Reading the workloads", work, self._on_read, self._on_read_failed)

    def _on_read(self, outcome) -> None:
        self._reading = False
        if isinstance(outcome, SparkSyncError):
            if str(outcome) != self._read_problem:
                self._read_problem = str(outcome)
                self.error_raised.emit(f"cannot read the workloads: {_first_line(str(outcome))}")
            return
        self._read_problem = None
        rows, key, page = outcome
        self.rows = rows
        self.table.show_rows(rows)
        if self.table.currentItem() is not None:  # the pane follows the new reading of the selected row
            self.detail.setText(self.table.detail_of(self.table.currentItem()))
        self._tell_failures(rows)
        self._update_buttons()
        if page is not None and key == self._log_key:
            self._append_log(page)
        self.rows_shown.emit(rows)
        self._tell_last()  # its running state may have changed

    def _on_read_failed(self, _message: str) -> None:
        self._reading = False  # the message reached the status bar through Jobs.error_raised

    def _tell_failures(self, rows: list[WorkloadRow]) -> None:
        """A workload seen not failed that is failed now: tell which rank, where, and why."""
        for row in rows:
            view = row.view
            before = self._states.get(view.workload_id)
            self._states[view.workload_id] = view.state
            if view.state == "failed" and before not in (None, "failed"):
                self.workload_failed.emit(view.workload_id, failure_reason(view))
            elif view.state in ENDED and before in LIVE and view.workload_id not in self._stopped_here:
                self.workload_ended.emit(view.workload_id, view.state)

    def _selected_id(self) -> str | None:
        key = self.table.key(self.table.currentItem())
        return key[0] if key else None

    def _update_buttons(self) -> None:
        chosen = self._selected_id()
        for button in (self.stop_button, self.restart_button, self.remove_button):
            button.setEnabled(chosen is not None)
        row = next((r for r in self.rows if r.view.workload_id == chosen), None)
        self.open_button.setEnabled(row is not None and bool(row.view.record.endpoints))
        self.open_button.setText("Close API" if chosen in self._api_open else "Open API")

    # --- logs ------------------------------------------------------------------------------------

    def _on_table_selection_moved(self, key) -> None:
        self._update_buttons()
        self.detail.setText(self.table.detail_of(self.table.currentItem()))
        if key is None or key[1] is None or tuple(key) == self._log_key:
            return
        self.follow_log(key[0], key[1])

    def follow_log(self, workload_id: str, name: str) -> None:
        """Show this process's log from its first held line; new lines follow at each reading."""
        self._log_key, self._log_seq = (workload_id, name), 0
        self.log_view.clear()
        self.log_title.setText(f"Log of {name} ({workload_id})")
        self.refresh()

    def _append_log(self, page: LogPage) -> None:
        if page.lost:
            self.log_view.appendPlainText(f"… {page.lost} line(s) no longer held by the agent")
        for line in page.lines:
            if line.seq > self._log_seq:
                self.log_view.appendPlainText(f"{line.seq:>6}  {line.text}")
                self._log_seq = line.seq
        if self.follow.isChecked():
            self.log_view.verticalScrollBar().setValue(self.log_view.verticalScrollBar().maximum())
        self.log_shown.emit(self._log_seq)

    def _on_jobs_error_raised(self, message: str) -> None:
        self.error_raised.emit(_first_line(message))


def failure_reason(view: WorkloadView) -> str:
    failed = view.failed()
    if not failed:
        return view.state
    rank = failed[0]
    return f"rank {rank.ref.rank} ({rank.ref.role}) on {rank.ref.node}: {rank.why()}"


def _known(rows: list[WorkloadRow], key: tuple[str, str]) -> bool:
    return any(r.view.workload_id == key[0] for r in rows)


def _first_line(message: str) -> str:
    return message.splitlines()[0] if message else message


def _fleet_control(actions, fleet: Callable[[], object] | None = None) -> WorkloadControl:
    """The app's control: every node's agent (this computer's too) through the app's one fleet.

    ``fleet`` makes (or returns) that fleet; without it, the actions' fleet. Made on first need.
    """
    source = fleet if fleet is not None else getattr(actions, "fleet", None)

    def agents():
        if not callable(source):
            raise SparkSyncError("this panel has no fleet to reach the nodes through.")
        return source()

    return WorkloadControl(agents)
