"""The published layout from the app: two recipes, 2, 4 or 8 nodes, the memory check, then one start.

The dialog shows the form the ticked nodes give (8: 3 x large on 2 nodes +
2 x small on 1 node; 4 and 2: its scaled-down forms) and the plan's groups.
"Check memory" reads the nodes and runs the memory check; "Start" checks
again, starts every replica as one workload, writes the gateway's config
and starts the gateway on the chosen node as a workload (it then appears in
the dashboard's Switchyard section). Everything that talks to a node or a
file runs in workers (``Jobs``); the orchestrator's progress comes back as a
queued signal. The Qt-free part is ``sparksync.switchyard.layout``.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.base import SparkSyncError, config_dir
from sparksync.core.agents import NodeAgents
from sparksync.core.workloads import INFERENCE_ENGINES, Prepared, Recipe, all_recipes, fit_lines
from sparksync.gui.workers import Jobs
from sparksync.switchyard.layout import FORMS, Layout, LayoutRequest, LayoutStarted, start_layout

CONFIG_NAME = "switchyard-layout.toml"
Nodes = Callable[[], Sequence[tuple[str, str]]]  # (name, address) of each paired node


def _inference_recipes() -> dict[str, Recipe]:
    recipes, _problems = all_recipes()
    return {name: r for name, r in sorted(recipes.items()) if r.engine in INFERENCE_ENGINES}


class _ProgressBridge(QObject):
    progressed = Signal(object)


class LayoutDialog(QDialog):
    loaded = Signal()  # recipes and nodes are in the lists
    checked = Signal(bool)  # the memory check passed (or could not be made: False with why)
    finished_start = Signal(object)  # LayoutStarted, or the error's message
    error_raised = Signal(str)

    def __init__(self, agents: Callable[[], NodeAgents], nodes: Nodes, parent: QWidget | None = None,
                 config_path: Path | None = None):  # fmt: skip
        super().__init__(parent)
        self.setObjectName("layoutDialog")
        self.setWindowTitle("Switchyard: the published layout")
        self._make_agents, self._read_nodes = agents, nodes
        self._agents: NodeAgents | None = None
        self.config_path = config_path or config_dir() / CONFIG_NAME
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self.error_raised)
        self.addresses: dict[str, str] = {}
        self.recipes: dict[str, Recipe] = {}
        self._cancel: threading.Event | None = None
        self._bridge = _ProgressBridge(self)
        self._bridge.progressed.connect(lambda p: self.log.appendPlainText(f"{p.event:>8}  {p.message}"))
        self._build()

    # --- the form ----------------------------------------------------------------------------

    def _build(self) -> None:
        self.large = QComboBox(self)
        self.small = QComboBox(self)
        self.large_model = QLineEdit(self, placeholderText="the recipe's model")
        self.small_model = QLineEdit(self, placeholderText="the recipe's model")
        self.nodes = QListWidget(self)
        self.nodes.itemChanged.connect(lambda _item: self._show_form())
        self.shape = QLabel(self, wordWrap=True)
        self.share = QLineEdit("1/4", self)
        self.share.setToolTip("The share of requests sent to the large pool (fixed_share); the published "
                              "prototype: about 3.0x throughput with 1/4, 1.5x with 1/2")  # fmt: skip
        self.gateway_node = QComboBox(self)
        self._gateway_chosen = False  # the user picked the gateway's node: keep it while it stays ticked
        self.gateway_node.activated.connect(lambda _i: setattr(self, "_gateway_chosen", True))
        self.program = QLineEdit("sparksync", self)
        self.program.setToolTip("The command that runs SparkSync on the gateway's node")
        form = QFormLayout()
        form.addRow("Large model's recipe", self.large)
        form.addRow("  its model", self.large_model)
        form.addRow("Small model's recipe", self.small)
        form.addRow("  its model", self.small_model)
        form.addRow("Nodes (2, 4 or 8)", self.nodes)
        form.addRow("", self.shape)
        form.addRow("Large share", self.share)
        form.addRow("Gateway on", self.gateway_node)
        form.addRow("  SparkSync there", self.program)
        self.check_button = QPushButton("Check memory", self)
        self.start_button = QPushButton("Start", self)
        self.close_button = QPushButton("Close", self)
        self.check_button.clicked.connect(self.check)
        self.start_button.clicked.connect(self.start)
        self.close_button.clicked.connect(self.reject)
        self.log = QPlainTextEdit(self, readOnly=True)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.check_button, self.start_button, self.close_button):
            buttons.addWidget(button)
        column = QVBoxLayout(self)
        column.addLayout(form)
        column.addWidget(self.log, 1)
        column.addLayout(buttons)
        self.resize(720, 640)

    def load(self) -> None:
        """Read the recipes and the paired nodes (workers)."""
        self.jobs.run("Reading the recipes and nodes", lambda: (_inference_recipes(), list(self._read_nodes())),
                      self._on_loaded)  # fmt: skip

    def _on_loaded(self, outcome) -> None:
        self.recipes, nodes = outcome
        for combo in (self.large, self.small):
            combo.clear()
            combo.addItems(list(self.recipes))
        self.addresses = dict(nodes)
        self.nodes.clear()
        for name, _address in nodes:
            item = QListWidgetItem(name, self.nodes)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
        self._show_form()
        self.loaded.emit()

    def tick(self, names: Sequence[str]) -> None:
        for i in range(self.nodes.count()):
            item = self.nodes.item(i)
            item.setCheckState(Qt.CheckState.Checked if item.text() in names else Qt.CheckState.Unchecked)

    def ticked(self) -> list[str]:
        items = (self.nodes.item(i) for i in range(self.nodes.count()))
        return [i.text() for i in items if i.checkState() == Qt.CheckState.Checked]

    def _show_form(self) -> None:
        ticked = self.ticked()
        form = FORMS.get(len(ticked))
        self.shape.setText(f"{form.describe()}: the large replicas on the first ticked nodes" if form else
                           f"{len(ticked)} node(s) ticked: tick 2, 4 or 8")  # fmt: skip
        current = self.gateway_node.currentText()
        self.gateway_node.clear()
        self.gateway_node.addItems(ticked)
        if self._gateway_chosen and current in ticked:
            self.gateway_node.setCurrentText(current)
        elif form is not None:  # by default beside the first small replica
            self.gateway_node.setCurrentText(ticked[form.large_replicas * form.large_nodes])

    def request(self) -> LayoutRequest:
        """The form as a request; SparkSyncError says what to fix."""
        if not self.recipes:
            raise SparkSyncError("no inference recipe is known yet")
        large, small = self.recipes[self.large.currentText()], self.recipes[self.small.currentText()]
        if self.large_model.text().strip():
            large = large.updated(model=self.large_model.text().strip())
        if self.small_model.text().strip():
            small = small.updated(model=self.small_model.text().strip())
        return LayoutRequest(large=large, small=small, nodes=tuple(self.ticked()),
                             policy={"kind": "fixed_share", "large_share": self.share.text().strip() or "1/4"},
                             gateway_node=self.gateway_node.currentText() or None)  # fmt: skip

    # --- check and start ---------------------------------------------------------------------

    def _layout(self) -> Layout:
        if self._agents is None:
            self._agents = self._make_agents()
        return Layout(self._agents, on_progress=self._bridge.progressed.emit)

    def _check(self, request: LayoutRequest) -> Prepared:
        """In a worker: read the nodes and check the memory (the request was read from the form before)."""
        plan, recipes, _form, _config = request.resolve()
        return self._layout().check(plan, recipes)

    def check(self) -> None:
        try:
            request = self.request()
            plan, _recipes, form, _ = request.resolve()
        except SparkSyncError as exc:
            self._say([str(exc)])
            self.checked.emit(False)
            return
        groups = [f"{gid}: {', '.join(g.nodes)}" for gid, g in zip(plan.group_ids(), plan.groups)]
        self._say([form.describe(), *groups, "Reading the nodes' free memory…"])
        self.jobs.run("Checking the layout's memory", lambda: self._check(request), self._on_checked,
                      self._on_check_failed)  # fmt: skip

    def _on_checked(self, prepared: Prepared) -> None:
        self.log.appendPlainText("\n".join(fit_lines(prepared.fits) + [f"warning: {w}" for w in prepared.warnings]))
        self.checked.emit(True)

    def _on_check_failed(self, message: str) -> None:
        self.log.appendPlainText(message)
        self.checked.emit(False)

    def start(self) -> None:
        if self._cancel is not None:
            return
        try:
            request = self.request()
            request.resolve()
        except SparkSyncError as exc:
            self._say([str(exc)])
            self.finished_start.emit(str(exc))
            return
        cancel = self._cancel = threading.Event()
        self._busy(True)
        self._say(["Checking memory, then starting the replicas and the gateway…"])
        path, addresses, program = self.config_path, dict(self.addresses), shlex.split(self.program.text())

        def work() -> LayoutStarted:
            prepared = self._check(request)  # checked again: the nodes' memory may have changed
            return start_layout(self._layout(), request, prepared, path, addresses, program or ["sparksync"], cancel)

        self.jobs.run("Starting the published layout", work, self._on_started, self._on_start_failed)

    def _on_started(self, started: LayoutStarted) -> None:
        self._done()
        lines = [f"workload {started.replicas.workload_id}: the replicas are {started.replicas.state}",
                 f"gateway config written to {self.config_path}"]  # fmt: skip
        if started.gateway is not None:
            lines.append(f"workload {started.gateway.workload_id}: the gateway on {self.gateway_node.currentText()}, "
                         f"port {started.config.listen.port}")  # fmt: skip
        self.log.appendPlainText("\n".join(lines))
        self.finished_start.emit(started)

    def _on_start_failed(self, message: str) -> None:
        self._done()
        self.log.appendPlainText(message)
        self.finished_start.emit(message)

    def _done(self) -> None:
        self._cancel = None
        self._busy(False)

    def _busy(self, busy: bool) -> None:
        for button in (self.check_button, self.start_button):
            button.setEnabled(not busy)

    def _say(self, lines: list[str]) -> None:
        self.log.setPlainText("\n".join(lines))

    def reject(self) -> None:
        if self._cancel is not None:
            self._cancel.set()  # what the start had begun is stopped
        super().reject()

    def wait(self, timeout: float = 60.0) -> bool:
        return self.jobs.wait(timeout)
