"""Short jobs (writing an export) in a plain worker thread, with the outcome as a Qt signal.

Plain ``threading`` threads rather than a QThreadPool: they end with their
job, so nothing outlives the window.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from sparksync.core.base import SparkSyncError

log = logging.getLogger(__name__)


class BackgroundJobs(QObject):
    succeeded = Signal(str)  # the job's message for the status bar
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._threads: list[threading.Thread] = []

    def run(self, name: str, job: Callable[[], str]) -> None:
        """Run ``job`` off the GUI thread; its return value (or its error) arrives as a signal."""
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=self._call, args=(name, job), name=f"job:{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait for the jobs still running (tests and shutdown only)."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def _call(self, name: str, job: Callable[[], str]) -> None:
        try:
            message = job()
        except (OSError, SparkSyncError) as exc:
            self.failed.emit(f"{name} failed: {exc}. Pick another place to save it and try again.")
        except Exception as exc:  # noqa: BLE001 - a bug must reach the user, not vanish with the thread
            log.exception("%s crashed", name)
            self.failed.emit(f"{name} failed with an internal error ({exc}). Please report this bug.")
        else:
            self.succeeded.emit(message)
