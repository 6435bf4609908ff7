"""The Topology tab as the cluster assistant: detect, plan, apply, mesh and check the fabric.

Each button runs one ``core.fabric.assistant.ClusterAssistant`` call in a
worker (``Jobs``); per-node progress comes back as a signal and is listed
per node. The "Cabling" page draws the detected cabling (or the applied
plan's) with the problems detection named marked on their edges and each
link's acceptance figures on it; "Live traffic" is the telemetry topology.
The side shows the plan (Apply button under it), the progress per node and
the acceptance figures per link. ``fabric_health_changed`` says when the
newest check found the fabric degraded (the tray shows it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QBrush, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.fabric import (
    ClusterAssistant,
    StepEvent,
    drawing_from_detection,
    drawing_from_plan,
    fabric_health,
)
from sparksync.core.fabric import FabricCheckReport, Verdict
from sparksync.gui.topology.cabling_canvas import GOOD_COLOR, CablingCanvas
from sparksync.gui.topology.edge_item import WARNING_COLOR
from sparksync.gui.topology.topology_view import TopologyView
from sparksync.gui.workers import Jobs

SIDE_WIDTH = 430
FIGURE_COLUMNS = ("Link", "Test", "Where", "Figure", "% of line", "Verdict")


class ClusterAssistantView(QWidget):
    status_message = Signal(str)
    error_raised = Signal(str)
    fabric_health_changed = Signal(object)  # str (degraded: why) or None (healthy / not checked)
    _progress = Signal(object)  # a StepEvent, from a worker

    def __init__(self, fleet: Callable[[], object], live: TopologyView | None = None,
                 parent: QWidget | None = None, *, core: ClusterAssistant | None = None):
        super().__init__(parent)
        self.setObjectName("clusterAssistant")
        self.jobs = Jobs(self)
        self.core = core or ClusterAssistant(fleet)  # type: ignore[arg-type]
        self.core.on_progress = self._progress.emit
        self.live = live or TopologyView(self)
        self.detection = None
        self.plan = None
        self.applied = False  # some plan is applied on the nodes (mesh and check can run)
        self.pending = False  # the shown plan is not applied yet (Apply can run)
        self.report: FabricCheckReport | None = None
        self.health: str | None = None
        self._loaded = False
        self.ask_password: Callable[[], str | None] = self._ask_password
        self._build()
        self._progress.connect(self._on_progress)
        self._enable()

    # --- layout -----------------------------------------------------------------------------

    def _build(self) -> None:
        buttons = QHBoxLayout()
        self.buttons: dict[str, QPushButton] = {}
        for key, text, slot in (
            ("detect", "Detect cabling", self.detect),
            ("plan", "Plan addresses", self.make_plan),
            ("mesh", "Set up SSH mesh", self.mesh),
            ("mesh_check", "Check SSH mesh", self.mesh_check),
            ("check", "Run acceptance check", self.check),
        ):
            button = QPushButton(text, self)
            button.setObjectName(f"{key}Button")
            button.clicked.connect(lambda _checked=False, slot=slot: slot())
            buttons.addWidget(button)
            self.buttons[key] = button
        buttons.addStretch(1)
        self.state = QLabel("", self)
        self.state.setObjectName("assistantState")
        buttons.addWidget(self.state)

        self.canvas = CablingCanvas(self)
        self.pages = QTabWidget(self)
        self.pages.addTab(self.canvas, "Cabling and checks")
        self.pages.addTab(self.live, "Live traffic")

        self.summary = QLabel("<b>Cluster fabric</b><br>Not detected yet.", self)
        self.summary.setObjectName("assistantSummary")
        self.summary.setWordWrap(True)
        self.problems = QListWidget(self)
        self.problems.setObjectName("assistantProblems")
        self.problems.setWordWrap(True)
        self.plan_text = QPlainTextEdit(self)
        self.plan_text.setObjectName("planText")
        self.plan_text.setReadOnly(True)
        self.plan_text.setPlaceholderText("Detect the cabling, then plan the addresses: the plan shows here "
                                          "before anything changes on the nodes.")
        self.apply_button = QPushButton("Apply this plan…", self)
        self.apply_button.setObjectName("applyButton")
        self.apply_button.clicked.connect(lambda _checked=False: self.apply())
        self.buttons["apply"] = self.apply_button
        plan_page = QWidget(self)
        plan_column = QVBoxLayout(plan_page)
        plan_column.addWidget(self.plan_text, 1)
        plan_column.addWidget(self.apply_button)
        self.progress = QTreeWidget(self)
        self.progress.setObjectName("assistantProgress")
        self.progress.setHeaderLabels(["Node / step", "State", "Detail"])
        self.figures = QTableWidget(0, len(FIGURE_COLUMNS), self)
        self.figures.setObjectName("acceptanceFigures")
        self.figures.setHorizontalHeaderLabels(FIGURE_COLUMNS)
        self.figures.verticalHeader().setVisible(False)
        self.side_tabs = QTabWidget(self)
        self.side_tabs.addTab(self.problems, "Problems")
        self.side_tabs.addTab(plan_page, "Plan")
        self.side_tabs.addTab(self.progress, "Progress")
        self.side_tabs.addTab(self.figures, "Acceptance")
        side = QWidget(self)
        column = QVBoxLayout(side)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.summary)
        column.addWidget(self.side_tabs, 1)
        side.setMinimumWidth(SIDE_WIDTH)
        splitter = QSplitter(self)
        splitter.addWidget(self.pages)
        splitter.addWidget(side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(splitter, 1)

    def _enable(self) -> None:
        busy = self.jobs.busy()
        self.buttons["detect"].setEnabled(not busy)
        self.buttons["plan"].setEnabled(not busy and self.detection is not None)
        self.apply_button.setEnabled(not busy and self.plan is not None and self.pending)
        for key in ("mesh", "mesh_check", "check"):
            self.buttons[key].setEnabled(not busy and self.applied)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._loaded:
            self.load()

    # --- actions (each a worker) ---------------------------------------------------------------

    def load(self) -> None:
        """Read the stored plan and the newest check (worker): the drawing and the tray start from them."""
        self._loaded = True
        self._run("Reading the fabric plan", lambda: (self.core.stored(), self.core.latest_check()), self._on_loaded)

    def detect(self) -> None:
        self._start("detect", "Detecting the cabling", self.core.detect, self._on_detected)

    def make_plan(self) -> None:
        detection = self.detection
        self._start("plan", "Planning the addresses", lambda: self.core.plan(detection), self._on_planned)

    def apply(self) -> None:
        plan = self.plan
        if plan is None:
            return
        password = self.ask_password()
        if not password:
            return
        # Bound now: the worker runs the call later, and only this call holds the password.
        self._start("apply", "Applying the plan", functools.partial(self.core.apply, plan, password), self._on_applied)

    def mesh(self) -> None:
        self._start("mesh", "Setting up node-to-node SSH", self.core.mesh, self._on_meshed)

    def mesh_check(self) -> None:
        self._start("mesh check", "Checking node-to-node SSH", self.core.mesh_check, self._on_mesh_checked)

    def check(self) -> None:
        self._start("check", "Running the acceptance check", self.core.check, self._on_checked)

    def _start(self, step: str, text: str, call: Callable[[], object], done: Callable[[object], None]) -> None:
        self.progress.clear()
        self.side_tabs.setCurrentWidget(self.progress)
        self._run(text, call, done)

    def _run(self, text: str, call: Callable[[], object], done: Callable[[object], None]) -> None:
        self.state.setText(text + "…")
        self.jobs.run(text, call, lambda result: self._finish(done, result), self._on_job_error)
        self._enable()

    def _finish(self, done: Callable[[object], None], result: object) -> None:
        self.state.setText("")
        done(result)
        self._enable()

    def _ask_password(self) -> str | None:
        text, ok = QInputDialog.getText(self, "Apply the fabric plan", "sudo password on the nodes (used once, "
                                        "never stored):", QLineEdit.EchoMode.Password)
        return text if ok else None

    # --- results ----------------------------------------------------------------------------------

    def _on_loaded(self, result) -> None:
        stored, report = result
        self.plan = stored.plan
        self.applied = stored.applied is not None
        self.pending = stored.plan is not None and stored.state.value != "applied"
        if self.plan is not None:
            self._show_plan(self.plan)
            if self.detection is None:
                self.canvas.show_drawing(drawing_from_plan(self.plan, report))
        if report is not None:
            self._show_report(report)

    def _on_detected(self, detection) -> None:
        self.detection = detection
        drawing = drawing_from_detection(detection, self.report)
        self.canvas.show_drawing(drawing)
        topology = detection.topology
        self.summary.setText(f"<b>Cluster fabric: {topology.kind.value}</b><br>{len(detection.reports)} nodes, "
                             f"{len(topology.graph.segments)} cable(s) or switch segment(s), detected in "
                             f"{detection.elapsed_s:.1f} s")
        self.problems.clear()
        for problem in topology.problems:
            self._problem(f"{problem.severity.value}: {problem.message}")
        if not topology.problems:
            self.problems.addItem("No cabling problem found.")
        self.side_tabs.setCurrentWidget(self.problems)
        self.status_message.emit(f"Fabric detected: {topology.kind.value}")

    def _on_planned(self, plan) -> None:
        self.plan, self.pending = plan, True
        self._show_plan(plan)
        self.side_tabs.setCurrentIndex(1)
        self.status_message.emit("Fabric plan stored: check it, then apply it.")

    def _on_applied(self, report) -> None:
        self.applied = self.applied or report.ok
        self.pending = not report.ok
        (self.status_message if report.ok else self.error_raised).emit(f"Fabric {report.summary()}")

    def _on_meshed(self, result) -> None:
        self.status_message.emit(f"Node-to-node SSH set up on {len(result.keys)} nodes; checking it next is wise.")

    def _on_mesh_checked(self, report) -> None:
        if report.ok:
            self.status_message.emit(f"Every ordered pair reached over the fabric ({len(report.checked)} logins).")
        else:
            bad = "; ".join(f"{p.source} -> {p.target} at {p.address}: {p.detail}" for p in report.failed[:3])
            self.error_raised.emit(f"SSH mesh: {len(report.failed)} of {len(report.checked)} failed: {bad}")

    def _on_checked(self, report: FabricCheckReport) -> None:
        self._show_report(report)
        if self.detection is not None:
            self.canvas.show_drawing(drawing_from_detection(self.detection, report))
        elif self.plan is not None:
            self.canvas.show_drawing(drawing_from_plan(self.plan, report))
        self.side_tabs.setCurrentWidget(self.figures)
        self.status_message.emit(f"Fabric check: {report.summary()}")

    def _on_job_error(self, message: str) -> None:
        self.state.setText("")
        self.error_raised.emit(message)
        self._problem(message)
        self._enable()

    @Slot(object)
    def _on_progress(self, event: StepEvent) -> None:
        node = self._node_item(event.node)
        item = QTreeWidgetItem([event.step, event.state, event.detail])
        if event.state == "failed":
            for column in range(3):
                item.setForeground(column, QBrush(WARNING_COLOR))
        node.addChild(item)
        node.setText(1, event.state if event.state != "running" else f"{event.step}…")
        node.setExpanded(event.state == "failed" or node.isExpanded())

    def _node_item(self, name: str) -> QTreeWidgetItem:
        for i in range(self.progress.topLevelItemCount()):
            if self.progress.topLevelItem(i).text(0) == name:
                return self.progress.topLevelItem(i)
        item = QTreeWidgetItem([name, "", ""])
        self.progress.addTopLevelItem(item)
        return item

    def progress_of(self, name: str) -> list[tuple[str, str]]:
        node = self._node_item(name)
        return [(node.child(i).text(0), node.child(i).text(1)) for i in range(node.childCount())]

    # --- shown ---------------------------------------------------------------------------------------

    def _problem(self, text: str) -> None:
        self.problems.addItem(text)
        self.problems.item(self.problems.count() - 1).setForeground(QBrush(WARNING_COLOR))

    def _show_plan(self, plan) -> None:
        lines = [f"Plan {plan.plan_id}: {plan.topology.value}, MTU {plan.mtu}, from {plan.base}"]
        for node in plan.nodes.values():
            lines.append(f"{node.name}:")
            lines += [f"  {i.name:<14} {i.address:<18} MTU {i.mtu}" for i in node.interfaces]
            lines += [f"  {key}={value}" for key, value in node.env.items()]
        lines += [f"warning: {w}" for w in plan.warnings]
        self.plan_text.setPlainText("\n".join(lines))

    def _show_report(self, report: FabricCheckReport) -> None:
        self.report = report
        rows = [(link, m) for link in report.links for m in link.measurements
                if m.test in ("iperf3", "ib_write_bw") or m.verdict is not Verdict.passed]
        rows += [(None, m) for m in report.cluster]
        self.figures.setRowCount(len(rows))
        for row, (link, m) in enumerate(rows):
            figure = "" if m.value is None else f"{m.value:.3g} {m.unit or ''}"
            share = "" if m.percent_of_line is None else f"{m.percent_of_line:.0f} %"
            verdict = m.detail if m.detail.startswith(m.verdict.value) else (
                m.verdict.value + (f": {m.detail}" if m.detail else ""))
            cells = (_link_text(link) if link else "cluster", m.test, m.where, figure, share, verdict)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if m.verdict in (Verdict.degraded, Verdict.failed):
                    item.setForeground(QBrush(WARNING_COLOR))
                elif m.verdict is Verdict.passed:
                    item.setForeground(QBrush(GOOD_COLOR))
                self.figures.setItem(row, column, item)
        self.figures.resizeColumnsToContents()
        health = fabric_health(report)
        self.summary.setText(f"<b>Acceptance check ({report.created_at.astimezone():%Y-%m-%d %H:%M})</b><br>"
                             f"{report.summary()}" + (f"<br><span style='color:#d9480f'>{health}</span>"
                                                      if health else ""))
        if health != self.health:
            self.health = health
            self.fabric_health_changed.emit(health)

    def figure_rows(self) -> list[list[str]]:
        return [[self.figures.item(r, c).text() for c in range(self.figures.columnCount())]
                for r in range(self.figures.rowCount())]


def _link_text(link) -> str:
    """``n1 ↔ n2 (enp1s0f0np0)``: the two nodes and the first end's interface (the twin the link is on)."""
    a_node, a_iface = link.a.split(":", 1)
    b_node = link.b.split(":", 1)[0]
    return f"{a_node} ↔ {b_node} ({a_iface})"
