"""The history store in a worker thread: batched writes, loads and pruning off the caller's thread.

``put`` only enqueues (any thread, never blocks), so the GUI thread can hand
over each one-second row as it is made. The worker writes what gathered
every ``flush_every_s`` in one transaction, prunes now and then, and answers
``request_load`` through ``on_loaded``. Errors go to ``on_error`` as one
sentence for the status bar, at most once per distinct message, and the rows
that failed are dropped rather than kept piling up in memory.

Callers speak of nodes by name (the dashboard's); the store files rows by
each node's stable id, so a renamed node keeps its history. The worker
turns one into the other with ``names()`` (by default the registry's nodes
and this computer, read in the worker), asked again when a name it does not
know comes by.

Callbacks run in the worker thread; the GUI wraps them in Qt signals.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.telemetry.dashboard_model import NodeHistory
from sparksync.core.telemetry.dashboard_series import CLUSTER
from sparksync.core.telemetry.downsample import SecondRow
from sparksync.core.telemetry.history import RETENTION_S, HistoryStore

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 2.0
PRUNE_EVERY_S = 600.0
NAMES_RETRY_S = 5.0  # how often an unknown name may make the worker read the node names again

Loaded = Callable[[dict[str, NodeHistory]], None]


@dataclass(frozen=True)
class _Load:
    window_s: float
    now: float | None


@dataclass(frozen=True)
class _Flush:
    done: threading.Event


_STOP = object()


class HistoryRecorder:
    def __init__(
        self,
        path: Path | None = None,
        *,
        on_loaded: Loaded | None = None,
        on_error: Callable[[str], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        flush_every_s: float = FLUSH_EVERY_S,
        prune_every_s: float = PRUNE_EVERY_S,
        retention_s: float = RETENTION_S,
        names: Callable[[], NodeNames] = NodeNames.current,
    ):
        self.path = path
        self.names = names
        self.on_loaded = on_loaded or (lambda _: None)
        self.on_error = on_error or (lambda _: None)
        self.on_stopped = on_stopped or (lambda: None)
        self.flush_every_s = flush_every_s
        self.prune_every_s = prune_every_s
        self.retention_s = retention_s
        self.rows_written = 0
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="history-recorder", daemon=True)
        self._reported: set[str] = set()
        self._names = NodeNames()  # the worker's; read when the store opens
        self._names_read_at = -float("inf")

    # --- any thread ---------------------------------------------------------------

    def start(self) -> HistoryRecorder:
        self._thread.start()
        return self

    def put(self, node: str, row: SecondRow) -> None:
        """Queue one row for writing; returns at once."""
        self._queue.put((node, row))

    def request_load(self, window_s: float, now: float | None = None) -> None:
        """Ask for the last ``window_s`` seconds; the answer comes through ``on_loaded``."""
        self._queue.put(_Load(window_s, now))

    def flush(self, timeout: float = 10.0) -> bool:
        """Write what is queued and wait for it (tests and tools; not for the GUI thread)."""
        done = threading.Event()
        self._queue.put(_Flush(done))
        return done.wait(timeout)

    def stop(self) -> None:
        """Write what is queued, close the file, then call ``on_stopped``; returns at once."""
        self._queue.put(_STOP)

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    # --- the worker thread ----------------------------------------------------------

    def _run(self) -> None:
        try:
            store = self._open()
            if store is not None:
                with store:
                    self._serve(store)
            else:
                self._drain_until_stop()
        finally:
            self.on_stopped()

    def _open(self) -> HistoryStore | None:
        try:
            store = HistoryStore(self.path, self.retention_s)
            self._read_names(store)
            self._prune(store)
            return store
        except SparkSyncError as exc:
            self._report(f"History is off: {exc}")
            return None

    def _serve(self, store: HistoryStore) -> None:
        batch: list[tuple[str, SecondRow]] = []
        due = time.monotonic() + self.flush_every_s
        next_prune = time.monotonic() + self.prune_every_s
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, due - time.monotonic()))
            except queue.Empty:
                item = None
            if isinstance(item, tuple):
                batch.append(item)
                if time.monotonic() < due:
                    continue
            self._write(store, batch)
            batch, due = [], time.monotonic() + self.flush_every_s
            if item is _STOP:
                return
            self._handle(store, item)
            if time.monotonic() >= next_prune:
                self._prune(store)
                next_prune = time.monotonic() + self.prune_every_s

    def _handle(self, store: HistoryStore, item: object) -> None:
        if isinstance(item, _Load):
            try:
                self._read_names(store)
                loaded = store.load_named(item.window_s, self._names, item.now)
            except SparkSyncError as exc:
                self._report(f"History could not be read: {exc}")
                loaded = {}
            self.on_loaded(loaded)
        elif isinstance(item, _Flush):
            item.done.set()

    def _write(self, store: HistoryStore, batch: list[tuple[str, SecondRow]]) -> None:
        if not batch:
            return
        try:
            rows, labels = self._keyed(store, batch)
            store.write(rows, labels)
            self.rows_written += len(batch)
        except SparkSyncError as exc:
            self._report(f"History is not being saved: {exc}")

    def _keyed(
        self, store: HistoryStore, batch: list[tuple[str, SecondRow]]
    ) -> tuple[list[tuple[str, SecondRow]], dict[str, str]]:
        """The rows by node id, and each id's name now.

        A name no node has is its own key until the names are read again,
        which then files its rows under its node's id (``adopt``).
        """
        named = {name for name, _ in batch} - {CLUSTER}
        if any(self._names.id_of(n) is None for n in named) and self._names_stale():
            self._read_names(store)
        keys = {name: (self._names.id_of(name) or name) for name in named}
        keys[CLUSTER] = CLUSTER
        labels = {key: self._names.name_of(key) or name for name, key in keys.items()}
        return [(keys[name], row) for name, row in batch], labels

    def _names_stale(self) -> bool:
        return time.monotonic() - self._names_read_at >= NAMES_RETRY_S

    def _read_names(self, store: HistoryStore) -> None:
        """Read the node names again, and file rows kept under a name under its node's id."""
        self._names_read_at = time.monotonic()
        try:
            self._names = self.names()
        except Exception as exc:  # noqa: BLE001 - the history goes on under the names it has
            log.warning("history: node names could not be read: %s", exc)
            return
        store.adopt({**self._names.former, **self._names.ids})
        store.set_labels(self._names.names)

    def _prune(self, store: HistoryStore) -> None:
        try:
            removed = store.prune()
            if removed:
                log.info("history: pruned %d aged rows", removed)
        except SparkSyncError as exc:
            self._report(f"History could not be pruned: {exc}")

    def _drain_until_stop(self) -> None:
        """No usable file: keep answering (empty loads, flushes) so callers never hang."""
        while (item := self._queue.get()) is not _STOP:
            if isinstance(item, _Load):
                self.on_loaded({})
            elif isinstance(item, _Flush):
                item.done.set()

    def _report(self, message: str) -> None:
        log.warning("%s", message)
        if message not in self._reported:
            self._reported.add(message)
            self.on_error(message)
