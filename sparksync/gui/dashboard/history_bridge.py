"""The history recorder (a Qt-free worker thread) as Qt signals for the window.

The recorder calls back in its own thread; emitting a signal of this object,
which lives in the GUI thread, queues the call there.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from sparksync.core.telemetry import HistoryRecorder, SecondRow


class HistoryBridge(QObject):
    loaded = Signal(object)  # dict[node, NodeHistory]
    error_raised = Signal(str)
    stopped = Signal()

    def __init__(self, path: Path | None = None, parent: QObject | None = None, **recorder_options):
        super().__init__(parent)
        self.recorder = HistoryRecorder(
            path,
            on_loaded=self.loaded.emit,
            on_error=self.error_raised.emit,
            on_stopped=self.stopped.emit,
            **recorder_options,
        )
        self._started = False
        self._stopped = False
        self.stopped.connect(self._on_self_stopped)  # first, so is_running() is False for later slots

    def start(self, load_window_s: float) -> None:
        """Start the worker and ask for the last ``load_window_s`` seconds."""
        if not self._started:
            self._started = True
            self.recorder.start()
            self.recorder.request_load(load_window_s)

    def put(self, node: str, row: SecondRow) -> None:
        self.recorder.put(node, row)

    def stop(self) -> bool:
        """Ask the worker to write what is left and stop; False when it never ran (nothing to wait for)."""
        if not self.is_running():
            return False
        self.recorder.stop()
        return True

    def is_running(self) -> bool:
        return self._started and not self._stopped

    def _on_self_stopped(self) -> None:
        self._stopped = True
