"""The Models tab: where each model is, fetch one on a node, copy one to nodes, delete one.

A view over ``sparksync.core.models``: the matrix is ``build_matrix`` of every
node's listing, the copy is ``ModelCopy`` (free space first, pipelined fan-out,
sha256 checks), the fetch is ``fetch_model`` (the node's own huggingface_hub, the
token from the keyring). Every call runs in a worker (``Jobs``); a copy's and
a fetch's progress come back as queued signals and move one bar per node.
Errors show in red under the buttons and go to the window's status bar.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from sparksync_agent.protocol import ModelJob

from sparksync.core.models import (
    CopyEvent,
    CopyReport,
    ModelCopy,
    ModelMatrix,
    ModelNodes,
    build_matrix,
    fetch_model,
    stored_token,
)
from sparksync.gui.models.copy_bars import CopyBars
from sparksync.gui.models.model_matrix import ModelMatrixTable
from sparksync.gui.workers import Jobs

log = logging.getLogger(__name__)
AUTO_SOURCE = "any node that has it"


class _Bridge(QObject):
    """Copy and fetch callbacks run in the worker; queued signals bring them to the GUI thread."""

    copied = Signal(object)  # CopyEvent
    fetched = Signal(str, object)  # node, ModelJob


class ModelsPanel(QWidget):
    error_raised = Signal(str)
    status_message = Signal(str)
    matrix_shown = Signal(object)  # ModelMatrix
    copy_finished = Signal(object)  # CopyReport, or the error's message
    fetch_finished = Signal(object)  # ModelJob, or the error's message
    deleted = Signal(object)  # (model, node), or the error's message

    def __init__(self, fleet: Callable[[], object] | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("modelsPanel")
        self._fleet = fleet
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self._on_jobs_error_raised)
        self._bridge = _Bridge(self)
        self._bridge.copied.connect(self._on_bridge_copied)
        self._bridge.fetched.connect(self._on_bridge_fetched)
        self._cancel: threading.Event | None = None
        self._loaded = False
        self.matrix: ModelMatrix | None = None

        self.table = ModelMatrixTable(self)
        self.table.selection_moved.connect(self._on_table_selection_moved)
        self.refresh_button = QPushButton("Refresh", self, objectName="refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.delete_button = QPushButton("Delete on node", self, objectName="delete", enabled=False)
        self.delete_button.clicked.connect(self.delete_selected)
        self.selection = QLabel("Select a model (and a node's cell to delete it there).", self)

        self.repo = QLineEdit(self, objectName="repo", placeholderText="org/model (Hugging Face repo id)")
        self.fetch_node = QComboBox(self, objectName="fetchNode")
        self.endpoint = QLineEdit(self, objectName="endpoint", placeholderText="hub URL (default: huggingface.co)")
        self.fetch_button = QPushButton("Fetch on node", self, objectName="fetch")
        self.fetch_button.clicked.connect(self.fetch)

        self.source = QComboBox(self, objectName="source")
        self.targets = QListWidget(self, objectName="targets")
        self.targets.setMaximumHeight(120)
        self.copy_button = QPushButton("Copy to checked nodes", self, objectName="copy", enabled=False)
        self.copy_button.clicked.connect(self.copy)
        self.stop_button = QPushButton("Stop", self, objectName="stopCopy", enabled=False)
        self.stop_button.clicked.connect(self.stop)

        self.error = QLabel("", self, objectName="error")
        self.error.setStyleSheet("color: #c0392b;")
        self.error.setWordWrap(True)
        self.bars = CopyBars(self)
        self._layout()

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.refresh_button)
        top.addWidget(self.selection, 1)
        top.addWidget(self.delete_button)
        fetch_box = QGroupBox("Fetch from a hub (the node downloads it itself)", self)
        fetch_row = QHBoxLayout(fetch_box)
        fetch_row.addWidget(self.repo, 2)
        fetch_row.addWidget(QLabel("on", self))
        fetch_row.addWidget(self.fetch_node, 1)
        fetch_row.addWidget(self.endpoint, 2)
        fetch_row.addWidget(self.fetch_button)
        copy_box = QGroupBox("Copy the selected model (rsync over SSH, verified by sha256)", self)
        copy_row = QHBoxLayout(copy_box)
        copy_row.addWidget(QLabel("from", self))
        copy_row.addWidget(self.source, 1)
        copy_row.addWidget(QLabel("to", self))
        copy_row.addWidget(self.targets, 2)
        buttons = QVBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        copy_row.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table, 3)
        layout.addWidget(fetch_box)
        layout.addWidget(copy_box)
        layout.addWidget(self.error)
        layout.addWidget(self.bars, 1)

    # --- reading -------------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if not self._loaded:
            self._loaded = True
            self.refresh()

    def nodes(self) -> ModelNodes:
        if self._fleet is None:
            raise RuntimeError("the Models panel has no fleet")
        return ModelNodes(self._fleet())  # type: ignore[arg-type]

    def refresh(self) -> None:
        self.refresh_button.setEnabled(False)

        def read() -> ModelMatrix:
            nodes = self.nodes()
            return build_matrix(nodes.listings(nodes.names()))

        self.jobs.run("Listing models", read, self._on_matrix_read, self._on_matrix_failed)

    def _on_matrix_read(self, matrix: ModelMatrix) -> None:
        self.refresh_button.setEnabled(True)
        self.matrix = matrix
        self.table.show_matrix(matrix)
        names = [c.name for c in matrix.nodes]
        _refill(self.fetch_node, names)
        _refill(self.source, [AUTO_SOURCE, *names])
        checked = {self.targets.item(i).text() for i in range(self.targets.count())
                   if self.targets.item(i).checkState() == Qt.CheckState.Checked}  # fmt: skip
        self.targets.clear()
        for name in names:
            item = QListWidgetItem(name, self.targets)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in checked else Qt.CheckState.Unchecked)
        problems = [f"{c.name}: {c.error}" for c in matrix.nodes if c.error]
        self._show_error("; ".join(problems))
        self.matrix_shown.emit(matrix)

    def _on_matrix_failed(self, message: str) -> None:
        self.refresh_button.setEnabled(True)
        self._show_error(message)

    def _on_table_selection_moved(self, at) -> None:
        model, node = at if at else (None, None)
        self.copy_button.setEnabled(model is not None and self._cancel is None)
        present = bool(model and node and self.matrix and self.matrix.cell(model, node).state in ("present", "partial"))
        self.delete_button.setEnabled(present)
        self.selection.setText(f"{model}" + (f" on {node}" if node else "") if model else "Select a model.")

    def selected(self) -> tuple[str | None, str | None]:
        at = self.table.at(self.table.currentRow(), self.table.currentColumn())
        return at if at else (None, None)

    # --- copying -------------------------------------------------------------------------------

    def check_targets(self, names: list[str]) -> None:
        for i in range(self.targets.count()):
            item = self.targets.item(i)
            item.setCheckState(Qt.CheckState.Checked if item.text() in names else Qt.CheckState.Unchecked)

    def copy(self) -> None:
        model, _node = self.selected()
        targets = [self.targets.item(i).text() for i in range(self.targets.count())
                   if self.targets.item(i).checkState() == Qt.CheckState.Checked]  # fmt: skip
        if model is None or not targets:
            self._show_error("Select a model and check the nodes to copy it to.")
            return
        source = None if self.source.currentText() in ("", AUTO_SOURCE) else self.source.currentText()
        self._show_error("")
        self.bars.clear()
        cancel = self._cancel = threading.Event()
        self._busy(True)

        def run() -> CopyReport:
            return ModelCopy(self.nodes(), self._bridge.copied.emit, cancel=cancel).run(model, targets, source)

        self.jobs.run(f"Copying {model}", run, self._on_copy_done, self._on_copy_failed)

    def stop(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def shutdown(self) -> None:
        """The window closes: a copy or fetch in progress stops (its files stay, partial)."""
        self.stop()

    def _on_bridge_copied(self, event: CopyEvent) -> None:
        self.bars.show_event(event)

    def _on_copy_done(self, report: CopyReport) -> None:
        self._busy(False)
        bad = [f"{r.node}: {r.message or r.state}" for r in report.results if not r.ok]
        if bad:
            self._show_error(f"The copy of {report.name} did not reach every node: " + "; ".join(bad))
        # Why a copy did not go over the fabric (a relay, or the management network): the route says.
        why = next((r.message for r in report.results if r.ok and r.message and r.route in ("relay", "ssh")), None)
        note = f" ({why})" if why else ""
        self.status_message.emit(f"{report.name}: copied in {report.seconds:.1f} s{note}")
        self.copy_finished.emit(report)
        self.refresh()

    def _on_copy_failed(self, message: str) -> None:
        self._busy(False)
        self._show_error(message)
        self.copy_finished.emit(message)
        self.refresh()

    # --- fetching -------------------------------------------------------------------------------

    def fetch(self) -> None:
        repo, node = self.repo.text().strip(), self.fetch_node.currentText()
        if not repo or not node:
            self._show_error("Type a repo id (org/name) and pick the node that downloads it.")
            return
        endpoint = self.endpoint.text().strip() or None
        self._show_error("")
        self.bars.clear()
        cancel = self._cancel = threading.Event()
        self._busy(True)

        def run() -> ModelJob:
            try:
                token = stored_token()
            except Exception:  # noqa: BLE001 - no keyring: a public repo still downloads
                token = None
            return fetch_model(self.nodes(), node, repo, endpoint=endpoint, token=token, cancel=cancel,
                         on_progress=lambda job: self._bridge.fetched.emit(node, job))  # fmt: skip

        self.jobs.run(f"Fetching {repo}", run, self._on_fetch_done, self._on_fetch_failed)

    def _on_bridge_fetched(self, node: str, job: ModelJob) -> None:
        elapsed = max((job.finished_at or _now()) - job.started_at, 1e-6)
        rate = job.bytes_done / elapsed if job.bytes_done else None
        eta = (job.bytes_total - job.bytes_done) / rate if rate and job.bytes_total else None
        phase = "fetching" if not job.state.finished else ("done" if job.state.value == "done" else job.state.value)
        self.bars.show_event(CopyEvent(node, phase, None, "hub", job.bytes_done, job.bytes_total, rate, eta,
                                       job.message))  # fmt: skip

    def _on_fetch_done(self, job: ModelJob) -> None:
        self._busy(False)
        self.status_message.emit(f"{job.name}: fetched")
        self.fetch_finished.emit(job)
        self.refresh()

    def _on_fetch_failed(self, message: str) -> None:
        self._busy(False)
        self._show_error(message)
        self.fetch_finished.emit(message)
        self.refresh()

    # --- deleting -------------------------------------------------------------------------------

    def delete_selected(self) -> None:
        model, node = self.selected()
        if model is None or node is None:
            return
        partial = bool(self.matrix and self.matrix.cell(model, node).state == "partial")

        def run():
            self.nodes().call(node, lambda c: c.delete_model(model, partial))
            return model, node

        self.jobs.run(f"Deleting {model} on {node}", run, self._on_deleted, self._on_delete_failed)

    def _on_deleted(self, what) -> None:
        self.status_message.emit(f"{what[0]}: deleted on {what[1]}")
        self.deleted.emit(what)
        self.refresh()

    def _on_delete_failed(self, message: str) -> None:
        self._show_error(message)
        self.deleted.emit(message)

    # --- helpers ---------------------------------------------------------------------------------

    def _busy(self, busy: bool) -> None:
        if not busy:
            self._cancel = None
        self.stop_button.setEnabled(busy)
        self.fetch_button.setEnabled(not busy)
        model, _ = self.selected()
        self.copy_button.setEnabled(not busy and model is not None)

    def _show_error(self, message: str) -> None:
        self.error.setText(message)
        if message:
            self.error_raised.emit(message)

    def _on_jobs_error_raised(self, message: str) -> None:
        log.debug("models job failed: %s", message)


def _refill(combo: QComboBox, names: list[str]) -> None:
    current = combo.currentText()
    combo.blockSignals(True)
    combo.clear()
    combo.addItems(names)
    if current in names:
        combo.setCurrentText(current)
    combo.blockSignals(False)


def _now() -> float:
    import time

    return time.time()
