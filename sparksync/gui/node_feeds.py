"""The window's telemetry feeds: one ``TelemetryWorker`` thread per streamed node.

``NodeFeeds`` starts, stops and forgets them and passes on what every worker
says, tagged with its node's name, so the window connects once however many
nodes come and go. A feed whose node was unpaired is forgotten only once its
thread has ended: a worker still stopping must not lose its thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QObject, QThread, Signal, Slot
from sparksync_agent.protocol import Sample, Snapshot

from sparksync.core.agents.handles import NodeHandle
from sparksync.gui.telemetry_worker import TelemetryWorker


class NodeFeed(QObject):
    """One node's worker, with its samples tagged by node name (lives in the GUI thread)."""

    sample_received = Signal(str, object)
    node_ready = Signal(str, object)

    def __init__(self, node: NodeHandle, parent: QObject):
        super().__init__(parent)
        self.node = node
        self.thread: QThread | None = None
        self.worker: TelemetryWorker | None = None
        self.removed = False  # its node was unpaired: forget the feed once its thread ends

    @Slot(object)
    def _on_worker_sample_received(self, sample: Sample) -> None:
        self.sample_received.emit(self.node.name, sample)

    @Slot(object)
    def _on_worker_node_ready(self, snapshot: Snapshot) -> None:
        self.node_ready.emit(self.node.name, snapshot)


class NodeFeeds(QObject):
    sample_received = Signal(str, object)  # node name, Sample
    node_ready = Signal(str, object)  # node name, Snapshot
    status_changed = Signal(str)
    error_raised = Signal(str)
    connected = Signal(str)  # the agent's run id
    feed_ended = Signal(object)  # a NodeFeed whose thread has ended (and been cleaned up)

    def __init__(self, nodes: Iterable[NodeHandle], parent: QObject):
        super().__init__(parent)
        self.feeds = [self._made(node) for node in nodes]

    def _made(self, node: NodeHandle) -> NodeFeed:
        feed = NodeFeed(node, self)
        feed.sample_received.connect(self.sample_received)
        feed.node_ready.connect(self.node_ready)
        return feed

    def add(self, node: NodeHandle) -> NodeFeed:
        feed = self._made(node)
        self.feeds.append(feed)
        self.start(feed)
        return feed

    def remove(self, feed: NodeFeed) -> None:
        feed.removed = True
        if feed.worker is not None:
            feed.worker.stop()  # forgotten in _on_feed_thread_finished
        elif feed.thread is None:
            self.feeds.remove(feed)

    def start(self, feed: NodeFeed) -> None:
        feed.thread = QThread(self)
        feed.thread.setObjectName(f"telemetry:{feed.node.name}")
        feed.worker = TelemetryWorker(feed.node)
        feed.worker.moveToThread(feed.thread)
        feed.thread.started.connect(feed.worker.run)
        feed.worker.node_ready.connect(feed._on_worker_node_ready)
        feed.worker.sample_received.connect(feed._on_worker_sample_received)
        feed.worker.status_changed.connect(self.status_changed)
        feed.worker.error_raised.connect(self.error_raised)
        feed.worker.connected.connect(self.connected)
        feed.worker.finished.connect(feed.thread.quit)
        feed.thread.finished.connect(lambda feed=feed: self._on_feed_thread_finished(feed))
        feed.thread.start()

    def stop_all(self) -> None:
        for feed in self.feeds:
            if feed.worker is not None:
                feed.worker.stop()

    def idle(self) -> list[NodeFeed]:
        """Feeds never started (or ended) whose node is still wanted."""
        return [f for f in self.feeds if f.thread is None and not f.removed]

    def streamed(self) -> list[str]:
        """The nodes whose telemetry workers run now."""
        return [f.node.name for f in self.feeds if f.thread is not None and not f.removed]

    def has_threads(self) -> bool:
        return any(f.thread is not None for f in self.feeds)

    def running(self) -> bool:
        return any(f.thread is not None and f.thread.isRunning() for f in self.feeds)

    def _on_feed_thread_finished(self, feed: NodeFeed) -> None:
        feed.worker.deleteLater()
        feed.thread.deleteLater()
        feed.worker, feed.thread = None, None
        if feed.removed:
            self.feeds.remove(feed)
        self.feed_ended.emit(feed)
