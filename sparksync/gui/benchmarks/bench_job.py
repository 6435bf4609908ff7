"""One benchmark run in a worker thread: llama-benchy's progress as signals, a clean cancel, the run stored.

The runner blocks for the whole run (minutes) and is cancelled from the GUI
thread through ``cancel()``, which the core runner allows from any thread.
Once it ends, the outcome becomes a history record (with the telemetry
summary of its time window) and is stored, all in the worker.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import shiboken6
from PySide6.QtCore import QObject, Signal

from sparksync.core.bench import (
    BenchRequest,
    BenchRunner,
    HistoryStore,
    run_and_store,
)
from sparksync.core.base import SparkSyncError

log = logging.getLogger(__name__)


class BenchJob(QObject):
    progressed = Signal(object)  # BenchProgress
    finished = Signal(object)  # the stored RunRecord (complete, partial or failed)
    failed = Signal(str)  # nothing was stored: the run could not start

    def __init__(self, request: BenchRequest, history_path: Path | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.request = request
        self.history_path = history_path
        self.runner = BenchRunner(request, on_progress=self._on_runner_progress)
        self.thread = threading.Thread(target=self._run, name="bench-run", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        self.runner.cancel()

    def is_running(self) -> bool:
        return self.thread.is_alive()

    def wait(self, timeout: float = 60.0) -> bool:
        """For tests and shutdown only: never from a slot."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def _run(self) -> None:
        try:
            record = run_and_store(self.runner, HistoryStore(self.history_path))
        except SparkSyncError as exc:
            self._emit(self.failed, str(exc))
        except Exception as exc:
            log.exception("benchmark run crashed")
            self._emit(self.failed, f"the benchmark failed with an internal error ({exc}). Please report this bug.")
        else:
            self._emit(self.finished, record)

    def _on_runner_progress(self, progress) -> None:
        self._emit(self.progressed, progress)

    def _emit(self, signal, value) -> None:
        if shiboken6.isValid(self):
            try:
                signal.emit(value)
            except RuntimeError:
                log.debug("benchmark run ended after its panel was deleted")
