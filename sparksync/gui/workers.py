"""Blocking core calls (SSH, keyring, files) off the GUI thread, with their outcome back on it.

``Jobs.run(name, call, on_done, on_error)`` runs ``call()`` in a plain
worker thread; ``on_done(result)`` or ``on_error(message)`` then runs in the
GUI thread. Plain threads rather than a pool, as in the dashboard's jobs:
each ends with its call, so nothing outlives the window. Errors become one
plain-language line: a SparkSyncError's own message, or "internal error"
with a request to report the bug.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, Signal, Slot

from sparksync.core.base import SparkSyncError

log = logging.getLogger(__name__)


class Jobs(QObject):
    started = Signal(str)  # job name
    finished = Signal(str)  # job name, after its callback ran
    error_raised = Signal(str)  # every failure's message, for a status bar
    _done = Signal(int, object)
    _failed = Signal(int, str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, Callable | None, Callable | None]] = {}
        self._threads: list[threading.Thread] = []
        self._done.connect(self._on_self_done)
        self._failed.connect(self._on_self_failed)

    def run(
        self,
        name: str,
        call: Callable[[], Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        job = next(self._ids)
        self._pending[job] = (name, on_done, on_error)
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=self._call, args=(job, name, call), name=f"job:{name}", daemon=True)
        self._threads.append(thread)
        self.started.emit(name)
        thread.start()

    def busy(self) -> bool:
        return bool(self._pending)

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait for the threads still running (tests and shutdown only; never from a slot)."""
        for thread in list(self._threads):
            thread.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def _call(self, job: int, name: str, call: Callable[[], Any]) -> None:
        try:
            result = call()
        except SparkSyncError as exc:
            self._emit(self._failed, job, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must reach the user, not vanish with the thread
            log.exception("%s crashed", name)
            self._emit(
                self._failed, job, f"{name} failed with an internal error ({exc}). Please report this bug."
            )
        else:
            self._emit(self._done, job, result)

    def _emit(self, signal, job: int, value: Any) -> None:
        # The window waits for its jobs before it goes; a job that outlives it anyway
        # (the app is exiting) has nobody left to tell.
        if shiboken6.isValid(self):
            try:
                signal.emit(job, value)
            except RuntimeError:
                log.debug("job %d finished after its window was deleted", job)

    @Slot(int, object)
    def _on_self_done(self, job: int, result: Any) -> None:
        name, on_done, _ = self._pending.pop(job, (None, None, None))
        if on_done is not None:
            on_done(result)
        if name is not None:
            self.finished.emit(name)

    @Slot(int, str)
    def _on_self_failed(self, job: int, message: str) -> None:
        name, _, on_error = self._pending.pop(job, (None, None, None))
        if on_error is not None:
            on_error(message)
        self.error_raised.emit(message)
        if name is not None:
            self.finished.emit(name)
