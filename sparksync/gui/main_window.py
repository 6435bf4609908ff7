"""The main window: "this computer" as a node, with live memory and CPU plots.

The window only shows what the worker reports; the worker, in its own
thread, does all the I/O. Closing the window hides it at once, stops the
worker (which stops the local agent it started) and only then closes.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QThread, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QVBoxLayout, QWidget

from sparksync.core.nodes import LocalNode, NodeHandle
from sparksync.gui.node_card import NodeCard
from sparksync.gui.node_plot import NodePlot
from sparksync.gui.telemetry_worker import TelemetryWorker
from sparksync_agent.protocol import Sample, Snapshot

log = logging.getLogger(__name__)

TITLE = "SparkSync"


class MainWindow(QMainWindow):
    live_data_shown = Signal()  # once, when the plots first draw real samples
    shut_down = Signal()  # the worker (and the local agent it started) has stopped

    def __init__(self, node: NodeHandle | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.node = node or LocalNode()
        self.setWindowTitle(TITLE)
        self.resize(900, 640)
        self.card = NodeCard(self.node.name)
        self.plot = NodePlot()
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.addWidget(self.card)
        layout.addWidget(self.plot, stretch=1)
        self.setCentralWidget(central)
        self.statusBar().showMessage("Starting…")
        # The last error stays here until the node is live again, while the
        # transient message area goes on with "reconnecting…" news.
        self.problem = QLabel("")
        self.problem.setObjectName("problem")
        self.problem.setStyleSheet("color: #c0392b")
        self.statusBar().addPermanentWidget(self.problem)
        self.plot.drawn.connect(self._on_plot_drawn)
        self._live = False
        self._thread: QThread | None = None
        self._worker: TelemetryWorker | None = None
        self._closing = False

    def start(self) -> None:
        """Start the worker thread that feeds this window."""
        if self._thread is not None:
            return
        self._thread = QThread(self)
        self._thread.setObjectName(f"telemetry:{self.node.name}")
        self._worker = TelemetryWorker(self.node)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.node_ready.connect(self._on_worker_node_ready)
        self._worker.sample_received.connect(self._on_worker_sample_received)
        self._worker.status_changed.connect(self._on_worker_status_changed)
        self._worker.error_raised.connect(self._on_worker_error_raised)
        self._worker.connected.connect(self._on_worker_connected)
        self._worker.finished.connect(self._thread.quit)
        self._thread.finished.connect(self._on_thread_finished)
        self._thread.start()

    @property
    def worker(self) -> TelemetryWorker | None:
        return self._worker

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.isRunning()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        if not self.is_running():
            event.accept()
            return
        # Stopping the agent takes a moment; never block the GUI thread on it.
        event.ignore()
        self.hide()
        if not self._closing:
            self._closing = True
            self.statusBar().showMessage("Stopping…")
            self._worker.stop()

    def _on_worker_node_ready(self, snapshot: Snapshot) -> None:
        self.card.show_snapshot(snapshot)
        if snapshot.latest is not None:
            self.plot.add_sample(snapshot.latest)

    def _on_worker_sample_received(self, sample: Sample) -> None:
        self.plot.add_sample(sample)
        self.card.show_sample(sample)

    def _on_worker_status_changed(self, message: str) -> None:
        if not self._closing:
            self.statusBar().showMessage(message)

    def _on_worker_error_raised(self, message: str) -> None:
        log.warning("%s", message)
        if self._closing:
            return
        flat = " ".join(message.split())  # an agent's log tail must not break the bar into lines
        self.statusBar().showMessage(f"Error: {flat}")
        self.problem.setText(f"⚠ {_shorten(flat)}")
        self.problem.setToolTip(message)

    def _on_worker_connected(self, run_id: str) -> None:
        self.problem.clear()
        self.problem.setToolTip("")

    def _on_plot_drawn(self, points: int) -> None:
        if points and not self._live:
            self._live = True
            self.live_data_shown.emit()

    def _on_thread_finished(self) -> None:
        self._worker.deleteLater()
        self._thread.deleteLater()
        self._worker = None
        self._thread = None
        if self._closing:
            self.shut_down.emit()
            self.close()
        else:  # only a bug ends the worker early; its error is already on screen
            self.statusBar().showMessage(self.statusBar().currentMessage() + " (telemetry stopped)")


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
