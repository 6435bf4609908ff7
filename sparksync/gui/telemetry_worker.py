"""The worker that keeps one node's telemetry flowing, off the GUI thread.

``TelemetryWorker`` lives in its own QThread. Its ``run`` slot connects the
node (for "this computer": attaches to or starts the local agent), streams
samples and re-emits them as Qt signals. When the stream keeps failing it
reconnects the node, which restarts a local agent that died. ``stop()`` is
safe from the GUI thread and never blocks it.

A connect that keeps failing the same way (a paired node without its agent
yet: "no agent token") is reported once, not at every retry; the node's row
keeps showing the reason. A new kind of failure, or one after the node was
live again, is reported anew.
"""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal, Slot

from sparksync.core.base.errors import LocalAgentCancelled, SparkSyncError
from sparksync.core.agents.handles import NodeHandle
from sparksync.core.agents.stream import Connected, Disconnected, Lost, Restarted, TelemetryStream
from sparksync_agent.protocol import Sample

log = logging.getLogger(__name__)

# After this many failed reconnects in a row the node itself is reconnected
# (for the local node: a dead agent is replaced by a new one).
STREAM_FAILURES_BEFORE_RECONNECT = 3
RECONNECT_FIRST_S = 0.5
RECONNECT_MAX_S = 10.0


class TelemetryWorker(QObject):
    node_ready = Signal(object)  # Snapshot, once per (re)connection
    sample_received = Signal(object)  # Sample
    status_changed = Signal(str)  # news for the status bar
    connected = Signal(str)  # the stream is up (run id): earlier errors are over
    error_raised = Signal(str)  # a failure for the status bar (what happened, what next)
    finished = Signal()

    def __init__(self, node: NodeHandle):
        super().__init__()
        self._node = node
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream: TelemetryStream | None = None
        self._since = 0
        self._run_id: str | None = None
        self._told: object = None  # the connect failure reported last; None once the node is live

    def stop(self) -> None:
        """Ask the worker to finish; returns at once (any thread)."""
        with self._lock:
            self._stop.set()
            if self._stream is not None:
                self._stream.close()

    @Slot()
    def run(self) -> None:
        try:
            self._run_until_stopped()
        except Exception as exc:  # noqa: BLE001 - a bug must reach the user, not vanish with the thread
            log.exception("telemetry worker for %s crashed", self._node.name)
            self.error_raised.emit(f"{self._node.name}: internal error ({exc}). Please report this bug.")
        finally:
            self.finished.emit()

    def _run_until_stopped(self) -> None:
        delay = RECONNECT_FIRST_S
        while not self._stop.is_set():
            try:
                if self._serve_once():
                    delay = RECONNECT_FIRST_S
            except LocalAgentCancelled:
                return
            except SparkSyncError as exc:
                self._tell_failure(exc)
            if self._stop.is_set():
                return
            self.status_changed.emit(f"{self._node.name}: reconnecting in {delay:.1f} s…")
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, RECONNECT_MAX_S)

    def _tell_failure(self, exc: SparkSyncError) -> None:
        # A node's problem has a state and a cause; its message may vary in detail between retries.
        state = getattr(exc, "state", None)
        key = (state, getattr(exc, "cause", None)) if state is not None else str(exc)
        if key != self._told:
            self._told = key
            self.error_raised.emit(f"{self._node.name}: {exc}")

    def _serve_once(self) -> bool:
        """One connection to the node; True if it delivered samples before it ended."""
        self.status_changed.emit(f"{self._node.name}: connecting…")
        with self._node.connect(self._stop) as client:
            self.node_ready.emit(client.snapshot())
            stream = client.stream(since=self._since, run_id=self._run_id)
            with self._lock:
                self._stream = stream
                if self._stop.is_set():
                    stream.close()
            try:
                return self._pump(stream)
            finally:
                with self._lock:
                    self._stream = None
                self._since, self._run_id = stream.last_seq, stream.run_id

    def _pump(self, stream: TelemetryStream) -> bool:
        delivered, failures = False, 0
        for item in stream:
            if isinstance(item, Sample):
                delivered, failures = True, 0
                self.sample_received.emit(item)
            elif isinstance(item, Disconnected):
                failures += 1
                self.error_raised.emit(f"{self._node.name}: {item.error}")
                if failures >= STREAM_FAILURES_BEFORE_RECONNECT:
                    break
            else:
                self._report(item)
        return delivered

    def _report(self, item: Connected | Lost | Restarted) -> None:
        name = self._node.name
        if isinstance(item, Connected):
            self._told = None
            self.connected.emit(item.run_id)
            self.status_changed.emit(f"{name}: live")
        elif isinstance(item, Lost) and item.since > 0:  # from 0 it only means "older history is gone"
            self.status_changed.emit(f"{name}: {item.lost} samples were lost while we were away")
        elif isinstance(item, Restarted):
            self.status_changed.emit(f"{name}: the agent restarted; following its new run")
