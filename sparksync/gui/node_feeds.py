"""The window's telemetry: the core's ``TelemetryFollower``, its events turned into Qt signals.

The follower (``sparksync.core.fleet.follower``) keeps one thread per node,
resumes after cuts, waits between retries, marks the gaps an agent restart
leaves and keeps the nodes' states in the fleet. This adapter holds no
resume state and no retry loop: it moves each event onto the GUI thread (a
queued signal) and re-emits it as the signal the window connects, tagged
with the node's name. It never blocks the GUI thread: ``remove`` and
``stop_all`` only ask, and ``feed_ended`` says when a node's thread is done.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal

from sparksync.core.base import Backoff

if TYPE_CHECKING:
    from sparksync.core.fleet import FollowEvent, TelemetryFollower

# The follower (and the agent client under it: httpx) is imported once the window follows a node,
# not before the window's first paint.


class NodeFeeds(QObject):
    sample_received = Signal(str, object)  # node name, Sample
    node_ready = Signal(str, object)  # node name, Snapshot (once per connection)
    status_changed = Signal(str)  # news for the status bar
    error_raised = Signal(str)  # a failure, told once per kind (what happened, what next)
    connected = Signal(str, str)  # node name, the agent's run id: earlier errors are over
    gap_marked = Signal(str, float, float, str)  # node, start, end (Unix times), why
    feed_ended = Signal(str)  # node name: its thread has ended
    _arrived = Signal(object)  # a FollowEvent, from a follower thread

    def __init__(self, names: Iterable[str], parent: QObject, *, retry: Backoff | None = None):
        super().__init__(parent)
        # The follower's wait between finding an agent again (set before attach; None: the core's RETRY).
        self.retry = retry
        self._wanted = list(dict.fromkeys(names))
        self._follower: TelemetryFollower | None = None
        self._threads: Counter[str] = Counter()  # node -> its threads still running
        self._runs: dict[str, str] = {}  # node -> the agent run it was last live with
        self._troubled: set[str] = set()  # nodes whose trouble was told and is not over yet
        self._arrived.connect(self._on_follower_event, Qt.ConnectionType.QueuedConnection)

    # --- what the window asks -------------------------------------------------------------

    def attach(self, fleet) -> None:
        """Start following, through ``fleet``'s links, every node wanted so far (and those added later)."""
        if self._follower is not None:
            return
        from sparksync.core.fleet import RETRY, TelemetryFollower

        retry = self.retry if self.retry is not None else RETRY
        self._follower = TelemetryFollower(fleet, [], on_event=self._arrived.emit, retry=retry)
        self._follower.start()
        for name in self._wanted:
            self._start(name)

    def add(self, name: str) -> None:
        if name in self._wanted:
            return
        self._wanted.append(name)
        if self._follower is not None:
            self._start(name)

    def remove(self, name: str) -> None:
        """Stop following ``name``; returns at once (``feed_ended`` comes when its thread is done)."""
        if name in self._wanted:
            self._wanted.remove(name)
        if self._follower is not None:
            self._follower.remove(name)

    def retry_now(self, name: str) -> None:
        """Try ``name``'s agent again now rather than after its backoff (it was just deployed)."""
        if self._follower is not None:
            self._follower.retry_now(name)

    def names(self) -> list[str]:
        """The nodes followed, or to be followed once a fleet is attached."""
        return list(self._wanted)

    def streamed(self) -> list[str]:
        """The nodes whose telemetry threads run now."""
        return [name for name in self._wanted if self._threads[name] > 0]

    def stop_all(self) -> None:
        """Ask every node's thread to end; returns at once."""
        self._wanted = []
        if self._follower is not None:
            self._follower.request_stop()

    def running(self) -> bool:
        return any(count > 0 for count in self._threads.values())

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the threads asked to stop (from a worker, never the GUI thread)."""
        return self._follower is None or self._follower.join(timeout)

    # --- from the follower ----------------------------------------------------------------

    def _start(self, name: str) -> None:
        assert self._follower is not None
        self._threads[name] += 1
        self._follower.add(name)

    def _on_follower_event(self, event: FollowEvent) -> None:
        from sparksync.core.fleet import Connecting, Ended, Gap, Live, Ready, Retrying, SampleIn, Trouble

        name = event.node
        if isinstance(event, SampleIn):
            self.sample_received.emit(name, event.sample)
        elif isinstance(event, Ready):
            self.node_ready.emit(name, event.snapshot)
        elif isinstance(event, Live):
            self._troubled.discard(name)
            before = self._runs.get(name)
            self._runs[name] = event.run_id
            if before is not None and before != event.run_id:
                self.status_changed.emit(f"{name}: the agent restarted; following its new run")
            self.connected.emit(name, event.run_id)
            self.status_changed.emit(f"{name}: live")
        elif isinstance(event, (Connecting, Retrying)):
            if name not in self._troubled:  # the error stays in sight until the node is live again
                what = "connecting" if isinstance(event, Connecting) else f"reconnecting in {event.delay_s:.1f} s"
                self.status_changed.emit(f"{name}: {what}…")
        elif isinstance(event, Trouble):
            self._troubled.add(name)
            self.error_raised.emit(event.message)
        elif isinstance(event, Gap):  # marked on the timeline; the restart itself was news at Live
            self.gap_marked.emit(name, event.start, event.end, event.reason)
        elif isinstance(event, Ended):
            self._threads[name] = max(0, self._threads[name] - 1)
            self.feed_ended.emit(name)
