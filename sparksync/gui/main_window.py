"""The main window: the live cluster dashboard over any number of nodes.

Today the only node is "this computer" (the local agent); the window takes
any number of ``NodeHandle`` sources, each kept streaming by its own worker
thread. The window only shows what the workers and the history recorder
report: they do all the I/O. Samples go into the Qt-free dashboard model,
one-second rows from it to the history file, and the last hour of that file
comes back when the app opens.

Closing the window hides it at once, stops the workers (which stop a local
agent they started) and the history recorder (which writes what is left),
and only then closes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QWidget

from sparksync.core.dashboard_model import COARSE_SPAN_S, DashboardModel
from sparksync.core.dashboard_series import MEMORY_USED
from sparksync.core.nodes import LocalNode, NodeHandle
from sparksync.gui.dashboard.dashboard_view import DashboardView
from sparksync.gui.dashboard.history_bridge import HistoryBridge
from sparksync.gui.node_card import NodeCard
from sparksync.gui.telemetry_worker import TelemetryWorker
from sparksync_agent.protocol import Sample, Snapshot

log = logging.getLogger(__name__)

TITLE = "SparkSync"
MAX_NODES = 8


class _NodeFeed(QObject):
    """One node's worker, with its samples tagged by node name (lives in the GUI thread)."""

    sample_received = Signal(str, object)
    node_ready = Signal(str, object)

    def __init__(self, node: NodeHandle, parent: QObject):
        super().__init__(parent)
        self.node = node
        self.thread: QThread | None = None
        self.worker: TelemetryWorker | None = None

    @Slot(object)
    def _on_worker_sample_received(self, sample: Sample) -> None:
        self.sample_received.emit(self.node.name, sample)

    @Slot(object)
    def _on_worker_node_ready(self, snapshot: Snapshot) -> None:
        self.node_ready.emit(self.node.name, snapshot)


class MainWindow(QMainWindow):
    live_data_shown = Signal()  # once, when the plots first draw a node's real samples
    shut_down = Signal()  # the workers (and the local agent they started) and the history have stopped

    def __init__(
        self,
        nodes: NodeHandle | Sequence[NodeHandle] | None = None,
        parent: QWidget | None = None,
        *,
        history_path: Path | None = None,
    ):
        super().__init__(parent)
        self.nodes = _as_list(nodes)
        self.node = self.nodes[0]
        self.setWindowTitle(TITLE)
        self.resize(1280, 800)
        self.model = DashboardModel()
        self.dashboard = DashboardView(self.model, self)
        self.cards = {n.name: NodeCard(n.name) for n in self.nodes}
        self.card = self.cards[self.node.name]
        for i, card in enumerate(self.cards.values()):
            self.dashboard.add_side_widget(card, i)
        self.setCentralWidget(self.dashboard)
        self.history = HistoryBridge(history_path, self)
        self.model.row_listeners.append(self.history.put)
        self._feeds = [_NodeFeed(n, self) for n in self.nodes]
        self._status_bar()
        self._connect()
        self._live = False
        self._closing = False
        self._shut = False

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
        for feed in self._feeds:
            feed.sample_received.connect(self._on_feed_sample_received)
            feed.node_ready.connect(self._on_feed_node_ready)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the history recorder and one worker thread per node."""
        self.history.start(COARSE_SPAN_S)
        for feed in self._feeds:
            if feed.thread is None:
                self._start_feed(feed)

    def _start_feed(self, feed: _NodeFeed) -> None:
        feed.thread = QThread(self)
        feed.thread.setObjectName(f"telemetry:{feed.node.name}")
        feed.worker = TelemetryWorker(feed.node)
        feed.worker.moveToThread(feed.thread)
        feed.thread.started.connect(feed.worker.run)
        feed.worker.node_ready.connect(feed._on_worker_node_ready)
        feed.worker.sample_received.connect(feed._on_worker_sample_received)
        feed.worker.status_changed.connect(self._on_worker_status_changed)
        feed.worker.error_raised.connect(self._on_worker_error_raised)
        feed.worker.connected.connect(self._on_worker_connected)
        feed.worker.finished.connect(feed.thread.quit)
        feed.thread.finished.connect(lambda feed=feed: self._on_feed_thread_finished(feed))
        feed.thread.start()

    @property
    def worker(self) -> TelemetryWorker | None:
        """The first node's worker (None once stopped)."""
        return self._feeds[0].worker

    def is_running(self) -> bool:
        return (
            any(f.thread is not None and f.thread.isRunning() for f in self._feeds)
            or self.history.is_running()
        )

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        if not self.is_running():
            event.accept()
            return
        # Stopping agents and writing the history take a moment; never block the GUI thread on them.
        event.ignore()
        self.hide()
        if not self._closing:
            self._closing = True
            self.statusBar().showMessage("Stopping…")
            for feed in self._feeds:
                if feed.worker is not None:
                    feed.worker.stop()
            self.model.flush()  # the second in progress goes to the history too
            if not self.history.stop():
                self._on_part_stopped()

    # --- slots --------------------------------------------------------------------------

    def _on_feed_node_ready(self, name: str, snapshot: Snapshot) -> None:
        self.cards[name].show_snapshot(snapshot)
        if snapshot.latest is not None:
            self.model.add_sample(name, snapshot.latest)

    def _on_feed_sample_received(self, name: str, sample: Sample) -> None:
        self.model.add_sample(name, sample)
        self.cards[name].show_sample(sample)

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
        return any(self.model.latest(f.node.name, MEMORY_USED) is not None for f in self._feeds)

    def _on_feed_thread_finished(self, feed: _NodeFeed) -> None:
        feed.worker.deleteLater()
        feed.thread.deleteLater()
        feed.worker, feed.thread = None, None
        if self._closing:
            self._on_part_stopped()
        else:  # only a bug ends a worker early; its error is already on screen
            self.statusBar().showMessage(self.statusBar().currentMessage() + " (telemetry stopped)")

    def _on_part_stopped(self) -> None:
        if self._closing and not self._shut and not self.is_running():
            self._shut = True
            self.shut_down.emit()
            self.close()


def _as_list(nodes: NodeHandle | Sequence[NodeHandle] | None) -> list[NodeHandle]:
    if nodes is None:
        return [LocalNode()]
    listed = list(nodes) if isinstance(nodes, Sequence) else [nodes]
    if not listed:
        raise ValueError("the window needs at least one node")
    if len(listed) > MAX_NODES:
        raise ValueError(f"a cluster holds at most {MAX_NODES} nodes; got {len(listed)}")
    return listed


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
