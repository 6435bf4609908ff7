"""The Switchyard tab: every known gateway's live traffic split, figures and tokens/s.

Once a second a worker (``Jobs``) runs ``GatewayWatch.poll``, which finds the
gateways (announced on this computer, launched on nodes as workloads, or
added by URL) and scrapes their /metrics; the GUI thread only draws what it
returns. A poll still running when the next second comes is not doubled.

With no gateway known, the section is one line saying how to start one. A
gateway that cannot be read shows why in its panel, and the message goes
to the status bar once (not every second).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from sparksync.core.base import SparkSyncError
from sparksync.gui.switchyard.gateway_panel import GatewayPanel
from sparksync.gui.switchyard.layout_dialog import LayoutDialog
from sparksync.gui.workers import Jobs
from sparksync.switchyard.gateway_watch import GatewayReading, GatewayWatch
from sparksync.switchyard.watched import add_watched

log = logging.getLogger(__name__)

POLL_MS = 1000
HINT = (
    "Switchyard: no gateway is running. Start one with <code>sparksync switchyard serve</code> "
    "(or <code>switchyard launch --node</code>), or add its address:"
)


class SwitchyardView(QWidget):
    readings_shown = Signal(list)  # GatewayReading, after each poll is drawn
    status_message = Signal(str)
    error_raised = Signal(str)

    def __init__(self, watch: GatewayWatch, parent: QWidget | None = None, *, poll_ms: int = POLL_MS,
                 actions=None):  # fmt: skip
        super().__init__(parent)
        self.setObjectName("switchyardView")
        self.watch = watch
        self.actions = actions  # the paired nodes and their fleet, for the published layout
        self.layout_dialog: LayoutDialog | None = None
        self.jobs = Jobs(self)
        self.panels: dict[str, GatewayPanel] = {}
        self._polling = False
        self._shut = False
        self._told: set[str] = set()  # problems already sent to the status bar
        self._timer = QTimer(self, interval=poll_ms)
        self._timer.timeout.connect(self.poll)
        self._build()

    def _build(self) -> None:
        self.hint = QLabel(HINT, self, objectName="switchyardHint")
        self.hint.setWordWrap(True)
        self.address = QLineEdit(self, objectName="gatewayAddress", placeholderText="http://HOST:PORT")
        self.add_button = QPushButton("Watch", self, objectName="watchGateway")
        self.add_button.setToolTip("Watch the Switchyard gateway at this address (kept across restarts)")
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.address.returnPressed.connect(self._on_add_button_clicked)
        self.layout_button = QPushButton("Published layout…", self)
        self.layout_button.setObjectName("publishedLayout")
        self.layout_button.setToolTip("Start 3 x large on 2 nodes + 2 x small on 1 node (or its 4- and 2-node "
                                      "forms), memory checked first, with the gateway over them")  # fmt: skip
        self.layout_button.clicked.connect(self.open_layout)
        self.problems = QLabel(self, objectName="switchyardProblems", wordWrap=True)
        self.problems.setStyleSheet("color: #c0392b")
        self.problems.hide()
        bar = QHBoxLayout()
        bar.addWidget(self.hint, 1)
        bar.addWidget(self.address)
        bar.addWidget(self.add_button)
        bar.addWidget(self.layout_button)
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 4, 0, 0)
        self.column.addLayout(bar)
        self.column.addWidget(self.problems)
        self.column.addStretch(1)  # the gateways stack from the top of the tab

    # --- polling -------------------------------------------------------------------------

    def start(self) -> None:
        """Poll now and then every second."""
        if self._shut:
            return
        self._timer.start()
        self.poll()

    def poll(self) -> None:
        if self._polling or self._shut:
            return
        self._polling = True
        self.jobs.run(
            "Reading the Switchyard gateways", self.watch.poll, self._on_polled, self._on_poll_failed
        )

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Stop polling; wait for a poll in flight (``timeout=0`` only asks). The watch is the owner's to close."""
        self._shut = True
        self._timer.stop()
        dialog = self.layout_dialog
        return self.jobs.wait(timeout) and (dialog is None or dialog.wait(timeout))

    def _on_polled(self, outcome: tuple[list[GatewayReading], list[str]]) -> None:
        self._polling = False
        if self._shut:
            return
        readings, problems = outcome
        self._show(readings)
        # A gateway's own problem shows in its panel; the others (e.g. an unreadable record) above them.
        self._show_problems(problems, [f"{r.label}: {r.problem}" for r in readings if r.problem])
        self.readings_shown.emit(readings)

    def _on_poll_failed(self, message: str) -> None:
        self._polling = False
        if not self._shut:
            self._show_problems([message], [])

    # --- drawing --------------------------------------------------------------------------

    def _show(self, readings: list[GatewayReading]) -> None:
        shown = {r.key for r in readings}
        for key in [k for k in self.panels if k not in shown]:
            panel = self.panels.pop(key)
            panel.hide()
            panel.deleteLater()
        for reading in readings:
            panel = self.panels.get(reading.key)
            if panel is None:
                panel = self.panels[reading.key] = GatewayPanel(reading.key, self)
                self.column.insertWidget(self.column.count() - 1, panel)
            panel.show_reading(reading)
        # Hidden while nothing is known: the section is then the one-line hint.
        self.hint.setText(HINT if not readings else "<b>Switchyard gateways</b> · add another:")

    def _show_problems(self, general: list[str], per_gateway: list[str]) -> None:
        self.problems.setVisible(bool(general))
        self.problems.setText("\n".join(f"⚠ {p}" for p in general))
        problems = general + per_gateway
        for problem in problems:
            if problem not in self._told:  # told once, not every second
                log.warning("%s", problem)
                self.error_raised.emit(problem)
        self._told = set(problems)

    def _on_add_button_clicked(self) -> None:
        text = self.address.text()
        if not text.strip():
            return

        def added(url: str) -> None:
            self.address.clear()
            self.status_message.emit(f"Watching the Switchyard gateway at {url}.")
            self.poll()

        self.jobs.run("Adding a Switchyard gateway", lambda: add_watched(text), added, self.error_raised.emit)


    def open_layout(self) -> LayoutDialog:
        """The published layout's dialog, over the paired nodes (made once, then shown again)."""
        if self.layout_dialog is None:
            actions = self.actions

            def agents():
                if actions is None or not callable(getattr(actions, "fleet", None)):
                    raise SparkSyncError("the layout runs on paired nodes: pair them first (Nodes tab)")
                return actions.fleet()

            def nodes():
                paired = actions.paired() if actions is not None and hasattr(actions, "paired") else []
                return [(n.name, n.host) for n in paired]

            self.layout_dialog = LayoutDialog(agents, nodes, self)
            self.layout_dialog.error_raised.connect(self.error_raised)
            self.layout_dialog.finished_start.connect(lambda _outcome: self.poll())  # the new gateway shows
        self.layout_dialog.load()
        self.layout_dialog.show()
        return self.layout_dialog


def app_watch(actions) -> GatewayWatch:
    """The app's watch: gateways on nodes are reached through the actions' fleet (SSH tunnels; this computer's as they are).

    The fleet is asked for only when a gateway workload is recorded, so a
    fresh app opens no SSH link and reads no keyring for this section.
    """
    if not callable(getattr(actions, "fleet", None)):
        return GatewayWatch()

    def reach():
        from sparksync.core.workloads import TunnelReach

        return TunnelReach(actions.fleet())

    return GatewayWatch(reach=reach)
